//! libstdc++ containers shown as gdb's pretty-printers show them, for the agent's typed
//! reads (`types.rs::agent_table`): `std::string` and `std::string_view` as their text (the
//! `rstr` descriptor: data pointer and length), `std::vector<T>` as its elements (`rvec` with
//! the past-the-end pointer's offset `fe`), `std::unique_ptr<T>` and `std::shared_ptr<T>` as
//! a `T *` (`ptr`), `std::optional<T>` as its value or `null` (`opt`: engaged flag and value
//! offsets), `std::map` / `std::set`, `std::unordered_*` and `std::list` as their entries (`nodes`: how to
//! walk their nodes, as debug_eval's printers do: eval/pretty/cpp_tree.rs, cpp_hash.rs).
//! Other layouts keep their plain struct view.

use serde_json::{json, Value};

use super::types::{Type, TypeKind, TypeStore};
use super::TypeId;

/// The offset and type of member `name` somewhere inside `id` (bases and nested members
/// included, depth-first), as an offset from `id`'s start.
fn find_member(store: &TypeStore, id: TypeId, name: &str, depth: u32) -> Option<(u64, TypeId)> {
    if depth > 6 {
        return None;
    }
    let t = store.get(id);
    let TypeKind::Struct { members, .. } = &t.kind else { return None };
    members.iter().find(|m| m.name == name).map(|m| (m.offset, m.ty)).or_else(|| {
        members.iter().find_map(|m| find_member(store, m.ty, name, depth + 1).map(|(o, ty)| (m.offset + o, ty)))
    })
}

/// The offset and type of `id`'s own member `name` (not inside its bases or members).
fn own_member(store: &TypeStore, id: TypeId, name: &str) -> Option<(u64, TypeId)> {
    match &store.get(id).kind {
        TypeKind::Struct { members, .. } => members.iter().find(|m| m.name == name).map(|m| (m.offset, m.ty)),
        _ => None,
    }
}

/// `std::string`'s (or `std::string_view`'s) data pointer and length offsets, when `id` is one.
pub(crate) fn string_layout(store: &TypeStore, id: TypeId) -> Option<(u64, u64)> {
    let t = store.get(id);
    if !matches!(t.kind, TypeKind::Struct { .. }) {
        return None;
    }
    if is_string_name(&t.name) {
        return Some((find_member(store, id, "_M_p", 0)?.0, find_member(store, id, "_M_string_length", 0)?.0));
    }
    if is_string_view_name(&t.name) {
        return Some((find_member(store, id, "_M_str", 0)?.0, find_member(store, id, "_M_len", 0)?.0));
    }
    None
}

/// The name without `class `/`struct `, `std::` and `__cxx11::`.
fn bare_name(n: &str) -> &str {
    let bare = n.trim_start_matches("class ").trim_start_matches("struct ");
    bare.strip_prefix("std::").unwrap_or(bare).strip_prefix("__cxx11::").unwrap_or(bare)
}

fn is_string_name(n: &str) -> bool {
    let bare = bare_name(n);
    bare.starts_with("basic_string<char,") || bare == "string"
}

fn is_string_view_name(n: &str) -> bool {
    let bare = bare_name(n);
    bare.starts_with("basic_string_view<char,") || bare == "string_view"
}

/// A descriptor for a libstdc++ type the agent reads specially, and the types it refers to.
pub(crate) fn special_desc(store: &TypeStore, id: TypeId) -> Option<(Value, Vec<TypeId>)> {
    let t = store.get(id);
    if !matches!(t.kind, TypeKind::Struct { .. }) {
        return None;
    }
    let n = &t.name;
    let bare = bare_name(n);
    if let Some((p, l)) = string_layout(store, id) {
        return Some((json!({"k": "rstr", "n": n, "s": t.size, "p": p, "l": l}), vec![]));
    }
    if let Some(to) = smart_pointer_target(store, id) {
        return Some((json!({"k": "ptr", "n": n, "s": t.size, "to": to, "sp": true}), vec![to]));
    }
    if let Some((start, finish, of)) = vector_layout(store, id) {
        return Some((json!({"k": "rvec", "n": n, "s": t.size, "p": start, "fe": finish, "of": of}), vec![of]));
    }
    if bare.starts_with("optional<") {
        let (engaged, value, of) = optional_layout(store, id)?;
        return Some((json!({"k": "opt", "n": n, "s": t.size, "g": engaged, "p": value, "of": of}), vec![of]));
    }
    nodes_desc(store, id, n, t.size)
}

