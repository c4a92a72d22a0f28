//! Typed capture at native speed (issue 18 item 1): for a C, C++ or Rust function whose
//! parameters and result travel in integer registers, the daemon compiles from DWARF a *capture
//! plan* — which pointees the agent's JavaScript serializer (`agent/src/serialize.ts`) would
//! read at the session's depth — and ships it with the hook spec (`capture`). The agent's
//! native hook runs the plan on every call (`agent/native/capture_walk.c`, from
//! `agent/src/capture_c.ts`): it copies each pointee
//! (struct bytes up to the last field printed, C strings up to 1,025 bytes, a Rust buffer's
//! first 1,024 bytes of text or 100 elements, each element walked in turn; a libstdc++
//! `std::map`, `std::set` or `std::unordered_*`'s first 100 nodes in iteration order, each
//! node's element walked in turn; a Rust enum's edges only under the variant its
//! discriminant selects) into the record,
//! reading through a fault-safe copy. The daemon rebuilds the very JSON the serializer would
//! print from those bytes (`capture_decode.rs`), so nothing the LLM sees changes.
//!
//! A plan is *type-driven*: small programs, one per (struct type, remaining depth) the
//! serializer can reach, and the roots (registers) that start a walk. A program is the
//! struct's bytes to copy (up to the last field printed at that depth) and its pointer
//! fields — offset, count and stride (an array of pointers is one edge), target kind
//! (struct or C string) and, for a struct, the child program. The agent walks them per call
//! with an explicit stack, de-duplicating pointees by (address, type): a pointee is visited
//! again only when a later path reaches it with more depth left. Plan size is bounded by
//! types × depth, not by paths; the bytes one call copies are bounded by the agent's scratch
//! (capture_walk.c CAP_BUDGET): pointees beyond it are left out and decode as `<unreadable …>`,
//! never as a wrong value. Each copy goes into the record as `u64 address, u32 meta, bytes`
//! and the decoder finds reads by address, exactly as the serializer would.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{json, Value};

use super::recipes;
use crate::symbols::cxx_std::{NodeLayout, NodeLinks};
use crate::symbols::{DebugInfo, Signature, Type, TypeId, TypeKind};

/// Set in a buffer's length offset (`RustVec::len`, `Edge::len_off`): the word there is the
/// past-the-end pointer (C++'s `std::vector`), the count is its distance from the data
/// pointer in elements (capture_walk.c CAP_LEN_END).
pub(crate) const LEN_IS_END: u64 = 1 << 31;

/// What the serializer prints at most (serialize.ts MAX_KEYS / MAX_ELEMENTS / MAX_STRING).
pub(crate) const MAX_KEYS: usize = 100;
pub(crate) const MAX_ELEMENTS: u64 = 100;
pub(crate) const MAX_STRING: usize = 1024;
/// Most pointer edges and programs a plan may have; bigger ones keep the JavaScript serializer.
const MAX_EDGES: usize = 4096;
const MAX_PROGRAMS: usize = 1024;
/// Largest struct copy: one must fit the agent's per-call byte budget (capture_walk.c CAP_BUDGET).
const MAX_STRUCT: u64 = 64 * 1024;
/// Bytes of a block header in the payload: u64 address, u32 meta.
pub(crate) const BLOCK_HEADER: u64 = 12;
pub(crate) const KIND_STRUCT: u32 = 0;
pub(crate) const KIND_CSTRING: u32 = 1;
/// A Rust buffer: pointer at `off`, element count at `len_off` (`&str`, `String`, slices, `Vec`).
pub(crate) const KIND_ARRAY: u32 = 2;
/// An array edge whose elements have nothing to follow: their bytes are the whole read.
pub(crate) const NO_CHILD: u32 = u32::MAX;
/// A root that is a value in argument register `reg` (and `reg + 1`: Rust's `&str`,
/// `&[T]`), or in rax at exit (`Option<&T>`), read in place by its program.
pub(crate) const KIND_INLINE: u32 = 3;
/// A root that is a float in xmm register `reg`: the hook copies the 16 bytes the interceptor
/// saved, labelled `capture_view::XMM_ADDR + 16 * reg`.
pub(crate) const KIND_XMM: u32 = 4;
/// Roots among the stack arguments at enter (a seventh parameter, a C struct passed in
/// memory), `reg` bytes past the first: the value's `size` bytes, labelled
/// `capture_view::STACK_ADDR + reg` (a struct's pointers followed from there, `program`), or
/// a pointer there to a struct (`program`) or to a C string.
pub(crate) const KIND_STACK: u32 = 5;
pub(crate) const KIND_STACK_POINTER: u32 = 6;
pub(crate) const KIND_STACK_STRING: u32 = 7;
/// Edges to a libstdc++ node container's nodes (serialize.ts readNodes; capture_walk.c
/// `cap_nodes`): the first node's pointer at `off`, the element count at `len_off`, at most
/// `max` nodes, each walked with program `child` (its links, then its element). `elem` packs
/// the links' offsets in a node: a list's next link; a tree's parent, left and right links,
/// a byte each (`node_links`).
pub(crate) const KIND_LIST: u32 = 8;
pub(crate) const KIND_TREE: u32 = 9;
/// An edge to a Rust hash table's elements (serialize.ts rustTable; capture_walk.c
/// `cap_table`): its control bytes at the pointer at `off`, the bucket mask at `aux`, the item
/// count at `len_off`, at most `max` elements of `elem` bytes below them, each walked with
/// program `child`.
pub(crate) const KIND_HASH: u32 = 10;
/// An edge to a Rust B-tree's nodes (serialize.ts btreeWalk; capture_walk.c `cap_btree`): the
/// root node's pointer at `off`, the tree's height at `aux`, the entry count at `len_off`, at
/// most `max` entries in key order; every node is copied by program `child`, whose next two
/// programs are a key slot's and a value slot's (`Compiler::btree_programs`); `elem` packs the
/// `len` and child-pointer offsets in a node.
pub(crate) const KIND_BTREE: u32 = 11;
/// The System V integer argument registers.
const MAX_REG_ARGS: usize = 6;
/// The System V float argument registers.
const MAX_XMM_ARGS: u64 = 8;

