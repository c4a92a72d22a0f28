//! libstdc++ sequences: `std::string` and `std::string_view` (→ JSON string), `std::vector<T>` and
//! `std::vector<bool>` (→ array), `std::array<T, N>`, `std::span<T>`, `std::list<T>`.

use serde_json::Value;

use crate::eval::render::{more, uint_at, unreadable, Renderer};
use crate::symbols::{TypeId, TypeKind};

/// Element counts beyond this mean the object is not initialized (or not what we think).
const MAX_COUNT: u64 = 1 << 32;

/// `_M_dataplus._M_p` (a `char *`) and `_M_string_length`.
pub(super) fn string(r: &mut Renderer, id: TypeId, bytes: &[u8]) -> Option<Value> {
    let (p_off, p_ty) = r.field_path(id, &["_M_dataplus", "_M_p"])?;
    let (l_off, _) = r.field(id, "_M_string_length")?;
    let elem = pointee(r, p_ty)?;
    if r.ty(elem).size != 1 {
        return None; // wide strings: shown as the struct they are
    }
    let (p, len) = (uint_at(bytes, p_off, 8)?, uint_at(bytes, l_off, 8)?);
    if len >= MAX_COUNT {
        return None;
    }
    Some(r.text_at(p, len))
}

/// `std::string_view`: `_M_str` (a `const char *`) and `_M_len`.
pub(super) fn string_view(r: &mut Renderer, id: TypeId, bytes: &[u8]) -> Option<Value> {
    let (p_off, p_ty) = r.field(id, "_M_str")?;
    let (l_off, _) = r.field(id, "_M_len")?;
    if r.ty(pointee(r, p_ty)?).size != 1 {
        return None;
    }
    let (p, len) = (uint_at(bytes, p_off, 8)?, uint_at(bytes, l_off, 8)?);
    if len >= MAX_COUNT {
        return None;
    }
    Some(r.text_at(p, len))
}

/// `_M_impl._M_start` / `_M_finish`: `T*` pointers bounding the elements.
pub(super) fn vector(r: &mut Renderer, id: TypeId, bytes: &[u8], depth: u32) -> Option<Value> {
    let (s_off, s_ty) = r.field_path(id, &["_M_impl", "_M_start"])?;
    let (f_off, _) = r.field_path(id, &["_M_impl", "_M_finish"])?;
    let elem = pointee(r, s_ty)?;
    let size = r.ty(elem).size;
    let (start, finish) = (uint_at(bytes, s_off, 8)?, uint_at(bytes, f_off, 8)?);
    if size == 0 || finish < start || (finish - start) % size != 0 || (finish - start) / size >= MAX_COUNT {
        return None;
    }
    Some(r.elements(elem, start, (finish - start) / size, depth))
}

/// `std::vector<bool>`: bits in words, from `_M_start` to `_M_finish` (each a
/// `_Bit_iterator` of word pointer `_M_p` and bit `_M_offset`).
pub(super) fn bit_vector(r: &mut Renderer, id: TypeId, bytes: &[u8]) -> Option<Value> {
    let (s_off, s_ty) = r.field_path(id, &["_M_impl", "_M_start"])?;
    let (f_off, _) = r.field_path(id, &["_M_impl", "_M_finish"])?;
    let (p_off, p_ty) = r.field(s_ty, "_M_p")?;
    let (o_off, _) = r.field(s_ty, "_M_offset")?;
    let word = r.ty(pointee(r, p_ty)?).size;
    if word == 0 || word > 8 {
        return None;
    }
    let start = uint_at(bytes, s_off + p_off, 8)?;
    let (end, end_bit) = (uint_at(bytes, f_off + p_off, 8)?, uint_at(bytes, f_off + o_off, 4)?);
    let start_bit = uint_at(bytes, s_off + o_off, 4)?;
    if end < start || (end - start) % word != 0 {
        return None;
    }
    let bits = ((end - start) / word).checked_mul(word * 8)?.checked_add(end_bit)?;
    let count = bits.checked_sub(start_bit)?;
    if count >= MAX_COUNT {
        return None;
    }
    let shown = count.min(r.opts.max_elements as u64);
    let mut out = Vec::with_capacity(shown as usize);
    for i in 0..shown {
        let bit = start_bit + i;
        let at = start.wrapping_add(bit / 8);
        match r.mem.read_vec(at, 1) {
            Ok(b) => out.push(Value::Bool(b[0] >> (bit % 8) & 1 == 1)),
            Err(_) => return Some(unreadable(at)),
        }
    }
    more(&mut out, count, shown);
    Some(Value::Array(out))
}