/// The node containers serialize.ts `readNodes` walks, as their entries: libstdc++'s trees
/// and hash tables, Rust's hash tables and B-trees. Every descriptor is `k: "nodes"` with
/// `w` the walk, `nc` the element count's offset, `m` whether entries are key/value pairs,
/// and the container's name `n` and size `s`.
fn nodes_desc(store: &TypeStore, id: TypeId, n: &str, size: u64) -> Option<(Value, Vec<TypeId>)> {
    let (mut desc, refs) = node_layout(store, id)
        .map(|l| l.desc())?;
    desc["n"] = json!(n);
    desc["s"] = json!(size);
    Some((desc, refs))
}

/// Type parameter `name` of the template type `ty` (`_Val`, `T`).
fn template_param(store: &TypeStore, ty: TypeId, name: &str) -> Option<TypeId> {
    store.templates.get(&ty)?.iter().find(|p| p.name == name)?.ty
}

/// How a node container reaches its elements: libstdc++'s red-black tree walked in order
/// (`std::map`, `multimap`, `set`, `multiset`), each node an `_Rb_tree_node_base` (colour,
/// then the parent, left and right links at these offsets); one list from the hash table's
/// `_M_before_begin` (the `std::unordered_` containers), each node's next link at `next`; or
/// Rust's hashbrown table (`HashMap`, `HashSet`): `bucket_mask + 1` control bytes (at the
/// pointer at `first`; top bit clear: slot full) with the `size`-byte elements just below
/// them, slot i at `ctrl - (i + 1) * size`, the mask at `mask`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum NodeLinks {
    Tree { parent: u64, left: u64, right: u64 },
    List { next: u64 },
    Hash { mask: u64, size: u64 },
    /// Rust's B-tree (`BTreeMap`, `BTreeSet`), walked in key order from the root node (its
    /// pointer at `first`, the tree's height at `height`): a node holds `len` (u16 at `len`)
    /// keys and values in arrays of `slots` slots (`key`, `value`: the arrays' offsets, slots
    /// `key_slot` / `value_slot` bytes apart); an internal node is that leaf followed by
    /// `len + 1` child pointers at `edges`.
    BTree { height: u64, len: u64, slots: u64, key_slot: u64, value_slot: u64, edges: u64 },
}

/// A node container as serialize.ts `readNodes` walks it (and the native capture's walks,
/// capture_walk.c `cap_nodes` / `cap_table` / `cap_btree`): the element count at `count`, the first node's
/// pointer at `first` (the tree's leftmost; a table's control bytes), `before` bytes of links
/// before each node's element `of` (none in a table), whose key and value (a C++ map's
/// `first` and `second`, a Rust tuple's `__0` and `__1`) are at `key` / `value`; a set's
/// element is its key (the element itself when that is not named).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct NodeLayout {
    pub links: NodeLinks,
    pub is_map: bool,
    pub count: u64,
    pub first: u64,
    pub before: u64,
    pub of: TypeId,
    pub key: Option<(u64, TypeId)>,
    pub value: Option<(u64, TypeId)>,
}

impl NodeLayout {
    /// Where a set's element, or a map's key, is in a node's element, and its type.
    pub fn key_or_element(&self) -> (u64, TypeId) {
        self.key.unwrap_or((0, self.of))
    }

    /// What serialize.ts `readNodes` reads of an entry: a map's key and value, a set's
    /// element (offsets in a node's element; in a B-tree node, of the slot arrays).
    pub fn reads(&self) -> ((u64, TypeId), Option<(u64, TypeId)>) {
        (self.key_or_element(), if self.is_map { self.value } else { None })
    }

