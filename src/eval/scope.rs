//! The variables in scope at one PC: the `DW_TAG_subprogram` holding it, its parameters and
//! the locals of every lexical block and inlined call that also holds it (inner names shadow
//! outer ones), each with its type and its raw DWARF location — evaluated later, against the
//! frame's real registers and memory (`location.rs`), instead of a hand-made subset.

use gimli::Reader as _;
use gimli::{AttributeValue, Expression};

use crate::symbols::{DebugInfo, TypeId};

type AR = gimli::EndianArcSlice<gimli::RunTimeEndian>;

/// Where a variable's value comes from at this PC.
#[derive(Debug, Clone)]
pub enum VarSource {
    /// A DWARF location expression (the entry of a location list that holds the PC).
    Location(Expression<AR>),
    /// `DW_AT_const_value`: the value itself, little-endian.
    Constant(Vec<u8>),
    /// No location at this PC.
    OptimizedOut,
    /// At the function's first instruction, before the prologue stored it: the parameter is
    /// still in its System V argument register.
    EntryRegister(&'static str),
    /// At the first instruction, a parameter not passed in an integer register.
    EntryUnavailable(&'static str),
}

#[derive(Debug, Clone)]
pub struct ScopeVar {
    pub name: String,
    pub ty: Option<TypeId>,
    pub is_parameter: bool,
    pub source: VarSource,
}

/// The function around a PC and what it can see.
#[derive(Debug, Clone)]
pub struct Scope {
    /// `DW_AT_frame_base` of the subprogram (usually `DW_OP_call_frame_cfa`).
    pub frame_base: Option<Expression<AR>>,
    pub encoding: gimli::Encoding,
    /// Index into the DebugInfo's units (for attribute lookups during evaluation).
    pub unit: usize,
    pub vars: Vec<ScopeVar>,
    /// The PC is the function's first instruction.
    pub at_entry: bool,
}

impl Scope {
    pub fn var(&self, name: &str) -> Option<&ScopeVar> {
        // Inner declarations come last; they win.
        self.vars.iter().rev().find(|v| v.name == name)
    }
}

/// The scope at static `pc`, or None when no function with DWARF holds it.
pub fn scope_at(info: &DebugInfo, pc: u64) -> Option<Scope> {
    for (ui, u) in info.units.iter().enumerate() {
        if !holds(info, &u.unit, pc) {
            continue;
        }
        let mut tree = u.unit.entries_tree(None).ok()?;
        let root = tree.root().ok()?;
        let mut w = Walker { info, unit: &u.unit, pc, vars: Vec::new(), entry: None };
        if let Some(frame_base) = w.search(root).ok().flatten() {
            let at_entry = w.entry == Some(pc);
            let mut scope = Scope { frame_base, encoding: u.unit.encoding(), unit: ui, vars: w.vars, at_entry };
            if at_entry {
                entry_registers(info, &mut scope, pc);
            }
            return Some(scope);
        }
    }
    None
}

fn holds(info: &DebugInfo, unit: &gimli::Unit<AR>, pc: u64) -> bool {
    let Ok(mut ranges) = info.dwarf.unit_ranges(unit) else { return false };
    while let Ok(Some(r)) = ranges.next() {
        if r.begin <= pc && pc < r.end {
            return true;
        }
    }
    false
}

struct Walker<'a> {
    info: &'a DebugInfo,
    unit: &'a gimli::Unit<AR>,
    pc: u64,
    vars: Vec<ScopeVar>,
    /// The subprogram's entry address (DW_AT_low_pc).
    entry: Option<u64>,
}

type Node<'a, 'b, 'c> = gimli::EntriesTreeNode<'a, 'b, 'c, AR>;

impl Walker<'_> {
    fn contains(&self, e: &gimli::DebuggingInformationEntry<AR>) -> bool {
        let Ok(mut ranges) = self.info.dwarf.die_ranges(self.unit, e) else { return false };
        while let Ok(Some(r)) = ranges.next() {
            if r.begin <= self.pc && self.pc < r.end {
                return true;
            }
        }
        false
    }

