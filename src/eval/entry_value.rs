//! `DW_OP_entry_value`: the value a register held when the function was entered, which
//! optimized code describes instead of keeping a copy (gdb's `x@entry`). Recovered the way
//! gdb does: the caller's `DW_TAG_call_site` at our return address names, per argument
//! register, an expression over the caller's frame (`DW_AT_call_value`) that computes it.

use std::collections::HashMap;

use gimli::{AttributeValue, Expression, Location, Operation};

use super::location::LocationContext;
use super::scope::scope_at;
use super::unwind::FrameRegs;
use crate::symbols::DebugInfo;

type AR = gimli::EndianArcSlice<gimli::RunTimeEndian>;

/// Call sites of one binary: static return address → (unit index, the call site's DIE).
pub struct CallSites(HashMap<u64, (usize, gimli::UnitOffset)>);

impl CallSites {
    pub fn build(info: &DebugInfo) -> CallSites {
        let mut map = HashMap::new();
        for (ui, u) in info.units.iter().enumerate() {
            let mut entries = u.unit.entries();
            while let Ok(Some((_, e))) = entries.next_dfs() {
                if e.tag() != gimli::DW_TAG_call_site && e.tag() != gimli::DW_TAG_GNU_call_site {
                    continue;
                }
                // DWARF 5 names the return address; GNU's extension puts it in low_pc.
                let pc = e.attr_value(gimli::DW_AT_call_return_pc).ok().flatten().or_else(|| e.attr_value(gimli::DW_AT_low_pc).ok().flatten());
                if let Some(Ok(Some(pc))) = pc.map(|v| info.dwarf.attr_address(&u.unit, v)) {
                    map.insert(pc, (ui, e.offset()));
                }
            }
        }
        CallSites(map)
    }
}

/// The register a `DW_OP_entry_value` block names (`DW_OP_regN`, or `DW_OP_bregN 0`).
fn entry_register(expr: &Expression<AR>, encoding: gimli::Encoding) -> Option<u16> {
    let mut ops = expr.clone().operations(encoding);
    let first = ops.next().ok()??;
    if ops.next().ok()?.is_some() {
        return None;
    }
    match first {
        Operation::Register { register } => Some(register.0),
        Operation::RegisterOffset { register, offset: 0, .. } => Some(register.0),
        _ => None,
    }
}

/// The entry value described by `expr` for the frame `callee` (whose caller is `caller`).
pub fn recover(ctx: &LocationContext<'_>, expr: &Expression<AR>, caller: &FrameRegs) -> Result<u64, String> {
    let not_here = |why: &str| format!("optimized out at this pc (its value at function entry: {why})");
    let reg = entry_register(expr, ctx.encoding).ok_or_else(|| not_here("an entry-value expression this debugger does not read"))?;
    let return_address = caller.pc().wrapping_sub(ctx.slide);
    let sites = ctx.info.eval_call_sites.get_or_init(|| CallSites::build(ctx.info));
    let &(ui, site) = sites.0.get(&return_address).ok_or_else(|| not_here("the caller's call site is not described"))?;
    let unit = &ctx.info.units[ui].unit;
    let mut tree = unit.entries_tree(Some(site)).map_err(|e| e.to_string())?;
    let root = tree.root().map_err(|e| e.to_string())?;
    let mut children = root.children();
    while let Ok(Some(child)) = children.next() {
        let e = child.entry();
        if e.tag() != gimli::DW_TAG_call_site_parameter && e.tag() != gimli::DW_TAG_GNU_call_site_parameter {
            continue;
        }
        let Ok(Some(AttributeValue::Exprloc(loc))) = e.attr_value(gimli::DW_AT_location) else { continue };
        if entry_register(&loc, unit.encoding()) != Some(reg) {
            continue;
        }
        let value = e.attr_value(gimli::DW_AT_call_value).ok().flatten().or_else(|| e.attr_value(gimli::DW_AT_GNU_call_site_value).ok().flatten());
        let Some(AttributeValue::Exprloc(value)) = value else {
            return Err(not_here("the caller did not record how it computed the argument"));
        };
        // The value expression runs in the caller's frame (its registers, its frame base).
        let caller_scope = scope_at(ctx.info, caller.lookup_pc().wrapping_sub(ctx.slide));
        let caller_ctx = LocationContext {
            info: ctx.info,
            unit: ui,
            encoding: unit.encoding(),
            frame: caller,
            slide: ctx.slide,
            mem: ctx.mem,
            unwinder: ctx.unwinder,
            frame_base: caller_scope.as_ref().and_then(|s| s.frame_base.as_ref()),
            caller: None,
        };
        return match caller_ctx.pieces(&value)?.first().map(|p| p.location.clone()) {
            Some(Location::Address { address }) => Ok(address),
            Some(Location::Value { value }) => Ok(value.to_u64(!0).unwrap_or(0)),
            Some(Location::Register { register }) => super::unwind::dwarf_register_name(register.0)
                .and_then(|n| caller.regs.get(n).copied())
                .ok_or_else(|| not_here("the caller's register is not known")),
            _ => Err(not_here("the caller's value is not known here")),
        };
    }
    Err(not_here("the caller did not record this argument"))
}
