//! Line-table queries for breakpoints and stepping (a child module of `lines`, so it sees the
//! table's rows): `file:line` → statement addresses with snapping and errors that list the
//! valid lines, and the statement starts of a function for step hooks.

use std::collections::BTreeSet;

use super::{file_matches, LineTable, END_OF_SEQUENCE};
use crate::error::{ErrorCode, Result, StrobeError};

/// How far forward a requested line without code snaps (blank lines, comments, a `{` alone).
const SNAP_FORWARD_LINES: u32 = 3;

/// A source line resolved to code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedLine {
    /// The absolute path of the one file that matched.
    pub file: String,
    /// The line that has code: the requested one, or the next one with code close after it.
    pub line: u32,
    /// Static addresses where execution enters this line (one per contiguous block of its
    /// code: a `for` line has its init and its condition), ascending.
    pub addresses: Vec<u64>,
}

impl LineTable {
    /// Resolve `file:line` for a breakpoint. `file` may be absolute, relative (`src/foo.c`)
    /// or a bare name; it must match exactly one source file (path-component suffix).
    /// A line without code snaps forward up to [`SNAP_FORWARD_LINES`] lines; otherwise the
    /// error is `NO_CODE_AT_LINE` naming the nearest lines that have code.
    pub fn resolve_line(&self, file: &str, line: u32) -> Result<ResolvedLine> {
        let file = file.trim();
        let candidates: Vec<u32> = (0..self.files.len() as u32)
            .filter(|&i| file_matches(&self.files[i as usize], file.trim_start_matches("./")))
            .filter(|&i| self.rows.iter().any(|r| r.file == i))
            .collect();
        let fid = match candidates.as_slice() {
            [one] => *one,
            [] => return Err(self.unknown_file(file)),
            many => {
                let names: Vec<&str> = many.iter().map(|&i| self.files[i as usize].as_str()).collect();
                return Err(StrobeError::validation(format!(
                    "File '{file}' is ambiguous: it matches {}. Pass more of the path (e.g. '{}').",
                    names.join(", "),
                    names[0]
                )));
            }
        };
        let lines: BTreeSet<u32> = self.rows.iter().filter(|r| r.file == fid && r.is_stmt && r.line > 0).map(|r| r.line).collect();
        let actual = lines.range(line..).next().copied().filter(|&l| l - line <= SNAP_FORWARD_LINES);
        let Some(actual) = actual else {
            let before = lines.range(..line).next_back();
            let after = lines.range(line..).next();
            let near: Vec<String> = before.iter().chain(after.iter()).map(|l| l.to_string()).collect();
            return Err(StrobeError::new(
                ErrorCode::NoCodeAtLine,
                format!(
                    "No executable code at {}:{line}. Valid lines: {}. Pick one of them (or a function name).",
                    self.files[fid as usize],
                    if near.is_empty() { "none in this file".to_string() } else { near.join(", ") }
                ),
            ));
        };
        Ok(ResolvedLine { file: self.files[fid as usize].clone(), line: actual, addresses: self.block_starts(fid, actual) })
    }