/// A pointer field a program follows: `count` pointers `stride` bytes apart from `off`.
/// Offsets (`off`, `len_off`, the guard's) are from the same base and move together when an
/// edge is repeated over an array or placed inside an enclosing struct.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Edge {
    pub off: u64,
    pub count: u64,
    pub stride: u64,
    pub kind: u32,
    /// The pointee's program (structs; for arrays, one element's, or `NO_CHILD`).
    pub child: u32,
    /// Arrays: where the element count is, the element size, and most elements read.
    #[serde(default)]
    pub len_off: u64,
    #[serde(default)]
    pub elem: u64,
    #[serde(default)]
    pub max: u64,
    /// Hash tables: where the bucket mask is (an offset from the same base as `off`).
    #[serde(default)]
    pub aux: u64,
    /// Followed only when a Rust enum's discriminant selects the variant holding the edge.
    #[serde(default)]
    pub guard: Option<Guard>,
}

/// serialize.ts readRustEnum's choice, for one variant: whether the `size`-byte
/// discriminant at `off` is one of a set of values — `lo + i` for each bit `i` of `mask` —
/// is `inside`: a variant's own value (one bit), or for the default variant of a
/// niche-encoded enum none of the others' (`Option<&T>`, `Result<T, String>`,
/// `enum {A(String), B, C}`: rustc lays their values out within a few of each other).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Guard {
    pub off: u64,
    pub size: u64,
    pub lo: u64,
    pub mask: u64,
    pub inside: bool,
}

impl Edge {
    fn pointer(off: u64, kind: u32, child: u32) -> Edge {
        Edge { off, count: 1, stride: 0, kind, child, len_off: 0, elem: 0, max: 0, aux: 0, guard: None }
    }

    /// The same edge `d` bytes further on.
    fn shifted(self, d: u64) -> Edge {
        Edge { off: self.off + d, len_off: self.len_off + d, aux: self.aux + d, guard: self.guard.map(|g| Guard { off: g.off + d, ..g }), ..self }
    }

    /// `[off, count, stride, kind, child, len_off, elem, max, guard off, guard size | inside
    /// << 8, guard lo low, high, guard mask low, high, aux]` (capture.ts CapEdge).
    fn to_agent(self) -> Value {
        let (goff, gspec, lo, mask) = self.guard.map_or((0, 0, 0, 0), |g| (g.off, g.size | (g.inside as u64) << 8, g.lo, g.mask));
        json!([self.off, self.count, self.stride, self.kind, self.child, self.len_off, self.elem, self.max, goff, gspec, lo & 0xffff_ffff, lo >> 32, mask & 0xffff_ffff, mask >> 32, self.aux])
    }
}

/// What the walk does with a struct of one type reached with `depth` left.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Program {
    /// The struct type's index in the plan: the walk's de-duplication key with the address.
    pub type_key: u32,
    pub depth: u32,
    /// Bytes to copy: up to the last one a print at this depth reads (a B-tree slot's
    /// program: the slot's stride).
    pub size: u64,
    pub edges: Vec<Edge>,
    /// A B-tree slot's program: its array's offset in a node (capture_walk.c `cap_btree`
    /// runs it at `base + i * size` for each filled slot i).
    #[serde(default)]
    pub base: u64,
}

/// A walk's start: the pointer in register `reg` (arguments rdi, rsi, ...; at exit rax).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Root {
    pub reg: u8,
    pub kind: u32,
    pub program: u32,
    /// A stack root's bytes (`reg`: its offset among the stack arguments).
    #[serde(default)]
    pub size: u32,
}

/// A function's capture plan, with the types its decoder needs.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct CapturePlan {
    pub depth: u32,
    /// Declared parameters: display name (`arg{i}` when unnamed) and type.
    pub params: Vec<(String, TypeId)>,
    /// Each parameter's (first) argument register; empty in plans stored before Rust's
    /// two-register parameters, whose parameter i is in register i.
    #[serde(default)]
    pub regs: Vec<u8>,
    /// The result's type; `None` for `void`.
    pub ret: Option<TypeId>,
    pub programs: Vec<Program>,
    pub enter: Vec<Root>,
    pub exit: Vec<Root>,
    /// Every type a decode may look at, resolved once (no DebugInfo lock per read).
    pub types: HashMap<TypeId, Arc<Type>>,
    /// `std::optional` types among them: engaged flag offset, value offset, value type
    /// (printed as the value or `null`, cxx_std.rs).
    #[serde(default)]
    pub optionals: HashMap<TypeId, (u64, u64, TypeId)>,
    /// Parameters passed by address (Rust aggregates past 16 bytes), by index: their
    /// register holds the value's address.
    #[serde(default)]
    pub by_address: Vec<usize>,
    /// The result came back through a hidden pointer, which rax holds at exit.
    #[serde(default)]
    pub ret_by_address: bool,
    /// Rust scalar pairs whose halves are not two 8-byte words (`Option<u32>`).
    #[serde(default)]
    pub split_pairs: Vec<SplitPair>,
    /// Floats in xmm registers: (the parameter, or `None` for the result; the register).
    #[serde(default)]
    pub floats: Vec<(Option<usize>, u8)>,
    /// Parameters among the stack arguments: (the parameter, its offset from the first).
    #[serde(default)]
    pub on_stack: Vec<(usize, u32)>,
    /// Values the serializer's recipe places nowhere (a zero-sized one, a Rust value on the
    /// stack, x87's `long double`): (the parameter, or `None` for the result; the reason it
    /// prints, `<why>`, as the serializer does).
    #[serde(default)]
    pub unavailable: Vec<(Option<usize>, String)>,
    /// Node containers among them (`std::map`, `std::unordered_set`, Rust's `HashMap`,
    /// `BTreeMap`, ...), printed as their entries (capture_decode.rs `nodes`).
    #[serde(default)]
    pub nodes: HashMap<TypeId, NodeLayout>,
    /// C structs of up to 16 bytes with a float in an eightbyte (`struct { double x, y; }`),
    /// passed or returned in xmm registers, or xmm and integer ones.
    #[serde(default)]
    pub sse_structs: Vec<SseStruct>,
}

/// A small C struct whose eightbytes travel in xmm registers (the low 8 bytes of each) or
/// integer ones, in order (the serializer's `eb` recipe): the hook copies the xmm registers,
/// the record holds the integer ones, and the decoder puts the eightbytes together. Only
/// structs without a pointer to follow.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct SseStruct {
    /// The parameter, or `None` for the result.
    pub param: Option<usize>,
    /// Each eightbyte's register: (xmm, else integer; its number).
    pub eightbytes: Vec<(bool, u8)>,
}