    /// The agent's `nodes` descriptor (serialize.ts TypeDesc) and the types it refers to.
    fn desc(&self) -> (Value, Vec<TypeId>) {
        let mut desc = json!({"k": "nodes", "m": self.is_map, "nc": self.count, "nf": self.first, "nb": self.before, "of": self.of});
        match self.links {
            NodeLinks::BTree { height, len, key_slot, value_slot, edges, .. } => {
                let ((bk, kt), (bv, vt)) = (self.key_or_element(), self.value.unwrap_or((0, self.of)));
                desc["w"] = json!("btree");
                desc["bh"] = json!(height);
                desc["bp"] = json!(self.first);
                desc["bl"] = json!(len);
                desc["bk"] = json!(bk);
                desc["ks"] = json!(key_slot);
                desc["kt"] = json!(kt);
                desc["bv"] = json!(bv);
                desc["vs"] = json!(value_slot);
                desc["vt"] = json!(vt);
                desc["be"] = json!(edges);
                // The slots' own offsets and types: not a map's `kf` / `vf`.
                return (desc, vec![kt, vt]);
            }
            NodeLinks::Hash { mask, size } => {
                desc["w"] = json!("hash");
                desc["hm"] = json!(mask);
                desc["hc"] = json!(self.first);
                desc["es"] = json!(size);
            }
            NodeLinks::Tree { parent, left, right } => {
                desc["w"] = json!("tree");
                desc["np"] = json!(parent);
                desc["nl"] = json!(left);
                desc["nr"] = json!(right);
            }
            NodeLinks::List { next } => {
                desc["w"] = json!("list");
                desc["nx"] = json!(next);
            }
        }
        let mut refs = vec![self.of];
        for (field, (f, t)) in [(self.key, ("kf", "kt")), (self.value, ("vf", "vt"))] {
            if let Some((off, ty)) = field {
                desc[f] = json!(off);
                desc[t] = json!(ty);
                refs.push(ty);
            }
        }
        (desc, refs)
    }
}

/// libstdc++'s tree and hash containers, Rust's hash tables and B-trees, when `id` is one.
pub(crate) fn node_layout(store: &TypeStore, id: TypeId) -> Option<NodeLayout> {
    let t = store.get(id);
    if !matches!(t.kind, TypeKind::Struct { .. }) {
        return None;
    }
    let bare = bare_name(&t.name);
    cxx_tree_layout(store, id, bare)
        .or_else(|| cxx_hash_layout(store, id, bare))
        .or_else(|| cxx_list_layout(store, id, bare))
        .or_else(|| rust_hash_layout(store, id))
        .or_else(|| rust_btree_layout(store, id))
}

/// Where a node's element `of` holds a map's key and value (`first`, `second`), each only
/// when named.
fn entry_layout(store: &TypeStore, of: TypeId, is_map: bool) -> Option<(Option<(u64, TypeId)>, Option<(u64, TypeId)>)> {
    if !is_map {
        return Some((None, None));
    }
    Some((Some(own_member(store, of, "first")?), Some(own_member(store, of, "second")?)))
}

/// `std::map`, `multimap`, `set`, `multiset`: the red-black tree `_M_t`, in order from the
/// header's leftmost link.
fn cxx_tree_layout(store: &TypeStore, id: TypeId, bare: &str) -> Option<NodeLayout> {
    let is_map = bare.starts_with("map<") || bare.starts_with("multimap<");
    if !is_map && !bare.starts_with("set<") && !bare.starts_with("multiset<") {
        return None;
    }
    let (t_off, t_ty) = own_member(store, id, "_M_t")?;
    let of = template_param(store, t_ty, "_Val")?;
    let (h_off, h_ty) = find_member(store, t_ty, "_M_header", 0)?;
    let (c_off, _) = find_member(store, t_ty, "_M_node_count", 0)?;
    let link = |name: &str| own_member(store, h_ty, name).map(|(o, _)| o);
    let (parent, left, right) = (link("_M_parent")?, link("_M_left")?, link("_M_right")?);
    let (key, value) = entry_layout(store, of, is_map)?;
    let links = NodeLinks::Tree { parent, left, right };
    Some(NodeLayout { links, is_map, count: t_off + c_off, first: t_off + h_off + left, before: store.get(h_ty).size, of, key, value })
}

