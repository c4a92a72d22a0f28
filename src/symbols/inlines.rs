//! Inlined calls at a PC, for backtraces: a crash inside code the compiler inlined (Rust's
//! `ptr::write`, `Vec` indexing, C++ accessors) has the line of the inlined function at its
//! PC, and the function it was inlined into only through `DW_TAG_inlined_subroutine`'s
//! `DW_AT_call_file` / `DW_AT_call_line`. Like a debugger, a backtrace then shows one frame
//! per inlined call, each at the line that called the next.

use gimli::AttributeValue;

use super::demangle::{demangle, Lang};
use super::dwarf::R;
use super::lines::resolve_file;
use super::locals::{first_in_units_at, LocalsInfo};
use crate::error::Result;

/// One inlined call holding a PC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InlinedCall {
    /// The inlined function (qualified and demangled when it has a linkage name).
    pub function: String,
    /// Where it was called from, in the function (or outer inlined call) it was inlined into.
    pub call_file: Option<String>,
    pub call_line: Option<u32>,
}

/// One frame of a backtrace as source: a function and where in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFrame {
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
    /// Code inlined into the next frame (the same address).
    pub inlined: bool,
}

/// The frames one PC stands for: one per inlined call, innermost first, then the function
/// itself. The innermost frame is at the PC's own line (`here`); each outer one is at the
/// line that called the inlined code below it. `calls` is outermost first, as
/// [`LocalsInfo::inlined_calls`] returns it.
pub fn expand_inlined(function: Option<String>, here: Option<(String, u32)>, calls: &[InlinedCall]) -> Vec<SourceFrame> {
    let mut frames = Vec::with_capacity(calls.len() + 1);
    let mut at = here;
    for call in calls.iter().rev() {
        let (file, line) = at.map_or((None, None), |(f, l)| (Some(f), Some(l)));
        frames.push(SourceFrame { function: Some(call.function.clone()), file, line, inlined: true });
        at = call.call_file.clone().zip(call.call_line);
    }
    let (file, line) = at.map_or((None, None), |(f, l)| (Some(f), Some(l)));
    frames.push(SourceFrame { function, file, line, inlined: false });
    frames
}

impl LocalsInfo {
    /// The inlined calls holding static `pc`, outermost first; empty when the PC is in no
    /// inlined code (or the binary has no DWARF for it).
    pub fn inlined_calls(&self, pc: u64) -> Result<Vec<InlinedCall>> {
        self.with_dwarf(|dwarf, _| chain_at(dwarf, pc))
    }
}

fn chain_at(dwarf: &gimli::Dwarf<R<'_>>, pc: u64) -> gimli::Result<Vec<InlinedCall>> {
    let chain = first_in_units_at(dwarf, pc, |unit| {
        let mut tree = unit.entries_tree(None)?;
        let root = tree.root()?;
        let lang = match root.entry().attr_value(gimli::DW_AT_language)? {
            Some(AttributeValue::Language(l)) => Lang::from_dw(l),
            _ => Lang::Other,
        };
        Scan { dwarf, unit, pc, lang }.subprogram(root)
    })?;
    Ok(chain.unwrap_or_default())
}

struct Scan<'d, 'a> {
    dwarf: &'d gimli::Dwarf<R<'a>>,
    unit: &'d gimli::Unit<R<'a>>,
    pc: u64,
    lang: Lang,
}

