//! Where a variable lives at one PC, symbolically: "in rdi", "at rbp-20", "at static 0x4010".
//! The agent turns such a location into a value with the paused thread's registers, so the
//! daemon never needs the target's memory to resolve a local.
//!
//! The canonical frame address (CFA, `DW_OP_call_frame_cfa`, gcc's frame base) comes from
//! `.eh_frame` at that PC: `rsp+8` at a function's entry, `rbp+16` once an -O0 prologue ran.

use gimli::{CfaRule, EhFrame, Expression, Operation, UnwindSection};
use serde::Serialize;

use super::dwarf::R;

/// The location of a variable at one PC.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum VarLocation {
    /// The value is in this register (Frida context name: "rdi", "rbx", ...).
    Register { reg: String },
    /// The value is in memory at `register + offset`.
    Memory { base: String, offset: i64 },
    /// The value is at a static (pre-slide) address: a `static` local.
    Static { address: u64 },
    /// The value is a constant the compiler recorded (`DW_OP_stack_value`, `DW_AT_const_value`).
    Value { value: i64 },
    /// The compiler kept no copy of the value at this PC.
    OptimizedOut,
    /// A location this debugger cannot express (split across registers, entry values, ...).
    Unsupported { why: String },
}

/// Frida's x86_64 register name for a DWARF register number.
pub fn register_name(reg: gimli::Register) -> Option<&'static str> {
    const NAMES: [&str; 17] = [
        "rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15",
        "rip",
    ];
    NAMES.get(reg.0 as usize).copied()
}

/// Integer argument registers of the System V x86_64 ABI, in order.
pub const ARG_REGISTERS: [&str; 6] = ["rdi", "rsi", "rdx", "rcx", "r8", "r9"];

/// `.eh_frame` of one binary, to find the CFA rule at a PC.
pub struct CallFrames<'a> {
    pub(super) eh_frame: EhFrame<R<'a>>,
    pub(super) bases: gimli::BaseAddresses,
}

impl CallFrames<'_> {
    /// CFA = `register + offset` at static `pc`, if the CFI says so (the usual case).
    pub fn cfa_rule(&self, pc: u64) -> Option<(String, i64)> {
        let mut ctx = gimli::UnwindContext::new();
        let row = self.eh_frame.unwind_info_for_address(&self.bases, &mut ctx, pc, EhFrame::cie_from_offset).ok()?;
        match row.cfa() {
            CfaRule::RegisterAndOffset { register, offset } => Some((register_name(*register)?.to_string(), *offset)),
            CfaRule::Expression(_) => None,
        }
    }
}

/// A frame base (`DW_AT_frame_base`) resolved at a PC: `register + offset`.
pub type FrameBase = Option<(String, i64)>;

/// Resolve a subprogram's `DW_AT_frame_base` expression at `pc`.
pub fn frame_base(expr: Expression<R<'_>>, encoding: gimli::Encoding, frames: &CallFrames<'_>, pc: u64) -> FrameBase {
    let ops = operations(expr, encoding)?;
    match ops.as_slice() {
        [Operation::CallFrameCFA] => frames.cfa_rule(pc),
        // DW_OP_regN as a frame base means "the frame base is the content of regN".
        [Operation::Register { register }] => Some((register_name(*register)?.to_string(), 0)),
        [Operation::RegisterOffset { register, offset, .. }] => Some((register_name(*register)?.to_string(), *offset)),
        _ => None,
    }
}

fn operations<'a>(expr: Expression<R<'a>>, encoding: gimli::Encoding) -> Option<Vec<Operation<R<'a>>>> {
    let mut ops = Vec::new();
    let mut it = expr.operations(encoding);
    while let Some(op) = it.next().ok()? {
        ops.push(op);
        if ops.len() > 32 {
            return None;
        }
    }
    Some(ops)
}

/// Evaluate a variable's location expression symbolically.
pub fn evaluate(expr: Expression<R<'_>>, encoding: gimli::Encoding, base: &FrameBase, frames: &CallFrames<'_>, pc: u64) -> VarLocation {
    let Some(mut ops) = operations(expr, encoding) else {
        return unsupported("unreadable location expression");
    };
    // A leading piece covering the whole value is the same as no piece.
    if let Some(i) = ops.iter().position(|o| matches!(o, Operation::Piece { .. })) {
        if ops[i + 1..].iter().any(|o| !matches!(o, Operation::Piece { .. })) {
            return unsupported("the value is split across several locations");
        }
        ops.truncate(i);
        if ops.is_empty() {
            return VarLocation::OptimizedOut;
        }
    }
    let reg = |r: &gimli::Register| register_name(*r).map(str::to_string);
    match ops.as_slice() {
        [] => VarLocation::OptimizedOut,
        [Operation::Register { register }] => match reg(register) {
            Some(reg) => VarLocation::Register { reg },
            None => unsupported(&format!("in DWARF register {} (not an integer register)", register.0)),
        },
        [Operation::FrameOffset { offset }] => match base {
            Some((b, o)) => VarLocation::Memory { base: b.clone(), offset: o + offset },
            None => unsupported("the function's frame base is not known at this PC"),
        },
        [Operation::RegisterOffset { register, offset, .. }] => match reg(register) {
            Some(base) => VarLocation::Memory { base, offset: *offset },
            None => unsupported("relative to a non-integer register"),
        },
        [Operation::CallFrameCFA] => match frames.cfa_rule(pc) {
            Some((base, offset)) => VarLocation::Memory { base, offset },
            None => unsupported("no CFA rule at this PC"),
        },
        [Operation::Address { address }] => VarLocation::Static { address: *address },
        [Operation::UnsignedConstant { value }, Operation::StackValue] => VarLocation::Value { value: *value as i64 },
        [Operation::SignedConstant { value }, Operation::StackValue] => VarLocation::Value { value: *value },
        [Operation::EntryValue { .. }, ..] => VarLocation::OptimizedOut,
        [.., Operation::StackValue] => unsupported("a value computed from other values (DW_OP_stack_value)"),
        other => unsupported(&format!("location expression {:?}", other.first())),
    }
}

fn unsupported(why: &str) -> VarLocation {
    VarLocation::Unsupported { why: why.to_string() }
}