/// A Rust scalar pair passed or returned with each half in its own register (the
/// serializer's `pair` recipe): the decoder puts the halves together at their offsets in
/// the two registers where the value is read. Only pairs without a pointer to follow: the
/// walk, which reads registers as they are, has nothing to do for them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct SplitPair {
    /// The parameter, or `None` for the result.
    pub param: Option<usize>,
    /// (register, offset in the value, size) of each half; the second register follows the first.
    pub halves: [(u8, u8, u8); 2],
}

impl CapturePlan {
    /// The hook spec's `capture` field: `{progs: [[typeKey, depth, size, [edge, …]], …],
    /// roots: [[reg, kind, prog], …], enter: n, depth}` (the enter roots, then the exit
    /// roots; an edge as `Edge::to_agent`).
    pub fn to_agent(&self) -> Value {
        let progs: Vec<Value> = self
            .programs
            .iter()
            .map(|p| json!([p.type_key, p.depth, p.size, p.edges.iter().map(|e| e.to_agent()).collect::<Vec<_>>(), p.base]))
            .collect();
        let roots: Vec<Value> = self.enter.iter().chain(&self.exit).map(|r| json!([r.reg, r.kind, r.program, r.size])).collect();
        json!({ "progs": progs, "roots": roots, "enter": self.enter.len(), "depth": self.depth })
    }

    pub fn ty(&self, id: TypeId) -> Option<&Arc<Type>> {
        self.types.get(&id)
    }

    /// How many argument registers a decode of an enter reads: through the last one a
    /// parameter (or a split pair's second half) is in.
    pub fn arg_words(&self) -> usize {
        let mut n = 0;
        for (i, (_, ty)) in self.params.iter().enumerate() {
            if self.floats.iter().any(|f| f.0 == Some(i)) || self.on_stack.iter().any(|s| s.0 == i) || self.unavailable.iter().any(|u| u.0 == Some(i)) {
                continue;
            }
            if let Some(s) = self.sse_structs.iter().find(|s| s.param == Some(i)) {
                n = s.eightbytes.iter().filter(|e| !e.0).fold(n, |n, e| n.max(e.1 as usize + 1));
                continue;
            }
            let size = self.types.get(ty).map_or(8, |t| t.size);
            let words = if self.by_address.contains(&i) { 1 } else { size.div_ceil(8).clamp(1, 2) as usize };
            n = n.max(self.reg_of(i) + words);
        }
        for p in self.split_pairs.iter().filter(|p| p.param.is_some()) {
            n = n.max(p.halves[1].0 as usize + 1);
        }
        n.min(MAX_REG_ARGS)
    }

    /// The argument register parameter `i` starts in.
    pub fn reg_of(&self, i: usize) -> usize {
        self.regs.get(i).map_or(i, |&r| r as usize)
    }
}

/// serialize.ts `followable` beyond structs: what a pointer to it prints at any depth.
fn is_rust_container(t: &Type) -> bool {
    matches!(t.kind, TypeKind::RustStr { .. } | TypeKind::RustSlice { .. } | TypeKind::RustVec { .. } | TypeKind::RustEnum { .. })
}

/// A value that travels in one integer register (symbols/abi.rs: what the wrapper forwards).
fn register_scalar(t: &Type) -> bool {
    matches!(t.kind, TypeKind::Int { .. } | TypeKind::Bool | TypeKind::Char { .. } | TypeKind::Enum { .. } | TypeKind::Pointer { .. }) && (1..=8).contains(&t.size)
}

/// A `float` or `double` (a `long double` is x87's, and 16 bytes).
fn float_scalar(t: &Type) -> bool {
    matches!(t.kind, TypeKind::Float) && (t.size == 4 || t.size == 8)
}

/// Where a recipe location (recipes.rs `locate`) puts a value, among the places the native
/// hook records: integer registers at enter, rax at exit.
enum Place {
    /// One register.
    Reg(u8),
    /// Two consecutive registers holding the value's two eightbytes (`r2`, or a Rust pair
    /// of two 8-byte halves).
    Regs(u8),
    /// The register holds the value's address (`ind`).
    Address(u8),
    /// A Rust scalar pair with a half smaller than 8 bytes: (register, offset, size) each.
    Split([(u8, u8, u8); 2]),
    /// A float or double in an xmm register.
    Xmm(u8),
    /// Among the stack arguments, this many bytes past the first.
    Stack(u8),
    /// A C struct's eightbytes, each in an xmm register (true) or an integer one.
    Eightbytes(Vec<(bool, u8)>),
}

fn place(at: &Value) -> Option<Place> {
    let reg = |v: &Value| v.as_u64().filter(|r| *r < MAX_REG_ARGS as u64).map(|r| r as u8);
    if let Some(r) = at.get("r") {
        return reg(r).map(Place::Reg);
    }
    if let Some(r) = at.get("ind") {
        return reg(r).map(Place::Address);
    }
    if let Some(off) = at.get("stack") {
        return off.as_u64().and_then(|o| u8::try_from(o).ok()).map(Place::Stack);
    }
    if let Some(x) = at.get("x") {
        return x.as_u64().filter(|x| *x < MAX_XMM_ARGS).map(|x| Place::Xmm(x as u8));
    }
    if let Some(eb) = at.get("eb").and_then(Value::as_array) {
        let one = |e: &Value| match e[0].as_u64()? {
            0 => reg(&e[1]).map(|r| (false, r)),
            _ => e[1].as_u64().filter(|x| *x < MAX_XMM_ARGS).map(|x| (true, x as u8)),
        };
        return (1..=2).contains(&eb.len()).then(|| eb.iter().map(one).collect::<Option<Vec<_>>>()).flatten().map(Place::Eightbytes);
    }
    let first_of_two = |a: Option<u8>, b: Option<u8>| a.filter(|a| b == Some(a + 1)).map(Place::Regs);
    if let Some(rs) = at.get("r2") {
        return first_of_two(reg(&rs[0]), reg(&rs[1]));
    }
    // A Rust scalar pair lies as in memory only when its halves are 8 bytes at 0 and 8.
    let pair = at.get("pair")?;
    let half = |h: &Value, off: u64| (h[1].as_u64() == Some(off) && h[2].as_u64() == Some(8)).then(|| reg(&h[0])).flatten();
    if let Some(p) = first_of_two(half(&pair[0], 0), half(&pair[1], 8)) {
        return Some(p);
    }
    let split = |h: &Value| Some((reg(&h[0])?, u8::try_from(h[1].as_u64()?).ok().filter(|o| *o < 16)?, u8::try_from(h[2].as_u64()?).ok().filter(|s| (1..=8).contains(s))?));
    let halves = [split(&pair[0])?, split(&pair[1])?];
    (halves[1].0 == halves[0].0 + 1).then_some(Place::Split(halves))
}

