//! What code a pointer points to, named as gdb names it (`0x… <compare_ints>`, `<name+4>`
//! inside a function): a traced struct of callbacks (SQLite's VFS, a Lua state) then says
//! which ones are set without another lookup. From the modules the agent reported (runtime
//! base, size, path; agent/src/modules.ts) and each file's ELF symbols, so libc's functions
//! are named too. debug_eval names them the same way from /proc/PID/maps (eval/memory.rs).

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use crate::symbols::ElfSymbols;

/// One reported module: runtime [start, end), its file, that file's symbols when first needed.
struct CodeModule {
    start: u64,
    end: u64,
    path: PathBuf,
    symbols: OnceLock<Arc<ElfSymbols>>,
}

/// A session's modules, for naming code addresses.
#[derive(Default)]
pub(crate) struct CodeNames {
    modules: Vec<CodeModule>,
}

impl CodeNames {
    /// These modules plus `added` (`(runtime base, size, path)`), a module already known kept.
    pub fn with(&self, added: &[(u64, u64, PathBuf)]) -> CodeNames {
        let mut modules: Vec<CodeModule> = self
            .modules
            .iter()
            .map(|m| CodeModule { start: m.start, end: m.end, path: m.path.clone(), symbols: m.symbols.clone() })
            .collect();
        for (base, size, path) in added {
            if !modules.iter().any(|m| m.start == *base) {
                modules.push(CodeModule { start: *base, end: base.wrapping_add(*size), path: path.clone(), symbols: OnceLock::new() });
            }
        }
        CodeNames { modules }
    }

    /// `[[base, size, path], ...]`, as stored with the session's captures.
    pub fn to_json(&self) -> String {
        serde_json::Value::Array(self.modules.iter().map(|m| serde_json::json!([m.start, m.end.wrapping_sub(m.start), m.path])).collect()).to_string()
    }

    /// The modules `to_json` wrote (none from text it did not write).
    pub fn from_json(text: &str) -> CodeNames {
        let list: Vec<(u64, u64, PathBuf)> = serde_json::from_str(text).unwrap_or_default();
        CodeNames::default().with(&list)
    }

    /// The function `addr` lies in, `name` at its entry and `name+offset` inside it.
    pub fn name(&self, addr: u64) -> Option<String> {
        let m = self.modules.iter().find(|m| addr >= m.start && addr < m.end)?;
        let table = m.symbols.get_or_init(|| ElfSymbols::cached(&m.path));
        table.describe(addr.wrapping_sub(m.start).wrapping_add(table.image_base))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_this_test_function_at_its_entry_and_inside_it() {
        let exe = std::fs::canonicalize(std::env::current_exe().unwrap()).unwrap();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let base = crate::eval::memory::parse_maps(&maps).iter().filter(|m| std::path::Path::new(&m.path) == exe && m.offset == 0).map(|m| m.start).min().expect("this binary's first mapping");
        let names = CodeNames::default().with(&[(base, 1 << 40, exe)]);
        let here = names_this_test_function_at_its_entry_and_inside_it as *const () as u64;
        let name = names.name(here).expect("named");
        assert!(name.ends_with("names_this_test_function_at_its_entry_and_inside_it"), "{name}");
        assert_eq!(names.name(here + 3), Some(format!("{name}+3")));
        assert_eq!(names.name(base - 1), None, "outside every module");
    }
}
