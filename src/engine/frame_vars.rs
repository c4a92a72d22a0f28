//! Locals of a paused frame, by name: the daemon resolves where each lives at the paused PC
//! (DWARF, lazily) and the agent reads or writes it with the thread's registers.

use std::sync::Arc;

use serde::Serialize;
use serde_json::{json, Value};

use super::breakpoints::recipe;
use super::debug_state::PausedThread;
use super::{Engine, Session};
use crate::error::{ErrorCode, Result, StrobeError};
use crate::symbols::{LocalVar, VarLocation};

/// One variable of the paused frame, with its value or why there is none.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LocalValue {
    pub name: String,
    #[serde(rename = "type")]
    pub type_name: String,
    pub is_parameter: bool,
    /// "register rdi", "memory rbp-20", "static 0x4010", "constant", "optimized out".
    pub location: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

fn describe_location(l: &VarLocation) -> String {
    match l {
        VarLocation::Register { reg } => format!("register {reg}"),
        VarLocation::Memory { base, offset } => format!("memory {base}{offset:+}"),
        VarLocation::Static { address } => format!("static 0x{address:x}"),
        VarLocation::Value { .. } => "constant".into(),
        VarLocation::OptimizedOut => "optimized out".into(),
        VarLocation::Unsupported { why } => format!("unsupported: {why}"),
    }
}

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

    fn frame_vars(&self, session: &Session, paused: &PausedThread) -> Result<Vec<LocalVar>> {
        self.locals_at(session, paused.pc)
    }

    /// All variables of the paused frame with their current values.
    pub async fn locals(self: &Arc<Engine>, id: &str, thread_id: Option<u64>) -> Result<(PausedThread, Vec<LocalValue>)> {
        let session = self.session(id)?;
        let paused = self.paused_thread(&session, thread_id)?;
        let vars = self.frame_vars(&session, &paused)?;
        let recipes: Vec<Value> = vars.iter().map(recipe).collect();
        let reply = self.debugger_frida()?.host().rpc(paused.pid, "readLocals", json!([paused.thread_id, recipes])).await?;
        let values = reply.as_array().cloned().unwrap_or_default();
        let out = vars
            .iter()
            .zip(values.iter().chain(std::iter::repeat(&Value::Null)))
            .map(|(v, r)| LocalValue {
                name: v.name.clone(),
                type_name: v.type_name.clone(),
                is_parameter: v.is_parameter,
                location: describe_location(&v.location),
                value: r.get("value").cloned(),
                error: r.get("error").and_then(Value::as_str).map(str::to_string),
            })
            .collect();
        Ok((paused, out))
    }

    /// Write a local of the paused frame. Register values take effect when the thread resumes.
    pub async fn set_local(self: &Arc<Engine>, id: &str, thread_id: Option<u64>, name: &str, value: Value) -> Result<Value> {
        let session = self.session(id)?;
        let paused = self.paused_thread(&session, thread_id)?;
        let vars = self.frame_vars(&session, &paused)?;
        let Some(var) = vars.iter().find(|v| v.name == name) else {
            let names: Vec<&str> = vars.iter().map(|v| v.name.as_str()).collect();
            return Err(StrobeError::validation(format!(
                "No local variable '{name}' in scope at {}. In scope: {}.",
                paused.function.as_deref().unwrap_or("this frame"),
                if names.is_empty() { "none (no DWARF for this function)".to_string() } else { names.join(", ") }
            )));
        };
        match &var.location {
            VarLocation::OptimizedOut => {
                return Err(StrobeError::new(
                    ErrorCode::OptimizedOut,
                    format!("Variable '{name}' is optimized out at this PC. Recompile with -O0, or step to where it is live."),
                ))
            }
            VarLocation::Value { .. } | VarLocation::Unsupported { .. } => {
                return Err(StrobeError::validation(format!("Variable '{name}' cannot be written here ({}).", describe_location(&var.location))))
            }
            _ => {}
        }
        if !(value.is_number() || value.is_boolean() || value.is_string()) {
            return Err(StrobeError::validation(format!("The value for '{name}' must be a number, boolean or hex string, got {value}.")));
        }
        let reply = self
            .debugger_frida()?
            .host()
            .rpc(paused.pid, "writeLocal", json!([paused.thread_id, recipe(var), value]))
            .await
            .map_err(|e| StrobeError::validation(format!("Cannot write '{name}': {}", e.message)))?;
        Ok(json!({
            "name": name,
            "type": var.type_name,
            "location": describe_location(&var.location),
            "previousValue": reply.get("previous").cloned().unwrap_or(Value::Null),
            "newValue": reply.get("value").cloned().unwrap_or(Value::Null),
        }))
    }
}
