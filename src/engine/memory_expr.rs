//! `debug_memory` targets written as debug_eval expressions: `{expr: "q->items[2].key"}` reads
//! (and, with `value`, writes) through the evaluator — in the paused frame when a thread of
//! that process is paused (locals by name), otherwise over globals only; and raw
//! `{address, type: "string"}` reads a C string.

use std::sync::Arc;

use serde_json::{json, Value};

use super::memory::MemoryTarget;
use super::{Engine, Session};
use crate::error::{Result, StrobeError};
use crate::eval::RenderOptions;

impl MemoryTarget {
    /// The expression this target reads, when it is one the evaluator serves.
    pub(crate) fn expression(&self) -> Option<String> {
        if let Some(e) = &self.expr {
            return Some(e.clone());
        }
        match (&self.address, self.type_hint.as_deref()) {
            (Some(a), Some("string")) => Some(format!("(const char *){a}")),
            _ => None,
        }
    }
}

impl Engine {
    /// Evaluate `exprs` in process `pid`: in its most recently paused thread's frame, or over
    /// globals when none of its threads is paused. Results: `{target, type, value | error,
    /// address?}` (for writes `{target, previousValue, newValue, ...}`).
    pub(crate) async fn memory_exprs(self: &Arc<Engine>, session: &Arc<Session>, pid: u32, targets: Vec<(String, Option<Value>)>, depth: u32) -> Result<Vec<Value>> {
        for (e, v) in &targets {
            if e.len() > crate::eval::parser::MAX_EXPRESSION_BYTES {
                return Err(StrobeError::validation(format!("expr is {} bytes; at most {}.", e.len(), crate::eval::parser::MAX_EXPRESSION_BYTES)));
            }
            if let Some(v) = v {
                if !(v.is_number() || v.is_boolean() || v.as_str().is_some_and(|s| s.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '-'))) {
                    return Err(StrobeError::validation(format!("value {v} for '{e}' must be a number, boolean, hex string or enumerator name.")));
                }
            }
        }
        let opts = RenderOptions { depth, ..RenderOptions::default() };
        let work = move |f: &super::eval::FrameContext<'_>| -> Vec<Value> {
            targets
                .iter()
                .map(|(e, value)| {
                    let before = f.eval.eval_to_json(e, &opts);
                    let mut out = json!({ "target": e });
                    let Some(v) = value else {
                        for k in ["type", "value", "address", "error"] {
                            if let Some(x) = before.get(k) {
                                out[k] = x.clone();
                            }
                        }
                        return out;
                    };
                    if let Some(err) = before.get("error") {
                        out["error"] = err.clone();
                        return out;
                    }
                    let literal = match v {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    let after = f.eval.eval_to_json(&format!("({e}) = {literal}"), &opts);
                    out["type"] = before["type"].clone();
                    out["address"] = before.get("address").cloned().unwrap_or(Value::Null);
                    out["previousValue"] = before["value"].clone();
                    match after.get("error") {
                        Some(err) => out["error"] = err.clone(),
                        None => out["newValue"] = after["value"].clone(),
                    }
                    out
                })
                .collect()
        };
        let paused = {
            let st = session.debug.lock();
            st.paused.values().filter(|p| p.pid == pid).max_by_key(|p| p.seq).cloned()
        };
        match paused {
            Some(p) => self.in_frame(session, p, 0, work).await,
            None => self.in_globals(session, pid, work).await,
        }
    }
}
