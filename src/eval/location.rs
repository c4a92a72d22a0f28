//! A DWARF location expression → where the value is at this frame, evaluated by
//! `gimli::Evaluation` against the frame's registers and the target's memory: `DW_OP_breg*`,
//! `DW_OP_fbreg` (through the function's frame base and the CFA), `DW_OP_piece` composites,
//! computed values (`DW_OP_stack_value`), relocated static addresses.

use gimli::Reader as _;
use gimli::{EvaluationResult, Expression, Location, Value as DwValue};

use super::unwind::{dwarf_register_name, FrameRegs, Unwinder};
use super::Memory;
use crate::symbols::DebugInfo;

type AR = gimli::EndianArcSlice<gimli::RunTimeEndian>;

/// Where a value is.
#[derive(Debug, Clone, PartialEq)]
pub enum Located {
    /// In memory at this runtime address.
    Memory(u64),
    /// In this register (Frida's name), whole.
    Register(&'static str),
    /// Computed or assembled from pieces: the bytes themselves (not writable).
    Bytes(Vec<u8>),
}

/// What a location is evaluated against.
pub struct LocationContext<'a> {
    pub info: &'a DebugInfo,
    pub unit: usize,
    pub encoding: gimli::Encoding,
    pub frame: &'a FrameRegs,
    pub slide: u64,
    pub mem: &'a dyn Memory,
    pub unwinder: Option<&'a Unwinder>,
    /// The function's `DW_AT_frame_base`.
    pub frame_base: Option<&'a Expression<AR>>,
    /// The caller's registers, for `DW_OP_entry_value` (entry_value.rs).
    pub caller: Option<&'a FrameRegs>,
}

const MAX_STEPS: usize = 256;

