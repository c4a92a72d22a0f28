//! The JSON of a natively captured call (`capture_plan.rs`): a port of the agent's
//! `serialize.ts` reading from the bytes the hook copied instead of live memory. A read
//! that no copied block covers is what faulted in the target: `<unreadable 0x…>`, as there.
//! Must print exactly what serialize.ts prints (tests/capture_native.rs compares both).
//!
//! It runs for every typed exit at ingest and for every typed enter a query returns
//! (`capture_lazy.rs`), so it is built for speed (benches/capture_decode.rs):
//! reads go through an address index of the record's blocks (`capture_view.rs`), the text is
//! written straight into one `String` (`capture_json.rs`) instead of a `serde_json::Value`
//! tree, and the index's storage is reused across records.

use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::capture_json as json;
use super::capture_plan::{CapturePlan, SseStruct, LEN_IS_END, MAX_ELEMENTS, MAX_KEYS, MAX_STRING};
use super::capture_view::{self, Index, View, REG_ADDR, STACK_ADDR, XMM_ADDR};
use super::code_names::CodeNames;
use crate::symbols::{Type, TypeId, TypeKind};

// Node containers (libstdc++'s, Rust's hash tables and B-trees): the decoder's half of
// serialize.ts readNodes.
#[path = "capture_nodes.rs"]
mod nodes;

/// Per decoding thread: the block index's storage, and which struct types have a member
/// name twice (keyed by the type's address; the `Arc` kept so the address is not reused).
#[derive(Default)]
struct Scratch {
    index: Index,
    repeats_names: FxHashMap<usize, (Arc<Type>, bool)>,
    /// Length of the last text: the next one's capacity (no regrowth in the common case).
    last_len: usize,
}

/// Struct types remembered per thread before the memo starts over.
const MEMO_TYPES: usize = 4096;

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// Decode with `f` over this thread's scratch.
fn with_reader(plan: &CapturePlan, code: Option<&CodeNames>, regs: &[u64], payload: &[u8], f: impl FnOnce(&mut Reader)) -> String {
    SCRATCH.with(|s| {
        let mut s = s.borrow_mut();
        let Scratch { index, repeats_names, last_len } = &mut *s;
        let view = index.view(regs, payload);
        let out = String::with_capacity((*last_len + 64).max(2 * payload.len() + 64));
        let mut r = Reader { plan, code, view: &view, path: Vec::new(), repeats_names, types: [(TypeId::MAX, None); TYPE_SLOTS], out };
        f(&mut r);
        *last_len = r.out.len();
        r.out
    })
}

/// The JSON stored for a typed record: the arguments of an enter (`regs`: its argument
/// words), the return value of an exit (`regs[0]`: rax). `code` names function pointers (the
/// session's modules); without it they print as bare addresses.
pub(crate) fn record_json(plan: &CapturePlan, code: Option<&CodeNames>, exit: bool, regs: &[u64], payload: &[u8]) -> String {
    if exit {
        ret_json(plan, code, regs, payload)
    } else {
        args_json(plan, code, regs, payload)
    }
}

/// `regs` with the halves of each split pair of the arguments (`result` false) or the
/// result put together at their offsets in the pair's two registers, where it is read.
fn joined<'r>(plan: &CapturePlan, result: bool, regs: &'r [u64]) -> Cow<'r, [u64]> {
    let mut pairs = plan.split_pairs.iter().filter(|p| p.param.is_none() == result).peekable();
    if pairs.peek().is_none() {
        return Cow::Borrowed(regs);
    }
    let mut out = regs.to_vec();
    for p in pairs {
        let first = p.halves[0].0 as usize;
        if out.len() < first + 2 {
            out.resize(first + 2, 0);
        }
        let mut value = [0u8; 16];
        for (reg, off, size) in p.halves {
            let (off, size) = (off as usize, (size as usize).min(8));
            let word = regs.get(reg as usize).copied().unwrap_or(0).to_le_bytes();
            if off + size <= 16 {
                value[off..off + size].copy_from_slice(&word[..size]);
            }
        }
        out[first] = u64::from_le_bytes(value[..8].try_into().unwrap());
        out[first + 1] = u64::from_le_bytes(value[8..].try_into().unwrap());
    }
    Cow::Owned(out)
}

/// What the serializer prints for a float whose xmm register it could not read (xmm.ts
/// XMM_UNAVAILABLE).
const XMM_UNAVAILABLE: &str = "<float in an xmm register (not captured: this Frida's saved-register layout is unknown)>";

