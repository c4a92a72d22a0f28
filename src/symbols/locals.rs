//! The parameters and local variables in scope at one PC, with where each lives there
//! ([`VarLocation`]), for a thread paused at a breakpoint.
//!
//! Parsed lazily, at pause time: find the compile unit and the `DW_TAG_subprogram` whose
//! ranges hold the PC, then collect `DW_TAG_formal_parameter` / `DW_TAG_variable` of it and of
//! every `DW_TAG_lexical_block` / `DW_TAG_inlined_subroutine` that also holds the PC (inner
//! declarations shadow outer ones). Locations come from `DW_AT_location` expressions or
//! location lists (registers at -O2), evaluated for this PC; see [`super::frame`].
//!
//! At a function's first instruction the prologue has not stored the parameters yet, so
//! they are described by their ABI argument registers instead (integers and pointers).

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

use gimli::{AttributeValue, EndianSlice, RunTimeEndian, UnitOffset};
use object::{Object, ObjectSection};
use serde::Serialize;

use super::dwarf::R;
use super::frame::{self, CallFrames, FrameBase, VarLocation, ARG_REGISTERS};
use crate::error::{Result, StrobeError};

/// One variable in scope.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LocalVar {
    pub name: String,
    /// The C-like spelling of its type: `int`, `double`, `struct order *`.
    pub type_name: String,
    /// Byte size of the value (0 when unknown).
    pub size: u64,
    /// How to show the bytes: signed, unsigned, float, bool, char, pointer or bytes.
    pub encoding: &'static str,
    pub is_parameter: bool,
    pub location: VarLocation,
}

/// The variables visible at a PC.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FrameLocals {
    /// Static entry address of the enclosing function.
    pub function_address: u64,
    pub at_entry: bool,
    pub vars: Vec<LocalVar>,
}

/// A binary's bytes, kept to answer local-variable questions at pause time.
pub struct LocalsInfo {
    data: Vec<u8>,
}

impl LocalsInfo {
    /// The shared copy of `path`, reloaded when its size or mtime changes.
    pub fn cached(path: &Path) -> Result<Arc<LocalsInfo>> {
        type Entry = ((u64, Option<SystemTime>), Arc<LocalsInfo>);
        static CACHE: OnceLock<Mutex<HashMap<PathBuf, Entry>>> = OnceLock::new();
        let err = |e: std::io::Error| StrobeError::validation(format!("Cannot read binary '{}': {e}.", path.display()));
        let meta = std::fs::metadata(path).map_err(err)?;
        let stamp = (meta.len(), meta.modified().ok());
        let cache = CACHE.get_or_init(Default::default);
        if let Some((s, d)) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(path) {
            if *s == stamp {
                return Ok(d.clone());
            }
        }
        let info = Arc::new(LocalsInfo { data: std::fs::read(path).map_err(err)? });
        cache.lock().unwrap_or_else(|e| e.into_inner()).insert(path.to_path_buf(), (stamp, info.clone()));
        Ok(info)
    }

    /// The variables in scope at static `pc`. `None` if no function with DWARF holds it.
    pub fn locals_at(&self, pc: u64) -> Result<Option<FrameLocals>> {
        self.with_dwarf(|dwarf, frames| find_locals(dwarf, frames, pc))
            .map_err(|e| StrobeError::internal(format!("reading locals at 0x{pc:x}: {e}")))
    }

    /// Whether the code at static `pc` comes from a unit GCC built for AVX (its DW_AT_producer,
    /// `variables.rs gcc_avx`): it may hold 256- or 512-bit values in vector registers. Reads
    /// only the unit headers up to that unit, not the whole DWARF.
    pub fn built_for_avx(&self, pc: u64) -> bool {
        let producer = self.with_dwarf(|dwarf, _| {
            first_in_units_at(dwarf, pc, |unit| {
                let mut entries = unit.entries();
                let value = match entries.next_dfs()? {
                    Some((_, root)) => root.attr_value(gimli::DW_AT_producer)?,
                    None => None,
                };
                // The first unit holding pc answers, with a producer or without.
                Ok(Some(value.and_then(|v| dwarf.attr_string(unit, v).ok()).map(|s| s.to_string_lossy().into_owned())))
            })
        });
        producer.ok().flatten().flatten().is_some_and(|p| super::variables::gcc_avx(&p))
    }

