//! The JSON of a natively captured call (`capture_plan.rs`): a port of the agent's
//! `serialize.ts` reading from the bytes the hook copied instead of live memory. A read
//! that no copied block covers is what faulted in the target: `<unreadable 0x…>`, as there.
//! Must print exactly what serialize.ts prints (tests/capture_native.rs compares both).

use std::sync::Arc;

use serde_json::{Map, Value};

use super::capture_plan::{CapturePlan, BLOCK_HEADER, MAX_ELEMENTS, MAX_KEYS, MAX_STRING};
use crate::symbols::{Type, TypeId, TypeKind};

/// Where register values are placed for reading (never a user-space address).
const REG_ADDR: u64 = 0xffff_ff00_0000_0000;
const META_CSTRING: u32 = 1 << 30;
const META_TERMINATED: u32 = 1 << 31;
const META_LEN: u32 = (1 << 30) - 1;
/// 2^53 - 1: beyond it a JavaScript number changes the value (serialize.ts readInt).
const MAX_SAFE: u64 = (1 << 53) - 1;

/// The blocks of one record's payload.
struct View<'a> {
    /// (address, bytes) of struct copies and register values.
    blocks: Vec<(u64, &'a [u8])>,
    /// (address, bytes, scanned length, ended at a NUL) of C strings.
    strings: Vec<(u64, &'a [u8], usize, bool)>,
}

impl<'a> View<'a> {
    fn parse(regs: &'a [u8], payload: &'a [u8]) -> View<'a> {
        let mut v = View { blocks: Vec::new(), strings: Vec::new() };
        for (i, r) in regs.chunks_exact(8).enumerate() {
            v.blocks.push((REG_ADDR + 16 * i as u64, r));
        }
        let mut rest = payload;
        while rest.len() as u64 >= BLOCK_HEADER {
            let addr = u64::from_le_bytes(rest[0..8].try_into().unwrap());
            let meta = u32::from_le_bytes(rest[8..12].try_into().unwrap());
            let len = (meta & META_LEN) as usize;
            let stored = if meta & META_CSTRING != 0 { len.min(MAX_STRING) } else { len };
            let Some(bytes) = rest.get(12..12 + stored) else { break };
            if meta & META_CSTRING != 0 {
                v.strings.push((addr, bytes, len, meta & META_TERMINATED != 0));
            } else {
                v.blocks.push((addr, bytes));
            }
            rest = &rest[12 + stored..];
        }
        v
    }

    fn bytes(&self, addr: u64, n: u64) -> Result<&'a [u8], ()> {
        for (a, b) in &self.blocks {
            if addr >= *a && addr.checked_add(n).is_some_and(|end| end <= a + b.len() as u64) {
                let off = (addr - a) as usize;
                return Ok(&b[off..off + n as usize]);
            }
        }
        Err(())
    }

    fn u64_at(&self, addr: u64, n: u64) -> Result<u64, ()> {
        let b = self.bytes(addr, n)?;
        let mut w = [0u8; 8];
        w[..b.len()].copy_from_slice(b);
        Ok(u64::from_le_bytes(w))
    }
}

/// `{name: value}` of the arguments of a captured enter (`regs`: the argument words).
pub(crate) fn args_json(plan: &CapturePlan, regs: &[u64], payload: &[u8]) -> String {
    let raw: Vec<u8> = regs.iter().flat_map(|w| w.to_le_bytes()).collect();
    let view = View::parse(&raw, payload);
    let mut out = Map::new();
    for (i, (name, ty)) in plan.params.iter().enumerate() {
        let mut r = Reader { plan, view: &view, path: Vec::new() };
        out.insert(name.clone(), r.read(REG_ADDR + 16 * i as u64, *ty, plan.depth as i64));
    }
    Value::Object(out).to_string()
}

/// The return value of a captured exit (`rax`).
pub(crate) fn ret_json(plan: &CapturePlan, rax: u64, payload: &[u8]) -> String {
    let Some(ty) = plan.ret else { return "null".into() };
    let raw = rax.to_le_bytes();
    let view = View::parse(&raw, payload);
    Reader { plan, view: &view, path: Vec::new() }.read(REG_ADDR, ty, plan.depth as i64).to_string()
}

