//! The DWARF line table (`.debug_line`) of a binary: static address → (file, line) for
//! crash backtraces, and (file, line) → statement addresses for line breakpoints.
//!
//! Every row of every line-number program is kept, sorted by address, with its sequence end,
//! so an address between two sequences (padding, code without line info) maps to nothing.
//! Files are interned (absolute, normalized paths, as in [`FunctionInfo::file`]).
//!
//! [`LineTable::cached`] shares tables per canonical binary path, reloading when the file's
//! size or modification time changes (the same rule as [`super::SymbolCache`]).
//!
//! [`FunctionInfo::file`]: super::FunctionInfo::file

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

use gimli::{EndianSlice, RunTimeEndian};
use object::{Object, ObjectSection};

use super::pattern::normalize_path;
use crate::error::{Result, StrobeError};

type R<'a> = EndianSlice<'a, RunTimeEndian>;

// file:line resolution and step targets for breakpoints (the debugger's half of this table).
#[path = "lines_resolve.rs"]
mod resolve;
pub use resolve::ResolvedLine;

/// One row: code from `address` up to the next row's address is on `line` of `file`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Row {
    address: u64,
    /// Index into `files`; `u32::MAX` marks the end of a sequence (no line from here on).
    file: u32,
    line: u32,
    is_stmt: bool,
}

const END_OF_SEQUENCE: u32 = u32::MAX;

/// The line table of one binary. Addresses are static (pre-slide), like the function index.
#[derive(Debug, Default)]
pub struct LineTable {
    rows: Vec<Row>,
    files: Vec<String>,
}

impl LineTable {
    /// Read the line programs of the ELF file at `path`. A binary without `.debug_line`
    /// gives an empty table (every lookup answers `None`), not an error.
    pub fn load(path: &Path) -> Result<LineTable> {
        let unreadable = |e: &dyn std::fmt::Display| {
            StrobeError::validation(format!("Cannot read binary '{}' for its line table: {e}.", path.display()))
        };
        let file = std::fs::File::open(path).map_err(|e| unreadable(&e))?;
        // SAFETY: read-only map, dropped before returning; gimli/object bounds-check reads.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| unreadable(&e))?;
        let obj = object::File::parse(&*map).map_err(|e| unreadable(&e))?;
        read_table(&obj).map_err(|e| StrobeError::internal(format!("Failed to parse .debug_line of '{}': {e}", path.display())))
    }

    /// The shared table of `path`, loaded once per file content (size + mtime).
    pub fn cached(path: &Path) -> Result<Arc<LineTable>> {
        type Entry = ((u64, Option<SystemTime>), Arc<LineTable>);
        static CACHE: OnceLock<Mutex<HashMap<PathBuf, Entry>>> = OnceLock::new();
        let canonical = std::fs::canonicalize(path)
            .map_err(|e| StrobeError::validation(format!("Cannot read binary '{}': {e}.", path.display())))?;
        let meta = std::fs::metadata(&canonical)
            .map_err(|e| StrobeError::validation(format!("Cannot read binary '{}': {e}.", path.display())))?;
        let stamp = (meta.len(), meta.modified().ok());
        let cache = CACHE.get_or_init(Default::default);
        if let Some((s, t)) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&canonical) {
            if *s == stamp {
                return Ok(t.clone());
            }
        }
        let table = Arc::new(LineTable::load(&canonical)?);
        cache.lock().unwrap_or_else(|e| e.into_inner()).insert(canonical, (stamp, table.clone()));
        Ok(table)
    }

    /// How many rows (address ranges) the table holds.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The source line whose code contains the static address `addr`.
    pub fn address_to_line(&self, addr: u64) -> Option<(&str, u32)> {
        // The last row at or before addr; several rows may share one address (the last wins,
        // as in addr2line: it is the one the code at that address belongs to).
        let end = self.rows.partition_point(|r| r.address <= addr);
        let row = self.rows[..end].last()?;
        if row.file == END_OF_SEQUENCE || row.line == 0 {
            return None;
        }
        Some((self.files[row.file as usize].as_str(), row.line))
    }

    /// Statement addresses (`is_stmt` rows) on `line` of the files matching `file`: an absolute
    /// path matches exactly, anything else as a path suffix at a `/` boundary ("main.c",
    /// "src/main.c"). Sorted, without duplicates; empty if the line has no code.
    pub fn line_to_addresses(&self, file: &str, line: u32) -> Vec<u64> {
        let wanted: Vec<u32> = (0..self.files.len() as u32).filter(|&i| file_matches(&self.files[i as usize], file)).collect();
        let mut out: Vec<u64> = self
            .rows
            .iter()
            .filter(|r| r.is_stmt && r.line == line && wanted.contains(&r.file))
            .map(|r| r.address)
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The known source files (absolute, normalized).
    pub fn files(&self) -> &[String] {
        &self.files
    }
}

fn file_matches(path: &str, query: &str) -> bool {
    if query.starts_with('/') {
        return path == normalize_path(Path::new(query)).to_string_lossy();
    }
    path == query || (path.ends_with(query) && path[..path.len() - query.len()].ends_with('/'))
}