/// The plan of `sig` at `depth`, or `None` when the function is not one the native capture
/// serves: not C, C++ or Rust on x86-64, a value the hook does not record (a struct of
/// floats holding a pointer, a Rust pair of smaller halves holding a pointer), a Rust enum
/// whose default variant stands beside several others, or a plan beyond the edge / program
/// budget. Values are placed as the serializer's recipe places them: in one or two integer
/// registers (scalars, small structs, `&str`), at the address a register holds (Rust
/// aggregates past 16 bytes, results through a hidden pointer), in xmm registers (floats,
/// small structs of them), or among the stack arguments. A variadic function's declared
/// parameters are placed as any function's (what follows them is not printed, by either
/// path). A value the recipe places nowhere (zero-sized, a Rust value on the stack, `long
/// double`, a parameter past `recipes::MAX_PARAMS`) prints the recipe's reason, as the
/// serializer prints it; a closure's environment pointer, which the recipe counts, is not
/// printed by either.
pub(crate) fn compile(info: &DebugInfo, sig: &Signature, depth: u32) -> Option<CapturePlan> {
    if !info.x86_64 || !(sig.c_language || sig.cxx_language || sig.rust) {
        return None;
    }
    let mut c = Compiler { info, types: HashMap::new(), programs: Vec::new(), memo: HashMap::new(), element_memo: HashMap::new(), optionals: HashMap::new(), nodes: HashMap::new(), node_memo: HashMap::new(), next_key: 0, type_keys: HashMap::new(), edges: 0, over: false };
    // Where each value lives, as the serializer's recipe says (recipes.rs `locate`: the
    // System V classes, Rust's scalar pairs, hidden result pointers).
    let (recipe, _) = super::recipes::serialize_recipe(info, sig);
    let mut params = Vec::new();
    let (mut regs, mut enter, mut by_address, mut split_pairs, mut floats, mut on_stack) = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut unavailable = Vec::new();
    let mut sse_structs = Vec::new();
    let depth_i = depth as i64;
    for (i, p) in sig.params.iter().enumerate() {
        let name = if p.name.is_empty() { format!("arg{i}") } else { p.name.clone() };
        if let Some(why) = recipe["args"][i]["at"]["none"].as_str() {
            unavailable.push((Some(i), why.to_string()));
            regs.push(0);
            params.push((name, p.ty.unwrap_or(0)));
            continue;
        }
        let ty = p.ty?;
        let t = c.ty(ty);
        let reg = match place(&recipe["args"][i]["at"])? {
            Place::Reg(r) if register_scalar(&t) => {
                enter.extend(c.root(r, ty, depth_i));
                r
            }
            // A 128-bit integer in two registers: read from them by the decoder, nothing to walk.
            Place::Regs(r) if matches!(t.kind, TypeKind::Int { .. }) && t.size == 16 => r,
            // An aggregate in one or two registers (a small C struct, Rust's `&str`, `&[T]`,
            // `Option<&T>`): the registers hold its bytes as laid out in memory.
            Place::Reg(r) | Place::Regs(r) if recipes::is_aggregate(&t.kind) => {
                enter.push(Root { reg: r, kind: KIND_INLINE, program: c.program(ty, depth_i.max(0))?, size: 0 });
                r
            }
            // Passed by address (Rust aggregates past 16 bytes): the register points at it.
            Place::Address(r) => {
                enter.push(Root { reg: r, kind: KIND_STRUCT, program: c.program(ty, depth_i.max(0))?, size: 0 });
                by_address.push(i);
                r
            }
            Place::Split(halves) if c.leaf_only(ty, depth_i)? => {
                split_pairs.push(SplitPair { param: Some(i), halves });
                halves[0].0
            }
            Place::Xmm(x) if float_scalar(&t) => {
                enter.push(Root { reg: x, kind: KIND_XMM, program: 0, size: 0 });
                floats.push((Some(i), x));
                x
            }
            Place::Stack(off) => {
                enter.push(c.stack_root(off, ty, depth_i)?);
                on_stack.push((i, off as u32));
                0
            }
            Place::Eightbytes(eb) if c.leaf_only(ty, depth_i)? => {
                enter.extend(xmm_roots(&eb));
                sse_structs.push(SseStruct { param: Some(i), eightbytes: eb });
                0
            }
            _ => return None,
        };
        regs.push(reg);
        params.push((name, ty));
    }
    let mut exit = Vec::new();
    let mut ret_by_address = false;
    let ret = match sig.ret {
        Some(t) if matches!(c.ty(t).kind, TypeKind::Void) => None,
        Some(t) => {
            let tt = c.ty(t);
            if let Some(why) = recipe["ret"]["at"]["none"].as_str() {
                // x87's `long double`, a zero-sized result: the reason, as the serializer prints.
                unavailable.push((None, why.to_string()));
            } else {
                match place(&recipe["ret"]["at"])? {
                    Place::Reg(0) if register_scalar(&tt) => exit.extend(c.root(0, t, depth_i)),
                    // A small aggregate returned in rax, or rax and rdx (`Option<&T>`, `&str`, a C
                    // struct of up to 16 bytes).
                    Place::Reg(0) | Place::Regs(0) if recipes::is_aggregate(&tt.kind) => exit.push(Root { reg: 0, kind: KIND_INLINE, program: c.program(t, depth_i.max(0))?, size: 0 }),
                    // A root reading nothing, so that the exit is not a bare one: its record
                    // carries rdx.
                    Place::Split(halves) if halves[0].0 == 0 && c.leaf_only(t, depth_i)? => {
                        exit.push(Root { reg: 0, kind: KIND_INLINE, program: c.program(t, depth_i.max(0))?, size: 0 });
                        split_pairs.push(SplitPair { param: None, halves });
                    }
                    // Returned through a hidden pointer (C's MEMORY class, Rust past 16 bytes),
                    // which rax holds at exit.
                    Place::Address(0) => {
                        exit.push(Root { reg: 0, kind: KIND_STRUCT, program: c.program(t, depth_i.max(0))?, size: 0 });
                        ret_by_address = true;
                    }
                    Place::Xmm(0) if float_scalar(&tt) => {
                        exit.push(Root { reg: 0, kind: KIND_XMM, program: 0, size: 0 });
                        floats.push((None, 0));
                    }
                    // In xmm0 and xmm1, or one of them and rax: at least one xmm root, so
                    // the exit record carries rdx too.
                    Place::Eightbytes(eb) if c.leaf_only(t, depth_i)? => {
                        exit.extend(xmm_roots(&eb));
                        sse_structs.push(SseStruct { param: None, eightbytes: eb });
                    }
                    _ => return None,
                }
            }
            Some(t)
        }
        None => None,
    };
    if c.over {
        return None;
    }
    Some(CapturePlan { depth, params, regs, ret, programs: c.programs, enter, exit, types: c.types, optionals: c.optionals, nodes: c.nodes, by_address, ret_by_address, split_pairs, floats, on_stack, unavailable, sse_structs })
}