/// The small struct passed in xmm registers as parameter `param` (`None`: the result), and
/// the word where the decoder puts it together: two words each past the six argument
/// registers, or past rax and rdx for a result.
fn sse_struct_of(plan: &CapturePlan, param: Option<usize>) -> Option<(&SseStruct, usize)> {
    if param.is_none() {
        return plan.sse_structs.iter().find(|s| s.param.is_none()).map(|s| (s, 2));
    }
    plan.sse_structs.iter().filter(|s| s.param.is_some()).enumerate().find(|(_, s)| s.param == param).map(|(j, s)| (s, 6 + 2 * j))
}

/// `regs` with each small struct of the arguments (`result` false) or the result that
/// travelled in xmm registers put together from its eightbytes, at its `sse_struct_of` word (a
/// missing xmm copy reads as 0 here; `Reader::sse_struct` says it is missing).
fn with_sse_structs<'r>(plan: &CapturePlan, result: bool, regs: Cow<'r, [u64]>, payload: &[u8]) -> Cow<'r, [u64]> {
    let mut structs = plan.sse_structs.iter().filter(|s| s.param.is_none() == result).peekable();
    if structs.peek().is_none() {
        return regs;
    }
    let mut out = regs.into_owned();
    for s in structs {
        let Some((_, w)) = sse_struct_of(plan, s.param) else { continue };
        if out.len() < w + 2 {
            out.resize(w + 2, 0);
        }
        for (k, &(xmm, n)) in s.eightbytes.iter().take(2).enumerate() {
            out[w + k] = if xmm {
                capture_view::block_at(payload, XMM_ADDR + 16 * n as u64, 8).map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap()))
            } else {
                out.get(n as usize).copied().unwrap_or(0)
            };
        }
    }
    Cow::Owned(out)
}

/// `{name: value}` of the arguments of a captured enter (`regs`: the argument words).
fn args_json(plan: &CapturePlan, code: Option<&CodeNames>, regs: &[u64], payload: &[u8]) -> String {
    let regs = &*with_sse_structs(plan, false, joined(plan, false, regs), payload);
    with_reader(plan, code, regs, payload, |r| {
        // `(int arg1, int)`: two parameters print as `arg1`.
        let repeated = plan.params.iter().enumerate().any(|(i, p)| plan.params[..i].iter().any(|q| q.0 == p.0));
        let mut spans = Vec::new();
        r.out.push('{');
        let from = r.out.len();
        for (i, (name, ty)) in plan.params.iter().enumerate() {
            if i > 0 {
                r.out.push(',');
            }
            let k = r.out.len();
            json::key(&mut r.out, name);
            let v = r.out.len();
            let reg = plan.reg_of(i);
            if let Some((_, why)) = plan.unavailable.iter().find(|u| u.0 == Some(i)) {
                json::string(&mut r.out, &["<", why, ">"]);
            } else if let Some((s, w)) = sse_struct_of(plan, Some(i)) {
                r.sse_struct(s, w, *ty);
            } else if let Some(&(_, x)) = plan.floats.iter().find(|f| f.0 == Some(i)) {
                r.xmm(x, *ty);
            } else if let Some(&(_, off)) = plan.on_stack.iter().find(|s| s.0 == i) {
                r.read(STACK_ADDR + off as u64, *ty, plan.depth as i64);
            } else {
                // Passed by address: the register holds where the walk copied the value from.
                let at = if plan.by_address.contains(&i) { regs.get(reg).copied().unwrap_or(0) } else { REG_ADDR + 16 * reg as u64 };
                r.read(at, *ty, plan.depth as i64);
            }
            if repeated {
                spans.push((k, v, r.out.len()));
            }
        }
        if repeated {
            json::merge_repeated_keys(&mut r.out, from, &spans);
        }
        r.out.push('}');
    })
}

/// The return value of a captured exit (`regs`: rax, then rdx when the record has it).
fn ret_json(plan: &CapturePlan, code: Option<&CodeNames>, regs: &[u64], payload: &[u8]) -> String {
    let Some(ty) = plan.ret else { return "null".into() };
    if let Some((_, why)) = plan.unavailable.iter().find(|u| u.0.is_none()) {
        let mut out = String::new();
        json::string(&mut out, &["<", why, ">"]);
        return out;
    }
    let rax = regs.first().copied().unwrap_or(0);
    let regs = &*with_sse_structs(plan, true, joined(plan, true, regs), payload);
    if let Some((s, w)) = sse_struct_of(plan, None) {
        return with_reader(plan, code, regs, payload, |r| r.sse_struct(s, w, ty));
    }
    // Returned through a hidden pointer: rax holds its address.
    let at = if plan.ret_by_address { rax } else { REG_ADDR };
    if plan.floats.iter().any(|f| f.0.is_none()) {
        return with_reader(plan, code, &[], payload, |r| r.xmm(0, ty));
    }
    with_reader(plan, code, &regs[..regs.len().min(2)], payload, |r| r.read(at, ty, plan.depth as i64))
}

