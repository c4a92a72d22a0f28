//! Where each argument of a hooked function lives at entry, and where its return value
//! lives at exit, as read recipes for `agent/src/watches.ts` (locations `r`, `r2`, `pair`,
//! `stack`, `ind`, `none`).
//!
//! C and C++ follow the System V x86-64 ABI: INTEGER-class values take the next of six
//! integer registers, then stack slots; structs of 9-16 bytes take two registers if both
//! eightbytes are INTEGER; larger structs are copied to the stack (MEMORY); a MEMORY return
//! value is written through a hidden pointer passed first. Floats and SSE-class eightbytes
//! take the next of eight xmm registers (`x`, `eb`); the agent reads the copy Frida saved of
//! them (agent/src/xmm.ts). `long double` goes on the stack and returns in x87 st0 (not read).
//! Rust uses its own ABI: scalar pairs (`&str`, `&[T]`, `Option<u32>`) take two registers,
//! other aggregates up to 8 bytes are cast to an integer, larger ones are passed by address
//! (and returned through a hidden pointer passed first, like C's MEMORY class).

use serde_json::{json, Value};

use crate::symbols::{DebugInfo, Signature, TypeId, TypeKind};

const INT_REGS: usize = 6;
const XMM_REGS: usize = 8;
/// Parameters a recipe places and an event prints the values of: the first 32 (SQLite's
/// longest list is thirteen). Each one past them prints why it has no value, never vanishes
/// (`beyond_max`).
pub(crate) const MAX_PARAMS: usize = 32;

/// What a parameter past MAX_PARAMS prints, as both paths print a recipe's `none`.
fn beyond_max(index: usize, count: usize) -> String {
    format!("parameter {} of {count}: only the first {MAX_PARAMS} are captured", index + 1)
}

/// A scalar leaf of a type: offset, size, float?
type Leaf = (u64, u64, bool);

fn leaves(info: &DebugInfo, ty: TypeId, base: u64, out: &mut Vec<Leaf>, depth: u32) {
    if depth > 8 || out.len() > 16 {
        return;
    }
    let t = info.ty(ty);
    match &t.kind {
        TypeKind::Float => out.push((base, t.size, true)),
        TypeKind::Struct { members, .. } => {
            for m in members {
                // A bitfield lives in a unit of its type's size, at that size's alignment.
                let unit = info.ty(m.ty).size.clamp(1, 8);
                let offset = if m.bits.is_some() { m.offset / unit * unit } else { m.offset };
                leaves(info, m.ty, base + offset, out, depth + 1);
            }
        }
        TypeKind::Array { element, count } => {
            let es = info.ty(*element).size.max(1);
            for i in 0..count.unwrap_or(0).min(16) {
                leaves(info, *element, base + i * es, out, depth + 1);
            }
        }
        TypeKind::RustEnum { discr, variants } => {
            if let Some(d) = discr {
                out.push((base + d.offset, d.size, false));
            }
            for v in variants {
                leaves(info, v.ty, base + v.offset, out, depth + 1);
            }
        }
        TypeKind::RustStr { ptr, len } | TypeKind::RustSlice { ptr, len, .. } => {
            out.push((base + ptr, 8, false));
            out.push((base + len, 8, false));
        }
        TypeKind::RustVec { ptr, len, .. } => {
            out.push((base + ptr, 8, false));
            out.push((base + len, 8, false));
        }
        TypeKind::Void | TypeKind::Function => {}
        _ => out.push((base, t.size.max(1), false)),
    }
}

pub(super) fn is_aggregate(kind: &TypeKind) -> bool {
    matches!(
        kind,
        TypeKind::Struct { .. } | TypeKind::Array { .. } | TypeKind::RustEnum { .. } | TypeKind::RustStr { .. } | TypeKind::RustSlice { .. } | TypeKind::RustVec { .. }
    )
}

/// Tracks the integer and xmm registers and stack bytes consumed so far.
#[derive(Default)]
struct Slots {
    regs: usize,
    xmm: usize,
    stack: u64,
}