/// A node edge's kind and its `elem`: the links' offsets in a node, a byte each (capture_walk.c
/// `cap_nodes`: a list's next link; a tree's parent, left and right links), or a hash table's
/// element size.
fn node_links(links: NodeLinks) -> (u32, u64) {
    match links {
        NodeLinks::List { next } => (KIND_LIST, next),
        NodeLinks::Tree { parent, left, right } => (KIND_TREE, parent | left << 8 | right << 16),
        NodeLinks::Hash { size, .. } => (KIND_HASH, size),
        NodeLinks::BTree { len, edges, .. } => (KIND_BTREE, len | edges << 16),
    }
}

/// The roots copying the xmm registers of a small struct's eightbytes (`Place::Eightbytes`).
fn xmm_roots(eightbytes: &[(bool, u8)]) -> impl Iterator<Item = Root> + '_ {
    eightbytes.iter().filter(|e| e.0).map(|e| Root { reg: e.1, kind: KIND_XMM, program: 0, size: 0 })
}

/// A program's body while it is compiled: bytes touched and pointer edges, offsets from 0.
#[derive(Default)]
struct Body {
    size: u64,
    edges: Vec<Edge>,
}

impl Body {
    /// The bytes [off, off + n) are read: the copy must reach them.
    fn touch(&mut self, off: u64, n: u64) {
        self.size = self.size.max(off + n);
    }
}

struct Compiler<'a> {
    info: &'a DebugInfo,
    types: HashMap<TypeId, Arc<Type>>,
    programs: Vec<Program>,
    /// (struct type, depth) -> program.
    memo: HashMap<(TypeId, i64), u32>,
    /// (element type, depth) -> the program of one element of a Rust buffer.
    element_memo: HashMap<(TypeId, i64), u32>,
    /// `std::optional` types met (CapturePlan::optionals).
    optionals: HashMap<TypeId, (u64, u64, TypeId)>,
    /// Node containers met (CapturePlan::nodes), and (container, depth) -> its nodes' program.
    nodes: HashMap<TypeId, NodeLayout>,
    node_memo: HashMap<(TypeId, i64), u32>,
    /// Visit-table keys: one per struct type, one per buffer element type (an array at an
    /// address is not the struct at its start).
    next_key: u32,
    type_keys: HashMap<TypeId, u32>,
    edges: usize,
    /// Beyond the edge or program budget: abandoned.
    over: bool,
}