    /// Addresses where a block of `line` starts: an `is_stmt` row of the line whose previous
    /// row (same sequence) belongs to another line.
    fn block_starts(&self, fid: u32, line: u32) -> Vec<u64> {
        let mut out = Vec::new();
        for (i, r) in self.rows.iter().enumerate() {
            if r.file != fid || r.line != line || !r.is_stmt {
                continue;
            }
            let prev = i.checked_sub(1).map(|p| self.rows[p]);
            let continues = prev.is_some_and(|p| p.file == fid && p.line == line && p.address < r.address);
            if !continues {
                out.push(r.address);
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Step targets inside `[lo, hi)` (a function): the start of every statement block whose
    /// line differs from `current_line`. Hooking all of them catches the next line whichever
    /// way control flows (loops jump backwards).
    pub fn statement_starts(&self, lo: u64, hi: u64, current_line: Option<u32>) -> Vec<u64> {
        let start = self.rows.partition_point(|r| r.address < lo);
        let mut out = Vec::new();
        let mut prev_line: Option<u32> = None;
        for r in self.rows[start..].iter().take_while(|r| r.address < hi) {
            if r.file == END_OF_SEQUENCE {
                prev_line = None;
                continue;
            }
            if r.is_stmt && r.line > 0 && Some(r.line) != current_line && Some(r.line) != prev_line {
                out.push(r.address);
            }
            prev_line = Some(r.line);
        }
        out.dedup();
        out
    }

    /// The address ranges of `[lo, hi)` that belong to `line` (for finding the calls a line
    /// makes, on step-into).
    pub fn line_ranges(&self, lo: u64, hi: u64, line: u32) -> Vec<(u64, u64)> {
        let start = self.rows.partition_point(|r| r.address < lo);
        let mut out: Vec<(u64, u64)> = Vec::new();
        let rows = &self.rows[start..];
        for (i, r) in rows.iter().enumerate().take_while(|(_, r)| r.address < hi) {
            if r.file == END_OF_SEQUENCE || r.line != line {
                continue;
            }
            let end = rows.get(i + 1).map_or(hi, |n| n.address.min(hi));
            match out.last_mut() {
                Some(last) if last.1 == r.address => last.1 = end,
                _ if end > r.address => out.push((r.address, end)),
                _ => {}
            }
        }
        out
    }

    fn unknown_file(&self, file: &str) -> StrobeError {
        let base = file.rsplit('/').next().unwrap_or(file);
        let mut similar: Vec<&str> = self
            .files
            .iter()
            .map(String::as_str)
            .filter(|f| f.rsplit('/').next().is_some_and(|b| b.contains(base) || base.contains(b)))
            .take(5)
            .collect();
        if similar.is_empty() {
            similar = self.files.iter().map(String::as_str).filter(|f| !f.starts_with("/usr/")).take(5).collect();
        }
        StrobeError::validation(format!(
            "No source file matching '{file}' has code in this binary. Known files include: {}.",
            similar.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::super::Row;
    use super::*;

    fn table() -> LineTable {
        let row = |address, file, line| Row { address, file, line, is_stmt: true };
        LineTable {
            files: vec!["/p/src/a.c".into(), "/p/lib/b.c".into(), "/q/b.c".into()],
            rows: vec![
                row(0x100, 0, 10),
                row(0x104, 0, 11),
                row(0x110, 0, 14), // loop condition
                row(0x118, 0, 12),
                row(0x120, 0, 14), // loop condition again (second block)
                row(0x128, 0, 16),
                Row { address: 0x130, file: END_OF_SEQUENCE, line: 0, is_stmt: false },
                row(0x200, 1, 5),
                row(0x210, 2, 5),
            ],
        }
    }

    #[test]
    fn resolves_exact_and_snaps_forward() {
        let t = table();
        let r = t.resolve_line("a.c", 14).unwrap();
        assert_eq!((r.line, r.addresses.clone()), (14, vec![0x110, 0x120]));
        assert_eq!(r.file, "/p/src/a.c");
        assert_eq!(t.resolve_line("src/a.c", 13).unwrap().line, 14);
        assert_eq!(t.resolve_line("/p/src/a.c", 11).unwrap().addresses, vec![0x104]);
    }

    #[test]
    fn no_code_lists_nearest_lines() {
        let e = table().resolve_line("a.c", 30).unwrap_err();
        assert_eq!(e.code, ErrorCode::NoCodeAtLine);
        assert!(e.message.contains("16"), "{}", e.message);
        let e = table().resolve_line("a.c", 1).unwrap_err();
        assert!(e.message.contains("10"), "{}", e.message);
    }

    #[test]
    fn ambiguous_and_unknown_files_are_errors() {
        let e = table().resolve_line("b.c", 5).unwrap_err();
        assert!(e.message.contains("/p/lib/b.c") && e.message.contains("/q/b.c"), "{}", e.message);
        assert_eq!(table().resolve_line("lib/b.c", 5).unwrap().addresses, vec![0x200]);
        let e = table().resolve_line("zzz.c", 5).unwrap_err();
        assert_eq!(e.code, ErrorCode::ValidationError);
    }

    #[test]
    fn statement_starts_skip_the_current_line() {
        let t = table();
        assert_eq!(t.statement_starts(0x100, 0x130, Some(14)), vec![0x100, 0x104, 0x118, 0x128]);
        assert_eq!(t.line_ranges(0x100, 0x130, 14), vec![(0x110, 0x118), (0x120, 0x128)]);
    }
}
