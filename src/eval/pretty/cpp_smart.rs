//! libstdc++ `std::optional<T>` (→ null when empty, else the value), `std::unique_ptr<T>`
//! and `std::shared_ptr<T>` (→ like a `T *`; a followed shared_ptr adds "@use_count"),
//! `std::atomic<T>` (→ the value).

use serde_json::{Map, Value};

use super::cpp_string_vector::pointee;
use crate::eval::render::{uint_at, Renderer};
use crate::symbols::{TypeId, TypeKind};

/// `_M_payload` (an `_Optional_payload`) holds `_M_engaged` and the `_M_payload._M_value` union.
pub(super) fn optional(r: &mut Renderer, id: TypeId, bytes: &[u8], addr: Option<u64>, depth: u32) -> Option<Value> {
    let (p_off, p_ty) = r.field(id, "_M_payload")?;
    let (e_off, _) = r.field(p_ty, "_M_engaged")?;
    let (v_off, v_ty) = r.field_path(p_ty, &["_M_payload", "_M_value"])?;
    if uint_at(bytes, p_off + e_off, 1)? == 0 {
        return Some(Value::Null);
    }
    let at = p_off + v_off;
    let sub = bytes.get(at as usize..(at + r.ty(v_ty).size) as usize)?;
    Some(r.value(v_ty, sub, addr.map(|a| a.wrapping_add(at)), depth))
}

/// `std::atomic<T>`: the value `_M_i` (in a base or member `__atomic_base` for integers and
/// `bool`), or, for
/// `std::atomic<T *>`, the pointer `_M_b._M_p`.
pub(super) fn atomic(r: &mut Renderer, id: TypeId, bytes: &[u8], addr: Option<u64>, depth: u32) -> Option<Value> {
    let (off, ty) = r.field(id, "_M_i").or_else(|| r.field_path(id, &["_M_base", "_M_i"])).or_else(|| r.field_path(id, &["_M_b", "_M_p"]))?;
    let sub = bytes.get(off as usize..(off + r.ty(ty).size) as usize)?;
    Some(r.value(ty, sub, addr.map(|a| a.wrapping_add(off)), depth))
}

/// The only pointer inside (`_M_t` … `_M_head_impl`), pointing at a `_Tp`.
pub(super) fn unique_ptr(r: &mut Renderer, id: TypeId, bytes: &[u8], depth: u32) -> Option<Value> {
    let tp = r.info.template_params(id).iter().find(|p| p.name == "_Tp").and_then(|p| p.ty)?;
    let (off, ptr) = first_pointer(r, id, 0)?;
    if r.ty(pointee(r, ptr)?).name != r.ty(tp).name {
        return None;
    }
    Some(r.value(ptr, bytes.get(off as usize..off as usize + 8)?, None, depth))
}

/// `_M_ptr`, and the control block `_M_refcount._M_pi` whose `_M_use_count` counts owners.
pub(super) fn shared_ptr(r: &mut Renderer, id: TypeId, bytes: &[u8], depth: u32) -> Option<Value> {
    let (p_off, p_ty) = r.field(id, "_M_ptr")?;
    pointee(r, p_ty)?;
    let (pi_off, pi_ty) = r.field_path(id, &["_M_refcount", "_M_pi"])?;
    let (u_off, _) = r.field(pointee(r, pi_ty)?, "_M_use_count")?;
    let value = r.value(p_ty, bytes.get(p_off as usize..p_off as usize + 8)?, None, depth);
    let block = uint_at(bytes, pi_off, 8)?;
    let Value::Object(fields) = value else { return Some(value) };
    let Ok(count) = r.mem.read_vec(block.wrapping_add(u_off), 4) else { return Some(Value::Object(fields)) };
    let mut out = Map::new();
    let mut fields = fields.into_iter();
    if let Some((k, v)) = fields.next() {
        out.insert(k, v);
    }
    out.insert("@use_count".into(), Value::from(i32::from_le_bytes(count.try_into().unwrap_or_default())));
    out.extend(fields);
    Some(Value::Object(out))
}

/// Offset and type of the first pointer member, depth-first through members and bases.
fn first_pointer(r: &Renderer, id: TypeId, nesting: u32) -> Option<(u64, TypeId)> {
    let t = r.ty(id);
    match &t.kind {
        TypeKind::Pointer { .. } => Some((0, id)),
        TypeKind::Struct { members, is_union: false } if nesting < 8 => {
            members.iter().find_map(|m| first_pointer(r, m.ty, nesting + 1).map(|(o, t)| (m.offset + o, t)))
        }
        _ => None,
    }
}