fn unreadable(addr: u64) -> Value {
    Value::String(format!("<unreadable 0x{addr:x}>"))
}

fn hex(p: u64) -> Value {
    Value::String(format!("0x{p:x}"))
}

/// A JavaScript number as JSON after the trip through `JSON.stringify` and serde: integral
/// values print without a fraction.
pub(crate) fn js_number(v: f64) -> Value {
    if v.is_finite() && v == v.trunc() {
        if (0.0..18446744073709551616.0).contains(&v) {
            return Value::from(v as u64);
        }
        if (-9223372036854775808.0..0.0).contains(&v) {
            return Value::from(v as i64);
        }
    }
    serde_json::Number::from_f64(v).map(Value::Number).unwrap_or(Value::Null)
}

/// serialize.ts `readInt`: a number, or decimal text beyond 2^53.
fn int_value(raw: u64, size: u64, signed: bool) -> Value {
    let bits = size * 8;
    if signed {
        let v = if bits == 64 { raw as i64 } else { ((raw << (64 - bits)) as i64) >> (64 - bits) };
        if v.unsigned_abs() <= MAX_SAFE {
            Value::from(v)
        } else {
            Value::String(v.to_string())
        }
    } else if raw <= MAX_SAFE {
        Value::from(raw)
    } else {
        Value::String(raw.to_string())
    }
}

fn js_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// UTF-8 when the bytes are valid, else each byte as a Latin-1 character (serialize.ts readUtf8).
fn utf8_or_latin1(b: &[u8]) -> String {
    match std::str::from_utf8(b) {
        Ok(s) => s.to_string(),
        Err(_) => b.iter().map(|&c| c as char).collect(),
    }
}

struct Reader<'a> {
    plan: &'a CapturePlan,
    view: &'a View<'a>,
    /// Structs being printed on the current path: (address, name).
    path: Vec<(u64, String)>,
}

