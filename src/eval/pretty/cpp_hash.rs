//! libstdc++ `std::unordered_map` / `std::unordered_set` (and multi-): the hashtable `_M_h`
//! keeps every node on one singly linked list from `_M_before_begin._M_nxt`; a node is the
//! `_M_nxt` link followed by the `_Value` it holds (then, maybe, a cached hash).

use serde_json::Value;

use super::entries;
use crate::eval::render::{uint_at, unreadable, Renderer};
use crate::symbols::TypeId;

pub(super) fn table(r: &mut Renderer, id: TypeId, bytes: &[u8], is_map: bool, depth: u32) -> Option<Value> {
    let (h_off, h_ty) = r.field(id, "_M_h")?;
    let val = r.info.template_params(h_ty).iter().find(|p| p.name == "_Value").and_then(|p| p.ty)?;
    let (b_off, b_ty) = r.field(h_ty, "_M_before_begin")?;
    let (n_off, _) = r.field(b_ty, "_M_nxt")?;
    let (c_off, _) = r.field(h_ty, "_M_element_count")?;
    let link_size = r.ty(b_ty).size;
    let pair = if is_map { Some((r.field(val, "first")?, r.field(val, "second")?)) } else { None };
    let count = uint_at(bytes, h_off + c_off, 8)?;
    let mut node = uint_at(bytes, h_off + b_off + n_off, 8)?;
    let shown = count.min(r.opts.max_elements as u64);
    let (mut pairs, mut items) = (Vec::new(), Vec::new());
    for _ in 0..shown {
        if node == 0 {
            break;
        }
        let at = node.wrapping_add(link_size);
        match pair {
            Some(((k_off, k_ty), (v_off, v_ty))) => pairs.push((r.at(k_ty, at.wrapping_add(k_off), depth), r.at(v_ty, at.wrapping_add(v_off), depth))),
            None => items.push(r.at(val, at, depth)),
        }
        node = match r.mem.read_u64(node.wrapping_add(n_off)) {
            Ok(n) => n,
            Err(_) => return Some(unreadable(node)),
        };
    }
    Some(if is_map { entries::map(pairs, count) } else { entries::set(items, count) })
}
