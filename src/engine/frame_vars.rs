//! Locals of a paused frame, by name, through the expression evaluator (src/eval): the
//! DWARF location of each variable is evaluated against the thread's registers and read from
//! the target's memory, and values render in the same model as `debug_eval`.

use std::sync::Arc;

use serde_json::{json, Value};

use super::debug_state::PausedThread;
use super::{Engine, Session};
use crate::error::{ErrorCode, Result, StrobeError};
use crate::eval::RenderOptions;

/// How far locals expand in pause reports (one level, as the issue asks; debug_eval goes deeper).
const LOCALS_DEPTH: u32 = 1;

impl Engine {
    /// The paused thread `thread_id`, or the one most recently paused.
    pub(crate) fn paused_thread(&self, session: &Session, thread_id: Option<u64>) -> Result<PausedThread> {
        let st = session.debug.lock();
        let found = match thread_id {
            Some(t) => st.paused.get(&t).cloned(),
            None => st.paused.values().max_by_key(|p| p.seq).cloned(),
        };
        found.ok_or_else(|| {
            let ids: Vec<String> = st.paused.keys().map(|t| t.to_string()).collect();
            StrobeError::validation(match (thread_id, ids.is_empty()) {
                (_, true) => "No thread is paused. Local variables are available while a thread is paused: set a breakpoint (debug_breakpoint) and wait for it to hit.".to_string(),
                (Some(t), false) => format!("Thread {t} is not paused. Paused threads: {}.", ids.join(", ")),
                (None, false) => unreachable!(),
            })
        })
    }

    /// All variables of the paused frame with their current values:
    /// `[{name, type, isParameter, location, value | error}]`.
    pub async fn locals(self: &Arc<Engine>, id: &str, thread_id: Option<u64>) -> Result<(PausedThread, Vec<Value>)> {
        let session = self.session(id)?;
        let paused = self.paused_thread(&session, thread_id)?;
        let opts = RenderOptions { depth: LOCALS_DEPTH, ..RenderOptions::default() };
        let vars = self.in_frame(&session, paused.clone(), 0, move |f| {
            // Types as the source spells them (qualifiers kept), only when listing locals.
            let declared = crate::symbols::LocalsInfo::cached(&f.module)
                .ok()
                .and_then(|l| l.locals_at(f.static_pc).ok().flatten())
                .map(|frame| frame.vars.into_iter().map(|v| (v.name, v.type_name)).collect())
                .unwrap_or_default();
            f.eval.locals(&opts, &declared)
        }).await?;
        Ok((paused, vars))
    }

    /// The session's paused threads, their `arguments` (the parameters, in order) rendered in
    /// debug_eval's value model from the paused frame; an unreadable one shows `<why>`.
    pub async fn paused_threads(self: &Arc<Engine>, session: &Arc<Session>) -> Vec<PausedThread> {
        let mut out = session.debug.paused_threads();
        for p in &mut out {
            let opts = RenderOptions { depth: LOCALS_DEPTH, ..RenderOptions::default() };
            let none = std::collections::HashMap::new();
            let Ok(vars) = self.in_frame(session, p.clone(), 0, move |f| f.eval.locals(&opts, &none)).await else { continue };
            let params: Vec<Value> = vars
                .into_iter()
                .filter(|v| v["isParameter"] == json!(true))
                .map(|v| match v.get("value") {
                    Some(x) => x.clone(),
                    None => json!(format!("<{}>", v["error"].as_str().unwrap_or("unavailable"))),
                })
                .collect();
            if !params.is_empty() {
                p.arguments = Value::Array(params);
            }
        }
        out
    }

    /// Write a local of the paused frame: `name = value` through the evaluator. Register
    /// values take effect when the thread resumes.
    pub async fn set_local(self: &Arc<Engine>, id: &str, thread_id: Option<u64>, name: &str, value: Value) -> Result<Value> {
        let session = self.session(id)?;
        let paused = self.paused_thread(&session, thread_id)?;
        if !name.chars().all(|c| c.is_alphanumeric() || c == '_') || name.is_empty() {
            return Err(StrobeError::validation(format!("'{name}' is not a variable name; to write a field or element use debug_eval, e.g. \"q->len = 0\".")));
        }
        let literal = match &value {
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            // Hex strings, and enumerator names for enum-typed locals.
            Value::String(s) if s.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '-') => s.clone(),
            other => return Err(StrobeError::validation(format!("The value for '{name}' must be a number, boolean, hex string or enumerator name, got {other}."))),
        };
        let opts = RenderOptions { depth: LOCALS_DEPTH, ..RenderOptions::default() };
        let (name_owned, assignment) = (name.to_string(), format!("{name} = {literal}"));
        let (before, after) = self
            .in_frame(&session, paused, 0, move |f| {
                (f.eval.eval_to_json(&name_owned, &opts), f.eval.eval_to_json(&assignment, &opts))
            })
            .await?;
        if let Some(e) = before.get("error").and_then(Value::as_str) {
            let code = if e.contains("optimized out") { ErrorCode::OptimizedOut } else { ErrorCode::ValidationError };
            return Err(StrobeError::new(code, format!("Cannot write '{name}': {e}")));
        }
        if let Some(e) = after.get("error").and_then(Value::as_str) {
            return Err(StrobeError::validation(format!("Cannot write '{name}': {e}")));
        }
        let location = match (after.get("address"), after.get("register")) {
            (Some(a), _) => format!("memory {}", a.as_str().unwrap_or("?")),
            (_, Some(r)) => format!("register {}", r.as_str().unwrap_or("?")),
            _ => "computed".to_string(),
        };
        Ok(json!({
            "name": name,
            "type": after.get("type").cloned().unwrap_or(Value::Null),
            "location": location,
            "previousValue": before.get("value").cloned().unwrap_or(Value::Null),
            "newValue": after.get("value").cloned().unwrap_or(Value::Null),
        }))
    }
}
