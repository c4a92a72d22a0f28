//! Typed capture at native speed (issue 18 item 1): for a C function whose parameters and
//! result each travel in one integer register, the daemon compiles from DWARF a *capture
//! plan* — which pointees the agent's JavaScript serializer (`agent/src/serialize.ts`) would
//! read at the session's depth — and ships it with the hook spec (`capture`). The agent's
//! native hook (`agent/src/capture_c.ts`) runs the plan on every call: it copies each pointee
//! (struct bytes up to the last field printed, C strings up to 1,025 bytes) into the record,
//! reading through a fault-safe copy. The daemon rebuilds the very JSON the serializer would
//! print from those bytes (`capture_decode.rs`), so nothing the LLM sees changes.
//!
//! A plan is a list of ops in execution order: `[src, off, size, kind]`. `src < 0`: the
//! pointer is register `-src - 1` (arguments rdi, rsi, ...; at exit rax); `src >= 0`: the
//! pointer is the 8 bytes at `off` in the block op `src` copied. `kind` 0 copies `size` bytes
//! (a struct), 1 a C string. The agent skips an op whose pointer is null, implausible or
//! whose source block was not copied; each copy goes into the record as `u64 address, u32
//! meta, bytes` and the decoder finds reads by address, exactly as the serializer would.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::symbols::{DebugInfo, Signature, Type, TypeId, TypeKind};

/// What the serializer prints at most (serialize.ts MAX_KEYS / MAX_ELEMENTS / MAX_STRING).
pub(crate) const MAX_KEYS: usize = 100;
pub(crate) const MAX_ELEMENTS: u64 = 100;
pub(crate) const MAX_STRING: usize = 1024;
/// Most ops and payload bytes a plan may need; bigger ones keep the JavaScript serializer.
const MAX_OPS: usize = 1024;
/// Must stay below the agent's per-thread scratch (capture_c.ts CAP_SCRATCH).
pub(crate) const MAX_PAYLOAD: u64 = 192 * 1024;
/// Bytes of a block header in the payload: u64 address, u32 meta.
pub(crate) const BLOCK_HEADER: u64 = 12;
const KIND_STRUCT: u32 = 0;
const KIND_CSTRING: u32 = 1;

/// One copy the native hook makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Op {
    /// `< 0`: register `-src - 1`; else the op whose block holds the pointer.
    pub src: i32,
    pub off: u64,
    pub size: u64,
    pub kind: u32,
}

/// A function's capture plan, with the types its decoder needs.
#[derive(Debug)]
pub(crate) struct CapturePlan {
    pub depth: u32,
    /// Declared parameters: display name (`arg{i}` when unnamed) and type.
    pub params: Vec<(String, TypeId)>,
    /// The result's type; `None` for `void`.
    pub ret: Option<TypeId>,
    pub enter: Vec<Op>,
    pub exit: Vec<Op>,
    /// Every type a decode may look at, resolved once (no DebugInfo lock per read).
    pub types: HashMap<TypeId, Arc<Type>>,
}

impl CapturePlan {
    /// The hook spec's `capture` field: `{ops: [[src, off, size, kind], …], enter: n, depth}`.
    pub fn to_agent(&self) -> Value {
        let ops: Vec<Value> = self.enter.iter().chain(&self.exit).map(|o| json!([o.src, o.off, o.size, o.kind])).collect();
        json!({ "ops": ops, "enter": self.enter.len(), "depth": self.depth })
    }

    pub fn ty(&self, id: TypeId) -> Option<&Arc<Type>> {
        self.types.get(&id)
    }
}

/// A value that travels in one integer register (symbols/abi.rs: what the wrapper forwards).
fn register_scalar(t: &Type) -> bool {
    matches!(t.kind, TypeKind::Int { .. } | TypeKind::Bool | TypeKind::Char { .. } | TypeKind::Enum { .. } | TypeKind::Pointer { .. }) && (1..=8).contains(&t.size)
}

/// The plan of `sig` at `depth`, or `None` when the function is not one the native capture
/// serves (not C on x86-64, a parameter or result not in one integer register, more than
/// six parameters, or a plan beyond the op or byte budget).
pub(crate) fn compile(info: &DebugInfo, sig: &Signature, depth: u32) -> Option<CapturePlan> {
    if !info.x86_64 || !sig.c_language || sig.rust || sig.variadic || sig.closure_env || sig.params.len() > 6 {
        return None;
    }
    let mut c = Compiler { info, ops: Vec::new(), types: HashMap::new(), over: false };
    let mut params = Vec::new();
    for (i, p) in sig.params.iter().enumerate() {
        let ty = p.ty?;
        if !register_scalar(&c.ty(ty)) {
            return None;
        }
        params.push((if p.name.is_empty() { format!("arg{i}") } else { p.name.clone() }, ty));
    }
    let depth_i = depth as i64;
    for (i, (_, ty)) in params.iter().enumerate() {
        c.value(Loc::Reg(i as u8), *ty, depth_i);
    }
    let enter = std::mem::take(&mut c.ops);
    let ret = match sig.ret {
        Some(t) if matches!(c.ty(t).kind, TypeKind::Void) => None,
        Some(t) if register_scalar(&c.ty(t)) => Some(t),
        Some(_) => return None,
        None => None,
    };
    if let Some(t) = ret {
        c.value(Loc::Reg(0), t, depth_i);
    }
    let exit = std::mem::take(&mut c.ops);
    let bound = |ops: &[Op]| ops.iter().map(|o| BLOCK_HEADER + if o.kind == KIND_CSTRING { MAX_STRING as u64 } else { o.size }).sum::<u64>();
    if c.over || enter.len() > MAX_OPS || exit.len() > MAX_OPS || bound(&enter) > MAX_PAYLOAD || bound(&exit) > MAX_PAYLOAD {
        return None;
    }
    Some(CapturePlan { depth, params, ret, enter, exit, types: c.types })
}