/// The `std::unordered_` containers: the hashtable's one list of nodes from `_M_before_begin`.
fn cxx_hash_layout(store: &TypeStore, id: TypeId, bare: &str) -> Option<NodeLayout> {
    let is_map = bare.starts_with("unordered_map<") || bare.starts_with("unordered_multimap<");
    if !is_map && !bare.starts_with("unordered_set<") && !bare.starts_with("unordered_multiset<") {
        return None;
    }
    let (h_off, h_ty) = own_member(store, id, "_M_h")?;
    let of = template_param(store, h_ty, "_Value")?;
    let (b_off, b_ty) = own_member(store, h_ty, "_M_before_begin")?;
    let (next, _) = own_member(store, b_ty, "_M_nxt")?;
    let (c_off, _) = own_member(store, h_ty, "_M_element_count")?;
    let (key, value) = entry_layout(store, of, is_map)?;
    let links = NodeLinks::List { next };
    Some(NodeLayout { links, is_map, count: h_off + c_off, first: h_off + b_off + next, before: store.get(b_ty).size, of, key, value })
}

/// `std::list`: its nodes from the header's next link, `_M_size` of them (the list is a ring
/// through the header, so the walk stops at the count); each node a `_List_node_base` (next,
/// prev), then the element.
fn cxx_list_layout(store: &TypeStore, id: TypeId, bare: &str) -> Option<NodeLayout> {
    if !bare.starts_with("list<") {
        return None;
    }
    let of = template_param(store, id, "_Tp")?;
    let (h_off, h_ty) = find_member(store, id, "_M_node", 0)?;
    let (c_off, _) = own_member(store, h_ty, "_M_size")?;
    let (next, _) = find_member(store, h_ty, "_M_next", 0)?;
    // A node's element follows its links: the header's base, `_List_node_base`.
    let TypeKind::Struct { members, .. } = &store.get(h_ty).kind else { return None };
    let links_size = store.get(members.iter().find(|m| m.name.starts_with("<base") && m.name.contains("_List_node_base"))?.ty).size;
    let links = NodeLinks::List { next };
    Some(NodeLayout { links, is_map: false, count: h_off + c_off, first: h_off + next, before: links_size, of, key: None, value: None })
}

/// Rust's `HashMap<K, V>` / `HashSet<K>`: hashbrown's `RawTableInner` (its control bytes at
/// `ctrl`, `bucket_mask`, `items`; eval/pretty/rust_std.rs), the element a tuple `(K, V)`, or
/// a set's `(K, ())`. Recognized by that layout under `base` (DWARF names carry no module path).
fn rust_hash_layout(store: &TypeStore, id: TypeId) -> Option<NodeLayout> {
    let name = &store.get(id).name;
    let is_map = name.starts_with("HashMap<");
    if !is_map && !name.starts_with("HashSet<") {
        return None;
    }
    let direct = |ty: TypeId, name: &str| own_member(store, ty, name);
    let (b_off, b_ty) = direct(id, "base")?;
    let (m_off, m_ty) = if is_map { (0, b_ty) } else { direct(b_ty, "map")? };
    let (r_off, r_ty) = direct(m_ty, "table")?;
    let of = template_param(store, r_ty, "T")?;
    let (i_off, i_ty) = direct(r_ty, "table")?;
    let at = |field: &str| direct(i_ty, field).map(|(o, _)| b_off + m_off + r_off + i_off + o);
    let size = store.get(of).size;
    (size > 0).then_some(())?;
    let key = Some(direct(of, "__0")?);
    let value = if is_map { Some(direct(of, "__1")?) } else { None };
    let links = NodeLinks::Hash { mask: at("bucket_mask")?, size };
    Some(NodeLayout { links, is_map, count: at("items")?, first: at("ctrl")?, before: 0, of, key, value })
}

