//! Typed text of raw argument and return words: functions whose parameters and result all
//! travel in one integer register each (integers, bools, chars, enums, pointers) are hooked
//! without JavaScript and report the registers as words; the daemon knows their DWARF
//! signature and renders the words as the JS path's typed reads would (`agent/src/
//! serialize.ts`): `{"a": 3, "ok": true, "c": "BLUE", "p": "0x7ffc…"}` for the arguments,
//! the declared parameters only, and the result by its type (`null` for `void`).

/// How one register-sized value is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WordKind {
    Int { size: u8, signed: bool },
    /// `bool`: only the low byte (`al`) is defined.
    Bool,
    /// A character of `size` bytes: printable ones as a one-character string.
    Char { size: u8, signed: bool },
    Enum { size: u8, signed: bool, names: Vec<(i64, String)> },
    Pointer,
}

/// Named parameters and the result of one function (`ret: None`: `void`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WordShape {
    /// Leading words that are no declared parameter (a Rust closure's environment pointer).
    pub hidden: usize,
    pub params: Vec<(String, WordKind)>,
    pub ret: Option<WordKind>,
}

/// Largest integer a JSON number carries exactly through JavaScript and Lua (2^53 − 1);
/// larger ones are written as decimal strings, as `serialize.ts` does.
const MAX_SAFE: u64 = (1 << 53) - 1;

fn truncate(w: u64, size: u8, signed: bool) -> i128 {
    let bits = (size.clamp(1, 8) as u32) * 8;
    if bits == 64 {
        return if signed { w as i64 as i128 } else { w as i128 };
    }
    let v = w & ((1u64 << bits) - 1);
    if signed && v >> (bits - 1) == 1 {
        v as i128 - (1i128 << bits)
    } else {
        v as i128
    }
}

fn push_int(out: &mut Vec<u8>, v: i128) {
    use std::io::Write;
    if v.unsigned_abs() > MAX_SAFE as u128 {
        let _ = write!(out, "\"{v}\"");
    } else {
        let _ = write!(out, "{v}");
    }
}

fn push_json_string(out: &mut Vec<u8>, s: &str) {
    let _ = serde_json::to_writer(&mut *out, s);
}

/// One word's JSON text, by its kind.
pub fn push_word(out: &mut Vec<u8>, kind: &WordKind, w: u64) {
    use std::io::Write;
    match kind {
        WordKind::Int { size, signed } => push_int(out, truncate(w, *size, *signed)),
        WordKind::Bool => out.extend_from_slice(if w & 0xff != 0 { b"true" } else { b"false" }),
        WordKind::Char { size, signed } => {
            let v = truncate(w, *size, *signed);
            // One-byte characters beyond ASCII are bytes of some encoding: shown as numbers.
            let printable = |c: &u32| *c >= 32 && *c != 127 && (*size > 1 || *c < 127);
            match u32::try_from(v).ok().filter(printable).and_then(char::from_u32) {
                Some(c) => push_json_string(out, c.encode_utf8(&mut [0; 4])),
                None => push_int(out, v),
            }
        }
        WordKind::Enum { size, signed, names } => {
            let v = truncate(w, *size, *signed);
            match names.iter().find(|(n, _)| *n as i128 == v || (!*signed && (*n as u64) as i128 == v)) {
                Some((_, name)) => push_json_string(out, name),
                None => push_int(out, v),
            }
        }
        WordKind::Pointer if w == 0 => out.extend_from_slice(b"null"),
        WordKind::Pointer => {
            let _ = write!(out, "\"0x{w:x}\"");
        }
    }
}

impl WordShape {
    /// `{"name": value, …}` of the declared parameters from the argument words.
    pub fn push_args(&self, out: &mut Vec<u8>, words: &[u64]) {
        let words = words.get(self.hidden..).unwrap_or(&[]);
        out.push(b'{');
        for (i, (name, kind)) in self.params.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            push_json_string(out, name);
            out.push(b':');
            match words.get(i) {
                Some(w) => push_word(out, kind, *w),
                None => out.extend_from_slice(b"\"<not captured>\""),
            }
        }
        out.push(b'}');
    }

    /// The result's JSON text (`null` for `void`).
    pub fn push_ret(&self, out: &mut Vec<u8>, w: u64) {
        match &self.ret {
            Some(kind) => push_word(out, kind, w),
            None => out.extend_from_slice(b"null"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(kind: WordKind, w: u64) -> String {
        let mut s = Vec::new();
        push_word(&mut s, &kind, w);
        String::from_utf8(s).unwrap()
    }

    #[test]
    fn words_read_as_their_types() {
        assert_eq!(text(WordKind::Int { size: 4, signed: true }, 0xdead_0000_ffff_fffe), "-2");
        assert_eq!(text(WordKind::Int { size: 4, signed: false }, 0xdead_0000_ffff_fffe), "4294967294");
        assert_eq!(text(WordKind::Int { size: 2, signed: true }, 0xfc18), "-1000");
        assert_eq!(text(WordKind::Int { size: 8, signed: false }, u64::MAX), "\"18446744073709551615\"");
        assert_eq!(text(WordKind::Int { size: 8, signed: true }, u64::MAX), "-1");
        assert_eq!(text(WordKind::Bool, 0xffff_ff01), "true");
        assert_eq!(text(WordKind::Bool, 0xffff_ff00), "false");
        assert_eq!(text(WordKind::Char { size: 1, signed: true }, 0x4141), "\"A\"");
        assert_eq!(text(WordKind::Char { size: 1, signed: true }, 0xff), "-1");
        assert_eq!(text(WordKind::Char { size: 1, signed: false }, 200), "200");
        assert_eq!(text(WordKind::Char { size: 4, signed: false }, 0xe9), "\"é\"");
        let names = vec![(0, "RED".to_string()), (5, "GREEN".to_string())];
        assert_eq!(text(WordKind::Enum { size: 4, signed: false, names: names.clone() }, 0x7700_0000_0005), "\"GREEN\"");
        assert_eq!(text(WordKind::Enum { size: 1, signed: false, names }, 0xf2_8001), "1");
        assert_eq!(text(WordKind::Pointer, 0), "null");
        assert_eq!(text(WordKind::Pointer, 0x7ffc_1000), "\"0x7ffc1000\"");
    }

    #[test]
    fn shapes_name_the_declared_parameters() {
        let shape = WordShape {
            hidden: 0,
            params: vec![("a".into(), WordKind::Int { size: 4, signed: true }), ("b".into(), WordKind::Bool)],
            ret: None,
        };
        let mut s = Vec::new();
        shape.push_args(&mut s, &[7, 1]);
        assert_eq!(s, br#"{"a":7,"b":true}"#);
        let mut r = Vec::new();
        shape.push_ret(&mut r, 0x1234);
        assert_eq!(r, b"null");
        let empty = WordShape { hidden: 1, params: vec![], ret: Some(WordKind::Bool) };
        let mut s = Vec::new();
        empty.push_args(&mut s, &[0x7ff0]);
        assert_eq!(s, b"{}");
    }
}