impl Compiler<'_> {
    /// A type as the serializer reads it: `std::string` is its text, as Rust's `&str` is
    /// (cxx_std.rs: the agent's `rstr` descriptor), so the walk and the decoder treat both
    /// alike.
    fn ty(&mut self, id: TypeId) -> Arc<Type> {
        if let Some(t) = self.types.get(&id) {
            return t.clone();
        }
        let t = self.info.ty(id);
        let t = match (self.info.std_string_layout(id), self.info.std_vector_layout(id)) {
            (Some((ptr, len)), _) => Arc::new(Type { name: t.name.clone(), size: t.size, kind: TypeKind::RustStr { ptr, len } }),
            // Its length is where the past-the-end pointer is (LEN_IS_END), in elements.
            (_, Some((ptr, end, element))) => Arc::new(Type { name: t.name.clone(), size: t.size, kind: TypeKind::RustVec { ptr, len: end | LEN_IS_END, element, utf8: false } }),
            // A unique_ptr / shared_ptr reads as the pointer in its first word.
            _ => match self.info.std_smart_pointer_target(id) {
                Some(to) => Arc::new(Type { name: t.name.clone(), size: 8, kind: TypeKind::Pointer { target: Some(to) } }),
                None => t,
            },
        };
        if let Some(o) = self.info.std_optional_layout(id) {
            self.optionals.insert(id, o);
        }
        if let Some(l) = self.info.std_node_layout(id) {
            self.nodes.insert(id, l);
        }
        self.types.insert(id, t.clone());
        t
    }

    /// serialize.ts on a `std::optional` at `off` (engaged flag at `g`, value of type `of` at
    /// `p`): the flag, then the value's reads, its edges followed only while engaged.
    fn optional(&mut self, b: &mut Body, off: u64, (g, p, of): (u64, u64, TypeId), depth: i64) {
        b.touch(off + g, 1);
        let mut vb = Body::default();
        self.value(&mut vb, p, of, depth);
        if vb.size > 0 {
            b.touch(off, vb.size);
        }
        let engaged = Guard { off: g, size: 1, lo: 0, mask: 1, inside: false };
        for e in vb.edges {
            if e.guard.is_some() {
                self.over = true; // one guard per edge
                return;
            }
            b.edges.push(Edge { guard: Some(engaged), ..e }.shifted(off));
        }
    }

    /// serialize.ts readNodes on the container at `off`: its count and first node pointer,
    /// then up to MAX_ELEMENTS nodes, each read by one program (its links, its element's key
    /// and value at the container's depth: containers spend none).
    fn node_container(&mut self, b: &mut Body, off: u64, id: TypeId, l: NodeLayout, depth: i64) {
        // The walk reads each link from a node's copy: a byte's offset, within the links.
        let fits = match l.links {
            NodeLinks::List { next } => next + 8 <= l.before,
            NodeLinks::Tree { parent, left, right } => [parent, left, right].iter().all(|&o| o + 8 <= l.before),
            NodeLinks::Hash { size, .. } => (1..=MAX_STRUCT).contains(&size),
            NodeLinks::BTree { len, slots, edges, .. } => len + 2 <= edges && edges < 0x10000 && (1..64).contains(&slots),
        };
        if !fits || l.before > 255 {
            self.over = true;
            return;
        }
        b.touch(off + l.count, 8);
        b.touch(off + l.first, 8);
        let depth = depth.max(0);
        let child = match self.node_memo.get(&(id, depth)) {
            Some(&p) => p,
            None => {
                if self.programs.len() >= MAX_PROGRAMS {
                    self.over = true;
                    return;
                }
                let index = self.programs.len() as u32;
                self.node_memo.insert((id, depth), index);
                match l.links {
                    NodeLinks::BTree { key_slot, value_slot, edges, .. } => self.btree_programs(index, &l, (key_slot, value_slot, edges), depth),
                    _ => self.node_program(index, &l, depth),
                }
                index
            }
        };
        let (kind, links) = node_links(l.links);
        let aux = match l.links {
            NodeLinks::Hash { mask: at, .. } | NodeLinks::BTree { height: at, .. } => {
                b.touch(off + at, 8);
                off + at
            }
            _ => 0,
        };
        b.edges.push(Edge { len_off: off + l.count, elem: links, max: MAX_ELEMENTS, aux, ..Edge::pointer(off + l.first, kind, child) });
    }

    /// A list's, tree's or hash table's node program, at `index`: its links, then what the
    /// serializer reads of its element.
    fn node_program(&mut self, index: u32, l: &NodeLayout, depth: i64) {
        let type_key = self.new_key();
        self.programs.push(Program { type_key, depth: depth as u32, ..Default::default() });
        let mut node = Body::default();
        node.touch(0, l.before);
        let ((kf, kt), value) = l.reads();
        self.value(&mut node, l.before + kf, kt, depth);
        if let Some((vf, vt)) = value {
            self.value(&mut node, l.before + vf, vt, depth);
        }
        self.finish(index, node);
    }

    /// A B-tree's three programs from `index` on (capture_walk.c `cap_btree`): a node's (the
    /// whole leaf, nothing to follow), then a key slot's and a value slot's (a set's: none),
    /// each run at `base + i * size` in a node for its filled slots i only — an enum's guard
    /// inside a key or a value stays the edge's one guard.
    fn btree_programs(&mut self, index: u32, l: &NodeLayout, (key_slot, value_slot, edges): (u64, u64, u64), depth: i64) {
        for _ in 0..3 {
            let type_key = self.new_key();
            self.programs.push(Program { type_key, depth: depth as u32, ..Default::default() });
        }
        let mut node = Body::default();
        node.touch(0, edges);
        self.finish(index, node);
        let (key, value) = l.reads();
        for (i, slot) in [(1, Some((key, key_slot))), (2, value.map(|v| (v, value_slot)))] {
            let mut one = Body::default();
            let ((base, ty), stride) = slot.unwrap_or(((0, l.of), 0));
            if slot.is_some() {
                self.value(&mut one, 0, ty, depth);
            }
            self.finish(index + i, one);
            let p = &mut self.programs[(index + i) as usize];
            p.size = stride;
            p.base = base;
        }
    }

    /// The walk a pointer value in register `reg` starts, if the serializer follows it.
    fn root(&mut self, reg: u8, id: TypeId, depth: i64) -> Option<Root> {
        let edge = self.pointer(0, id, depth)?;
        Some(Root { reg, kind: edge.kind, program: edge.child, size: 0 })
    }

    /// serialize.ts on a pointer at `off`: a C string at any depth, a struct while depth is left.
    fn pointer(&mut self, off: u64, id: TypeId, depth: i64) -> Option<Edge> {
        let TypeKind::Pointer { target: Some(to) } = self.ty(id).kind else { return None };
        let tt = self.ty(to);
        if crate::symbols::types::is_c_char(&tt) {
            return Some(Edge::pointer(off, KIND_CSTRING, 0));
        }
        if self.optionals.contains_key(&to) || self.nodes.contains_key(&to) {
            // serialize.ts `followable` (`opt`, `nodes`): its value at any depth.
            let child = self.program(to, depth.max(0))?;
            return Some(Edge::pointer(off, KIND_STRUCT, child));
        }
        if matches!(tt.kind, TypeKind::Struct { .. }) && depth > 0 {
            // Followed without spending depth; the struct spends it.
            let child = self.program(to, depth)?;
            return Some(Edge::pointer(off, KIND_STRUCT, child));
        }
        if is_rust_container(&tt) || crate::symbols::cxx_std::is_smart_pointer(&tt) {
            // serialize.ts `followable`: read at any depth (what they hold spends it); a
            // std::unique_ptr / shared_ptr too (its `sp` descriptor).
            let child = self.program(to, depth.max(0))?;
            return Some(Edge::pointer(off, KIND_STRUCT, child));
        }
        None
    }

    /// The program of struct `id` reached with `depth` (>= 1) left, compiled once.
    /// The root of a value at `off` among the stack arguments: a pointer the serializer
    /// follows (to a struct or a C string), else the value's bytes (a struct's pointers
    /// followed from them).
    fn stack_root(&mut self, off: u8, id: TypeId, depth: i64) -> Option<Root> {
        let t = self.ty(id);
        if register_scalar(&t) {
            return Some(match self.root(0, id, depth) {
                Some(r) if r.kind == KIND_CSTRING => Root { reg: off, kind: KIND_STACK_STRING, program: 0, size: 8 },
                Some(r) => Root { reg: off, kind: KIND_STACK_POINTER, program: r.program, size: 8 },
                None => Root { reg: off, kind: KIND_STACK, program: NO_CHILD, size: t.size as u32 },
            });
        }
        match t.kind {
            TypeKind::Float if matches!(t.size, 4 | 8 | 16) => Some(Root { reg: off, kind: KIND_STACK, program: NO_CHILD, size: t.size as u32 }),
            _ if recipes::is_aggregate(&t.kind) && (1..=4096).contains(&t.size) => Some(Root { reg: off, kind: KIND_STACK, program: self.program(id, depth.max(0))?, size: t.size as u32 }),
            _ => None,
        }
    }

    /// Does the value of `id` hold no pointer the serializer would follow? Its types are
    /// noted for the decoder on the way.
    fn leaf_only(&mut self, id: TypeId, depth: i64) -> Option<bool> {
        let p = self.program(id, depth.max(0))?;
        Some(self.programs[p as usize].edges.is_empty())
    }

    fn program(&mut self, id: TypeId, depth: i64) -> Option<u32> {
        if let Some(&p) = self.memo.get(&(id, depth)) {
            return Some(p);
        }
        if self.over || self.programs.len() >= MAX_PROGRAMS {
            self.over = true;
            return None;
        }
        let index = self.programs.len() as u32;
        let type_key = match self.type_keys.get(&id) {
            Some(&k) => k,
            None => {
                let k = self.new_key();
                self.type_keys.insert(id, k);
                k
            }
        };
        // In the memo before its body: a struct reaching itself at the same depth (only
        // through a `__0` wrapper) ends here instead of recursing.
        self.memo.insert((id, depth), index);
        self.programs.push(Program { type_key, depth: depth as u32, ..Default::default() });
        let mut body = Body::default();
        if matches!(self.ty(id).kind, TypeKind::Struct { .. }) && !self.optionals.contains_key(&id) && !self.nodes.contains_key(&id) {
            self.structure(&mut body, 0, id, depth);
        } else {
            self.value(&mut body, 0, id, depth); // a Rust container or std::optional behind a pointer
        }
        self.finish(index, body);
        Some(index)
    }

    fn new_key(&mut self) -> u32 {
        self.next_key += 1;
        self.next_key - 1
    }

    fn finish(&mut self, index: u32, body: Body) {
        self.edges += body.edges.len();
        if self.edges > MAX_EDGES || body.size > MAX_STRUCT {
            self.over = true;
        }
        let p = &mut self.programs[index as usize];
        p.size = body.size;
        p.edges = body.edges;
    }

    /// The program of one element of a Rust buffer of `element`s read with `depth` left
    /// (serialize.ts readArray: elements keep the buffer's depth), or `None` when an element
    /// reads nothing (a struct at depth 0 prints its name).
    fn element_program(&mut self, element: TypeId, depth: i64) -> Option<u32> {
        let depth = depth.max(0);
        if let Some(&p) = self.element_memo.get(&(element, depth)) {
            return (p != NO_CHILD).then_some(p);
        }
        if self.over || self.programs.len() >= MAX_PROGRAMS {
            self.over = true;
            return None;
        }
        let index = self.programs.len() as u32;
        let type_key = self.new_key();
        self.element_memo.insert((element, depth), index);
        self.programs.push(Program { type_key, depth: depth as u32, ..Default::default() });
        let mut one = Body::default();
        self.value(&mut one, 0, element, depth);
        if one.size == 0 && one.edges.is_empty() {
            self.element_memo.insert((element, depth), NO_CHILD);
            // Left in place (programs are indexed) but never reached.
            return None;
        }
        self.finish(index, one);
        Some(index)
    }

    /// A Rust buffer at `off`: its pointer and length words are read, then up to `max`
    /// elements of `element` (`None`: bytes of UTF-8 text, up to MAX_STRING).
    fn buffer(&mut self, b: &mut Body, off: u64, ptr: u64, len: u64, element: Option<TypeId>, depth: i64) {
        b.touch(off + ptr, 8);
        b.touch(off + (len & !LEN_IS_END), 8);
        let (child, elem, max) = match element {
            None => (NO_CHILD, 1, MAX_STRING as u64),
            Some(e) => {
                let es = self.elem_size(e);
                match self.element_program(e, depth) {
                    Some(p) => (p, es, MAX_ELEMENTS),
                    None => return,
                }
            }
        };
        if elem == 0 {
            return;
        }
        b.edges.push(Edge { kind: KIND_ARRAY, child, len_off: off + len, elem, max, ..Edge::pointer(off + ptr, KIND_ARRAY, child) });
    }

    /// serialize.ts readRustEnum: the discriminant, then what the chosen variant reads; the
    /// variants' edges are guarded by the discriminant, so the walk follows the chosen one's.
    fn rust_enum(&mut self, b: &mut Body, off: u64, discr: Option<crate::symbols::types::Discr>, variants: &[crate::symbols::types::Variant], depth: i64) {
        if let Some(d) = discr {
            if !matches!(d.size, 1 | 2 | 4 | 8) {
                self.over = true; // read as `<intN>`: no variant matches (rare; the serializer's)
                return;
            }
            b.touch(off + d.offset, d.size);
        }
        let mut explicit: Vec<u64> = variants.iter().filter_map(|v| v.value).collect();
        explicit.sort_unstable();
        explicit.dedup();
        // The values the default variant is not, as a set of at most 64 consecutive values.
        let others = match (explicit.first(), explicit.last()) {
            (Some(&lo), Some(&hi)) if hi - lo < 64 => Some((lo, explicit.iter().fold(0u64, |m, v| m | 1 << (v - lo)))),
            _ => None,
        };
        for (i, v) in variants.iter().enumerate() {
            let guard = match (discr, v.value) {
                (None, _) if i > 0 => continue, // no discriminant: the first variant
                (None, _) => None,
                (Some(d), Some(value)) => Some(Guard { off: d.offset, size: d.size, lo: value, mask: 1, inside: true }),
                (Some(_), None) if variants[..i].iter().any(|w| w.value.is_none()) => continue, // the first default is chosen
                (Some(_), None) if explicit.is_empty() => None,
                (Some(d), None) => match others {
                    Some((lo, mask)) => Some(Guard { off: d.offset, size: d.size, lo, mask, inside: false }),
                    None => {
                        self.over = true;
                        return;
                    }
                },
            };
            let vt = self.ty(v.ty);
            let TypeKind::Struct { members, .. } = &vt.kind else { continue };
            if members.is_empty() {
                continue;
            }
            let mut vb = Body::default();
            let tuple = members.iter().all(|m| m.name.strip_prefix("__").is_some_and(|n| !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit())));
            if tuple && members.len() == 1 {
                self.value(&mut vb, v.offset + members[0].offset, members[0].ty, depth);
            } else {
                self.value(&mut vb, v.offset, v.ty, depth);
            }
            if vb.size > 0 {
                b.touch(off, vb.size);
            }
            for e in vb.edges {
                if guard.is_some() && e.guard.is_some() {
                    self.over = true; // an enum inside a variant: one guard per edge
                    return;
                }
                let e = Edge { guard: e.guard.or(guard), ..e };
                b.edges.push(e.shifted(off));
            }
        }
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

    /// Mirrors serialize.ts `read(addr, id, depth)`: what it would read at `off`.
    fn value(&mut self, b: &mut Body, off: u64, id: TypeId, depth: i64) {
        if self.over {
            return;
        }
        let t = self.ty(id);
        if let Some(&o) = self.optionals.get(&id) {
            return self.optional(b, off, o, depth);
        }
        if let Some(&l) = self.nodes.get(&id) {
            return self.node_container(b, off, id, l, depth);
        }
        match &t.kind {
            TypeKind::Int { .. } | TypeKind::Char { .. } | TypeKind::Enum { .. } => b.touch(off, t.size.clamp(1, 8)),
            TypeKind::Bool => b.touch(off, 1),
            TypeKind::Float => b.touch(off, if t.size == 16 { 10 } else { t.size }),
            TypeKind::Pointer { .. } => {
                b.touch(off, 8);
                if let Some(e) = self.pointer(off, id, depth) {
                    b.edges.push(e);
                }
            }
            TypeKind::Struct { .. } => self.structure(b, off, id, depth),
            TypeKind::RustStr { ptr, len } => {
                // The whole object: a std::string's short text is in it, read from this copy.
                b.touch(off, t.size);
                self.buffer(b, off, *ptr, *len, None, depth);
            }
            TypeKind::RustVec { ptr, len, utf8: true, .. } => self.buffer(b, off, *ptr, *len, None, depth),
            TypeKind::RustVec { ptr, len, element, .. } | TypeKind::RustSlice { ptr, len, element } => self.buffer(b, off, *ptr, *len, Some(*element), depth),
            TypeKind::RustEnum { discr, variants } => self.rust_enum(b, off, *discr, variants, depth),
            TypeKind::Array { element, count } => {
                // A `char` array holding text prints up to MAX_STRING bytes (capture_decode.rs).
                let limit = if crate::symbols::types::is_c_char(&self.ty(*element)) { MAX_STRING as u64 } else { MAX_ELEMENTS };
                let n = count.unwrap_or(0).min(limit);
                if n == 0 {
                    return;
                }
                let es = self.elem_size(*element);
                // One element's reads, then repeated: an edge of one pointer becomes one
                // edge over the array; nested arrays' edges are repeated per element.
                let mut one = Body::default();
                self.value(&mut one, 0, *element, depth);
                if one.size > 0 {
                    b.touch(off + (n - 1) * es, one.size);
                }
                for e in one.edges {
                    if e.count == 1 {
                        b.edges.push(Edge { count: n, stride: es, ..e.shifted(off) });
                    } else {
                        b.edges.extend((0..n).map(|i| e.shifted(off + i * es)));
                    }
                    if b.edges.len() > MAX_EDGES {
                        self.over = true;
                        return;
                    }
                }
            }
            _ => {}
        }
    }

    /// serialize.ts `readStruct`.
    fn structure(&mut self, b: &mut Body, off: u64, id: TypeId, depth: i64) {
        if depth <= 0 {
            return;
        }
        // Printed specially by the serializer and not known here (cxx_std.rs: `std::string`
        // and `std::optional` never get here: `ty` and `value` read them as it does).
        if self.info.is_std_special(id) {
            self.over = true;
            return;
        }
        let t = self.ty(id);
        let TypeKind::Struct { members, .. } = &t.kind else { return };
        if t.size > 0 {
            b.touch(off, 1);
        }
        if members.len() == 1 && crate::symbols::types::is_transparent_wrapper(&t.name, &members[0].name) && members[0].bits.is_none() {
            self.value(b, off + members[0].offset, members[0].ty, depth);
            return;
        }
        for m in members.iter().take(MAX_KEYS) {
            match m.bits {
                Some((bo, bs)) => b.touch(off + m.offset, (bo + bs).div_ceil(8).clamp(1, 8)),
                None => self.value(b, off + m.offset, m.ty, depth - 1),
            }
        }
    }
}