/// serialize.ts lengthAt: a length word, capped so a garbage one reads no gigabytes.
fn length_at(v: &View, addr: u64) -> Result<u64, ()> {
    Ok(v.u64_at(addr, 8)?.min(0x7fff_ffff))
}

struct Reader<'a> {
    plan: &'a CapturePlan,
    code: Option<&'a CodeNames>,
    view: &'a View<'a>,
    /// Structs being printed on the current path: (address, type). By type, not name: Rust's
    /// HashMap wraps another struct named HashMap at its address (serialize.ts readStruct).
    path: Vec<(u64, *const Type)>,
    repeats_names: &'a mut FxHashMap<usize, (Arc<Type>, bool)>,
    /// The plan's types last looked up, by id modulo the slots (a record reads few types,
    /// each many times).
    types: [(TypeId, Option<&'a Arc<Type>>); TYPE_SLOTS],
    out: String,
}

const TYPE_SLOTS: usize = 256;

impl<'a> Reader<'a> {
    fn ty(&mut self, id: TypeId) -> Option<&'a Arc<Type>> {
        // Fibonacci hashing: ids of one struct's member types are often close together.
        let slot = &mut self.types[(id.wrapping_mul(0x9e37_79b9) >> 24) as usize % TYPE_SLOTS];
        if slot.0 != id {
            *slot = (id, self.plan.ty(id));
        }
        slot.1
    }

    /// The value of type `id` at `addr`; what cannot be read prints `<unreadable 0x…>`.
    /// A float the hook copied from xmm register `x`; where it could not (the interceptor's
    /// saved registers not found), what the serializer prints then (xmm.ts XMM_UNAVAILABLE).
    fn xmm(&mut self, x: u8, id: TypeId) {
        let at = XMM_ADDR + 16 * x as u64;
        if self.view.bytes(at, 4).is_ok() {
            self.read(at, id, 0);
        } else {
            json::string(&mut self.out, &[XMM_UNAVAILABLE]);
        }
    }

    /// A small struct put together from xmm registers at word `w` (with_sse_structs); where
    /// a register's copy is missing, what the serializer prints then.
    fn sse_struct(&mut self, s: &SseStruct, w: usize, id: TypeId) {
        if s.eightbytes.iter().all(|&(xmm, n)| !xmm || self.view.bytes(XMM_ADDR + 16 * n as u64, 8).is_ok()) {
            self.read(REG_ADDR + 16 * w as u64, id, self.plan.depth as i64);
        } else {
            json::string(&mut self.out, &[XMM_UNAVAILABLE]);
        }
    }

    fn read(&mut self, addr: u64, id: TypeId, depth: i64) {
        let Some(t) = self.ty(id) else {
            let _ = std::fmt::Write::write_fmt(&mut self.out, format_args!("\"<unknown type {id}>\""));
            return;
        };
        let start = self.out.len();
        if !self.plan.optionals.is_empty() {
            if let Some(&(g, p, of)) = self.plan.optionals.get(&id) {
                // serialize.ts `opt`: the value, or null when not engaged.
                match self.view.u64_at(addr + g, 1) {
                    Ok(0) => self.out.push_str("null"),
                    Ok(_) => self.read(addr + p, of, depth),
                    Err(()) => json::unreadable(&mut self.out, addr),
                }
                return;
            }
        }
        if !self.plan.nodes.is_empty() {
            if let Some(l) = self.plan.nodes.get(&id) {
                if self.nodes(addr, l, depth).is_err() {
                    self.out.truncate(start);
                    json::unreadable(&mut self.out, addr);
                }
                return;
            }
        }
        if self.try_read(addr, t, depth).is_err() {
            self.out.truncate(start);
            json::unreadable(&mut self.out, addr);
        }
    }

    fn try_read(&mut self, addr: u64, t: &'a Arc<Type>, depth: i64) -> Result<(), ()> {
        let v = self.view;
        let out = &mut self.out;
        match &t.kind {
            TypeKind::Int { signed } => match t.size {
                1 | 2 | 4 | 8 => {
                    json::int_value(out, v.u64_at(addr, t.size)?, t.size, *signed);
                }
                16 => {
                    let (lo, hi) = (v.u64_at(addr, 8)?, v.u64_at(addr + 8, 8)?);
                    json::int128_value(out, (hi as u128) << 64 | lo as u128, *signed);
                }
                s => json::string(out, &[&format!("<int{} @0x{addr:x}>", s * 8)]),
            },
            TypeKind::Float => match t.size {
                4 => json::js_float(out, f32::from_bits(v.u64_at(addr, 4)? as u32) as f64),
                8 => json::js_float(out, f64::from_bits(v.u64_at(addr, 8)?)),
                16 => json::js_float(out, json::extended(v.bytes(addr, 10)?)),
                s => json::string(out, &[&format!("<float{}>", s * 8)]),
            },
            TypeKind::Bool => out.push_str(if v.bytes(addr, 1)?[0] != 0 { "true" } else { "false" }),
            TypeKind::Char { signed } => {
                let size = if t.size == 0 { 1 } else { t.size };
                let code: i64 = match size {
                    4 => v.u64_at(addr, 4)? as i64,
                    2 => v.u64_at(addr, 2)? as i64,
                    _ if *signed => v.bytes(addr, 1)?[0] as i8 as i64,
                    _ => v.bytes(addr, 1)?[0] as i64,
                };
                // unsigned char is a byte (uint8_t, flags): its number (serialize.ts readChar).
                let printable = if size == 1 { *signed && (32..127).contains(&code) } else { code >= 32 && code < 0x110000 && code != 127 && !(0xd800..0xe000).contains(&code) };
                match char::from_u32(code as u32).filter(|_| printable) {
                    Some(c) => {
                        let mut buf = [0; 4];
                        let c: &str = c.encode_utf8(&mut buf);
                        json::string(out, &[c]);
                    }
                    None => json::int(out, code),
                }
            }
            TypeKind::Enum { signed, enumerators } => {
                let size = if t.size == 0 { 4 } else { t.size };
                if !matches!(size, 1 | 2 | 4 | 8) {
                    json::string(out, &[&format!("<int{} @0x{addr:x}>", size * 8)]);
                    return Ok(());
                }
                let raw = v.u64_at(addr, size)?;
                let start = out.len();
                let n = json::int_value(out, raw, size, *signed);
                if let Some((name, _)) = enumerators.iter().rev().find(|(_, val)| *val as i128 == n) {
                    out.truncate(start);
                    json::string(out, &[name]);
                }
            }
            TypeKind::Pointer { target } => {
                let p = v.u64_at(addr, 8)?;
                self.pointer(p, *target, depth);
            }
            TypeKind::Struct { .. } => return self.structure(addr, t, depth),
            TypeKind::Array { element, count } => self.array(addr, *element, count.unwrap_or(0), depth),
            TypeKind::RustStr { ptr, len } | TypeKind::RustVec { ptr, len, utf8: true, .. } => {
                let (p, n) = (v.u64_at(addr + ptr, 8)?, length_at(v, addr + len)?);
                self.utf8(p, n);
            }
            TypeKind::RustVec { ptr, len, element, .. } if *len & LEN_IS_END != 0 => {
                // C++'s std::vector: the count is the past-the-end pointer's distance.
                let (p, end) = (v.u64_at(addr + ptr, 8)?, v.u64_at(addr + (*len & !LEN_IS_END), 8)?);
                let size = self.ty(*element).map_or(0, |t| t.size);
                let n = if size == 0 || end <= p { 0 } else { ((end - p) / size).min(0x7fff_ffff) };
                self.array(p, *element, n, depth);
            }
            TypeKind::RustVec { ptr, len, element, .. } | TypeKind::RustSlice { ptr, len, element } => {
                let (p, n) = (v.u64_at(addr + ptr, 8)?, length_at(v, addr + len)?);
                self.array(p, *element, n, depth);
            }
            TypeKind::RustEnum { discr, variants } => return self.rust_enum(addr, t, *discr, variants, depth),
            TypeKind::Void => out.push_str("null"),
            TypeKind::Function => json::hex(out, addr),
            _ => json::string(out, &[&format!("<{} @0x{addr:x}>", t.name)]),
        }
        Ok(())
    }

    fn pointer(&mut self, p: u64, target: Option<TypeId>, depth: i64) {
        if p == 0 {
            return self.out.push_str("null");
        }
        let Some(tt) = target.and_then(|to| self.ty(to)) else { return json::hex(&mut self.out, p) };
        if crate::symbols::types::is_c_char(tt) {
            return self.cstring(p);
        }
        if matches!(tt.kind, TypeKind::Function) {
            // gdb: `0x401136 <cmp_int>` (serialize.ts codeName).
            if let Some(name) = self.code.and_then(|c| c.name(p)) {
                return json::string(&mut self.out, &[&format!("0x{p:x} <{name}>")]);
            }
        }
        // serialize.ts `followable`: structs, Rust containers, std::unique_ptr / shared_ptr.
        if crate::symbols::cxx_std::is_smart_pointer(tt) || matches!(tt.kind, TypeKind::Struct { .. } | TypeKind::RustStr { .. } | TypeKind::RustSlice { .. } | TypeKind::RustVec { .. } | TypeKind::RustEnum { .. }) {
            return self.read(p, target.unwrap(), depth);
        }
        json::hex(&mut self.out, p)
    }

    /// serialize.ts readUtf8: `len` bytes of text at `p`, cut at MAX_STRING.
    fn utf8(&mut self, p: u64, len: u64) {
        if len == 0 {
            return self.out.push_str("\"\"");
        }
        let n = len.min(MAX_STRING as u64);
        match (p, self.view.bytes(p, n)) {
            (1.., Ok(b)) => json::text(&mut self.out, b, len > MAX_STRING as u64),
            _ => json::unreadable(&mut self.out, p),
        }
    }

    /// serialize.ts readRustEnum: the variant the discriminant names (or the default one),
    /// printed as its name, its one tuple field's value, or `{name: value}`.
    fn rust_enum(&mut self, addr: u64, t: &'a Arc<Type>, discr: Option<crate::symbols::types::Discr>, variants: &'a [crate::symbols::types::Variant], depth: i64) -> Result<(), ()> {
        let mut chosen = variants.iter().find(|v| v.value.is_none());
        match discr {
            Some(d) => {
                if matches!(d.size, 1 | 2 | 4 | 8) {
                    let raw = self.view.u64_at(addr + d.offset, d.size)?;
                    if let Some(hit) = variants.iter().find(|v| v.value == Some(raw)) {
                        chosen = Some(hit);
                    }
                }
            }
            None => chosen = variants.first().or(chosen),
        }
        let Some(v) = chosen else {
            json::string(&mut self.out, &["<", &t.name, ": unknown variant>"]);
            return Ok(());
        };
        let members: &'a [crate::symbols::Member] = match self.ty(v.ty).map(|vt| &vt.kind) {
            Some(TypeKind::Struct { members, .. }) => members,
            _ => &[],
        };
        let is_option = t.name.starts_with("Option<");
        if members.is_empty() {
            if is_option && v.name == "None" {
                self.out.push_str("null");
            } else {
                json::string(&mut self.out, &[&v.name]);
            }
            return Ok(());
        }
        let base = addr + v.offset;
        let tuple = members.iter().all(|m| m.name.strip_prefix("__").is_some_and(|n| !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit())));
        if tuple && members.len() == 1 {
            if is_option {
                self.read(base + members[0].offset, members[0].ty, depth);
                return Ok(());
            }
            self.out.push('{');
            json::key(&mut self.out, &v.name);
            self.read(base + members[0].offset, members[0].ty, depth);
            self.out.push('}');
            return Ok(());
        }
        self.out.push('{');
        json::key(&mut self.out, &v.name);
        self.read(base, v.ty, depth);
        self.out.push('}');
        Ok(())
    }

    fn cstring(&mut self, p: u64) {
        match self.view.cstring(p) {
            Some((s, bytes)) => json::text(&mut self.out, &bytes[..s.len.min(MAX_STRING).min(bytes.len())], s.len > MAX_STRING),
            None => json::unreadable(&mut self.out, p),
        }
    }

    /// Whether two members of struct `t` share a name (remembered per type).
    fn repeats_names(&mut self, t: &Arc<Type>, members: &[crate::symbols::Member]) -> bool {
        let key = Arc::as_ptr(t) as usize;
        if let Some((_, r)) = self.repeats_names.get(&key) {
            return *r;
        }
        // Anonymous members are not keys: their members are the struct's (structure).
        let mut names: Vec<&str> = members.iter().take(MAX_KEYS).map(|m| m.name.as_str()).filter(|n| *n != crate::symbols::types::ANONYMOUS).collect();
        names.sort_unstable();
        let repeats = names.windows(2).any(|w| w[0] == w[1]);
        if self.repeats_names.len() >= MEMO_TYPES {
            self.repeats_names.clear();
        }
        self.repeats_names.insert(key, (t.clone(), repeats));
        repeats
    }

    fn structure(&mut self, addr: u64, t: &'a Arc<Type>, depth: i64) -> Result<(), ()> {
        let name = t.name.as_str();
        let id = Arc::as_ptr(t);
        if self.path.iter().any(|(a, n)| *a == addr && *n == id) {
            json::string(&mut self.out, &["<circular ref to ", name, ">"]);
            return Ok(());
        }
        if depth <= 0 {
            json::string(&mut self.out, &["<", name, ">"]);
            return Ok(());
        }
        if t.size > 0 {
            self.view.bytes(addr, 1)?;
        }
        let TypeKind::Struct { members, .. } = &t.kind else { return Err(()) };
        if members.len() == 1 && crate::symbols::types::is_transparent_wrapper(&t.name, &members[0].name) && members[0].bits.is_none() {
            self.read(addr + members[0].offset, members[0].ty, depth);
            return Ok(());
        }
        // A Rust tuple, `(i32, &str)`: its fields as an array, as debug_eval prints it.
        if name.starts_with('(') && members.iter().all(|m| m.bits.is_none() && crate::eval::render::is_tuple_field(&m.name)) {
            self.out.push('[');
            self.path.push((addr, id));
            for (i, m) in members.iter().take(MAX_KEYS).enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                self.read(addr + m.offset, m.ty, depth - 1);
            }
            self.path.pop();
            self.out.push(']');
            return Ok(());
        }
        if let Some((strong, value)) = crate::symbols::cxx_std::rust_shared_block_fields(name, members) {
            return self.shared_block(addr, id, strong, value, depth);
        }
        let mut spans = if self.repeats_names(t, members) { Some(Vec::new()) } else { None };
        self.out.push('{');
        let from = self.out.len();
        self.path.push((addr, id));
        for (i, m) in members.iter().take(MAX_KEYS).enumerate() {
            let before = self.out.len();
            if i > 0 && !self.out.ends_with('{') {
                self.out.push(',');
            }
            let faddr = addr + m.offset;
            // An anonymous struct or union: its members are this struct's (serialize.ts
            // readStruct), so an object's members are written in place of a key.
            if m.name == crate::symbols::types::ANONYMOUS && m.bits.is_none() && spans.is_none() {
                let at = self.out.len();
                self.read(faddr, m.ty, depth - 1);
                match self.take_value(at) {
                    Ok(members) => {
                        if members.is_empty() {
                            self.out.truncate(before);
                        }
                        self.out.push_str(&members);
                    }
                    // Not an object (past the depth, unreadable): under its key, as there.
                    Err(value) => {
                        json::key(&mut self.out, &m.name);
                        self.out.push_str(&value);
                    }
                }
                continue;
            }
            let k = self.out.len();
            json::key(&mut self.out, &m.name);
            let v = self.out.len();
            // A bitfield's failed read fails the whole struct, leaving it on the path, as there.
            match m.bits {
                Some((bo, bs)) => self.bits(faddr, m.ty, bo, bs)?,
                None => self.read(faddr, m.ty, depth - 1),
            }
            if let Some(s) = spans.as_mut() {
                s.push((k, v, self.out.len()));
            }
        }
        self.path.pop();
        if let Some(s) = spans {
            json::merge_repeated_keys(&mut self.out, from, &s);
        }
        self.out.push('}');
        Ok(())
    }

    /// Take the value written from `at` back out of the output: an object's members (without
    /// its braces) as `Ok`, anything else whole as `Err`.
    fn take_value(&mut self, at: usize) -> Result<String, String> {
        let v = self.out.split_off(at);
        if v.len() >= 2 && v.starts_with('{') && v.ends_with('}') {
            Ok(v[1..v.len() - 1].to_string())
        } else {
            Err(v)
        }
    }

    /// An `Rc`'s shared block: `{"@strong": n, ..the value's members}`, or `"*"` for a value
    /// that is not an object (serialize.ts readStruct).
    fn shared_block(&mut self, addr: u64, id: *const Type, strong: &crate::symbols::Member, value: &crate::symbols::Member, depth: i64) -> Result<(), ()> {
        self.path.push((addr, id));
        self.out.push('{');
        json::key(&mut self.out, "@strong");
        self.read(addr + strong.offset, strong.ty, depth - 1);
        let at = self.out.len();
        self.read(addr + value.offset, value.ty, depth - 1);
        match self.take_value(at) {
            Ok(members) if members.is_empty() => {}
            Ok(members) => {
                self.out.push(',');
                self.out.push_str(&members);
            }
            Err(v) => {
                self.out.push(',');
                json::key(&mut self.out, "*");
                self.out.push_str(&v);
            }
        }
        self.out.push('}');
        self.path.pop();
        Ok(())
    }

    fn bits(&mut self, addr: u64, id: TypeId, bit_off: u64, bit_size: u64) -> Result<(), ()> {
        let size = (bit_off + bit_size).div_ceil(8).clamp(1, 8);
        let raw = self.view.u64_at(addr, size)? as u128;
        let bit_size = bit_size.min(64);
        let mask = (1u128 << bit_size) - 1;
        // BigInt shifts in JS: a shift past the bytes read gives 0.
        let v = if bit_off >= 128 { 0 } else { (raw >> bit_off) & mask };
        let kind = self.ty(id).map(|t| &t.kind);
        let out = &mut self.out;
        let signed = matches!(kind, Some(TypeKind::Int { signed: true } | TypeKind::Char { signed: true } | TypeKind::Enum { signed: true, .. }));
        if signed && bit_size > 0 && (v >> (bit_size - 1)) == 1 {
            json::js_number(out, v as f64 - (1u128 << bit_size) as f64);
        } else if matches!(kind, Some(TypeKind::Bool)) {
            out.push_str(if v != 0 { "true" } else { "false" });
        } else if let Some((name, _)) = match kind {
            Some(TypeKind::Enum { enumerators, .. }) => enumerators.iter().rev().find(|(_, val)| *val as i128 == v as i128),
            _ => None,
        } {
            json::string(out, &[name]);
        } else {
            json::js_number(out, v as f64);
        }
        Ok(())
    }

    fn array(&mut self, addr: u64, of: TypeId, count: u64, depth: i64) {
        if addr == 0 {
            return self.out.push_str(if count == 0 { "[]" } else { "null" });
        }
        let size = match self.ty(of) {
            Some(t) if matches!(t.kind, TypeKind::Pointer { .. }) => 8,
            Some(t) => t.size,
            None => 0,
        };
        // serialize.ts readArray: a `char` array holding text prints as a string.
        if self.ty(of).is_some_and(|t| crate::symbols::types::is_c_char(t)) {
            let scan = count.min(MAX_STRING as u64);
            if let Ok(bytes) = self.view.bytes(addr, scan) {
                if let Some(end) = crate::symbols::types::char_array_text_len(bytes) {
                    let cut = end as u64 == scan && count > scan;
                    return json::text(&mut self.out, &bytes[..end], cut);
                }
            }
        }
        self.out.push('[');
        for i in 0..count.min(MAX_ELEMENTS) {
            if i > 0 {
                self.out.push(',');
            }
            self.read(addr + i * size, of, depth);
        }
        if count > MAX_ELEMENTS {
            if MAX_ELEMENTS > 0 {
                self.out.push(',');
            }
            json::string(&mut self.out, &[&format!("<{} more>", count - MAX_ELEMENTS)]);
        }
        self.out.push(']');
    }
}

