//! Word shapes (`store/word_shape.rs`) of hooked functions: for a function whose declared
//! parameters and result each travel in one integer register, the DWARF names and types
//! the daemon renders the hook's raw words with. Such hooks keep the native fast path (no
//! JavaScript per call) and still report `{"a": 1, "b": 40}` and `41`, not six registers.

use crate::store::word_shape::{WordKind, WordShape};
use crate::symbols::{DebugInfo, Signature, TypeId, TypeKind};

/// Integer argument registers of System V x86-64 (and of Rust's ABI there).
const INT_REGS: usize = 6;

fn kind_of(info: &DebugInfo, ty: TypeId) -> Option<WordKind> {
    let t = info.ty(ty);
    if !(1..=8).contains(&t.size) {
        return None;
    }
    let size = t.size as u8;
    Some(match &t.kind {
        TypeKind::Int { signed } => WordKind::Int { size, signed: *signed },
        TypeKind::Bool => WordKind::Bool,
        TypeKind::Char { signed } => WordKind::Char { size, signed: *signed },
        TypeKind::Enum { signed, enumerators } => WordKind::Enum { size, signed: *signed, names: enumerators.iter().map(|(n, v)| (*v, n.clone())).collect() },
        TypeKind::Pointer { .. } => WordKind::Pointer,
        _ => return None,
    })
}

/// The shape of `sig`, if every parameter and the result fit one integer register each
/// (at most six parameters, not variadic, x86-64).
pub(crate) fn word_shape(info: &DebugInfo, sig: &Signature) -> Option<WordShape> {
    let hidden = usize::from(sig.closure_env);
    if !info.x86_64 || sig.variadic || sig.params.len() + hidden > INT_REGS {
        return None;
    }
    let params = sig
        .params
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let kind = kind_of(info, p.ty?)?;
            let name = if p.name.is_empty() { format!("arg{i}") } else { p.name.clone() };
            Some((name, kind))
        })
        .collect::<Option<Vec<_>>>()?;
    let ret = match sig.ret {
        None => None,
        Some(t) if matches!(info.ty(t).kind, TypeKind::Void) => None,
        Some(t) => Some(kind_of(info, t)?),
    };
    Some(WordShape { hidden, params, ret })
}