#[derive(Clone, Copy)]
enum Loc {
    /// The value's bytes are argument register i (rax at exit).
    Reg(u8),
    /// At this offset in the block of op i.
    Block(usize, u64),
}

impl Loc {
    fn add(self, n: u64) -> Loc {
        match self {
            Loc::Block(b, off) => Loc::Block(b, off + n),
            reg => reg, // a register holds scalars only: no offsets into it
        }
    }
}

struct Compiler<'a> {
    info: &'a DebugInfo,
    ops: Vec<Op>,
    types: HashMap<TypeId, Arc<Type>>,
    /// The plan grew beyond MAX_OPS: abandoned.
    over: bool,
}

impl Compiler<'_> {
    fn ty(&mut self, id: TypeId) -> Arc<Type> {
        self.types.entry(id).or_insert_with(|| self.info.ty(id)).clone()
    }

    /// The bytes [off, off + n) of a block are read: its copy must reach them.
    fn touch(&mut self, at: Loc, n: u64) {
        if let Loc::Block(b, off) = at {
            let op = &mut self.ops[b];
            op.size = op.size.max(off + n);
        }
    }

    fn push(&mut self, src: Loc, kind: u32) -> Option<usize> {
        if self.ops.len() >= MAX_OPS {
            self.over = true;
            return None;
        }
        let (src, off) = match src {
            Loc::Reg(r) => (-(r as i32) - 1, 0),
            Loc::Block(b, off) => (b as i32, off),
        };
        self.ops.push(Op { src, off, size: 0, kind });
        Some(self.ops.len() - 1)
    }

    /// serialize.ts `typeSize`: what an array steps by.
    fn elem_size(&mut self, id: TypeId) -> u64 {
        let t = self.ty(id);
        if matches!(t.kind, TypeKind::Pointer { .. }) {
            8
        } else {
            t.size
        }
    }

    /// Mirrors serialize.ts `read(addr, id, depth)`: what it would read at `at`.
    fn value(&mut self, at: Loc, id: TypeId, depth: i64) {
        if self.over {
            return;
        }
        let t = self.ty(id);
        match &t.kind {
            TypeKind::Int { .. } | TypeKind::Char { .. } | TypeKind::Enum { .. } => self.touch(at, t.size.clamp(1, 8)),
            TypeKind::Bool => self.touch(at, 1),
            TypeKind::Float => self.touch(at, if t.size == 16 { 10 } else { t.size }),
            TypeKind::Pointer { target } => {
                self.touch(at, 8);
                let Some(to) = *target else { return };
                let tt = self.ty(to);
                if crate::symbols::types::is_c_char(&tt) {
                    self.push(at, KIND_CSTRING);
                } else if matches!(tt.kind, TypeKind::Struct { .. }) && depth > 0 {
                    // Followed without spending depth; the struct spends it.
                    if let Some(b) = self.push(at, KIND_STRUCT) {
                        self.structure(Loc::Block(b, 0), to, depth);
                    }
                }
            }
            TypeKind::Struct { .. } => self.structure(at, id, depth),
            TypeKind::Array { element, count } => {
                let n = count.unwrap_or(0).min(MAX_ELEMENTS);
                let es = self.elem_size(*element);
                for i in 0..n {
                    self.value(at.add(i * es), *element, depth);
                }
            }
            _ => {}
        }
    }

    /// serialize.ts `readStruct`.
    fn structure(&mut self, at: Loc, id: TypeId, depth: i64) {
        if depth <= 0 {
            return;
        }
        let t = self.ty(id);
        let TypeKind::Struct { members, .. } = &t.kind else { return };
        if t.size > 0 {
            self.touch(at, 1);
        }
        if members.len() == 1 && members[0].name == "__0" && members[0].bits.is_none() {
            self.value(at.add(members[0].offset), members[0].ty, depth);
            return;
        }
        for m in members.iter().take(MAX_KEYS) {
            let fat = at.add(m.offset);
            match m.bits {
                Some((bo, bs)) => self.touch(fat, (bo + bs).div_ceil(8).clamp(1, 8)),
                None => self.value(fat, m.ty, depth - 1),
            }
        }
    }
}

/// Per session: the plans of hooked functions, by function id.
#[derive(Default)]
pub(crate) struct CaptureState {
    pub plans: HashMap<u32, Arc<CapturePlan>>,
}

#[cfg(test)]
mod tests {
    /// Plan sizes on the SQLite benchmark driver, when it has been built (benches/sqlite_real.rs).
    #[test]
    fn sqlite_plans_fit_the_budget() {
        let exe = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-real/sqlite_drv");
        if !exe.exists() {
            return;
        }
        let index = crate::symbols::SymbolIndex::load(&exe).unwrap();
        let info = crate::symbols::DebugInfo::of(&index).unwrap();
        for name in ["sqlite3VdbeMemRelease", "sqlite3BtreeNext", "sqlite3BtreePayloadSize", "sqlite3VdbeIntValue"] {
            let f = index.functions.iter().find(|f| f.name == name).unwrap();
            let sig = info.signature(f.address).unwrap();
            for depth in [1, 2, 3] {
                let plan = super::compile(&info, &sig, depth);
                let sizes = plan.as_ref().map(|p| (p.enter.len(), p.enter.iter().map(|o| o.size).sum::<u64>(), p.exit.len()));
                eprintln!("{name} depth {depth}: {sizes:?}");
            }
        }
    }
}