fn read_table(obj: &object::File) -> gimli::Result<LineTable> {
    let mut table = LineTable::default();
    if obj.section_by_name(".debug_line").is_none() {
        return Ok(table);
    }
    let endian = if obj.is_little_endian() { RunTimeEndian::Little } else { RunTimeEndian::Big };
    let sections = gimli::DwarfSections::load(|id| -> gimli::Result<Cow<[u8]>> {
        Ok(obj.section_by_name(id.name()).and_then(|s| s.uncompressed_data().ok()).unwrap_or(Cow::Borrowed(&[])))
    })?;
    let dwarf = sections.borrow(|s| EndianSlice::new(s, endian));
    let mut interned: HashMap<String, u32> = HashMap::new();
    let mut units = dwarf.units();
    while let Some(header) = units.next()? {
        let offset = header.offset();
        let result = dwarf.unit(header).and_then(|unit| read_unit(&dwarf, &unit, &mut table, &mut interned));
        if let Err(e) = result {
            // One malformed unit should not hide the lines of the rest of the program.
            tracing::debug!("skipping the line program of DWARF unit at {offset:?}: {e}");
        }
    }
    // Stable: rows of one address keep their program order (the last one wins on lookup).
    table.rows.sort_by_key(|r| r.address);
    Ok(table)
}

fn read_unit(
    dwarf: &gimli::Dwarf<R<'_>>,
    unit: &gimli::Unit<R<'_>>,
    table: &mut LineTable,
    interned: &mut HashMap<String, u32>,
) -> gimli::Result<()> {
    let Some(program) = unit.line_program.clone() else { return Ok(()) };
    // File index of the unit's program -> interned id (resolved once per index).
    let mut local: HashMap<u64, u32> = HashMap::new();
    let mut rows = program.rows();
    while let Some((header, row)) = rows.next_row()? {
        if row.end_sequence() {
            table.rows.push(Row { address: row.address(), file: END_OF_SEQUENCE, line: 0, is_stmt: false });
            continue;
        }
        // Address 0 in a relocatable-less binary is a discarded function (linker tombstone).
        if row.address() == 0 {
            continue;
        }
        let index = row.file_index();
        let file = match local.get(&index) {
            Some(&f) => f,
            None => {
                let path = resolve_file(dwarf, unit, header, index).unwrap_or_else(|| "<unknown>".to_string());
                let next = table.files.len() as u32;
                let id = *interned.entry(path.clone()).or_insert_with(|| {
                    table.files.push(path);
                    next
                });
                local.insert(index, id);
                id
            }
        };
        let line = row.line().map(|l| l.get().min(u32::MAX as u64 - 1) as u32).unwrap_or(0);
        table.rows.push(Row { address: row.address(), file, line, is_stmt: row.is_stmt() });
    }
    Ok(())
}

pub(super) fn resolve_file(
    dwarf: &gimli::Dwarf<R<'_>>,
    unit: &gimli::Unit<R<'_>>,
    header: &gimli::LineProgramHeader<R<'_>>,
    index: u64,
) -> Option<String> {
    let entry = header.file(index)?;
    let string = |v| dwarf.attr_string(unit, v).ok().map(|s| s.to_string_lossy().into_owned());
    let mut path = PathBuf::new();
    if let Some(comp_dir) = &unit.comp_dir {
        path.push(&*comp_dir.to_string_lossy());
    }
    if let Some(dir) = entry.directory(header).and_then(string) {
        path.push(dir); // an absolute directory replaces comp_dir
    }
    path.push(string(entry.path_name())?);
    Some(normalize_path(&path).to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_matching_is_by_suffix_at_a_slash() {
        assert!(file_matches("/a/src/main.c", "main.c"));
        assert!(file_matches("/a/src/main.c", "src/main.c"));
        assert!(file_matches("/a/src/main.c", "/a/src/main.c"));
        assert!(file_matches("/a/src/main.c", "/a/src/../src/main.c"));
        assert!(!file_matches("/a/src/domain.c", "main.c"));
        assert!(!file_matches("/a/src/main.c", "/src/main.c"));
    }

    #[test]
    fn lookups_respect_sequence_ends() {
        let t = LineTable {
            files: vec!["/x/a.c".into()],
            rows: vec![
                Row { address: 0x100, file: 0, line: 10, is_stmt: true },
                Row { address: 0x108, file: 0, line: 11, is_stmt: true },
                Row { address: 0x110, file: END_OF_SEQUENCE, line: 0, is_stmt: false },
            ],
        };
        assert_eq!(t.address_to_line(0x0ff), None);
        assert_eq!(t.address_to_line(0x100), Some(("/x/a.c", 10)));
        assert_eq!(t.address_to_line(0x10f), Some(("/x/a.c", 11)));
        assert_eq!(t.address_to_line(0x110), None);
        assert_eq!(t.line_to_addresses("a.c", 11), vec![0x108]);
        assert!(t.line_to_addresses("b.c", 11).is_empty());
    }
}