/// Rust's `BTreeMap<K, V>` / `BTreeSet<K>` (eval/pretty/rust_btree.rs): `root` is an
/// `Option` of a node reference (its height, its node pointer: 0 when empty); a `LeafNode`
/// holds `len` keys and values in arrays (of `MaybeUninit`); an internal node is that leaf
/// followed by its child pointers, at the leaf's size rounded up to 8.
fn rust_btree_layout(store: &TypeStore, id: TypeId) -> Option<NodeLayout> {
    let name = &store.get(id).name;
    let is_map = name.starts_with("BTreeMap<");
    if !is_map && !name.starts_with("BTreeSet<") {
        return None;
    }
    let direct = |ty: TypeId, name: &str| own_member(store, ty, name);
    let (m_off, map) = if is_map { (0, id) } else { direct(id, "map")? };
    let (root_off, root_ty) = direct(map, "root")?;
    let (len_off, _) = direct(map, "length")?;
    let TypeKind::RustEnum { variants, .. } = &store.get(root_ty).kind else { return None };
    let some = variants.iter().find(|v| v.name == "Some")?;
    let (noderef_off, noderef) = direct(some.ty, "__0")?;
    let (h_off, _) = direct(noderef, "height")?;
    let (node_off, node_ty) = direct(noderef, "node")?;
    let (p_off, p_ty) = direct(node_ty, "pointer")?;
    let TypeKind::Pointer { target: Some(leaf) } = store.get(p_ty).kind else { return None };
    let (len, _) = direct(leaf, "len")?;
    let slot = |field: &str| -> Option<(u64, TypeId, u64, u64)> {
        let (off, array) = direct(leaf, field)?;
        let TypeKind::Array { element, count } = store.get(array).kind else { return None };
        Some((off, unwrap_maybe_uninit(store, element), store.get(element).size, count.unwrap_or(0)))
    };
    let ((bk, kt, ks, slots), (bv, vt, vs, _)) = (slot("keys")?, slot("vals")?);
    let at = m_off + root_off + some.offset + noderef_off;
    let links = NodeLinks::BTree { height: at + h_off, len, slots, key_slot: ks, value_slot: vs, edges: store.get(leaf).size.next_multiple_of(8) };
    // A set's value is a zero-sized marker, never read: its element is the key.
    Some(NodeLayout { links, is_map, count: m_off + len_off, first: at + node_off + p_off, before: 0, of: kt, key: Some((bk, kt)), value: Some((bv, vt)) })
}

/// The `T` inside std's `MaybeUninit<T>` / `ManuallyDrop<T>` / `MaybeDangling<T>` layers.
fn unwrap_maybe_uninit(store: &TypeStore, mut ty: TypeId) -> TypeId {
    for _ in 0..4 {
        let t = store.get(ty);
        if !["MaybeUninit<", "ManuallyDrop<", "MaybeDangling<"].iter().any(|p| t.name.starts_with(p)) {
            break;
        }
        let TypeKind::Struct { members, .. } = &t.kind else { break };
        match members.iter().find(|m| m.name == "value" || m.name == "__0") {
            Some(m) => ty = m.ty,
            None => break,
        }
    }
    ty
}

/// `std::optional<T>`'s engaged flag offset, value offset and `T`, when `id` is one.
pub(crate) fn optional_layout(store: &TypeStore, id: TypeId) -> Option<(u64, u64, TypeId)> {
    let t = store.get(id);
    if !matches!(t.kind, TypeKind::Struct { .. }) || !bare_name(&t.name).starts_with("optional<") {
        return None;
    }
    let (engaged, _) = find_member(store, id, "_M_engaged", 0)?;
    let (value, of) = find_member(store, id, "_M_value", 0)?;
    Some((engaged, value, of))
}

/// `std::vector<T>`'s first-element and past-the-end pointer offsets and `T`, when `id` is
/// one (not `std::vector<bool>`, a vector of bits).
pub(crate) fn vector_layout(store: &TypeStore, id: TypeId) -> Option<(u64, u64, TypeId)> {
    let t = store.get(id);
    let bare = bare_name(&t.name);
    if !matches!(t.kind, TypeKind::Struct { .. }) || !bare.starts_with("vector<") || bare.starts_with("vector<bool,") {
        return None;
    }
    let (start, ptr) = find_member(store, id, "_M_start", 0)?;
    let (finish, _) = find_member(store, id, "_M_finish", 0)?;
    let TypeKind::Pointer { target: Some(of) } = store.get(ptr).kind else { return None };
    (store.get(of).size > 0).then_some((start, finish, of))
}