    /// Find the subprogram holding the PC; returns its frame base (Some(None) = found, no base).
    fn search(&mut self, node: Node<'_, '_, '_>) -> gimli::Result<Option<Option<Expression<AR>>>> {
        let mut children = node.children();
        while let Some(child) = children.next()? {
            let e = child.entry();
            match e.tag() {
                gimli::DW_TAG_subprogram if self.contains(e) => {
                    if let Some(v) = e.attr_value(gimli::DW_AT_low_pc)? {
                        self.entry = self.info.dwarf.attr_address(self.unit, v)?;
                    }
                    let base = match e.attr_value(gimli::DW_AT_frame_base)? {
                        Some(AttributeValue::Exprloc(x)) => Some(x),
                        _ => None,
                    };
                    self.collect(child)?;
                    return Ok(Some(base));
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

    fn collect(&mut self, node: Node<'_, '_, '_>) -> gimli::Result<()> {
        let mut children = node.children();
        while let Some(child) = children.next()? {
            let e = child.entry();
            match e.tag() {
                gimli::DW_TAG_formal_parameter | gimli::DW_TAG_variable => {
                    if let Some(v) = self.variable(e)? {
                        self.vars.push(v);
                    }
                }
                gimli::DW_TAG_lexical_block | gimli::DW_TAG_inlined_subroutine => {
                    let has_ranges = e.attr(gimli::DW_AT_low_pc)?.is_some() || e.attr(gimli::DW_AT_ranges)?.is_some();
                    if !has_ranges || self.contains(e) {
                        self.collect(child)?;
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn variable(&self, e: &gimli::DebuggingInformationEntry<AR>) -> gimli::Result<Option<ScopeVar>> {
        let origin = match e.attr_value(gimli::DW_AT_abstract_origin)? {
            Some(AttributeValue::UnitRef(o)) => Some(self.unit.entry(o)?),
            _ => None,
        };
        let attr = |name| -> gimli::Result<Option<AttributeValue<AR>>> {
            match e.attr_value(name)? {
                Some(v) => Ok(Some(v)),
                None => origin.as_ref().map_or(Ok(None), |o| o.attr_value(name)),
            }
        };
        let Some(name) = attr(gimli::DW_AT_name)?.and_then(|v| self.info.dwarf.attr_string(self.unit, v).ok()) else {
            return Ok(None);
        };
        let name = name.to_string_lossy()?.into_owned();
        let ty = match attr(gimli::DW_AT_type)? {
            Some(AttributeValue::UnitRef(t)) => t.to_debug_info_offset(&self.unit.header).and_then(|o| self.info.type_at(o.0 as u64)),
            Some(AttributeValue::DebugInfoRef(o)) => self.info.type_at(o.0 as u64),
            _ => None,
        };
        let source = match e.attr_value(gimli::DW_AT_location)? {
            Some(AttributeValue::Exprloc(x)) => VarSource::Location(x),
            Some(v) => match self.info.dwarf.attr_locations_offset(self.unit, v)? {
                Some(off) => {
                    let mut list = self.info.dwarf.locations(self.unit, off)?;
                    let mut found = VarSource::OptimizedOut;
                    while let Some(entry) = list.next()? {
                        if entry.range.begin <= self.pc && self.pc < entry.range.end {
                            found = VarSource::Location(entry.data);
                            break;
                        }
                    }
                    found
                }
                None => VarSource::OptimizedOut,
            },
            None => match attr(gimli::DW_AT_const_value)? {
                Some(AttributeValue::Block(b)) => VarSource::Constant(b.to_slice()?.to_vec()),
                Some(v) => match v.sdata_value().or_else(|| v.udata_value().map(|u| u as i64)) {
                    Some(n) => VarSource::Constant(n.to_le_bytes().to_vec()),
                    None => VarSource::OptimizedOut,
                },
                None => VarSource::OptimizedOut,
            },
        };
        Ok(Some(ScopeVar { name, ty, is_parameter: e.tag() == gimli::DW_TAG_formal_parameter, source }))
    }
}

/// Integer argument registers of the System V x86-64 ABI, in order.
const ARG_REGISTERS: [&str; 6] = ["rdi", "rsi", "rdx", "rcx", "r8", "r9"];

/// At a function's first instruction an -O0 prologue has not yet stored the parameters:
/// describe each by the register the caller passed it in (a hidden return-buffer pointer
/// takes the first one when the function returns a large struct).
fn entry_registers(info: &DebugInfo, scope: &mut Scope, pc: u64) {
    let returns_in_memory = info
        .signature(pc)
        .and_then(|s| s.ret)
        .map(|r| info.ty(r))
        .is_some_and(|t| matches!(t.kind, crate::symbols::TypeKind::Struct { .. }) && t.size > 16);
    let mut next = usize::from(returns_in_memory);
    for v in scope.vars.iter_mut().filter(|v| v.is_parameter) {
        let integer_class = v.ty.map(|t| info.ty(t)).is_some_and(|t| {
            use crate::symbols::TypeKind::*;
            matches!(t.kind, Int { .. } | Char { .. } | Bool | Enum { .. } | Pointer { .. }) && t.size <= 8
        });
        v.source = if !integer_class {
            VarSource::EntryUnavailable("not passed in an integer register; step past the prologue (step-over) to read it")
        } else if let Some(r) = ARG_REGISTERS.get(next) {
            next += 1;
            VarSource::EntryRegister(r)
        } else {
            VarSource::EntryUnavailable("passed on the stack; step past the prologue (step-over) to read it")
        };
    }
}
