//! The DWARF type model: what a value in the target looks like, for typed argument
//! serialization, watches, `debug_memory` and (via `locals.rs`) locals of a paused frame.
//!
//! # Public API (stable; other modules build on it)
//! - [`DebugInfo`] (in `variables.rs`): the lazily parsed DWARF of one binary, from
//!   [`DebugInfo::of`]`(&SymbolIndex)` (cached per binary, rebuilt when the file changes).
//!   - `signature(fn_address) -> Option<Signature>`: parameters (name, [`TypeId`]) and
//!     return type of the function with that entry address, resolved on first use.
//!   - `global(name) -> Option<GlobalVar>` / `globals()`: global and static variables
//!     with static addresses (pre-slide, like `FunctionInfo::address`) and types.
//!   - `type_at(die_offset) -> Option<TypeId>`: the type whose DIE starts at that
//!     `.debug_info` offset (for callers that walk DIEs themselves, e.g. locals).
//!   - `ty(id) -> Arc<Type>`: the resolved type. Typedefs, `const` and `volatile` are
//!     looked through (an anonymous struct takes its typedef's name).
//!   - `agent_types(&[TypeId]) -> serde_json::Value`: the type table the agent's
//!     `serialize.ts` reads values with (every type reachable from the roots).
//!   - `template_params(id) -> Arc<[TemplateParam]>`: a struct's template parameters
//!     (`std::map`'s `_Key`, `_Tp`; a Rust `RawTable`'s `T`), empty for other types.
//!   - `is_reference(id)`: C++ `T &`/`T &&` and Rust `&T`/`&mut T` (pointer kinds).
//! - [`Type`] = name + size + [`TypeKind`]. Rust `&str`, `&[T]`, `Vec<T>`, `String` and
//!   enums (`Option<T>`) get their own kinds, their field offsets read from DWARF.
//!
//! Type ids are indexes into the binary's type table: stable for the life of one
//! `DebugInfo`, so the agent caches the table across hook updates.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{json, Map, Value};

/// Index of a type in a [`DebugInfo`]'s table.
pub type TypeId = u32;

/// A resolved type.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Type {
    /// Display name: `int`, `struct Node`, `Clock`, `&str`, `Vec<i32, alloc::alloc::Global>`.
    pub name: String,
    /// `DW_AT_byte_size` (pointer size for pointers; element size × count for arrays).
    pub size: u64,
    pub kind: TypeKind,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum TypeKind {
    Void,
    Int { signed: bool },
    Float,
    Bool,
    /// A character: `char` (1 byte, C) or Rust `char` (4 bytes, a Unicode scalar).
    Char { signed: bool },
    /// Pointers and references; `target: None` is `void *`.
    Pointer { target: Option<TypeId> },
    /// Structs, classes and unions; base classes appear as members named `<base Name>`.
    Struct { members: Vec<Member>, is_union: bool },
    /// `count: None` for flexible / unknown-length arrays.
    Array { element: TypeId, count: Option<u64> },
    Enum { signed: bool, enumerators: Vec<(String, i64)> },
    Function,
    /// Rust `&str`: UTF-8 bytes at `*ptr`, `len` bytes long (offsets into the value).
    RustStr { ptr: u64, len: u64 },
    /// Rust `&[T]`.
    RustSlice { ptr: u64, len: u64, element: TypeId },
    /// Rust `Vec<T>`, and `String` (`utf8: true`, element `u8`).
    RustVec { ptr: u64, len: u64, element: TypeId, utf8: bool },
    /// A Rust enum (`Option<T>`, `Result<T, E>`, user enums): the discriminant (absent for a
    /// single variant) selects a variant; a variant without `value` is the default one.
    RustEnum { discr: Option<Discr>, variants: Vec<Variant> },
    /// A type DWARF does not describe usefully (incomplete declaration, unknown tag).
    Unknown,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Member {
    pub name: String,
    pub offset: u64,
    pub ty: TypeId,
    /// `(bit offset within the storage unit, bit count)` for bitfields.
    pub bits: Option<(u64, u64)>,
}

#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Discr {
    pub offset: u64,
    pub size: u64,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Variant {
    /// `DW_AT_discr_value`; `None` for the default variant (niche-encoded enums).
    pub value: Option<u64>,
    /// `Some`, `None`, `Ok`, ...
    pub name: String,
    /// The variant's own struct type (fields `__0`, `__1` for tuple variants).
    pub ty: TypeId,
    pub offset: u64,
}

/// One parameter of a function (`DW_TAG_formal_parameter`).
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    /// Empty for unnamed parameters (e.g. Rust closure environments).
    pub name: String,
    pub ty: Option<TypeId>,
    /// C++ `this` and other compiler-made parameters.
    pub artificial: bool,
}