/// Per session: the plans of hooked functions, by function id, and the spans their records
/// refer to (`capture_spans.rs`).
#[derive(Default)]
pub(crate) struct CaptureState {
    pub plans: rustc_hash::FxHashMap<u32, Arc<CapturePlan>>,
    pub spans: super::capture_spans::Spans,
    /// Plans records were stored with (capture_lazy.rs), by stored id: a re-trace replaces
    /// a function's plan, and records stored before still decode with theirs.
    stored: Vec<Arc<CapturePlan>>,
}

impl CaptureState {
    /// The stored id of `plan`, and its JSON when it is new (to be stored with the record).
    pub fn stored_id(&mut self, plan: &Arc<CapturePlan>) -> (u32, Option<String>) {
        if let Some(i) = self.stored.iter().position(|p| Arc::ptr_eq(p, plan)) {
            return (i as u32, None);
        }
        self.stored.push(plan.clone());
        let json = serde_json::to_string(&**plan).unwrap_or_default();
        ((self.stored.len() - 1) as u32, Some(json))
    }

    pub fn stored_plan(&self, id: u32) -> Option<Arc<CapturePlan>> {
        self.stored.get(id as usize).cloned()
    }
}

#[cfg(test)]
mod tests {
    /// Plan sizes on the SQLite benchmark driver, when it has been built (benches/sqlite_real.rs):
    /// every traced function keeps a native plan at the default depth (path expansion made
    /// the `BtCursor *` ones exceed the old 1,024-op budget).
    #[test]
    fn sqlite_plans_fit_the_budget() {
        let exe = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-real/sqlite_drv");
        if !exe.exists() {
            eprintln!("skipped: {} not built (cargo bench --bench sqlite_real builds it)", exe.display());
            return;
        }
        let index = crate::symbols::SymbolIndex::load(&exe).unwrap();
        let info = crate::symbols::DebugInfo::of(&index).unwrap();
        for name in ["sqlite3VdbeMemRelease", "sqlite3BtreeNext", "sqlite3BtreePayloadSize", "sqlite3VdbeIntValue"] {
            let f = index.functions.iter().find(|f| f.name == name).unwrap();
            let sig = info.signature(f.address).unwrap();
            for depth in [1, 2, 3] {
                let plan = super::compile(&info, &sig, depth);
                let sizes = plan.as_ref().map(|p| (p.programs.len(), p.programs.iter().map(|g| g.edges.len()).sum::<usize>(), p.programs.iter().map(|g| g.size).sum::<u64>()));
                eprintln!("{name} depth {depth}: (programs, edges, struct bytes) {sizes:?}");
                assert!(plan.is_some(), "{name} at depth {depth} has no native plan");
            }
        }
    }
}