#[cfg(test)]
mod tests {
    use super::super::capture_view::push_block as block;
    use super::*;
    use crate::symbols::Member;

    fn ty(name: &str, size: u64, kind: TypeKind) -> Arc<Type> {
        Arc::new(Type { name: name.into(), size, kind })
    }

    fn member(name: &str, offset: u64, ty: TypeId, bits: Option<(u64, u64)>) -> Member {
        Member { name: name.into(), offset, ty, bits }
    }

    /// `struct S {int a; int; union U {int x;}; struct S *next; char *name; enum E e; unsigned flag: 1;}`
    /// with both anonymous members named `<anonymous>`, as DWARF reading names them: the
    /// union's members print as the struct's, the `int` under its key.
    fn plan() -> CapturePlan {
        let s = TypeKind::Struct {
            members: vec![
                member("a", 0, 0, None),
                member("<anonymous>", 4, 0, None),
                member("<anonymous>", 8, 7, None),
                member("next", 16, 2, None),
                member("name", 24, 4, None),
                member("e", 32, 5, None),
                member("flag", 36, 6, Some((0, 1))),
            ],
            is_union: false,
        };
        let types = [
            ty("int", 4, TypeKind::Int { signed: true }),
            ty("struct S", 40, s),
            ty("struct S *", 8, TypeKind::Pointer { target: Some(1) }),
            ty("char", 1, TypeKind::Char { signed: true }),
            ty("char *", 8, TypeKind::Pointer { target: Some(3) }),
            ty("enum E", 4, TypeKind::Enum { signed: true, enumerators: vec![("A".into(), 0), ("B".into(), -1)] }),
            ty("unsigned int", 4, TypeKind::Int { signed: false }),
            ty("union U", 4, TypeKind::Struct { members: vec![member("x", 0, 0, None)], is_union: true }),
        ];
        CapturePlan {
            depth: 3,
            params: vec![("s".into(), 2), ("t".into(), 2)],
            regs: Vec::new(),
            ret: Some(4),
            programs: Vec::new(),
            enter: Vec::new(),
            exit: Vec::new(),
            types: types.into_iter().enumerate().map(|(i, t)| (i as TypeId, t)).collect(),
            optionals: Default::default(),
            nodes: Default::default(),
            by_address: Vec::new(),
            ret_by_address: false,
            split_pairs: Vec::new(),
            floats: Vec::new(),
            on_stack: Vec::new(),
            unavailable: Vec::new(),
            sse_structs: Vec::new(),
        }
    }