impl Slots {
    fn take(&mut self, n: usize) -> Option<Vec<usize>> {
        if self.regs + n > INT_REGS {
            return None;
        }
        let v = (self.regs..self.regs + n).collect();
        self.regs += n;
        Some(v)
    }
    /// One eightbyte per class flag (true: SSE), all in registers or none.
    fn take_classes(&mut self, sse: &[bool]) -> Option<Vec<Value>> {
        let n_sse = sse.iter().filter(|s| **s).count();
        if self.regs + (sse.len() - n_sse) > INT_REGS || self.xmm + n_sse > XMM_REGS {
            return None;
        }
        Some(
            sse.iter()
                .map(|&is_sse| {
                    let (kind, counter) = if is_sse { (1, &mut self.xmm) } else { (0, &mut self.regs) };
                    *counter += 1;
                    json!([kind, *counter - 1])
                })
                .collect(),
        )
    }
    fn on_stack(&mut self, size: u64) -> Value {
        let at = self.stack;
        self.stack += size.div_ceil(8).max(1) * 8;
        json!({ "stack": at })
    }
}

const XMM: &str = "float in an xmm register (not captured)";
const X87: &str = "long double in an x87 register (not captured)";

/// System V classes of the eightbytes of a small C aggregate: true where every scalar in
/// the eightbyte is a float or double. None when a leaf is an x87 `long double`.
fn eightbyte_classes(size: u64, leaves: &[Leaf]) -> Option<Vec<bool>> {
    if leaves.iter().any(|l| l.2 && l.1 > 8) {
        return None;
    }
    Some(
        (0..size.div_ceil(8))
            .map(|e| {
                let mut in_eb = leaves.iter().filter(|l| l.0 / 8 == e).peekable();
                in_eb.peek().is_some() && in_eb.all(|l| l.2)
            })
            .collect(),
    )
}

/// The location of one value: an argument (`ret = false`) or the return value.
fn locate(info: &DebugInfo, ty: TypeId, rust: bool, slots: &mut Slots, ret: bool) -> Value {
    let t = info.ty(ty);
    let mut ls = Vec::new();
    leaves(info, ty, 0, &mut ls, 0);
    ls.sort_by_key(|l| l.0);
    // Leaves at one offset (a union's members) are one: a float only if all of them are
    // (System V: INTEGER wins an eightbyte), as long as the longest.
    ls.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            kept.1 = kept.1.max(later.1);
            kept.2 &= later.2;
        }
        same
    });
    let any_float = ls.iter().any(|l| l.2);
    let int_slot = |slots: &mut Slots| -> Value {
        if ret {
            return json!({ "r": 0 });
        }
        match slots.take(1) {
            Some(s) => json!({ "r": s[0] }),
            None => slots.on_stack(8),
        }
    };
    // Rust passes no zero-sized value (`()`, a unit struct, a closure capturing nothing):
    // it takes no register, and the parameters after it move up.
    if rust && t.size == 0 {
        return json!({ "none": "zero-sized" });
    }
    if !is_aggregate(&t.kind) {
        return match t.kind {
            TypeKind::Float if t.size > 8 => {
                if ret {
                    json!({ "none": X87 })
                } else {
                    slots.on_stack(t.size)
                }
            }
            // __int128, u128: two registers (low, then high), never split with the stack.
            TypeKind::Int { .. } if t.size == 16 => match if ret { Some(vec![0, 1]) } else { slots.take(2) } {
                Some(r) => json!({ "r2": [r[0], r[1]] }),
                None if rust => json!({ "none": "passed on the stack (not captured)" }),
                None => slots.on_stack(16),
            },
            TypeKind::Float if ret => json!({ "x": 0 }),
            TypeKind::Float => match slots.take_classes(&[true]) {
                Some(_) => json!({ "x": slots.xmm - 1 }),
                None => slots.on_stack(8),
            },
            _ => int_slot(slots),
        };
    }
    if !rust && info.passed_by_reference(ty) {
        // A C++ class not trivial for calls: the caller's copy is passed by its address, a
        // result is built where the hidden first argument points.
        if ret {
            return json!({ "ind": 0 });
        }
        return match slots.take(1) {
            Some(s) => json!({ "ind": s[0] }),
            None => json!({ "none": "passed by address on the stack (not captured)" }),
        };
    }
    if !rust && ls.is_empty() && t.size <= 1 && matches!(t.kind, TypeKind::Struct { .. }) {
        // An empty C++ class (a comparator, an allocator, a tag type) travels in no register
        // and no stack slot (GCC 8+ and clang): the parameters after it move up. It prints as
        // `{}` from wherever it is read, so it names the next register without taking it.
        return json!({ "r": if ret { 0 } else { slots.regs.min(INT_REGS - 1) } });
    }
    if rust {
        let scalar_pair = ls.len() == 2 && !any_float && t.size <= 16;
        if t.size > 16 || (t.size > 8 && !scalar_pair) {
            if ret {
                return json!({ "ind": 0 });
            }
            return match slots.take(1) {
                Some(s) => json!({ "ind": s[0] }),
                None => json!({ "none": "passed by address on the stack (not captured)" }),
            };
        }
        if any_float {
            return json!({ "none": XMM });
        }
        if ls.len() == 2 {
            // A scalar pair: each half in its own register, written back at its offset.
            let regs = if ret { Some(vec![0, 1]) } else { slots.take(2) };
            return match regs {
                Some(r) => json!({ "pair": [[r[0], ls[0].0, ls[0].1], [r[1], ls[1].0, ls[1].1]] }),
                None => json!({ "none": "passed on the stack (not captured)" }),
            };
        }
    } else if t.size > 16 || t.size == 0 || ls.iter().any(|l| l.0 % l.1.clamp(1, 8) != 0) {
        // MEMORY class (past 16 bytes, or a field not at its natural alignment: a packed
        // struct): copied to the stack; returned through a hidden pointer.
        return if ret { json!({ "ind": 0 }) } else { slots.on_stack(t.size) };
    } else if any_float {
        let Some(classes) = eightbyte_classes(t.size, &ls) else {
            // A `long double` member: in memory as an argument, in st0 as a result.
            return if ret { json!({ "none": X87 }) } else { slots.on_stack(t.size) };
        };
        // A return uses rax/rdx and xmm0/xmm1 in order, whatever the arguments took.
        let taken = if ret { Slots::default().take_classes(&classes) } else { slots.take_classes(&classes) };
        return match taken {
            Some(eb) => json!({ "eb": eb }),
            None => slots.on_stack(t.size),
        };
    }
    let n = if t.size > 8 { 2 } else { 1 };
    let regs = if ret { Some((0..n).collect()) } else { slots.take(n) };
    match regs {
        Some(r) if n == 1 => json!({ "r": r[0] }),
        Some(r) => json!({ "r2": [r[0], r[1]] }),
        None if rust => json!({ "none": "passed on the stack (not captured)" }),
        None => slots.on_stack(t.size),
    }
}