impl<'a> Scan<'_, 'a> {
    fn holds_pc(&self, entry: &gimli::DebuggingInformationEntry<R<'a>>) -> gimli::Result<bool> {
        let mut ranges = self.dwarf.die_ranges(self.unit, entry)?;
        while let Some(r) = ranges.next()? {
            if r.begin <= self.pc && self.pc < r.end {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The subprogram holding the PC below `node` (through namespaces and types), and the
    /// inlined calls inside it that hold the PC.
    fn subprogram(&self, node: gimli::EntriesTreeNode<'_, '_, '_, R<'a>>) -> gimli::Result<Option<Vec<InlinedCall>>> {
        let mut children = node.children();
        while let Some(child) = children.next()? {
            match child.entry().tag() {
                gimli::DW_TAG_subprogram if self.holds_pc(child.entry())? => {
                    let mut chain = Vec::new();
                    self.inlined(child, &mut chain)?;
                    return Ok(Some(chain));
                }
                gimli::DW_TAG_namespace | gimli::DW_TAG_structure_type | gimli::DW_TAG_class_type | gimli::DW_TAG_union_type | gimli::DW_TAG_module => {
                    if let Some(found) = self.subprogram(child)? {
                        return Ok(Some(found));
                    }
                }
                _ => {}
            }
        }
        Ok(None)
    }

    fn inlined(&self, node: gimli::EntriesTreeNode<'_, '_, '_, R<'a>>, chain: &mut Vec<InlinedCall>) -> gimli::Result<()> {
        let mut children = node.children();
        while let Some(child) = children.next()? {
            let entry = child.entry();
            match entry.tag() {
                gimli::DW_TAG_inlined_subroutine if self.holds_pc(entry)? => {
                    chain.push(self.describe(entry)?);
                    return self.inlined(child, chain);
                }
                gimli::DW_TAG_lexical_block => {
                    let ranged = entry.attr(gimli::DW_AT_low_pc)?.is_some() || entry.attr(gimli::DW_AT_ranges)?.is_some();
                    if !ranged || self.holds_pc(entry)? {
                        self.inlined(child, chain)?;
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn describe(&self, entry: &gimli::DebuggingInformationEntry<R<'a>>) -> gimli::Result<InlinedCall> {
        let call_file = match entry.attr_value(gimli::DW_AT_call_file)? {
            Some(AttributeValue::FileIndex(i)) | Some(AttributeValue::Udata(i)) => {
                self.unit.line_program.as_ref().and_then(|p| resolve_file(self.dwarf, self.unit, p.header(), i))
            }
            _ => None,
        };
        let call_line = entry.attr_value(gimli::DW_AT_call_line)?.and_then(|v| v.udata_value()).map(|l| l as u32);
        Ok(InlinedCall { function: self.origin_name(entry, 0)?.unwrap_or_else(|| "<inlined>".into()), call_file, call_line })
    }

    /// The name of an inlined call's function: through `DW_AT_abstract_origin` (and a C++
    /// definition's `DW_AT_specification`), the demangled linkage name, else the plain name.
    fn origin_name(&self, entry: &gimli::DebuggingInformationEntry<R<'a>>, depth: u8) -> gimli::Result<Option<String>> {
        let string = |v| self.dwarf.attr_string(self.unit, v).ok().map(|s| s.to_string_lossy().into_owned());
        for attr in [gimli::DW_AT_linkage_name, gimli::DW_AT_MIPS_linkage_name] {
            if let Some(linkage) = entry.attr_value(attr)?.and_then(string) {
                return Ok(Some(demangle(&linkage, self.lang).unwrap_or(linkage)));
            }
        }
        if depth < 4 {
            for attr in [gimli::DW_AT_abstract_origin, gimli::DW_AT_specification] {
                if let Some(AttributeValue::UnitRef(o)) = entry.attr_value(attr)? {
                    if let Some(name) = self.origin_name(&self.unit.entry(o)?, depth + 1)? {
                        return Ok(Some(name));
                    }
                }
            }
        }
        Ok(entry.attr_value(gimli::DW_AT_name)?.and_then(string))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(function: &str, file: &str, line: u32) -> InlinedCall {
        InlinedCall { function: function.into(), call_file: Some(file.into()), call_line: Some(line) }
    }

    #[test]
    fn each_frame_is_at_the_line_that_called_the_next() {
        // plot() inlines <*mut T>::write_volatile (called at main.rs:62), which inlines
        // ptr::write_volatile (called at mut_ptr.rs:1458); the PC is at ptr.rs:2178.
        let calls = [call("<*mut T>::write_volatile", "main.rs", 62), call("ptr::write_volatile", "mut_ptr.rs", 1458)];
        let frames = expand_inlined(Some("plot".into()), Some(("ptr.rs".into(), 2178)), &calls);
        let got: Vec<(&str, &str, u32, bool)> =
            frames.iter().map(|f| (f.function.as_deref().unwrap(), f.file.as_deref().unwrap(), f.line.unwrap(), f.inlined)).collect();
        assert_eq!(
            got,
            [("ptr::write_volatile", "ptr.rs", 2178, true), ("<*mut T>::write_volatile", "mut_ptr.rs", 1458, true), ("plot", "main.rs", 62, false)]
        );
    }

    #[test]
    fn without_inlined_calls_the_frame_is_the_function_at_the_pc() {
        let frames = expand_inlined(Some("f".into()), Some(("a.c".into(), 3)), &[]);
        assert_eq!(frames, [SourceFrame { function: Some("f".into()), file: Some("a.c".into()), line: Some(3), inlined: false }]);
        // A call site DWARF does not give leaves the outer frame without a line, not a wrong one.
        let frames = expand_inlined(Some("f".into()), Some(("a.c".into(), 3)), &[InlinedCall { function: "g".into(), call_file: None, call_line: None }]);
        assert_eq!((frames[1].file.as_deref(), frames[1].line), (None, None));
    }
}