impl Reader<'_> {
    fn ty(&self, id: TypeId) -> Option<Arc<Type>> {
        self.plan.ty(id).cloned()
    }

    fn read(&mut self, addr: u64, id: TypeId, depth: i64) -> Value {
        let Some(t) = self.ty(id) else { return Value::String(format!("<unknown type {id}>")) };
        self.try_read(addr, &t, depth).unwrap_or_else(|()| unreadable(addr))
    }

    fn try_read(&mut self, addr: u64, t: &Type, depth: i64) -> Result<Value, ()> {
        let v = self.view;
        Ok(match &t.kind {
            TypeKind::Int { signed } => match t.size {
                1 | 2 | 4 | 8 => int_value(v.u64_at(addr, t.size)?, t.size, *signed),
                s => Value::String(format!("<int{} @0x{addr:x}>", s * 8)),
            },
            TypeKind::Float => match t.size {
                4 => js_float(f32::from_bits(v.u64_at(addr, 4)? as u32) as f64),
                8 => js_float(f64::from_bits(v.u64_at(addr, 8)?)),
                16 => js_float(extended(v.bytes(addr, 10)?)),
                s => Value::String(format!("<float{}>", s * 8)),
            },
            TypeKind::Bool => Value::Bool(v.bytes(addr, 1)?[0] != 0),
            TypeKind::Char { signed } => {
                let size = if t.size == 0 { 1 } else { t.size };
                let code: i64 = match size {
                    4 => v.u64_at(addr, 4)? as i64,
                    2 => v.u64_at(addr, 2)? as i64,
                    _ if *signed => v.bytes(addr, 1)?[0] as i8 as i64,
                    _ => v.bytes(addr, 1)?[0] as i64,
                };
                let printable = if size == 1 { (32..127).contains(&code) } else { code >= 32 && code < 0x110000 && code != 127 && !(0xd800..0xe000).contains(&code) };
                match char::from_u32(code as u32).filter(|_| printable) {
                    Some(c) => Value::String(c.to_string()),
                    None => Value::from(code),
                }
            }
            TypeKind::Enum { signed, enumerators } => {
                let size = if t.size == 0 { 4 } else { t.size };
                let n = match size {
                    1 | 2 | 4 | 8 => int_value(v.u64_at(addr, size)?, size, *signed),
                    s => Value::String(format!("<int{} @0x{addr:x}>", s * 8)),
                };
                let text = js_text(&n);
                match enumerators.iter().rev().find(|(_, val)| val.to_string() == text) {
                    Some((name, _)) => Value::String(name.clone()),
                    None => n,
                }
            }
            TypeKind::Pointer { target } => {
                let p = v.u64_at(addr, 8)?;
                self.pointer(p, *target, depth)
            }
            TypeKind::Struct { .. } => return self.structure(addr, t, depth),
            TypeKind::Array { element, count } => self.array(addr, *element, count.unwrap_or(0), depth),
            TypeKind::Void => Value::Null,
            TypeKind::Function => hex(addr),
            _ => Value::String(format!("<{} @0x{addr:x}>", t.name)),
        })
    }

    fn pointer(&mut self, p: u64, target: Option<TypeId>, depth: i64) -> Value {
        if p == 0 {
            return Value::Null;
        }
        let Some(to) = target else { return hex(p) };
        let Some(tt) = self.ty(to) else { return hex(p) };
        if crate::symbols::types::is_c_char(&tt) {
            return self.cstring(p);
        }
        if matches!(tt.kind, TypeKind::Struct { .. }) {
            return self.read(p, to, depth);
        }
        hex(p)
    }

    fn cstring(&self, p: u64) -> Value {
        let Some(&(_, bytes, len, _)) = self.view.strings.iter().find(|s| s.0 == p) else { return unreadable(p) };
        let s = utf8_or_latin1(&bytes[..len.min(MAX_STRING).min(bytes.len())]);
        Value::String(if len > MAX_STRING { s + "…" } else { s })
    }

    fn structure(&mut self, addr: u64, t: &Type, depth: i64) -> Result<Value, ()> {
        let name = t.name.clone();
        if self.path.iter().any(|(a, n)| *a == addr && *n == name) {
            return Ok(Value::String(format!("<circular ref to {name}>")));
        }
        if depth <= 0 {
            return Ok(Value::String(format!("<{name}>")));
        }
        if t.size > 0 {
            self.view.bytes(addr, 1)?;
        }
        let TypeKind::Struct { members, .. } = &t.kind else { return Err(()) };
        if members.len() == 1 && members[0].name == "__0" && members[0].bits.is_none() {
            return Ok(self.read(addr + members[0].offset, members[0].ty, depth));
        }
        let mut out = Map::new();
        self.path.push((addr, name));
        for m in members.iter().take(MAX_KEYS) {
            let faddr = addr + m.offset;
            // A bitfield's failed read fails the whole struct, leaving it on the path, as there.
            let value = match m.bits {
                Some((bo, bs)) => self.bits(faddr, m.ty, bo, bs)?,
                None => self.read(faddr, m.ty, depth - 1),
            };
            out.insert(m.name.clone(), value);
        }
        self.path.pop();
        Ok(Value::Object(out))
    }

    fn bits(&self, addr: u64, id: TypeId, bit_off: u64, bit_size: u64) -> Result<Value, ()> {
        let size = (bit_off + bit_size).div_ceil(8).clamp(1, 8);
        let raw = self.view.u64_at(addr, size)? as u128;
        let bit_size = bit_size.min(64);
        let mask = (1u128 << bit_size) - 1;
        // BigInt shifts in JS: a shift past the bytes read gives 0.
        let v = if bit_off >= 128 { 0 } else { (raw >> bit_off) & mask };
        let t = self.ty(id);
        let signed = matches!(t.as_deref().map(|t| &t.kind), Some(TypeKind::Int { signed: true } | TypeKind::Char { signed: true } | TypeKind::Enum { signed: true, .. }));
        if signed && bit_size > 0 && (v >> (bit_size - 1)) == 1 {
            return Ok(js_number(v as f64 - (1u128 << bit_size) as f64));
        }
        if matches!(t.as_deref().map(|t| &t.kind), Some(TypeKind::Bool)) {
            return Ok(Value::Bool(v != 0));
        }
        if let Some(TypeKind::Enum { enumerators, .. }) = t.as_deref().map(|t| &t.kind) {
            if let Some((name, _)) = enumerators.iter().rev().find(|(_, val)| val.to_string() == v.to_string()) {
                return Ok(Value::String(name.clone()));
            }
        }
        Ok(js_number(v as f64))
    }

    fn array(&mut self, addr: u64, of: TypeId, count: u64, depth: i64) -> Value {
        if addr == 0 {
            return if count == 0 { Value::Array(vec![]) } else { Value::Null };
        }
        let size = match self.ty(of) {
            Some(t) if matches!(t.kind, TypeKind::Pointer { .. }) => 8,
            Some(t) => t.size,
            None => 0,
        };
        let n = count.min(MAX_ELEMENTS);
        let mut out: Vec<Value> = (0..n).map(|i| self.read(addr + i * size, of, depth)).collect();
        if count > MAX_ELEMENTS {
            out.push(Value::String(format!("<{} more>", count - MAX_ELEMENTS)));
        }
        Value::Array(out)
    }
}

