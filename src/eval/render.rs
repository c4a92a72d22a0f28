//! A typed value → the JSON an LLM reads. (Placeholder signature; the renderer lands next.)

use serde_json::Value;

use super::Memory;
use crate::symbols::{DebugInfo, TypeId};

/// How much of a value to show.
#[derive(Debug, Clone)]
pub struct RenderOptions {
    /// Struct/array/pointer levels to expand (debug_eval `depth`, default 2).
    pub depth: u32,
    /// `format: "hex"`: integers as hex strings.
    pub hex: bool,
    /// Elements shown of an array or container (the rest is summarized).
    pub max_elements: usize,
    /// Bytes shown of a string.
    pub max_string: usize,
}

impl Default for RenderOptions {
    fn default() -> Self {
        RenderOptions { depth: 2, hex: false, max_elements: 100, max_string: 1024 }
    }
}

/// Render the value of type `ty` whose bytes are `bytes` (exactly the type's size) and which
/// lives at `address` in the target when it is an lvalue. Pointers are followed through `mem`.
pub fn render(info: &DebugInfo, ty: TypeId, bytes: &[u8], address: Option<u64>, mem: &dyn Memory, opts: &RenderOptions) -> Value {
    let _ = (info, ty, bytes, address, mem, opts);
    Value::Null
}