/// `std::array<T, N>`: its `_M_elems` array (an empty struct when N is 0).
pub(super) fn array(r: &mut Renderer, id: TypeId, bytes: &[u8], addr: Option<u64>, depth: u32) -> Option<Value> {
    let (off, ty) = r.field(id, "_M_elems")?;
    let t = r.ty(ty);
    match &t.kind {
        TypeKind::Array { .. } => {
            let sub = bytes.get(off as usize..(off + t.size) as usize)?;
            Some(r.value(ty, sub, addr.map(|a| a.wrapping_add(off)), depth))
        }
        TypeKind::Struct { members, .. } if members.is_empty() => Some(Value::Array(Vec::new())),
        _ => None,
    }
}

/// `std::span<T>`: `_M_ptr` and the extent — `_M_extent._M_extent_value` when dynamic,
/// else the `_Extent` template value.
pub(super) fn span(r: &mut Renderer, id: TypeId, bytes: &[u8], depth: u32) -> Option<Value> {
    let (p_off, p_ty) = r.field(id, "_M_ptr")?;
    let elem = pointee(r, p_ty)?;
    let count = match r.field_path(id, &["_M_extent", "_M_extent_value"]) {
        Some((off, _)) => uint_at(bytes, off, 8)?,
        None => r.info.template_params(id).iter().find(|p| p.name == "_Extent").and_then(|p| p.value)? as u64,
    };
    if count >= MAX_COUNT {
        return None;
    }
    Some(r.elements(elem, uint_at(bytes, p_off, 8)?, count, depth))
}

/// `std::list<T>`: a ring of nodes from the header `_M_impl._M_node` (`_M_next`, and the
/// count `_M_size`); each node is an `_List_node_base` followed by its `_Tp`.
pub(super) fn list(r: &mut Renderer, id: TypeId, bytes: &[u8], depth: u32) -> Option<Value> {
    let elem = r.info.template_params(id).iter().find(|p| p.name == "_Tp").and_then(|p| p.ty)?;
    let (h_off, h_ty) = r.field_path(id, &["_M_impl", "_M_node"])?;
    let (n_off, _) = r.field(h_ty, "_M_next")?;
    let (c_off, _) = r.field(h_ty, "_M_size")?;
    let node_base = r.ty(r.field(h_ty, "<base struct _List_node_base>")?.1).size;
    let count = uint_at(bytes, h_off + c_off, 8)?;
    if count >= MAX_COUNT {
        return None;
    }
    let shown = count.min(r.opts.max_elements as u64);
    let mut node = uint_at(bytes, h_off + n_off, 8)?;
    let mut out = Vec::with_capacity(shown as usize);
    for _ in 0..shown {
        out.push(r.at(elem, node.wrapping_add(node_base), depth));
        node = match r.mem.read_u64(node.wrapping_add(n_off)) {
            Ok(n) => n,
            Err(_) => return Some(unreadable(node)),
        };
    }
    more(&mut out, count, shown);
    Some(Value::Array(out))
}

/// What pointer type `ptr` points to (`None` for `void *` and non-pointers).
pub(super) fn pointee(r: &Renderer, ptr: TypeId) -> Option<TypeId> {
    match r.ty(ptr).kind {
        TypeKind::Pointer { target } => target,
        _ => None,
    }
}