/// serialize.ts readFloat's result: the number, or its text when not finite.
fn js_float(v: f64) -> Value {
    if v.is_finite() {
        js_number(v)
    } else if v.is_nan() {
        Value::String("NaN".into())
    } else if v > 0.0 {
        Value::String("Infinity".into())
    } else {
        Value::String("-Infinity".into())
    }
}

/// serialize.ts readExtended: an x87 80-bit value as the nearest double, computed the same way.
fn extended(b: &[u8]) -> f64 {
    let lo = u32::from_le_bytes(b[0..4].try_into().unwrap()) as f64;
    let hi_bits = u32::from_le_bytes(b[4..8].try_into().unwrap());
    let se = u16::from_le_bytes(b[8..10].try_into().unwrap());
    let sign = if se & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = (se & 0x7fff) as i32;
    let significand = hi_bits as f64 * 4294967296.0 + lo;
    if exp == 0x7fff {
        return if hi_bits & 0x7fff_ffff == 0 && lo == 0.0 { sign * f64::INFINITY } else { f64::NAN };
    }
    if exp == 0 && significand == 0.0 {
        return sign * 0.0;
    }
    sign * significand * 2f64.powi((if exp == 0 { 1 } else { exp }) - 16383 - 63)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_as_javascript_and_serde_would() {
        assert_eq!(js_number(5.0).to_string(), "5");
        assert_eq!(js_number(-0.0).to_string(), "0");
        assert_eq!(js_number(2.5).to_string(), "2.5");
        assert_eq!(js_number(-3.0).to_string(), "-3");
        assert_eq!(js_float(f32::from_bits(0x3dcc_cccd) as f64).to_string(), "0.10000000149011612");
        assert_eq!(js_float(f64::NAN), Value::String("NaN".into()));
        assert_eq!(int_value(0xffff_fffe, 4, true), Value::from(-2));
        assert_eq!(int_value(u64::MAX, 8, false), Value::String("18446744073709551615".into()));
    }

    #[test]
    fn blocks_are_found_by_address_and_strings_keep_their_flags() {
        let mut payload = Vec::new();
        payload.extend_from_slice(&0x1000u64.to_le_bytes());
        payload.extend_from_slice(&4u32.to_le_bytes());
        payload.extend_from_slice(&[1, 2, 3, 4]);
        payload.extend_from_slice(&0x2000u64.to_le_bytes());
        payload.extend_from_slice(&(2 | META_CSTRING | META_TERMINATED).to_le_bytes());
        payload.extend_from_slice(b"hi");
        let v = View::parse(&[], &payload);
        assert_eq!(v.bytes(0x1001, 2), Ok(&[2u8, 3][..]));
        assert!(v.bytes(0x1002, 4).is_err(), "beyond the copy: unreadable");
        assert_eq!(v.strings, vec![(0x2000, &b"hi"[..], 2, true)]);
    }
}
