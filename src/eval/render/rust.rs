//! Rust's std kinds of the type model: `&str`, slices, `Vec`/`String`, and enums — `Option`
//! (None → null, Some(x) → x), `Result` ({"Ok": v} / {"Err": e}), user enums with payloads
//! ({"Variant": payload}, or "Variant" when fieldless), niche-encoded ones included: the
//! DWARF variant part says where the tag (or the niche holding it) lives.

use serde_json::{Map, Value};

use super::{scalar, uint_at, Renderer};
use crate::symbols::types::Variant;
use crate::symbols::{Type, TypeKind};

/// Lengths beyond this are garbage (an uninitialized value), not a real container.
const MAX_LEN: u64 = 1 << 40;

impl Renderer<'_> {
    pub(super) fn rust(&mut self, t: &Type, bytes: &[u8], addr: Option<u64>, depth: u32) -> Value {
        let bad = || Value::String(format!("<{}: bad length>", t.name));
        match &t.kind {
            TypeKind::RustStr { ptr, len } => match (uint_at(bytes, *ptr, 8), uint_at(bytes, *len, 8)) {
                (Some(p), Some(n)) if n < MAX_LEN => self.text_at(p, n),
                _ => bad(),
            },
            TypeKind::RustSlice { ptr, len, element } | TypeKind::RustVec { ptr, len, element, utf8: false } => {
                match (uint_at(bytes, *ptr, 8), uint_at(bytes, *len, 8)) {
                    (Some(p), Some(n)) if n < MAX_LEN => self.elements(*element, p, n, depth),
                    _ => bad(),
                }
            }
            TypeKind::RustVec { ptr, len, utf8: true, .. } => match (uint_at(bytes, *ptr, 8), uint_at(bytes, *len, 8)) {
                (Some(p), Some(n)) if n < MAX_LEN => self.text_at(p, n),
                _ => bad(),
            },
            TypeKind::RustEnum { discr, variants } => {
                let chosen = match discr {
                    Some(d) => {
                        let raw = bytes.get(d.offset as usize..(d.offset + d.size.min(16)) as usize).map(scalar::le);
                        let hit = raw.and_then(|raw| variants.iter().find(|v| v.value.is_some_and(|x| x as u128 == raw || truncated_eq(x, raw, d.size))));
                        hit.or_else(|| variants.iter().find(|v| v.value.is_none()))
                    }
                    None => variants.first(),
                };
                match chosen {
                    Some(v) => self.variant(t, v, bytes, addr, depth),
                    None => Value::String(format!("<{}: unknown variant>", t.name)),
                }
            }
            _ => Value::Null,
        }
    }

    fn variant(&mut self, t: &Type, v: &Variant, bytes: &[u8], addr: Option<u64>, depth: u32) -> Value {
        let vt = self.ty(v.ty);
        let members = match &vt.kind {
            TypeKind::Struct { members, .. } => members.clone(),
            _ => Vec::new(),
        };
        let option = t.name.starts_with("Option<");
        if members.is_empty() {
            return if option && v.name == "None" { Value::Null } else { Value::String(v.name.clone()) };
        }
        let base = &bytes[(v.offset as usize).min(bytes.len())..];
        let at = addr.map(|a| a.wrapping_add(v.offset));
        let tuple = members.iter().all(|m| is_tuple_field(&m.name));
        let payload = if tuple && members.len() == 1 {
            let m = &members[0];
            let size = self.ty(m.ty).size as usize;
            match base.get(m.offset as usize..m.offset as usize + size) {
                Some(b) => self.value(m.ty, b, at.map(|a| a.wrapping_add(m.offset)), depth),
                None => Value::String("<variant out of the value's bytes>".into()),
            }
        } else {
            let mut fields = self.value(v.ty, base, at, depth);
            if tuple {
                if let Value::Object(map) = fields {
                    fields = Value::Array(map.into_iter().map(|(_, x)| x).collect());
                }
            }
            fields
        };
        if option {
            return payload;
        }
        let mut out = Map::new();
        out.insert(v.name.clone(), payload);
        Value::Object(out)
    }
}

/// `__0`, `__1`: the fields of a tuple (or tuple variant).
pub(crate) fn is_tuple_field(name: &str) -> bool {
    name.strip_prefix("__").is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

/// A discriminant value DWARF gave sign-extended (`DW_FORM_sdata`) compared in `size` bytes.
fn truncated_eq(value: u64, raw: u128, size: u64) -> bool {
    size < 8 && (value & ((1u64 << (size * 8)) - 1)) as u128 == raw
}
