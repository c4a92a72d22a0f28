//! Function names from ELF symbol tables, for code without DWARF (libc, system libraries):
//! `.symtab`, else `.dynsym`, and the separate debug file when one is installed
//! (`/usr/lib/debug/.build-id/xx/yyyy.debug`, as gdb finds it), which names the static
//! functions of a stripped library (`__pthread_kill_implementation`).
//!
//! A name is only given for an address inside the symbol's extent (`st_size`): with just
//! `.dynsym`, a static function would otherwise take the name of the export before it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};

use super::demangle::{demangle, Lang};

/// The function symbols of one ELF file, by static address.
#[derive(Debug, Default)]
pub struct ElfSymbols {
    /// (start, size, name), sorted by start.
    functions: Vec<(u64, u64, String)>,
    /// The lowest loaded address (0 for a shared object or PIE): what the file's first
    /// mapping stands for.
    pub image_base: u64,
}

impl ElfSymbols {
    /// The symbols of `path` (and of its separate debug file), cached per file content.
    /// An unreadable or non-ELF file gives an empty table.
    pub fn cached(path: &Path) -> Arc<ElfSymbols> {
        type Entry = ((u64, Option<SystemTime>), Arc<ElfSymbols>);
        static CACHE: OnceLock<Mutex<HashMap<PathBuf, Entry>>> = OnceLock::new();
        let cache = CACHE.get_or_init(Default::default);
        let stamp = std::fs::metadata(path).map(|m| (m.len(), m.modified().ok())).unwrap_or((0, None));
        if let Some((s, t)) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(path) {
            if *s == stamp {
                return t.clone();
            }
        }
        let table = Arc::new(ElfSymbols::load(path));
        cache.lock().unwrap_or_else(|e| e.into_inner()).insert(path.to_path_buf(), (stamp, table.clone()));
        table
    }

    fn load(path: &Path) -> ElfSymbols {
        let mut functions = Vec::new();
        let Ok(data) = std::fs::read(path) else { return ElfSymbols::default() };
        let Ok(obj) = object::File::parse(&*data) else { return ElfSymbols::default() };
        collect(&obj, &mut functions);
        let image_base = obj.segments().map(|seg| seg.address()).min().unwrap_or(0);
        if let Some(debug) = debug_file(&obj, path) {
            if let Ok(d) = std::fs::read(&debug) {
                if let Ok(o) = object::File::parse(&*d) {
                    collect(&o, &mut functions);
                }
            }
        }
        // At one address: the longest extent, then the public alias (`free`, not `__libc_free`).
        functions.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)).then(rank(&a.2).cmp(&rank(&b.2))));
        functions.dedup_by(|a, b| a.0 == b.0);
        ElfSymbols { functions, image_base }
    }

    /// The function symbol whose extent holds static address `addr`.
    pub fn name_at(&self, addr: u64) -> Option<&str> {
        self.function_at(addr).map(|(_, name)| name)
    }

    /// The start and name of the function symbol whose extent holds static address `addr`.
    pub fn function_at(&self, addr: u64) -> Option<(u64, &str)> {
        let end = self.functions.partition_point(|f| f.0 <= addr);
        self.functions[..end]
            .iter()
            .rev()
            .take(16)
            .find(|(start, size, _)| addr < start + (*size).max(1))
            .map(|(start, _, name)| (*start, name.as_str()))
    }

    /// gdb's name for static address `addr`: `name` at a function's entry, `name+offset`
    /// inside it.
    pub fn describe(&self, addr: u64) -> Option<String> {
        let (start, name) = self.function_at(addr)?;
        Some(if start == addr { name.to_string() } else { format!("{name}+{}", addr - start) })
    }

    pub fn is_empty(&self) -> bool {
        self.functions.is_empty()
    }
}

/// Among aliases: fewest leading underscores, then the shortest (`free`, not `cfree`).
fn rank(name: &str) -> (usize, usize, &str) {
    (name.len() - name.trim_start_matches('_').len(), name.len(), name)
}

fn collect(obj: &object::File, out: &mut Vec<(u64, u64, String)>) {
    for sym in obj.symbols().chain(obj.dynamic_symbols()) {
        if sym.kind() != SymbolKind::Text || sym.address() == 0 || !sym.is_definition() {
            continue;
        }
        let Ok(raw) = sym.name() else { continue };
        if raw.is_empty() {
            continue;
        }
        // `memcpy@@GLIBC_2.14`: the version is not part of the name.
        let raw = raw.split('@').next().unwrap_or(raw);
        let name = demangle(raw, Lang::Other).unwrap_or_else(|| raw.to_string());
        out.push((sym.address(), sym.size(), name));
    }
}

/// The separate debug file of `obj`, by build id (as gdb looks it up), if installed.
fn debug_file(obj: &object::File, path: &Path) -> Option<PathBuf> {
    let root = Path::new("/usr/lib/debug");
    if let Ok(Some(id)) = obj.build_id() {
        if id.len() > 1 {
            let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
            let p = root.join(".build-id").join(&hex[..2]).join(format!("{}.debug", &hex[2..]));
            if p.is_file() {
                return Some(p);
            }
        }
    }
    let p = root.join(path.strip_prefix("/").ok()?).with_extension("debug");
    p.is_file().then_some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_need_an_address_inside_the_symbol() {
        let t = ElfSymbols { functions: vec![(0x100, 0x10, "a".into()), (0x200, 0x20, "b".into())], image_base: 0 };
        assert_eq!(t.name_at(0x100), Some("a"));
        assert_eq!(t.name_at(0x10f), Some("a"));
        assert_eq!(t.name_at(0x110), None, "past a's end: a static function dynsym does not list");
        assert_eq!(t.name_at(0x21f), Some("b"));
        assert_eq!(t.name_at(0x50), None);
    }

    #[test]
    fn libc_free_is_named() {
        // Every Linux test machine has a libc with `free` in .dynsym.
        let Some(libc) = ["/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib64/libc.so.6", "/lib64/libc.so.6"].into_iter().map(Path::new).find(|p| p.exists()) else {
            return;
        };
        let started = std::time::Instant::now();
        let t = ElfSymbols::cached(libc);
        // With the separate debug file (when installed) this reads .symtab too.
        eprintln!("libc ELF symbols: {} functions in {:?}", t.functions.len(), started.elapsed());
        let data = std::fs::read(libc).unwrap();
        let obj = object::File::parse(&*data).unwrap();
        let free = obj.dynamic_symbols().find(|s| s.name() == Ok("free")).expect("free in .dynsym");
        assert_eq!(t.name_at(free.address() + 1), Some("free"));
    }
}
