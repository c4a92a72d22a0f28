//! Rust `BTreeMap<K, V>` (→ entries) and `BTreeSet<T>` (→ array), in key order. The map's
//! `root` is an `Option<NodeRef>` (`height`, `node.pointer` → a `LeafNode`): a leaf holds
//! `len` keys and values in `keys` / `vals` (arrays of `MaybeUninit`); an internal node is
//! the same `LeafNode` followed by `len + 1` child pointers (`edges`).

use serde_json::Value;

use super::entries;
use crate::eval::render::{uint_at, unreadable, Renderer};
use crate::symbols::{TypeId, TypeKind};

/// Taller trees are corrupt (a B-tree of 2^64 entries is at most ~20 high).
const MAX_HEIGHT: u64 = 32;

struct Layout {
    len: u64,
    keys: u64,
    vals: u64,
    key: (TypeId, u64),
    val: (TypeId, u64),
    edges: u64,
}

pub(super) fn tree(r: &mut Renderer, id: TypeId, bytes: &[u8], is_map: bool, depth: u32) -> Option<Value> {
    let (m_off, map) = if is_map { (0, id) } else { r.field(id, "map")? };
    let (root_off, root_ty) = r.field(map, "root")?;
    let (len_off, _) = r.field(map, "length")?;
    let TypeKind::RustEnum { variants, .. } = &r.ty(root_ty).kind else { return None };
    let some = variants.iter().find(|v| v.name == "Some")?;
    let (noderef_off, noderef) = r.field(some.ty, "__0")?;
    let (h_off, _) = r.field(noderef, "height")?;
    let (p_off, p_ty) = r.field_path(noderef, &["node", "pointer"])?;
    let TypeKind::Pointer { target: Some(leaf) } = r.ty(p_ty).kind else { return None };
    let layout = layout(r, leaf)?;
    let count = uint_at(bytes, m_off + len_off, 8)?;
    let at = m_off + root_off + some.offset + noderef_off;
    let (height, node) = (uint_at(bytes, at + h_off, 8)?, uint_at(bytes, at + p_off, 8)?);
    if height > MAX_HEIGHT {
        return None;
    }
    let shown = count.min(r.opts.max_elements as u64) as usize;
    let mut out = Vec::new();
    if node != 0 && shown > 0 {
        if let Err(bad) = walk(r, &layout, node, height, shown, is_map, depth, &mut out) {
            return Some(unreadable(bad));
        }
    }
    Some(if is_map { entries::map(out, count) } else { entries::set(out.into_iter().map(|(k, _)| k).collect(), count) })
}

/// Where a `LeafNode`'s fields are, and the `K` / `V` inside its `MaybeUninit` slots.
fn layout(r: &Renderer, leaf: TypeId) -> Option<Layout> {
    let (len, _) = r.field(leaf, "len")?;
    let (keys, keys_ty) = r.field(leaf, "keys")?;
    let (vals, vals_ty) = r.field(leaf, "vals")?;
    let slot = |array: TypeId| -> Option<(TypeId, u64)> {
        let TypeKind::Array { element, .. } = r.ty(array).kind else { return None };
        Some((unwrap_std(r, element), r.ty(element).size))
    };
    let edges = r.ty(leaf).size.next_multiple_of(8);
    Some(Layout { len, keys, vals, key: slot(keys_ty)?, val: slot(vals_ty)?, edges })
}

/// The `T` inside std's `MaybeUninit<T>` / `ManuallyDrop<T>` / `MaybeDangling<T>` layers.
fn unwrap_std(r: &Renderer, mut ty: TypeId) -> TypeId {
    for _ in 0..4 {
        let name = r.ty(ty).name.clone();
        if !["MaybeUninit<", "ManuallyDrop<", "MaybeDangling<"].iter().any(|p| name.starts_with(p)) {
            break;
        }
        match r.field(ty, "value").or_else(|| r.field(ty, "__0")) {
            Some((_, inner)) => ty = inner,
            None => break,
        }
    }
    ty
}

/// In-order: edge 0, entry 0, edge 1, … entry len-1, edge len (edges only above height 0).
#[allow(clippy::too_many_arguments)]
fn walk(r: &mut Renderer, l: &Layout, node: u64, height: u64, shown: usize, is_map: bool, depth: u32, out: &mut Vec<(Value, Value)>) -> Result<(), u64> {
    let len = r.mem.read_vec(node.wrapping_add(l.len), 2).map_err(|_| node)?;
    let len = u16::from_le_bytes([len[0], len[1]]) as u64;
    for i in 0..=len {
        if out.len() >= shown {
            return Ok(());
        }
        if height > 0 {
            let child = r.mem.read_u64(node.wrapping_add(l.edges + i * 8)).map_err(|_| node)?;
            walk(r, l, child, height - 1, shown, is_map, depth, out)?;
        }
        if i < len && out.len() < shown {
            let key = r.at(l.key.0, node.wrapping_add(l.keys + i * l.key.1), depth);
            let val = if is_map { r.at(l.val.0, node.wrapping_add(l.vals + i * l.val.1), depth) } else { Value::Null };
            out.push((key, val));
        }
    }
    Ok(())
}