/// Parameters and return type of one function.
#[derive(Debug, Clone, PartialEq)]
pub struct Signature {
    pub params: Vec<Param>,
    /// `None` for `void` functions.
    pub ret: Option<TypeId>,
    /// The compile unit is Rust: Rust's calling convention, not System V's, passes aggregates.
    pub rust: bool,
    /// The compile unit is C (any standard): no exceptions unwind through its calls, so a
    /// native wrapper without unwind info may stand in for it (`symbols/abi.rs`), and the
    /// native capture prints its values as the serializer does (`capture_plan.rs`).
    pub c_language: bool,
    /// The compile unit is C++ (the native capture serves it too, short of the `std` types
    /// the serializer prints specially).
    pub cxx_language: bool,
    /// Built with GCC's interprocedural register allocation: callers may keep values in
    /// registers this function does not touch, so no native wrapper may stand in for it.
    pub ipa_ra: bool,
    /// Built by GCC for AVX (an `-mavx…` flag or an `-march` with AVX in its producer
    /// string): with `ipa_ra`, its callers may keep 256-bit values in vector registers.
    pub avx: bool,
    /// Declared with `...` (`DW_TAG_unspecified_parameters`).
    pub variadic: bool,
    /// A Rust closure whose environment pointer DWARF does not list: it comes first, in
    /// the first integer register, before the listed parameters.
    pub closure_env: bool,
}

/// A global or static variable.
#[derive(Debug, Clone, PartialEq)]
pub struct GlobalVar {
    /// Qualified (`types::HITS`, `ns::gCount`) or plain (`g_counter`) name.
    pub name: String,
    /// Static address, before the load slide.
    pub address: u64,
    pub ty: Option<TypeId>,
}

/// One template parameter of a C++ class or Rust generic struct
/// (`DW_TAG_template_type_param` / `DW_TAG_template_value_param`), in declaration order.
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateParam {
    /// `_Tp`, `_Key`, `T`, `K` (may be empty).
    pub name: String,
    /// The type argument, or the value parameter's type.
    pub ty: Option<TypeId>,
    /// A value parameter's constant (`N` of `std::array<T, N>`).
    pub value: Option<i64>,
}

/// Resolved types of one binary, addressed by id and by DIE offset.
pub(crate) struct TypeStore {
    pub(crate) types: Vec<Arc<Type>>,
    pub(crate) by_die: HashMap<u64, TypeId>,
    /// Template parameters of struct types that have any (pretty printers need the element
    /// types that the members alone do not name).
    pub(crate) templates: HashMap<TypeId, Arc<[TemplateParam]>>,
    /// C++ `T &` / `T &&` (kind `Pointer`, like `T *`, but always valid to follow).
    pub(crate) references: std::collections::HashSet<TypeId>,
    /// C++ classes passed and returned by invisible reference (the Itanium C++ ABI: a
    /// non-trivial copy or move constructor or destructor, or virtual functions), and their
    /// typedefs and cv-qualified versions.
    pub(crate) by_reference: std::collections::HashSet<TypeId>,
    /// The first id of this store: each binary's types get ids of their own, so the type
    /// tables of a program and its shared libraries can meet in one agent (engine/modules.rs).
    base: TypeId,
}

/// Ids per store: 2^20 types per binary, 2^12 stores before ids come round again.
const STORE_IDS: u32 = 1 << 20;

impl Default for TypeStore {
    fn default() -> Self {
        use std::sync::atomic::{AtomicU32, Ordering};
        // Ids up to 0x10000 stay free for ad-hoc types (engine/memory.rs raw-address hints).
        static NEXT: AtomicU32 = AtomicU32::new(1);
        let n = NEXT.fetch_add(1, Ordering::Relaxed) % (u32::MAX / STORE_IDS);
        TypeStore { types: Vec::new(), by_die: HashMap::new(), templates: HashMap::new(), references: Default::default(), by_reference: Default::default(), base: n.max(1) * STORE_IDS }
    }
}

impl TypeStore {
    /// Reserve an id for the DIE before resolving it, so cyclic types (a list node
    /// pointing at itself) terminate.
    pub(crate) fn reserve(&mut self, die: u64) -> TypeId {
        let id = self.base + self.types.len() as TypeId;
        self.types.push(Arc::new(Type { name: String::new(), size: 0, kind: TypeKind::Unknown }));
        self.by_die.insert(die, id);
        id
    }