    #[test]
    fn prints_what_the_serializer_prints() {
        let mut s = Vec::new();
        for w in [1u32, 2, 3, 0] {
            s.extend_from_slice(&w.to_le_bytes());
        }
        s.extend_from_slice(&0x1000u64.to_le_bytes()); // next: itself
        s.extend_from_slice(&0x2000u64.to_le_bytes());
        s.extend_from_slice(&(-1i32).to_le_bytes());
        s.extend_from_slice(&1u32.to_le_bytes());
        let mut payload = Vec::new();
        block(&mut payload, 0x1000, 40, &s);
        block(&mut payload, 0x2000, 4 | 3 << 30, b"hi\"\n");
        let plan = plan();
        assert_eq!(
            args_json(&plan, None, &[0x1000, 0x3000], &payload),
            r#"{"s":{"a":1,"<anonymous>":2,"x":3,"next":"<circular ref to struct S>","name":"hi\"\n","e":"B","flag":1},"t":"<unreadable 0x3000>"}"#
        );
        assert_eq!(ret_json(&plan, None, &[0x2000], &payload), r#""hi\"\n""#);
        assert_eq!(ret_json(&plan, None, &[0], &payload), "null");
        // Again, with the repeated names remembered, and a struct cut short.
        assert_eq!(args_json(&plan, None, &[0x1000, 0], &payload[..12 + 20]), r#"{"s":"<unreadable 0x1000>","t":null}"#);
    }

    /// `struct R {name: String, tags: &[u16], next: Option<&R>, shape: Shape}` with
    /// `enum Shape {Dot, Circle(u32)}` (discriminant u32 at 0): what serialize.ts prints for
    /// its Rust kinds — text, a buffer of elements, the niche-encoded `None`, a unit variant
    /// and a one-field tuple variant — and a text buffer that was not copied.
    #[test]
    fn prints_rust_containers_and_enums_as_the_serializer() {
        use crate::symbols::types::{Discr, Variant};
        let r = TypeKind::Struct {
            members: vec![member("name", 0, 1, None), member("tags", 24, 3, None), member("next", 40, 5, None), member("shape", 48, 9, None)],
            is_union: false,
        };
        let types = [
            ty("R", 56, r),
            ty("String", 24, TypeKind::RustVec { ptr: 8, len: 16, element: 2, utf8: true }),
            ty("u16", 2, TypeKind::Int { signed: false }),
            ty("&[u16]", 16, TypeKind::RustSlice { ptr: 0, len: 8, element: 2 }),
            ty("&R", 8, TypeKind::Pointer { target: Some(0) }),
            ty("Option<&R>", 8, TypeKind::RustEnum {
                discr: Some(Discr { offset: 0, size: 8 }),
                variants: vec![Variant { value: Some(0), name: "None".into(), ty: 6, offset: 0 }, Variant { value: None, name: "Some".into(), ty: 7, offset: 0 }],
            }),
            ty("None", 8, TypeKind::Struct { members: vec![], is_union: false }),
            ty("Some", 8, TypeKind::Struct { members: vec![member("__0", 0, 4, None)], is_union: false }),
            ty("u32", 4, TypeKind::Int { signed: false }),
            ty("Shape", 8, TypeKind::RustEnum {
                discr: Some(Discr { offset: 0, size: 4 }),
                variants: vec![Variant { value: Some(0), name: "Dot".into(), ty: 10, offset: 0 }, Variant { value: Some(1), name: "Circle".into(), ty: 11, offset: 0 }],
            }),
            ty("Dot", 8, TypeKind::Struct { members: vec![], is_union: false }),
            ty("Circle", 8, TypeKind::Struct { members: vec![member("__0", 4, 8, None)], is_union: false }),
        ];
        let plan = CapturePlan {
            depth: 3,
            params: vec![("r".into(), 4)],
            regs: Vec::new(),
            ret: None,
            programs: Vec::new(),
            enter: Vec::new(),
            exit: Vec::new(),
            types: types.into_iter().enumerate().map(|(i, t)| (i as TypeId, t)).collect(),
            optionals: Default::default(),
            nodes: Default::default(),
            by_address: Vec::new(),
            ret_by_address: false,
            split_pairs: Vec::new(),
            floats: Vec::new(),
            on_stack: Vec::new(),
            unavailable: Vec::new(),
            sse_structs: Vec::new(),
        };
        let words = |w: &[u64]| w.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        // r at 0x1000: name "héllo" at 0x2000, tags [7, 8] at 0x3000, next -> 0x1100, shape Dot.
        let mut payload = Vec::new();
        block(&mut payload, 0x1000, 56, &words(&[5, 0x2000, 6, 0x3000, 2, 0x1100, 0]));
        block(&mut payload, 0x2000, 6, "héllo".as_bytes());
        block(&mut payload, 0x3000, 4, &[7, 0, 8, 0]);
        // 0x1100: name at 0x4000 not copied, no tags, next None, shape Circle(9).
        block(&mut payload, 0x1100, 56, &words(&[3, 0x4000, 3, 0x2, 0, 0, 1 | 9 << 32]));
        assert_eq!(
            args_json(&plan, None, &[0x1000], &payload),
            r#"{"r":{"name":"héllo","tags":[7,8],"next":{"name":"<unreadable 0x4000>","tags":[],"next":null,"shape":{"Circle":9}},"shape":"Dot"}}"#
        );
    }
}
