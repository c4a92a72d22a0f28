//! JSON text written straight into a `String`, exactly as `serde_json::Value::to_string`
//! would print the same value (escapes, number forms): the typed-capture decoder
//! (`capture_decode.rs`) builds each record's text without a `Value` tree, whose maps and
//! strings cost an allocation per field.

use std::fmt::Write;

/// 2^53 - 1: beyond it a JavaScript number changes the value (serialize.ts readInt).
const MAX_SAFE: u64 = (1 << 53) - 1;

/// A JSON string of the concatenated `parts`.
pub(super) fn string(out: &mut String, parts: &[&str]) {
    out.push('"');
    for p in parts {
        escape(out, p);
    }
    out.push('"');
}

/// `"key":`
pub(super) fn key(out: &mut String, k: &str) {
    string(out, &[k]);
    out.push(':');
}

/// What serde_json writes for each byte inside a string: 0 as is, `u` as `\u00XX`, else
/// a backslash and that letter.
const ESCAPES: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 0x20 {
        t[b] = b'u';
        b += 1;
    }
    t[0x08] = b'b';
    t[0x09] = b't';
    t[0x0a] = b'n';
    t[0x0c] = b'f';
    t[0x0d] = b'r';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t
};

/// The inside of a JSON string, escaped as serde_json does (`"`, `\` and controls only).
pub(super) fn escape(out: &mut String, s: &str) {
    let mut from = 0;
    for (i, b) in s.bytes().enumerate() {
        let e = ESCAPES[b as usize];
        if e == 0 {
            continue;
        }
        out.push_str(&s[from..i]);
        if e == b'u' {
            let _ = write!(out, "\\u{:04x}", b);
        } else {
            out.push('\\');
            out.push(e as char);
        }
        from = i + 1;
    }
    out.push_str(&s[from..]);
}

/// A string of `0x…` hex (pointers as serialize.ts prints them).
pub(super) fn hex(out: &mut String, p: u64) {
    let _ = write!(out, "\"0x{p:x}\"");
}

/// `"<prefix 0x…>"`
pub(super) fn tagged_hex(out: &mut String, prefix: &str, p: u64) {
    let _ = write!(out, "\"<{prefix} 0x{p:x}>\"");
}

pub(super) fn unreadable(out: &mut String, addr: u64) {
    tagged_hex(out, "unreadable", addr);
}

pub(super) fn uint(out: &mut String, v: u64) {
    out.push_str(itoa::Buffer::new().format(v));
}

pub(super) fn int(out: &mut String, v: i64) {
    out.push_str(itoa::Buffer::new().format(v));
}

/// serialize.ts readInt of 16 bytes: a number when exact as one, else its decimal text.
pub(super) fn int128_value(out: &mut String, raw: u128, signed: bool) {
    let text = if signed { (raw as i128).to_string() } else { raw.to_string() };
    let exact = if signed { (raw as i128).unsigned_abs() <= MAX_SAFE as u128 } else { raw <= MAX_SAFE as u128 };
    if exact {
        out.push_str(&text);
    } else {
        string(out, &[&text]);
    }
}

/// serialize.ts `readInt` of `size` bytes: a number, or decimal text beyond 2^53. Returns
/// the value (for enumerator lookups).
pub(super) fn int_value(out: &mut String, raw: u64, size: u64, signed: bool) -> i128 {
    let bits = size * 8;
    if signed {
        let v = if bits == 64 { raw as i64 } else { ((raw << (64 - bits)) as i64) >> (64 - bits) };
        if v.unsigned_abs() <= MAX_SAFE {
            int(out, v);
        } else {
            out.push('"');
            int(out, v);
            out.push('"');
        }
        v as i128
    } else {
        if raw <= MAX_SAFE {
            uint(out, raw);
        } else {
            out.push('"');
            uint(out, raw);
            out.push('"');
        }
        raw as i128
    }
}

/// A JavaScript number after the trip through `JSON.stringify` and serde: integral values
/// print without a fraction.
pub(super) fn js_number(out: &mut String, v: f64) {
    if v.is_finite() && v == v.trunc() {
        if (0.0..18446744073709551616.0).contains(&v) {
            return uint(out, v as u64);
        }
        if (-9223372036854775808.0..0.0).contains(&v) {
            return int(out, v as i64);
        }
    }
    match serde_json::Number::from_f64(v) {
        Some(n) => {
            let _ = write!(out, "{n}");
        }
        None => out.push_str("null"),
    }
}