    /// A type of no DIE of its own (an inner dimension of a multi-dimensional array).
    pub(crate) fn push(&mut self, ty: Type) -> TypeId {
        self.types.push(Arc::new(ty));
        self.base + self.types.len() as TypeId - 1
    }

    pub(crate) fn set(&mut self, id: TypeId, ty: Type) {
        if let Some(slot) = id.checked_sub(self.base).and_then(|i| self.types.get_mut(i as usize)) {
            *slot = Arc::new(ty);
        }
    }

    pub(crate) fn get(&self, id: TypeId) -> Arc<Type> {
        id.checked_sub(self.base).and_then(|i| self.types.get(i as usize)).cloned().unwrap_or_else(|| Arc::new(unknown()))
    }

    /// Offset of the first pointer inside `id` (depth-first through nested structs):
    /// where `Vec`'s buffer pointer lives, whatever the std version's wrapper layers.
    pub(crate) fn first_pointer(&self, id: TypeId, depth: u32) -> Option<u64> {
        let t = self.get(id);
        match &t.kind {
            TypeKind::Pointer { .. } => Some(0),
            TypeKind::Struct { members, is_union: false } if depth < 8 => members
                .iter()
                .find_map(|m| self.first_pointer(m.ty, depth + 1).map(|o| m.offset + o)),
            _ => None,
        }
    }
}

pub(crate) fn unknown() -> Type {
    Type { name: "?".into(), size: 0, kind: TypeKind::Unknown }
}

/// Most types the agent table will carry for one request: a guard against pathological
/// DWARF (the agent only needs what it can print within depth 10).
const MAX_AGENT_TYPES: usize = 4000;

/// The agent's type table (see `agent/src/serialize.ts`): `{ "<id>": descriptor }`.
///
/// Descriptors: `{k:"int"|"float"|"bool"|"char", n, s, sg}`, `{k:"ptr", n, to}`,
/// `{k:"struct", n, s, u, f:[[name, offset, type, bitOffset?, bitSize?]]}`,
/// `{k:"array", n, of, c}`, `{k:"enum", n, s, sg, e:{value:name}}`,
/// `{k:"rstr", n, s, p, l}`, `{k:"rslice", n, s, p, l, of}`, `{k:"rvec", n, s, p, l, of, utf8}`,
/// `{k:"renum", n, s, d:[offset,size]|null, v:[["value"|null, name, type, offset]]}`,
/// `{k:"opt", n, s, g, p, of}` (`std::optional`: engaged flag at g, value at p, cxx_std.rs),
/// `{k:"void"|"fn"|"unknown", n}`.
pub(crate) fn agent_table(store: &TypeStore, roots: &[TypeId]) -> Value {
    let mut out = Map::new();
    let mut todo: Vec<TypeId> = roots.to_vec();
    while let Some(id) = todo.pop() {
        if out.contains_key(&id.to_string()) || out.len() >= MAX_AGENT_TYPES {
            continue;
        }
        let t = store.get(id);
        let (desc, refs) = super::cxx_std::special_desc(store, id).unwrap_or_else(|| agent_desc(&t));
        out.insert(id.to_string(), desc);
        todo.extend(refs);
    }
    Value::Object(out)
}

fn agent_desc(t: &Type) -> (Value, Vec<TypeId>) {
    let n = &t.name;
    match &t.kind {
        TypeKind::Void => (json!({"k": "void", "n": n}), vec![]),
        TypeKind::Int { signed } => (json!({"k": "int", "n": n, "s": t.size, "sg": signed}), vec![]),
        TypeKind::Float => (json!({"k": "float", "n": n, "s": t.size}), vec![]),
        TypeKind::Bool => (json!({"k": "bool", "n": n, "s": t.size}), vec![]),
        TypeKind::Char { signed } => (json!({"k": "char", "n": n, "s": t.size, "sg": signed}), vec![]),
        TypeKind::Pointer { target } => (json!({"k": "ptr", "n": n, "to": target}), target.iter().copied().collect()),
        TypeKind::Struct { members, is_union } => {
            let f: Vec<Value> = members
                .iter()
                .map(|m| match m.bits {
                    Some((bo, bs)) => json!([m.name, m.offset, m.ty, bo, bs]),
                    None => json!([m.name, m.offset, m.ty]),
                })
                .collect();
            (json!({"k": "struct", "n": n, "s": t.size, "u": is_union, "f": f}), members.iter().map(|m| m.ty).collect())
        }
        TypeKind::Array { element, count } => (json!({"k": "array", "n": n, "of": element, "c": count}), vec![*element]),
        TypeKind::Enum { signed, enumerators } => {
            let e: Map<String, Value> = enumerators.iter().map(|(name, v)| (v.to_string(), json!(name))).collect();
            (json!({"k": "enum", "n": n, "s": t.size, "sg": signed, "e": e}), vec![])
        }
        TypeKind::Function => (json!({"k": "fn", "n": n}), vec![]),
        TypeKind::RustStr { ptr, len } => (json!({"k": "rstr", "n": n, "s": t.size, "p": ptr, "l": len}), vec![]),
        TypeKind::RustSlice { ptr, len, element } => {
            (json!({"k": "rslice", "n": n, "s": t.size, "p": ptr, "l": len, "of": element}), vec![*element])
        }
        TypeKind::RustVec { ptr, len, element, utf8 } => {
            (json!({"k": "rvec", "n": n, "s": t.size, "p": ptr, "l": len, "of": element, "utf8": utf8}), vec![*element])
        }
        TypeKind::RustEnum { discr, variants } => {
            // Discriminant values as decimal text: niche values such as 2^63 lose digits as
            // JavaScript numbers (the agent compares text).
            let v: Vec<Value> = variants.iter().map(|v| json!([v.value.map(|x| x.to_string()), v.name, v.ty, v.offset])).collect();
            let d = discr.map(|d| json!([d.offset, d.size]));
            (json!({"k": "renum", "n": n, "s": t.size, "d": d, "v": v}), variants.iter().map(|v| v.ty).collect())
        }
        TypeKind::Unknown => (json!({"k": "unknown", "n": n, "s": t.size}), vec![]),
    }
}

