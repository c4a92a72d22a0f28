//! libstdc++ `std::map` / `std::multimap` (→ entries) and `std::set` / `std::multiset`
//! (→ array): an in-order walk of the red-black tree `_M_t`. Each node is an
//! `_Rb_tree_node_base` (colour, parent, left, right) followed by the `_Val` it holds.

use serde_json::Value;

use super::entries;
use crate::eval::render::{uint_at, unreadable, Renderer};
use crate::symbols::TypeId;

/// Steps up or down one successor search may take (a tree this tall is corrupt).
const MAX_HEIGHT: u32 = 128;

struct Links {
    parent: u64,
    left: u64,
    right: u64,
}

pub(super) fn tree(r: &mut Renderer, id: TypeId, bytes: &[u8], is_map: bool, depth: u32) -> Option<Value> {
    let (t_off, t_ty) = r.field(id, "_M_t")?;
    let val = r.info.template_params(t_ty).iter().find(|p| p.name == "_Val").and_then(|p| p.ty)?;
    let (h_off, h_ty) = r.field_path(t_ty, &["_M_impl", "_M_header"])?;
    let (c_off, _) = r.field_path(t_ty, &["_M_impl", "_M_node_count"])?;
    let links = Links { parent: r.field(h_ty, "_M_parent")?.0, left: r.field(h_ty, "_M_left")?.0, right: r.field(h_ty, "_M_right")?.0 };
    let node_base = r.ty(h_ty).size;
    let pair = if is_map { Some((r.field(val, "first")?, r.field(val, "second")?)) } else { None };
    let count = uint_at(bytes, t_off + c_off, 8)?;
    let mut node = uint_at(bytes, t_off + h_off + links.left, 8)?;
    let shown = count.min(r.opts.max_elements as u64);
    let (mut pairs, mut items) = (Vec::new(), Vec::new());
    for i in 0..shown {
        if node == 0 {
            return Some(unreadable(0));
        }
        let at = node.wrapping_add(node_base);
        match pair {
            Some(((k_off, k_ty), (v_off, v_ty))) => pairs.push((r.at(k_ty, at.wrapping_add(k_off), depth), r.at(v_ty, at.wrapping_add(v_off), depth))),
            None => items.push(r.at(val, at, depth)),
        }
        if i + 1 < shown {
            node = match successor(r, &links, node) {
                Ok(n) => n,
                Err(bad) => return Some(unreadable(bad)),
            };
        }
    }
    Some(if is_map { entries::map(pairs, count) } else { entries::set(items, count) })
}

/// The in-order successor of `node` (`_Rb_tree_increment`).
fn successor(r: &Renderer, links: &Links, mut node: u64) -> Result<u64, u64> {
    let read = |at: u64| r.mem.read_u64(at).map_err(|_| at);
    let link = |node: u64, off: u64| node.wrapping_add(off);
    let right = read(link(node, links.right))?;
    if right != 0 {
        node = right;
        for _ in 0..MAX_HEIGHT {
            let left = read(link(node, links.left))?;
            if left == 0 {
                return Ok(node);
            }
            node = left;
        }
        return Err(node);
    }
    let mut parent = read(link(node, links.parent))?;
    for _ in 0..MAX_HEIGHT {
        if node != read(link(parent, links.right))? {
            return Ok(parent);
        }
        node = parent;
        parent = read(link(node, links.parent))?;
    }
    Err(node)
}