impl LocationContext<'_> {
    /// Locate a value of `size` bytes described by `expr`.
    pub fn locate(&self, expr: &Expression<AR>, size: u64) -> Result<Located, String> {
        let pieces = self.pieces(expr)?;
        match pieces.as_slice() {
            [] => Err("optimized out at this pc".into()),
            [p] if p.size_in_bits.is_none() || p.size_in_bits == Some(size * 8) => match &p.location {
                Location::Address { address } => Ok(Located::Memory(*address)),
                Location::Register { register } => dwarf_register_name(register.0)
                    .map(Located::Register)
                    .ok_or_else(|| register_missing(register.0)),
                _ => self.assemble(&pieces, size),
            },
            _ => self.assemble(&pieces, size),
        }
    }

    /// Bytes of a value split over several places (or computed).
    fn assemble(&self, pieces: &[gimli::Piece<AR>], size: u64) -> Result<Located, String> {
        let mut out = Vec::with_capacity(size as usize);
        for p in pieces {
            let bytes = p.size_in_bits.map(|b| b.div_ceil(8)).unwrap_or(size) as usize;
            match &p.location {
                Location::Empty => return Err("partly optimized out at this pc".into()),
                Location::Address { address } => out.extend(self.mem.read_vec(*address, bytes)?),
                Location::Register { register } => {
                    let name = dwarf_register_name(register.0).ok_or_else(|| register_missing(register.0))?;
                    let v = self.register(name)?;
                    out.extend_from_slice(&v.to_le_bytes()[..bytes.min(8)]);
                }
                Location::Value { value } => out.extend_from_slice(&value_bytes(*value)[..bytes.min(8)]),
                Location::Bytes { value } => out.extend_from_slice(&value.to_slice().map_err(|e| e.to_string())?[..]),
                Location::ImplicitPointer { .. } => {
                    return Err("an implicit pointer (the pointee was optimized into constants)".into())
                }
            }
        }
        out.resize(size as usize, 0);
        Ok(Located::Bytes(out))
    }

    fn register(&self, name: &str) -> Result<u64, String> {
        self.frame.regs.get(name).copied().ok_or_else(|| format!("register {name} is not known in this frame (not saved by the callee)"))
    }

    fn cfa(&self) -> Result<u64, String> {
        let pc = self.frame.lookup_pc().wrapping_sub(self.slide);
        let (reg, off) = self.unwinder.and_then(|u| u.cfa_rule(pc)).ok_or("no call frame information at this pc")?;
        Ok(self.register(reg)?.wrapping_add_signed(off))
    }

    /// The pieces `expr` evaluates to in this frame.
    pub fn pieces(&self, expr: &Expression<AR>) -> Result<Vec<gimli::Piece<AR>>, String> {
        self.run(expr, 0)
    }

    fn run(&self, expr: &Expression<AR>, depth: u32) -> Result<Vec<gimli::Piece<AR>>, String> {
        if depth > 4 {
            return Err("location expression nests too deeply".into());
        }
        let mut eval = expr.clone().evaluation(self.encoding);
        let mut state = eval.evaluate().map_err(explain)?;
        let mut steps = 0;
        loop {
            steps += 1;
            if steps > MAX_STEPS {
                return Err("location expression does not terminate".into());
            }
            let next = match state {
                EvaluationResult::Complete => break,
                EvaluationResult::RequiresMemory { address, size, .. } => {
                    let b = self.mem.read_vec(address, size as usize)?;
                    let mut v = [0u8; 8];
                    v[..b.len().min(8)].copy_from_slice(&b[..b.len().min(8)]);
                    eval.resume_with_memory(DwValue::Generic(u64::from_le_bytes(v)))
                }
                EvaluationResult::RequiresRegister { register, .. } => {
                    let name = dwarf_register_name(register.0).ok_or_else(|| register_missing(register.0))?;
                    eval.resume_with_register(DwValue::Generic(self.register(name)?))
                }
                EvaluationResult::RequiresFrameBase => {
                    let base = self.frame_base.ok_or("the function has no frame base")?;
                    let address = match self.run(base, depth + 1)?.first().map(|p| &p.location) {
                        Some(Location::Address { address }) => *address,
                        Some(Location::Register { register }) => {
                            self.register(dwarf_register_name(register.0).ok_or_else(|| register_missing(register.0))?)?
                        }
                        _ => return Err("the frame base is not an address".into()),
                    };
                    eval.resume_with_frame_base(address)
                }
                EvaluationResult::RequiresCallFrameCfa => eval.resume_with_call_frame_cfa(self.cfa()?),
                EvaluationResult::RequiresRelocatedAddress(a) => eval.resume_with_relocated_address(a.wrapping_add(self.slide)),
                EvaluationResult::RequiresIndexedAddress { index, relocate } => {
                    let unit = &self.info.units[self.unit].unit;
                    let a = self.info.dwarf.address(unit, index).map_err(|e| e.to_string())?;
                    eval.resume_with_indexed_address(if relocate { a.wrapping_add(self.slide) } else { a })
                }
                EvaluationResult::RequiresBaseType(off) => {
                    let unit = &self.info.units[self.unit].unit;
                    let e = unit.entry(off).map_err(|e| e.to_string())?;
                    let enc = match e.attr_value(gimli::DW_AT_encoding).ok().flatten() {
                        Some(gimli::AttributeValue::Encoding(x)) => x,
                        _ => gimli::DW_ATE_unsigned,
                    };
                    let size = e.attr_value(gimli::DW_AT_byte_size).ok().flatten().and_then(|v| v.udata_value()).unwrap_or(8);
                    let vt = gimli::ValueType::from_encoding(enc, size).unwrap_or(gimli::ValueType::Generic);
                    eval.resume_with_base_type(vt)
                }
                EvaluationResult::RequiresEntryValue(entry) => match self.caller {
                    Some(caller) => eval.resume_with_entry_value(DwValue::Generic(super::entry_value::recover(self, &entry, caller)?)),
                    None => return Err("optimized out at this pc (its value at function entry: no caller frame to recover it from)".into()),
                },
                EvaluationResult::RequiresTls(_) => return Err("a thread-local variable (not supported yet)".into()),
                EvaluationResult::RequiresAtLocation(_) | EvaluationResult::RequiresParameterRef(_) => {
                    return Err("a location that refers to another DIE (not supported)".into())
                }
            };
            state = next.map_err(explain)?;
        }
        Ok(eval.result())
    }
}

/// gimli's evaluation errors, said for the reader of a value.
fn explain(e: gimli::Error) -> String {
    match e {
        gimli::Error::IntegralTypeRequired | gimli::Error::UnsupportedTypeOperation => {
            "computed from a floating-point register value (vector registers are not captured at pauses yet)".into()
        }
        other => format!("location expression: {other}"),
    }
}

fn register_missing(n: u16) -> String {
    if (17..=32).contains(&n) {
        format!("in register xmm{} (vector registers are not captured at pauses yet)", n - 17)
    } else {
        format!("in DWARF register {n}, which this debugger does not read")
    }
}

fn value_bytes(v: DwValue) -> [u8; 8] {
    match v {
        DwValue::Generic(x) | DwValue::U64(x) => x.to_le_bytes(),
        DwValue::I64(x) => x.to_le_bytes(),
        DwValue::I8(x) => (x as i64).to_le_bytes(),
        DwValue::U8(x) => (x as u64).to_le_bytes(),
        DwValue::I16(x) => (x as i64).to_le_bytes(),
        DwValue::U16(x) => (x as u64).to_le_bytes(),
        DwValue::I32(x) => (x as i64).to_le_bytes(),
        DwValue::U32(x) => (x as u64).to_le_bytes(),
        DwValue::F32(x) => (x.to_bits() as u64).to_le_bytes(),
        DwValue::F64(x) => x.to_bits().to_le_bytes(),
    }
}
