//! Pretty printers: containers recognized by type name, then verified member by member
//! against the layout they expect. Any mismatch (another standard library, another version)
//! returns `None` and the value prints as the plain struct it is — never a guess.
//!
//! - `cpp_string_vector.rs`: libstdc++ `std::string`, `std::string_view`, `std::vector` (and `<bool>`),
//!   `std::array`, `std::span`, `std::list`.
//! - `cpp_tree.rs`: `std::map`, `std::set`, `std::multimap`, `std::multiset` (red-black tree).
//! - `cpp_hash.rs`: `std::unordered_map` / `_set` (and multi-) (node list).
//! - `cpp_smart.rs`: `std::optional`, `std::unique_ptr`, `std::shared_ptr`, `std::atomic`.
//! - `rust_std.rs`: Rust `HashMap` / `HashSet` (hashbrown table), `Rc` / `Arc`, tuples,
//!   `NonZero`, cells and atomics.
//! - `rust_btree.rs`: Rust `BTreeMap` / `BTreeSet` (B-tree walk, in key order).
//! - `entries.rs`: how maps and sets of decoded entries become JSON.

mod cpp_hash;
mod cpp_smart;
mod cpp_string_vector;
mod cpp_tree;
mod entries;
mod rust_btree;
mod rust_std;

use serde_json::Value;

use super::render::Renderer;
use crate::symbols::{Type, TypeId};

/// The pretty form of struct `t` (`bytes` at `addr`), or `None` to print it plainly.
pub(crate) fn render(r: &mut Renderer, t: &Type, id: TypeId, bytes: &[u8], addr: Option<u64>, depth: u32) -> Option<Value> {
    let cpp = ["class ", "struct ", "union "].iter().find_map(|k| t.name.strip_prefix(k));
    match cpp {
        Some(name) => {
            let family = name.split('<').next().unwrap_or("");
            match family {
                "basic_string" => cpp_string_vector::string(r, id, bytes),
                "basic_string_view" => cpp_string_vector::string_view(r, id, bytes),
                "atomic" => cpp_smart::atomic(r, id, bytes, addr, depth),
                "vector" if name.starts_with("vector<bool,") => cpp_string_vector::bit_vector(r, id, bytes),
                "vector" => cpp_string_vector::vector(r, id, bytes, depth),
                "array" => cpp_string_vector::array(r, id, bytes, addr, depth),
                "span" => cpp_string_vector::span(r, id, bytes, depth),
                "list" => cpp_string_vector::list(r, id, bytes, depth),
                "map" | "multimap" => cpp_tree::tree(r, id, bytes, true, depth),
                "set" | "multiset" => cpp_tree::tree(r, id, bytes, false, depth),
                "unordered_map" | "unordered_multimap" => cpp_hash::table(r, id, bytes, true, depth),
                "unordered_set" | "unordered_multiset" => cpp_hash::table(r, id, bytes, false, depth),
                "optional" => cpp_smart::optional(r, id, bytes, addr, depth),
                "unique_ptr" => cpp_smart::unique_ptr(r, id, bytes, depth),
                "shared_ptr" => cpp_smart::shared_ptr(r, id, bytes, depth),
                _ => None,
            }
        }
        None if t.name.starts_with("HashMap<") => rust_std::hash_map(r, id, bytes, true, depth),
        None if t.name.starts_with("BTreeMap<") => rust_btree::tree(r, id, bytes, true, depth),
        None if t.name.starts_with("BTreeSet<") => rust_btree::tree(r, id, bytes, false, depth),
        None if t.name.starts_with("HashSet<") => rust_std::hash_map(r, id, bytes, false, depth),
        None if t.name.starts_with("Rc<") || t.name.starts_with("Arc<") => rust_std::counted(r, id, bytes, depth),
        None if t.name.starts_with("NonZero<") => rust_std::newtype(r, id, bytes, addr, depth),
        None if crate::symbols::types::is_rust_cell(&t.name) => rust_std::cell(r, id, bytes, addr, depth, "value"),
        None if t.name.starts_with("MaybeDangling<") => rust_std::cell(r, id, bytes, addr, depth, "__0"),
        None if t.name.starts_with("Atomic") => rust_std::cell(r, id, bytes, addr, depth, "v"),
        None if t.name.starts_with('(') => rust_std::tuple(r, t, bytes, addr, depth),
        None => None,
    }
}