/// The name of an unnamed member (an anonymous struct or union): its members print as the
/// enclosing struct's, as C reads them (`a.x`).
pub const ANONYMOUS: &str = "<anonymous>";

/// Whether a struct named `name` whose one member is `member` prints as that member's value:
/// a Rust newtype (`NonZero<u32>(NonZeroU32Inner(5))`, field `__0`), a cell or
/// `ManuallyDrop` (`value`) or an atomic (`v`), as debug_eval prints them (eval/pretty) and
/// serialize.ts `readStruct` decides too.
pub fn is_transparent_wrapper(name: &str, member: &str) -> bool {
    match member {
        "__0" => true,
        "value" => is_rust_cell(name),
        "v" => name.starts_with("Atomic"),
        _ => false,
    }
}

/// Rust's cells and `ManuallyDrop` (one member, `value`), by DWARF's name.
pub fn is_rust_cell(name: &str) -> bool {
    ["Cell<", "UnsafeCell<", "SyncUnsafeCell<", "ManuallyDrop<"].iter().any(|p| name.starts_with(p))
}

/// Whether a type is read as a C string when pointed to: 1-byte characters.
pub fn is_c_char(t: &Type) -> bool {
    matches!(t.kind, TypeKind::Char { .. }) && t.size == 1
}

/// The bytes of a `char` array that print as its text, as gdb prints `char name[16]` as a
/// string: those before the first NUL, when they are UTF-8 without control characters (tab,
/// newline and carriage return aside). `None` for binary data, which prints element by
/// element: other bytes, or nothing before a NUL that non-zero bytes follow (a MAC address).
/// serialize.ts `charArrayText` decides the same way, byte for byte.
pub fn char_array_text_len(bytes: &[u8]) -> Option<usize> {
    let end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
    let text = std::str::from_utf8(&bytes[..end]).ok()?;
    if text.chars().any(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r')) {
        return None;
    }
    if end == 0 && bytes.iter().any(|b| *b != 0) {
        return None;
    }
    Some(end)
}

#[cfg(test)]
mod char_array_tests {
    use super::char_array_text_len;

    #[test]
    fn text_of_char_arrays_and_binary_bytes() {
        assert_eq!(char_array_text_len(b"hello\0\0\0"), Some(5));
        assert_eq!(char_array_text_len(b"abcd"), Some(4), "text to the last byte");
        assert_eq!(char_array_text_len(b"hi\0llo"), Some(2), "what the program reads as a C string");
        assert_eq!(char_array_text_len(b"\0\0\0"), Some(0), "all NUL: empty text");
        assert_eq!(char_array_text_len("Groß\0".as_bytes()), Some(5));
        assert_eq!(char_array_text_len(b"tab\there\n"), Some(9));
        assert_eq!(char_array_text_len(b"\0\x1a\x2b\x3c"), None, "a NUL first, then bytes: a MAC address");
        assert_eq!(char_array_text_len(b"a\x01b\0"), None, "a control character");
        assert_eq!(char_array_text_len(b"a\xc2\x85b"), None, "a C1 control character");
        assert_eq!(char_array_text_len(b"\xff\xfe"), None, "not UTF-8");
    }
}