/// Does this signature need typed reads in the target (strings, structs, floats, Rust
/// values)? Functions of register-sized integers, bools, enums and pointers keep the fast
/// native hooks: the daemon types their raw words (`engine/word_shapes.rs`).
pub(crate) fn worth_serializing(info: &DebugInfo, sig: &Signature) -> bool {
    let rich = |ty: Option<TypeId>| {
        let Some(ty) = ty else { return false };
        let t = info.ty(ty);
        match t.kind {
            TypeKind::Pointer { target: Some(to) } => {
                let p = info.ty(to);
                crate::symbols::types::is_c_char(&p) || is_aggregate(&p.kind)
            }
            ref k => is_aggregate(k) || matches!(k, TypeKind::Float),
        }
    };
    // More than six parameters: the rest are on the stack, which only the JS path reads.
    sig.params.len() > 6 || sig.params.iter().any(|p| rich(p.ty)) || rich(sig.ret)
}

/// The `serialize` recipe of a function: `{args: [{n, t, at}], ret: {t, at} | null}`,
/// plus the type ids it refers to.
pub(crate) fn serialize_recipe(info: &DebugInfo, sig: &Signature) -> (Value, Vec<TypeId>) {
    let mut slots = Slots::default();
    let mut roots = Vec::new();
    let ret = sig.ret.map(|t| {
        roots.push(t);
        let at = locate(info, t, sig.rust, &mut Slots::default(), true);
        if at.get("ind").is_some() {
            slots.regs = 1; // the hidden result pointer takes the first register
        }
        json!({ "t": t, "at": at })
    });
    if sig.closure_env {
        slots.regs += 1; // then a closure's environment pointer, which DWARF does not list
    }
    let count = sig.params.len();
    let args: Vec<Value> = sig
        .params
        .iter()
        .enumerate()
        .map(|(i, p)| match p.ty {
            _ if i >= MAX_PARAMS => json!({ "n": p.name, "t": 0, "at": { "none": beyond_max(i, count) } }),
            Some(t) => {
                roots.push(t);
                json!({ "n": p.name, "t": t, "at": locate(info, t, sig.rust, &mut slots, false) })
            }
            None => json!({ "n": p.name, "t": 0, "at": { "none": "no type information" } }),
        })
        .collect();
    (json!({ "args": args, "ret": ret }), roots)
}
