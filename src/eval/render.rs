//! A typed value → the JSON an LLM reads (the "Values" model of `debug_eval` in
//! docs/mcp-tools.md): scalars in `scalar.rs`, Rust's std kinds in `rust.rs`, containers
//! recognized by name and verified layout in `eval/pretty/`; structs, arrays and pointers here.
//!
//! Depth is spent by objects (structs, unions, enum payloads): a struct met with no depth
//! left prints as `"<struct Name>"`; arrays and containers do not spend it, and a pointer is
//! followed (to its pointee's object) only while depth remains. A reference (C++ `int &`,
//! Rust `&i32`) to a scalar shows it too: `{"@": "0x…", "*": 5}`.

mod rust;
pub(crate) use rust::is_tuple_field;
pub(crate) mod scalar;

use serde_json::{Map, Value};

use super::pretty;
use super::Memory;
use crate::symbols::{DebugInfo, Type, TypeId, TypeKind};

/// How much of a value to show.
#[derive(Debug, Clone)]
pub struct RenderOptions {
    /// Object levels to expand (debug_eval `depth`, default 2): structs spend one each;
    /// arrays and containers spend none; pointers are followed while depth remains.
    pub depth: u32,
    /// `format: "hex"`: integers as hex strings.
    pub hex: bool,
    /// Elements shown of an array or container (the rest is summarized).
    pub max_elements: usize,
    /// Bytes shown of a string.
    pub max_string: usize,
}

impl Default for RenderOptions {
    fn default() -> Self {
        RenderOptions { depth: 2, hex: false, max_elements: 100, max_string: 1024 }
    }
}

/// Largest value read in one piece from the target (a bigger array is read element-wise).
const MAX_READ: u64 = 1 << 16;
/// Base classes searched through when looking for a member by name.
const MAX_BASE_NESTING: u32 = 8;

/// Render the value of type `ty` whose bytes are `bytes` (exactly the type's size) and which
/// lives at `address` in the target when it is an lvalue. Pointers are followed through `mem`.
pub fn render(info: &DebugInfo, ty: TypeId, bytes: &[u8], address: Option<u64>, mem: &dyn Memory, opts: &RenderOptions) -> Value {
    let mut r = Renderer { info, mem, opts, path: Vec::new() };
    r.value(ty, bytes, address, opts.depth)
}

/// Render the value of type `ty` stored at `address` in the target.
pub fn render_at(info: &DebugInfo, ty: TypeId, address: u64, mem: &dyn Memory, opts: &RenderOptions) -> Value {
    let mut r = Renderer { info, mem, opts, path: Vec::new() };
    r.at(ty, address, opts.depth)
}

/// One rendering: the type model, target memory, options, and the objects being printed
/// on the current path (a pointer back to one of them is a cycle).
pub(crate) struct Renderer<'a> {
    pub(crate) info: &'a DebugInfo,
    pub(crate) mem: &'a dyn Memory,
    pub(crate) opts: &'a RenderOptions,
    path: Vec<(u64, String)>,
}

pub(crate) fn unreadable(addr: u64) -> Value {
    Value::String(format!("<unreadable 0x{addr:x}>"))
}