    /// Run `f` over this binary's DWARF and call frame information.
    pub(super) fn with_dwarf<T>(&self, f: impl FnOnce(&gimli::Dwarf<R<'_>>, &CallFrames<'_>) -> gimli::Result<T>) -> Result<T> {
        let obj = object::File::parse(&*self.data)
            .map_err(|e| StrobeError::internal(format!("cannot parse the binary for its DWARF: {e}")))?;
        let endian = if obj.is_little_endian() { RunTimeEndian::Little } else { RunTimeEndian::Big };
        let sections = gimli::DwarfSections::load(|id| -> gimli::Result<Cow<[u8]>> {
            Ok(obj.section_by_name(id.name()).and_then(|s| s.uncompressed_data().ok()).unwrap_or(Cow::Borrowed(&[])))
        })
        .map_err(|e| StrobeError::internal(format!("DWARF: {e}")))?;
        let dwarf = sections.borrow(|s| EndianSlice::new(s, endian));
        let frames = call_frames(&obj, endian);
        f(&dwarf, &frames).map_err(|e| StrobeError::internal(format!("DWARF: {e}")))
    }
}

impl LocalsInfo {
    /// The canonical frame address rule at static `pc`: CFA = register + offset. The return
    /// address of the frame is stored at CFA - 8 (x86_64).
    pub fn cfa_rule(&self, pc: u64) -> Option<(String, i64)> {
        let obj = object::File::parse(&*self.data).ok()?;
        let endian = if obj.is_little_endian() { RunTimeEndian::Little } else { RunTimeEndian::Big };
        call_frames(&obj, endian).cfa_rule(pc)
    }
}

fn call_frames<'a>(obj: &'a object::File<'a>, endian: RunTimeEndian) -> CallFrames<'a> {
    let mut bases = gimli::BaseAddresses::default();
    let data = match obj.section_by_name(".eh_frame") {
        Some(s) => {
            bases = bases.set_eh_frame(s.address());
            s.data().unwrap_or(&[])
        }
        None => &[],
    };
    if let Some(text) = obj.section_by_name(".text") {
        bases = bases.set_text(text.address());
    }
    let mut eh_frame = gimli::EhFrame::new(data, endian);
    eh_frame.set_address_size(8);
    CallFrames { eh_frame, bases }
}

/// The first `Some` that `f` gives for a compile unit whose address ranges hold `pc`, in unit
/// order (a unit that holds `pc` but answers None passes the question on to the next).
pub(super) fn first_in_units_at<'a, T>(
    dwarf: &gimli::Dwarf<R<'a>>,
    pc: u64,
    mut f: impl FnMut(&gimli::Unit<R<'a>>) -> gimli::Result<Option<T>>,
) -> gimli::Result<Option<T>> {
    let mut units = dwarf.units();
    while let Some(header) = units.next()? {
        let unit = dwarf.unit(header)?;
        if !unit_holds(dwarf, &unit, pc)? {
            continue;
        }
        if let Some(found) = f(&unit)? {
            return Ok(Some(found));
        }
    }
    Ok(None)
}

/// Whether compile unit `unit`'s address ranges hold `pc`.
fn unit_holds(dwarf: &gimli::Dwarf<R<'_>>, unit: &gimli::Unit<R<'_>>, pc: u64) -> gimli::Result<bool> {
    let mut ranges = dwarf.unit_ranges(unit)?;
    while let Some(r) = ranges.next()? {
        if r.begin <= pc && pc < r.end {
            return Ok(true);
        }
    }
    Ok(false)
}

fn find_locals(dwarf: &gimli::Dwarf<R<'_>>, frames: &CallFrames<'_>, pc: u64) -> gimli::Result<Option<FrameLocals>> {
    first_in_units_at(dwarf, pc, |unit| {
        let mut walker = Walker { dwarf, unit, frames, pc, vars: Vec::new() };
        let mut tree = unit.entries_tree(None)?;
        walker.search(tree.root()?)
    })
}

struct Walker<'d, 'a> {
    dwarf: &'d gimli::Dwarf<R<'a>>,
    unit: &'d gimli::Unit<R<'a>>,
    frames: &'d CallFrames<'a>,
    pc: u64,
    vars: Vec<LocalVar>,
}



