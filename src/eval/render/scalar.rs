//! Scalars → JSON: integers (exact beyond 2^53 as strings, or hex), floats (x87 long double
//! too; NaN/inf as strings), characters, booleans, enumerators and bitfields.

use serde_json::{json, Value};

use crate::symbols::{Type, TypeKind};

/// Largest integer a JSON number (an f64 in most readers) holds exactly.
const EXACT: i128 = 1 << 53;

/// The little-endian unsigned integer in `bytes` (at most 16 of them).
pub(crate) fn le(bytes: &[u8]) -> u128 {
    bytes.iter().take(16).rev().fold(0u128, |acc, b| (acc << 8) | *b as u128)
}

/// `raw` (the low `bits` bits) as a signed number.
fn sign_extend(raw: u128, bits: u32) -> i128 {
    if bits == 0 || bits >= 128 {
        return raw as i128;
    }
    let shift = 128 - bits;
    ((raw << shift) as i128) >> shift
}

/// An integer as JSON: a number when exact, else its decimal text.
pub(crate) fn number(v: i128) -> Value {
    if (-EXACT..=EXACT).contains(&v) {
        json!(v as i64)
    } else {
        Value::String(v.to_string())
    }
}

/// An unsigned 128-bit integer as JSON (beyond i128 only for u128 values ≥ 2^127).
fn unsigned(v: u128) -> Value {
    if v <= i128::MAX as u128 { number(v as i128) } else { Value::String(v.to_string()) }
}

/// A pointer or address as `"0x…"`.
pub(crate) fn hex(v: u64) -> Value {
    Value::String(format!("0x{v:x}"))
}

/// An integer of `bytes.len()` bytes; `hex` shows its bits as `"0x…"` (two's complement).
pub(crate) fn int(bytes: &[u8], signed: bool, as_hex: bool) -> Value {
    let raw = le(bytes);
    if as_hex {
        return Value::String(format!("0x{raw:x}"));
    }
    if signed { number(sign_extend(raw, bytes.len() as u32 * 8)) } else { unsigned(raw) }
}

/// A finite float as a number; NaN and infinities as "nan", "inf", "-inf".
pub(crate) fn float(bytes: &[u8]) -> Value {
    let v = match bytes.len() {
        4 => {
            // Through its shortest decimal text: 0.1f32 shows as 0.1, not 0.10000000149011612.
            let f = f32::from_le_bytes(bytes.try_into().unwrap_or_default());
            f.to_string().parse::<f64>().unwrap_or(f as f64)
        }
        8 => f64::from_le_bytes(bytes.try_into().unwrap_or_default()),
        10 | 12 | 16 => x87(bytes),
        n => return Value::String(format!("<float{}>", n * 8)),
    };
    if v.is_nan() {
        json!("nan")
    } else if v.is_infinite() {
        json!(if v > 0.0 { "inf" } else { "-inf" })
    } else {
        json!(v)
    }
}

/// An x87 80-bit extended value (the low 10 bytes of a `long double`), to the nearest f64.
fn x87(bytes: &[u8]) -> f64 {
    let significand = le(&bytes[..8]) as u64;
    let se = le(&bytes[8..10]) as u16;
    let sign = if se & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = (se & 0x7fff) as i32;
    if exp == 0x7fff {
        return if significand << 1 == 0 { sign * f64::INFINITY } else { f64::NAN };
    }
    if exp == 0 && significand == 0 {
        return sign * 0.0;
    }
    // Denormals have an effective exponent of 1 - 16383.
    sign * significand as f64 * 2f64.powi(exp.max(1) - 16383 - 63)
}

/// A character as a one-character string when printable, else its code.
pub(crate) fn character(bytes: &[u8], signed: bool) -> Value {
    let raw = le(bytes);
    let code = if signed { sign_extend(raw, bytes.len() as u32 * 8) } else { raw as i128 };
    if bytes.len() == 1 && !signed {
        // unsigned char is how C spells a byte (uint8_t, u8 flags and states): its number.
        return number(code);
    }
    match u32::try_from(code).ok().and_then(char::from_u32) {
        Some(c) if !c.is_control() && (bytes.len() > 1 || c.is_ascii()) => Value::String(c.to_string()),
        _ => number(code),
    }
}

/// An enumerator's name, or `"(Color)7"` for a value without one.
pub(crate) fn enumerator(t: &Type, raw: u128, bits: u32) -> Value {
    let TypeKind::Enum { signed, enumerators } = &t.kind else { return unsigned(raw) };
    let v = if *signed { sign_extend(raw, bits) } else { raw as i128 };
    match enumerators.iter().find(|(_, e)| *e as i128 == v || (!*signed && *e as u64 as i128 == v)) {
        Some((name, _)) => Value::String(name.clone()),
        None => Value::String(format!("({}){v}", t.name.strip_prefix("enum ").unwrap_or(&t.name))),
    }
}

/// A bitfield: `count` bits from bit `bit_offset` of the storage at `bytes`, as its type.
pub(crate) fn bitfield(t: &Type, bytes: &[u8], bit_offset: u64, count: u64, as_hex: bool) -> Value {
    let need = (bit_offset + count).div_ceil(8) as usize;
    if count == 0 || count > 64 || need > bytes.len().min(16) {
        return Value::String(format!("<bitfield {count} bits>"));
    }
    let raw = (le(&bytes[..need]) >> bit_offset) & ((1u128 << count) - 1);
    match &t.kind {
        TypeKind::Bool => Value::Bool(raw != 0),
        TypeKind::Enum { .. } => enumerator(t, raw, count as u32),
        _ if as_hex => Value::String(format!("0x{raw:x}")),
        TypeKind::Int { signed: true } | TypeKind::Char { signed: true } => number(sign_extend(raw, count as u32)),
        _ => unsigned(raw),
    }
}
