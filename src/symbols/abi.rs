//! Which functions a native call wrapper may stand in for (the agent's `replaceFast` hook
//! path, `agent/src/wrappers.ts`): a C function `guint64 w(guint64 a0..a5)` forwards
//! exactly the six System V integer argument registers and `rax`, nothing else. So only:
//! - x86-64 binaries;
//! - C and C++ compile units (Rust does not promise the System V convention). A C++
//!   exception may unwind through the wrapper's frames, which then need unwind info: C++
//!   functions get the abi with `-eh` appended, and the agent wraps them only once the
//!   program's unwinder knows the wrapper code (agent/src/wrapper_unwind.ts; until then, and
//!   in a process without libgcc_s, they attach). Units GCC optimized (`Signature::ipa_ra`, from the producer string) get
//!   `sysv-int-saved`: interprocedural register allocation lets their callers keep values in
//!   caller-saved registers the callee leaves alone, so the wrapper is entered through a stub
//!   that saves them (agent/src/wrappers.ts `savingStubs`);
//! - not variadic (`al` counts vector registers; extra arguments live on the stack);
//! - at most 6 parameters, each an integer, bool, char, enum or pointer of at most 8 bytes
//!   (no float/double: they travel in xmm registers; no struct or union by value);
//! - a return type that is void or such a scalar (no float, no struct: `rdx`, xmm0 or a
//!   hidden result pointer would be lost).
//!
//! Anything else keeps `Interceptor.attach`.

use super::types::{Signature, TypeKind};
use super::DebugInfo;

/// The hook spec's `abi` value for functions the wrapper path may take.
pub const SYSV_INT_ABI: &str = "sysv-int";
/// The same for GCC-optimized units: the wrapper saves every caller-saved register.
pub const SYSV_INT_SAVED_ABI: &str = "sysv-int-saved";
/// Either of them, for C++ units: wrapped only when the wrapper frames have unwind info.
pub const SYSV_INT_EH_ABI: &str = "sysv-int-eh";
pub const SYSV_INT_SAVED_EH_ABI: &str = "sysv-int-saved-eh";

/// Most parameters the wrapper forwards: the System V integer argument registers.
const MAX_REG_PARAMS: usize = 6;

/// `Some("sysv-int")` (or `"sysv-int-saved"`, see the header) when a native wrapper may
/// replace the function with this signature.
pub fn wrapper_abi(info: &DebugInfo, sig: &Signature) -> Option<&'static str> {
    let language_ok = (sig.c_language || sig.cxx_language) && !sig.rust;
    if !info.x86_64 || !language_ok || sig.variadic || sig.params.len() > MAX_REG_PARAMS {
        return None;
    }
    let params_ok = sig.params.iter().all(|p| p.ty.is_some_and(|t| integer_scalar(info, t)));
    let ret_ok = sig.ret.is_none_or(|t| integer_scalar(info, t) || matches!(info.ty(t).kind, TypeKind::Void));
    let abi = match (sig.cxx_language, sig.ipa_ra) {
        (false, false) => SYSV_INT_ABI,
        (false, true) => SYSV_INT_SAVED_ABI,
        (true, false) => SYSV_INT_EH_ABI,
        (true, true) => SYSV_INT_SAVED_EH_ABI,
    };
    (params_ok && ret_ok).then_some(abi)
}

/// A value that travels in one integer register: integer, bool, char, enum, pointer, ≤ 8 bytes.
fn integer_scalar(info: &DebugInfo, ty: super::TypeId) -> bool {
    let t = info.ty(ty);
    let kind_ok = matches!(t.kind, TypeKind::Int { .. } | TypeKind::Bool | TypeKind::Char { .. } | TypeKind::Enum { .. } | TypeKind::Pointer { .. });
    kind_ok && (1..=8).contains(&t.size)
}