impl<'a> Walker<'_, 'a> {
    fn contains(&self, entry: &gimli::DebuggingInformationEntry<R<'a>>) -> gimli::Result<Option<u64>> {
        let mut ranges = self.dwarf.die_ranges(self.unit, entry)?;
        let (mut hit, mut low) = (false, u64::MAX);
        while let Some(r) = ranges.next()? {
            hit |= r.begin <= self.pc && self.pc < r.end;
            low = low.min(r.begin);
        }
        Ok(hit.then_some(low))
    }

    /// Find the subprogram holding the PC below `node` (through namespaces and types).
    fn search(&mut self, node: gimli::EntriesTreeNode<'_, '_, '_, R<'a>>) -> gimli::Result<Option<FrameLocals>> {
        let mut children = node.children();
        while let Some(child) = children.next()? {
            let entry = child.entry();
            match entry.tag() {
                gimli::DW_TAG_subprogram => {
                    let Some(low) = self.contains(entry)? else { continue };
                    // Entry low_pc is the function's entry (DW_AT_low_pc), ranges' lowest otherwise.
                    let entry_pc = match entry.attr_value(gimli::DW_AT_low_pc)? {
                        Some(v) => self.dwarf.attr_address(self.unit, v)?.unwrap_or(low),
                        None => low,
                    };
                    let base = match entry.attr_value(gimli::DW_AT_frame_base)? {
                        Some(AttributeValue::Exprloc(e)) => frame::frame_base(e, self.unit.encoding(), self.frames, self.pc),
                        _ => None,
                    };
                    let at_entry = entry_pc == self.pc;
                    self.collect(child, &base, at_entry)?;
                    let mut vars = std::mem::take(&mut self.vars);
                    // Inner declarations shadow outer ones: keep the last of each name.
                    let mut seen = std::collections::HashSet::new();
                    vars.reverse();
                    vars.retain(|v| seen.insert(v.name.clone()));
                    vars.reverse();
                    return Ok(Some(FrameLocals { function_address: entry_pc, at_entry, vars }));
                }
                gimli::DW_TAG_namespace
                | gimli::DW_TAG_structure_type
                | gimli::DW_TAG_class_type
                | gimli::DW_TAG_union_type
                | gimli::DW_TAG_module => {
                    if let Some(found) = self.search(child)? {
                        return Ok(Some(found));
                    }
                }
                _ => {}
            }
        }
        Ok(None)
    }

    fn collect(&mut self, node: gimli::EntriesTreeNode<'_, '_, '_, R<'a>>, base: &FrameBase, at_entry: bool) -> gimli::Result<()> {
        let mut children = node.children();
        let mut arg_index = 0usize;
        while let Some(child) = children.next()? {
            let entry = child.entry();
            match entry.tag() {
                gimli::DW_TAG_formal_parameter | gimli::DW_TAG_variable => {
                    let is_param = entry.tag() == gimli::DW_TAG_formal_parameter;
                    if let Some(mut var) = self.variable(entry, base, is_param)? {
                        if is_param && at_entry {
                            var.location = entry_location(&var, &mut arg_index);
                        }
                        self.vars.push(var);
                    }
                }
                gimli::DW_TAG_lexical_block | gimli::DW_TAG_inlined_subroutine => {
                    let has_ranges = entry.attr(gimli::DW_AT_low_pc)?.is_some() || entry.attr(gimli::DW_AT_ranges)?.is_some();
                    if !has_ranges || self.contains(entry)?.is_some() {
                        self.collect(child, base, false)?;
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn variable(&self, entry: &gimli::DebuggingInformationEntry<R<'a>>, base: &FrameBase, is_param: bool) -> gimli::Result<Option<LocalVar>> {
        let origin = match entry.attr_value(gimli::DW_AT_abstract_origin)? {
            Some(AttributeValue::UnitRef(o)) => Some(self.unit.entry(o)?),
            _ => None,
        };
        let attr = |name| -> gimli::Result<Option<AttributeValue<R<'a>>>> {
            match entry.attr_value(name)? {
                Some(v) => Ok(Some(v)),
                None => origin.as_ref().map_or(Ok(None), |o| o.attr_value(name)),
            }
        };
        let Some(name) = attr(gimli::DW_AT_name)?.and_then(|v| self.string(v)) else { return Ok(None) };
        let (type_name, size, encoding) = match attr(gimli::DW_AT_type)? {
            Some(AttributeValue::UnitRef(t)) => self.describe_type(t, 0)?,
            _ => ("void".to_string(), 0, "bytes"),
        };
        let location = match entry.attr_value(gimli::DW_AT_location)? {
            Some(AttributeValue::Exprloc(e)) => frame::evaluate(e, self.unit.encoding(), base, self.frames, self.pc),
            Some(v) => match self.dwarf.attr_locations_offset(self.unit, v)? {
                Some(off) => {
                    let mut list = self.dwarf.locations(self.unit, off)?;
                    let mut found = VarLocation::OptimizedOut;
                    while let Some(e) = list.next()? {
                        if e.range.begin <= self.pc && self.pc < e.range.end {
                            found = frame::evaluate(e.data, self.unit.encoding(), base, self.frames, self.pc);
                            break;
                        }
                    }
                    found
                }
                None => VarLocation::OptimizedOut,
            },
            None => match entry.attr_value(gimli::DW_AT_const_value)? {
                Some(v) => v.sdata_value().or(v.udata_value().map(|u| u as i64)).map_or(VarLocation::OptimizedOut, |value| VarLocation::Value { value }),
                None => VarLocation::OptimizedOut,
            },
        };
        Ok(Some(LocalVar { name, type_name, size, encoding, is_parameter: is_param, location }))
    }

    fn string(&self, v: AttributeValue<R<'a>>) -> Option<String> {
        Some(self.dwarf.attr_string(self.unit, v).ok()?.to_string_lossy().into_owned())
    }

    /// (display name, byte size, encoding) of the type at `offset`.
    fn describe_type(&self, offset: UnitOffset, depth: u32) -> gimli::Result<(String, u64, &'static str)> {
        if depth > 12 {
            return Ok(("?".into(), 0, "bytes"));
        }
        let e = self.unit.entry(offset)?;
        let name = e.attr_value(gimli::DW_AT_name)?.and_then(|v| self.string(v));
        let size = e.attr_value(gimli::DW_AT_byte_size)?.and_then(|v| v.udata_value()).unwrap_or(0);
        let target = match e.attr_value(gimli::DW_AT_type)? {
            Some(AttributeValue::UnitRef(t)) => Some(t),
            _ => None,
        };
        let inner = |this: &Self| -> gimli::Result<(String, u64, &'static str)> {
            match target {
                Some(t) => this.describe_type(t, depth + 1),
                None => Ok(("void".into(), 0, "bytes")),
            }
        };
        Ok(match e.tag() {
            gimli::DW_TAG_base_type => {
                let enc = match e.attr_value(gimli::DW_AT_encoding)? {
                    Some(AttributeValue::Encoding(gimli::DW_ATE_float)) => "float",
                    Some(AttributeValue::Encoding(gimli::DW_ATE_boolean)) => "bool",
                    Some(AttributeValue::Encoding(gimli::DW_ATE_signed_char)) if size == 1 => "char",
                    Some(AttributeValue::Encoding(gimli::DW_ATE_unsigned_char)) if size == 1 => "char",
                    Some(AttributeValue::Encoding(gimli::DW_ATE_signed | gimli::DW_ATE_signed_char)) => "signed",
                    Some(AttributeValue::Encoding(gimli::DW_ATE_UTF)) if size == 4 => "char",
                    _ => "unsigned",
                };
                (name.unwrap_or_else(|| "?".into()), size, enc)
            }
            gimli::DW_TAG_pointer_type | gimli::DW_TAG_reference_type | gimli::DW_TAG_rvalue_reference_type => {
                let shown = match name {
                    Some(n) => n,
                    None => format!("{} *", inner(self)?.0),
                };
                (shown, 8, "pointer")
            }
            gimli::DW_TAG_typedef | gimli::DW_TAG_const_type | gimli::DW_TAG_volatile_type | gimli::DW_TAG_restrict_type | gimli::DW_TAG_atomic_type => {
                let (n, s, enc) = inner(self)?;
                let shown = match (e.tag(), name) {
                    (gimli::DW_TAG_typedef, Some(t)) => t,
                    // A const pointer is `T * const` (C's order); `const` of anything else goes
                    // first, once.
                    (gimli::DW_TAG_const_type, _) if enc == "pointer" && n.ends_with('*') => format!("{n} const"),
                    (gimli::DW_TAG_const_type, _) if n.starts_with("const ") => n,
                    (gimli::DW_TAG_const_type, _) => format!("const {n}"),
                    _ => n,
                };
                (shown, s, enc)
            }
            gimli::DW_TAG_enumeration_type => (format!("enum {}", name.unwrap_or_default()), size.max(4), "signed"),
            gimli::DW_TAG_structure_type | gimli::DW_TAG_class_type => (format!("struct {}", name.unwrap_or_default()), size, "bytes"),
            gimli::DW_TAG_union_type => (format!("union {}", name.unwrap_or_default()), size, "bytes"),
            gimli::DW_TAG_array_type => (format!("{}[]", inner(self)?.0), size, "bytes"),
            gimli::DW_TAG_subroutine_type => ("function".into(), 8, "pointer"),
            _ => (name.unwrap_or_else(|| "?".into()), size, "bytes"),
        })
    }
}

/// At the entry instruction, the n-th integer-class parameter is in the n-th ABI register.
fn entry_location(var: &LocalVar, next: &mut usize) -> VarLocation {
    let integer_class = matches!(var.encoding, "signed" | "unsigned" | "bool" | "char" | "pointer") && var.size <= 8;
    if !integer_class {
        return VarLocation::Unsupported { why: format!("a {} parameter at function entry (not in an integer register)", var.type_name) };
    }
    match ARG_REGISTERS.get(*next) {
        Some(reg) => {
            *next += 1;
            VarLocation::Register { reg: reg.to_string() }
        }
        None => VarLocation::Unsupported { why: "passed on the stack".into() },
    }
}