/// What `std::unique_ptr<T>` (with the default deleter), `std::shared_ptr<T>` or Rust's
/// `Rc<T>` / `Arc<T>` (`is_rust_counted`) points to, when `id` is one: its pointer is its
/// first word, so it reads as a `T *` (gdb prints `{get() = 0x…}`; the pointee says more).
pub(crate) fn smart_pointer_target(store: &TypeStore, id: TypeId) -> Option<TypeId> {
    let t = store.get(id);
    let bare = bare_name(&t.name);
    if !matches!(t.kind, TypeKind::Struct { .. }) {
        return None;
    }
    let (off, ptr) = if (bare.starts_with("unique_ptr<") || is_rust_counted(bare)) && t.size == 8 {
        first_pointer(store, id, 0)?
    } else if bare.starts_with("shared_ptr<") {
        find_member(store, id, "_M_ptr", 0)?
    } else {
        return None;
    };
    match store.get(ptr).kind {
        TypeKind::Pointer { target: Some(to) } if off == 0 && (!is_rust_counted(bare) || is_rust_shared_block(&store.get(to).name)) => Some(to),
        _ => None,
    }
}

/// Whether `t` is a `std::unique_ptr`, `std::shared_ptr` or Rust `Rc` / `Arc` read as the pointer it holds
/// (`smart_pointer_target`, the plan's types): a pointer to one is followed, as to a struct
/// (serialize.ts `followable`, its `sp` descriptor).
pub(crate) fn is_smart_pointer(t: &Type) -> bool {
    let bare = bare_name(&t.name);
    matches!(t.kind, TypeKind::Pointer { .. }) && (bare.starts_with("unique_ptr<") || bare.starts_with("shared_ptr<") || is_rust_counted(bare))
}

/// Rust's `Rc<T>` and `Arc<T>`: one pointer to the shared block (`RcInner`/`ArcInner`:
/// the counts, then the value), read as a pointer to it so the value shows at the default
/// depth instead of behind `ptr.pointer` (gdb without Rust's printers shows only the address).
/// The name is DWARF's, without the module path (`Rc<T, alloc::alloc::Global>`); the pointee
/// being `RcInner` / `ArcInner` (`RcBox` before Rust 1.84) tells it from a type of the same name.
fn is_rust_counted(bare: &str) -> bool {
    let bare = bare.strip_prefix("alloc::rc::").or_else(|| bare.strip_prefix("alloc::sync::")).unwrap_or(bare);
    bare.starts_with("Rc<") || bare.starts_with("Arc<")
}

fn is_rust_shared_block(name: &str) -> bool {
    let bare = name.strip_prefix("alloc::rc::").or_else(|| name.strip_prefix("alloc::sync::")).unwrap_or(name);
    ["RcInner<", "RcBox<", "ArcInner<"].iter().any(|p| bare.starts_with(p))
}

/// The strong count and the value of a Rust `RcInner` / `ArcInner` struct (what an `Rc` /
/// `Arc` points to): a traced one prints as debug_eval prints the `Rc`, `{"@strong": 2, ..the
/// value}` (eval/pretty/rust_std.rs `counted`; serialize.ts `sharedBlock` does the same).
pub(crate) fn rust_shared_block_fields<'m>(name: &str, members: &'m [crate::symbols::Member]) -> Option<(&'m crate::symbols::Member, &'m crate::symbols::Member)> {
    if !is_rust_shared_block(name) {
        return None;
    }
    let field = |n: &str| members.iter().find(|m| m.name == n && m.bits.is_none());
    Some((field("strong")?, field("value").or_else(|| field("data"))?))
}

/// The first pointer member inside `id` (bases and nested members included, depth-first).
fn first_pointer(store: &TypeStore, id: TypeId, depth: u32) -> Option<(u64, TypeId)> {
    if depth > 6 {
        return None;
    }
    let TypeKind::Struct { members, .. } = &store.get(id).kind else { return None };
    members.iter().find_map(|m| match store.get(m.ty).kind {
        TypeKind::Pointer { .. } => Some((m.offset, m.ty)),
        TypeKind::Struct { .. } => first_pointer(store, m.ty, depth + 1).map(|(o, ty)| (m.offset + o, ty)),
        _ => None,
    })
}
