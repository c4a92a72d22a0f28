//! Rust `HashMap` / `HashSet` (→ entries / array, walking hashbrown's table), tuples
//! (→ arrays, `()` → null), `NonZero<T>`, cells and atomics (→ what they wrap) and `Rc<T>` / `Arc<T>` (→ like a
//! pointer to the value, with "@strong" owners). hashbrown's `RawTableInner` keeps
//! `bucket_mask + 1` control bytes at `ctrl` (top bit clear = slot full) and the `T`
//! elements just below them, slot i at `ctrl - (i + 1) * size_of::<T>()`.

use serde_json::{Map, Value};

use super::entries;
use crate::eval::render::{scalar, uint_at, unreadable, Renderer};
use crate::symbols::{Type, TypeId, TypeKind};

/// Tables with more buckets than this are not walked (a corrupt mask).
const MAX_BUCKETS: u64 = 1 << 32;
/// Control bytes read at once.
const CTRL_CHUNK: u64 = 256;

pub(super) fn hash_map(r: &mut Renderer, id: TypeId, bytes: &[u8], is_map: bool, depth: u32) -> Option<Value> {
    let path: &[&str] = if is_map { &["base", "table"] } else { &["base", "map", "table"] };
    let (raw_off, raw_ty) = r.field_path(id, path)?;
    let elem = r.info.template_params(raw_ty).iter().find(|p| p.name == "T").and_then(|p| p.ty)?;
    let (inner_off, inner_ty) = r.field(raw_ty, "table")?;
    let at = |name: &str| r.field(inner_ty, name).map(|(o, _)| raw_off + inner_off + o);
    let (mask_at, ctrl_at, items_at) = (at("bucket_mask")?, at("ctrl")?, at("items")?);
    let (k, v) = (r.field(elem, "__0")?, r.field(elem, "__1")?);
    let size = r.ty(elem).size;
    let (mask, ctrl, items) = (uint_at(bytes, mask_at, 8)?, uint_at(bytes, ctrl_at, 8)?, uint_at(bytes, items_at, 8)?);
    if mask >= MAX_BUCKETS || items > mask + 1 || size == 0 {
        return None;
    }
    let shown = items.min(r.opts.max_elements as u64);
    let (mut pairs, mut keys) = (Vec::new(), Vec::new());
    // Control bytes are read a group at a time, only as far as the shown entries reach.
    let mut i = 0u64;
    while ((pairs.len() + keys.len()) as u64) < shown && i <= mask {
        let n = CTRL_CHUNK.min(mask + 1 - i);
        let Ok(control) = r.mem.read_vec(ctrl.wrapping_add(i), n as usize) else { return Some(unreadable(ctrl.wrapping_add(i))) };
        for (j, c) in control.iter().enumerate() {
            if (pairs.len() + keys.len()) as u64 >= shown {
                break;
            }
            if c & 0x80 != 0 {
                continue;
            }
            let slot = ctrl.wrapping_sub((i + j as u64 + 1) * size);
            if is_map {
                pairs.push((r.at(k.1, slot.wrapping_add(k.0), depth), r.at(v.1, slot.wrapping_add(v.0), depth)));
            } else {
                keys.push(r.at(k.1, slot.wrapping_add(k.0), depth));
            }
        }
        i += n;
    }
    Some(if is_map { entries::map(pairs, items) } else { entries::set(keys, items) })
}

/// `(i32, &str)`: fields `__0`, `__1`, … as a JSON array.
pub(super) fn tuple(r: &mut Renderer, t: &Type, bytes: &[u8], addr: Option<u64>, depth: u32) -> Option<Value> {
    let TypeKind::Struct { members, is_union: false } = &t.kind else { return None };
    if !members.iter().all(|m| crate::eval::render::is_tuple_field(&m.name)) {
        return None;
    }
    if members.is_empty() {
        return Some(Value::Null); // `()`
    }
    let mut out = Vec::with_capacity(members.len());
    for m in members {
        let size = r.ty(m.ty).size;
        let sub = bytes.get(m.offset as usize..(m.offset + size) as usize)?;
        out.push(r.value(m.ty, sub, addr.map(|a| a.wrapping_add(m.offset)), depth));
    }
    Some(Value::Array(out))
}

/// `NonZero<u32>` and its inner `ZeroablePrimitive` wrapper: the number they wrap.
pub(super) fn newtype(r: &mut Renderer, id: TypeId, bytes: &[u8], addr: Option<u64>, depth: u32) -> Option<Value> {
    wrapped(r, id, bytes, addr, depth, "__0", 4)
}

/// `Cell<T>`, `UnsafeCell<T>`, `ManuallyDrop<T>` (field `value`) and atomics (field `v`):
/// the value they wrap (a wrapper inside is unwrapped in its turn).
pub(super) fn cell(r: &mut Renderer, id: TypeId, bytes: &[u8], addr: Option<u64>, depth: u32, field: &str) -> Option<Value> {
    wrapped(r, id, bytes, addr, depth, field, 1)
}

/// Through up to `levels` structs whose only member is `field`, then render what is inside.
fn wrapped(r: &mut Renderer, id: TypeId, bytes: &[u8], addr: Option<u64>, depth: u32, field: &str, levels: u32) -> Option<Value> {
    let mut ty = id;
    let mut off = 0;
    for _ in 0..levels {
        let TypeKind::Struct { members, .. } = &r.ty(ty).kind else { break };
        let [m] = members.as_slice() else { return None };
        if m.name != field {
            return None;
        }
        (off, ty) = (off + m.offset, m.ty);
    }
    let size = r.ty(ty).size;
    let sub = bytes.get(off as usize..(off + size) as usize)?;
    Some(r.value(ty, sub, addr.map(|a| a.wrapping_add(off)), depth))
}

/// `Rc<T>` / `Arc<T>`: `ptr.pointer` → an `RcInner` / `ArcInner` of `strong`, `weak` and the
/// `value` / `data`; shown as a pointer to the value with the `strong` count after `"@"`.
pub(super) fn counted(r: &mut Renderer, id: TypeId, bytes: &[u8], depth: u32) -> Option<Value> {
    let (p_off, p_ty) = r.field_path(id, &["ptr", "pointer"])?;
    let TypeKind::Pointer { target: Some(inner) } = r.ty(p_ty).kind else { return None };
    let (s_off, s_ty) = r.field(inner, "strong")?;
    let (v_off, v_ty) = r.field(inner, "value").or_else(|| r.field(inner, "data"))?;
    if r.ty(s_ty).size != 8 {
        return None;
    }
    let raw = uint_at(bytes, p_off, 8)?;
    let value_at = raw.wrapping_add(v_off);
    if raw == 0 || depth == 0 {
        return Some(scalar::hex(value_at));
    }
    let Ok(strong) = r.mem.read_u64(raw.wrapping_add(s_off)) else { return Some(unreadable(raw)) };
    let mut out = Map::new();
    out.insert("@".into(), scalar::hex(value_at));
    out.insert("@strong".into(), Value::from(strong));
    match r.at(v_ty, value_at, depth) {
        Value::Object(fields) => out.extend(fields),
        other => {
            out.insert("*".into(), other);
        }
    }
    Some(Value::Object(out))
}