/// serialize.ts readFloat's result: the number, or its text when not finite.
pub(super) fn js_float(out: &mut String, v: f64) {
    if v.is_finite() {
        js_number(out, v)
    } else if v.is_nan() {
        out.push_str("\"NaN\"")
    } else if v > 0.0 {
        out.push_str("\"Infinity\"")
    } else {
        out.push_str("\"-Infinity\"")
    }
}

/// serialize.ts readUtf8: UTF-8 when the bytes are valid, else each byte as a Latin-1
/// character; `…` appended when `cut`.
pub(super) fn text(out: &mut String, b: &[u8], cut: bool) {
    out.push('"');
    match std::str::from_utf8(b) {
        Ok(s) => escape(out, s),
        Err(_) => {
            let s: String = b.iter().map(|&c| c as char).collect();
            escape(out, &s);
        }
    }
    if cut {
        out.push('…');
    }
    out.push('"');
}

/// serialize.ts readExtended: an x87 80-bit value as the nearest double, computed the same way.
pub(super) fn extended(b: &[u8]) -> f64 {
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

/// Rewrite the object members written at `from..` (spans `(key start, value start, value
/// end)`) as a JavaScript object (and serde's map) holds them: a repeated key keeps its first
/// place and takes its last value (two `<anonymous>` unions of one struct).
pub(super) fn merge_repeated_keys(out: &mut String, from: usize, spans: &[(usize, usize, usize)]) {
    let written = out[from..].to_string();
    let at = |i: usize| i - from;
    let mut members: Vec<(&str, &str)> = Vec::with_capacity(spans.len());
    for &(k, v, e) in spans {
        let (key, value) = (&written[at(k)..at(v)], &written[at(v)..at(e)]);
        match members.iter_mut().find(|m| m.0 == key) {
            Some(m) => m.1 = value,
            None => members.push((key, value)),
        }
    }
    out.truncate(from);
    for (i, (k, v)) in members.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(k);
        out.push_str(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn with(f: impl FnOnce(&mut String)) -> String {
        let mut s = String::new();
        f(&mut s);
        s
    }

    #[test]
    fn strings_escape_as_serde_json_does() {
        let all: String = (0u32..0x250).filter_map(char::from_u32).chain(['\u{2028}', '€', '😀']).collect();
        assert_eq!(with(|o| string(o, &[&all])), Value::String(all.clone()).to_string());
        assert_eq!(with(|o| text(o, &[b'c', b'a', b'f', 0xe9], true)), Value::String("caf\u{e9}…".into()).to_string());
    }

    #[test]
    fn numbers_print_as_javascript_and_serde_would() {
        assert_eq!(with(|o| js_number(o, 5.0)), "5");
        assert_eq!(with(|o| js_number(o, -0.0)), "0");
        assert_eq!(with(|o| js_number(o, 2.5)), "2.5");
        assert_eq!(with(|o| js_number(o, -3.0)), "-3");
        assert_eq!(with(|o| js_number(o, 1e300)), Value::from(1e300).to_string());
        assert_eq!(with(|o| js_float(o, f32::from_bits(0x3dcc_cccd) as f64)), "0.10000000149011612");
        assert_eq!(with(|o| js_float(o, f64::NAN)), "\"NaN\"");
        assert_eq!(with(|o| assert_eq!(int_value(o, 0xffff_fffe, 4, true), -2)), "-2");
        assert_eq!(with(|o| assert_eq!(int_value(o, u64::MAX, 8, false), u64::MAX as i128)), "\"18446744073709551615\"");
        assert_eq!(with(|o| assert_eq!(int_value(o, 1 << 60, 8, true), 1 << 60)), "\"1152921504606846976\"");
    }

    #[test]
    fn a_repeated_key_keeps_its_first_place_and_last_value() {
        let mut out = String::from("{");
        let mut spans = Vec::new();
        for (k, v) in [("<anonymous>", "1"), ("b", "2"), ("<anonymous>", "3")] {
            if spans.len() > 0 {
                out.push(',');
            }
            let ks = out.len();
            key(&mut out, k);
            let vs = out.len();
            out.push_str(v);
            spans.push((ks, vs, out.len()));
        }
        merge_repeated_keys(&mut out, 1, &spans);
        out.push('}');
        assert_eq!(out, r#"{"<anonymous>":3,"b":2}"#);
    }
}