impl Renderer<'_> {
    pub(crate) fn value(&mut self, id: TypeId, bytes: &[u8], addr: Option<u64>, depth: u32) -> Value {
        let t = self.info.ty(id);
        let hex = self.opts.hex;
        let scalar = || bytes.get(..t.size as usize).filter(|b| !b.is_empty());
        match &t.kind {
            TypeKind::Int { signed } => scalar().map_or(Value::Null, |b| scalar::int(b, *signed, hex)),
            TypeKind::Float => scalar().map_or(Value::Null, scalar::float),
            TypeKind::Bool => scalar().map_or(Value::Null, |b| Value::Bool(b.iter().any(|x| *x != 0))),
            TypeKind::Char { signed } => scalar().map_or(Value::Null, |b| scalar::character(b, *signed)),
            TypeKind::Enum { .. } => scalar().map_or(Value::Null, |b| scalar::enumerator(&t, scalar::le(b), b.len() as u32 * 8)),
            TypeKind::Pointer { target } => match scalar() {
                Some(b) => self.pointer(id, *target, scalar::le(b) as u64, depth),
                None => Value::Null,
            },
            TypeKind::Struct { .. } => {
                if let Some(v) = pretty::render(self, &t, id, bytes, addr, depth) {
                    return v;
                }
                self.structure(&t, bytes, addr, depth)
            }
            TypeKind::Array { element, count } => match count {
                Some(n) => self.array_in(*element, *n, bytes, addr, depth),
                None => Value::String(format!("<{}>", t.name)),
            },
            TypeKind::RustStr { .. } | TypeKind::RustSlice { .. } | TypeKind::RustVec { .. } | TypeKind::RustEnum { .. } => {
                self.rust(&t, bytes, addr, depth)
            }
            TypeKind::Void => Value::Null,
            TypeKind::Function => addr.map_or(Value::Null, scalar::hex),
            TypeKind::Unknown => Value::String(format!("<{}>", t.name)),
        }
    }

    /// The value of type `id` at `addr` in the target.
    pub(crate) fn at(&mut self, id: TypeId, addr: u64, depth: u32) -> Value {
        let t = self.info.ty(id);
        if let TypeKind::Array { element, count: Some(n) } = t.kind {
            if t.size > MAX_READ {
                return self.elements(element, addr, n, depth);
            }
        }
        match self.mem.read_vec(addr, t.size.min(MAX_READ) as usize) {
            Ok(bytes) => self.value(id, &bytes, Some(addr), depth),
            Err(_) => unreadable(addr),
        }
    }

    fn pointer(&mut self, id: TypeId, target: Option<TypeId>, raw: u64, depth: u32) -> Value {
        if raw == 0 {
            return scalar::hex(0);
        }
        let Some(target) = target else { return scalar::hex(raw) };
        let to = self.info.ty(target);
        if crate::symbols::types::is_c_char(&to) {
            return self.c_string(raw);
        }
        if matches!(to.kind, TypeKind::Function) {
            // gdb: `0x401136 <cmp_int>`: which callback is set, without another lookup.
            return match self.mem.code_symbol(raw) {
                Some(name) => Value::String(format!("0x{raw:x} <{name}>")),
                None => scalar::hex(raw),
            };
        }
        let followable = matches!(
            to.kind,
            TypeKind::Struct { .. } | TypeKind::RustVec { .. } | TypeKind::RustStr { .. } | TypeKind::RustSlice { .. } | TypeKind::RustEnum { .. }
        );
        let scalar_ref = !followable && depth > 0 && to.size > 0 && self.info.is_reference(id) && is_scalar(&to);
        if !scalar_ref && (!followable || depth == 0 || to.size == 0) {
            return scalar::hex(raw);
        }
        if self.path.iter().any(|(a, n)| *a == raw && *n == to.name) {
            return Value::String(format!("<circular ref to {}>", to.name));
        }
        let mut out = Map::new();
        out.insert("@".into(), scalar::hex(raw));
        match self.at(target, raw, depth) {
            Value::String(s) if s.starts_with("<unreadable") => return Value::String(s),
            Value::Object(fields) => out.extend(fields),
            other => {
                out.insert("*".into(), other);
            }
        }
        Value::Object(out)
    }

    /// A NUL-terminated string at `addr`, read page by page, capped at `max_string` bytes.
    pub(crate) fn c_string(&self, addr: u64) -> Value {
        let max = self.opts.max_string;
        let mut bytes = Vec::new();
        let mut at = addr;
        let mut ended = false;
        while bytes.len() <= max {
            let n = (4096 - (at & 4095) as usize).min(max + 1 - bytes.len());
            let Ok(chunk) = self.mem.read_vec(at, n) else { break };
            if let Some(nul) = chunk.iter().position(|b| *b == 0) {
                bytes.extend_from_slice(&chunk[..nul]);
                ended = true;
                break;
            }
            bytes.extend_from_slice(&chunk);
            at = at.wrapping_add(n as u64);
        }
        if bytes.is_empty() && !ended {
            return unreadable(addr);
        }
        self.text(&bytes, bytes.len() as u64)
    }

    /// Text of `len` bytes of which `bytes` are the first (at most `max_string` shown).
    pub(crate) fn text(&self, bytes: &[u8], len: u64) -> Value {
        let shown = &bytes[..bytes.len().min(self.opts.max_string)];
        let mut s = String::from_utf8_lossy(shown).into_owned();
        if len > shown.len() as u64 {
            s.push('…');
        }
        Value::String(s)
    }

    /// `len` bytes of text at `addr` (std::string, Rust String and &str).
    pub(crate) fn text_at(&self, addr: u64, len: u64) -> Value {
        if len == 0 {
            return Value::String(String::new());
        }
        let n = len.min(self.opts.max_string as u64) as usize;
        match self.mem.read_vec(addr, n) {
            Ok(bytes) => self.text(&bytes, len),
            Err(_) => unreadable(addr),
        }
    }

    fn structure(&mut self, t: &Type, bytes: &[u8], addr: Option<u64>, depth: u32) -> Value {
        let TypeKind::Struct { members, .. } = &t.kind else { return Value::Null };
        if depth == 0 {
            return Value::String(format!("<{}>", t.name));
        }
        if let Some(a) = addr {
            if self.path.iter().any(|(p, n)| *p == a && *n == t.name) {
                return Value::String(format!("<circular ref to {}>", t.name));
            }
            self.path.push((a, t.name.clone()));
        }
        let mut out = Map::new();
        for m in members {
            let mt = self.info.ty(m.ty);
            let start = m.offset as usize;
            let v = match (m.bits, bytes.get(start..)) {
                (Some((bo, bs)), Some(rest)) => scalar::bitfield(&mt, rest, bo, bs, self.opts.hex),
                (None, Some(rest)) if rest.len() as u64 >= mt.size.min(MAX_READ) => {
                    let sub = &rest[..mt.size.min(rest.len() as u64) as usize];
                    self.value(m.ty, sub, addr.map(|a| a.wrapping_add(m.offset)), depth - 1)
                }
                _ => match addr {
                    Some(a) => self.at(m.ty, a.wrapping_add(m.offset), depth - 1),
                    None => Value::String(format!("<{} out of the value's bytes>", m.name)),
                },
            };
            match v {
                // An anonymous struct or union's members are the enclosing struct's (C: `a.x`):
                // two of them under one key would hide the first.
                Value::Object(inner) if m.name == crate::symbols::types::ANONYMOUS => out.extend(inner),
                v => {
                    out.insert(m.name.clone(), v);
                }
            }
        }
        if addr.is_some() {
            self.path.pop();
        }
        Value::Object(out)
    }

    /// An array of `count` elements held in `bytes` (or, past them, at `addr`).
    fn array_in(&mut self, element: TypeId, count: u64, bytes: &[u8], addr: Option<u64>, depth: u32) -> Value {
        let size = self.info.ty(element).size;
        if size.saturating_mul(count) > bytes.len() as u64 {
            return match addr {
                Some(a) => self.elements(element, a, count, depth),
                None => Value::String("<array out of the value's bytes>".into()),
            };
        }
        if size == 1 && crate::symbols::types::is_c_char(&self.info.ty(element)) {
            if let Some(text) = self.char_array(&bytes[..count as usize]) {
                return text;
            }
        }
        let shown = count.min(self.opts.max_elements as u64);
        let mut out: Vec<Value> = (0..shown)
            .map(|i| {
                let off = (i * size) as usize;
                self.value(element, &bytes[off..off + size as usize], addr.map(|a| a.wrapping_add(i * size)), depth)
            })
            .collect();
        more(&mut out, count, shown);
        Value::Array(out)
    }

    /// A `char` array holding text (up to its first NUL) as a string; `None` for binary data.
    fn char_array(&self, bytes: &[u8]) -> Option<Value> {
        let end = crate::symbols::types::char_array_text_len(bytes)?;
        Some(self.text(&bytes[..end], end as u64))
    }

    /// `count` elements of type `element` starting at `addr` in the target.
    pub(crate) fn elements(&mut self, element: TypeId, addr: u64, count: u64, depth: u32) -> Value {
        let size = self.info.ty(element).size;
        let shown = count.min(self.opts.max_elements as u64);
        if addr == 0 && count > 0 {
            return unreadable(0);
        }
        let mut out = Vec::with_capacity(shown as usize);
        for i in 0..shown {
            out.push(self.at(element, addr.wrapping_add(i * size), depth));
        }
        more(&mut out, count, shown);
        Value::Array(out)
    }

    /// Member `name` of struct `id` (searching base classes): its offset and type.
    pub(crate) fn field(&self, id: TypeId, name: &str) -> Option<(u64, TypeId)> {
        self.field_in(id, name, 0)
    }

    fn field_in(&self, id: TypeId, name: &str, nesting: u32) -> Option<(u64, TypeId)> {
        let t = self.info.ty(id);
        let TypeKind::Struct { members, .. } = &t.kind else { return None };
        if let Some(m) = members.iter().find(|m| m.name == name && m.bits.is_none()) {
            return Some((m.offset, m.ty));
        }
        if nesting >= MAX_BASE_NESTING {
            return None;
        }
        members
            .iter()
            .filter(|m| m.name.starts_with("<base "))
            .find_map(|m| self.field_in(m.ty, name, nesting + 1).map(|(o, t)| (m.offset + o, t)))
    }

    /// A chain of members (`["_M_impl", "_M_start"]`): the last one's offset and type.
    pub(crate) fn field_path(&self, id: TypeId, names: &[&str]) -> Option<(u64, TypeId)> {
        names.iter().try_fold((0, id), |(off, ty), n| self.field(ty, n).map(|(o, t)| (off + o, t)))
    }

    pub(crate) fn ty(&self, id: TypeId) -> std::sync::Arc<Type> {
        self.info.ty(id)
    }
}

/// Numbers, characters, booleans and enumerators: what a reference shows as `"*"`.
fn is_scalar(t: &Type) -> bool {
    matches!(t.kind, TypeKind::Int { .. } | TypeKind::Float | TypeKind::Bool | TypeKind::Char { .. } | TypeKind::Enum { .. } | TypeKind::Pointer { .. })
}

/// Append `"<N more>"` when only `shown` of `count` elements are in `out`.
pub(crate) fn more(out: &mut Vec<Value>, count: u64, shown: u64) {
    if count > shown {
        out.push(Value::String(format!("<{} more>", count - shown)));
    }
}

/// An unsigned integer of `size` bytes at `off` in `bytes`.
pub(crate) fn uint_at(bytes: &[u8], off: u64, size: u64) -> Option<u64> {
    let b = bytes.get(off as usize..(off + size) as usize)?;
    Some(scalar::le(b) as u64)
}
