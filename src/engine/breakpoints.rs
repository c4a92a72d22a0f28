//! `debug_breakpoint`: resolve a function pattern or `file:line` to static addresses (DWARF
//! function index and line table), describe the frame's variables for conditions, and have
//! the agent hook them. Removing a breakpoint a thread is paused on resumes that thread first.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::debug_state::{function_at, hex, PointInfo};
use super::{Engine, Session};
use crate::error::{ErrorCode, Result, StrobeError};
use crate::symbols::{LineTable, LocalVar, LocalsInfo, Pattern};

pub const MAX_BREAKPOINTS: usize = 50;
pub const MAX_LOGPOINTS: usize = 100;
pub const MAX_CONDITION_BYTES: usize = 1024;
pub const MAX_MESSAGE_BYTES: usize = 2048;

/// One entry of `debug_breakpoint`'s `add`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PointRequest {
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
    pub condition: Option<String>,
    pub hit_count: Option<u32>,
    /// Present: a logpoint with this `{expr}` template.
    pub message: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PointsResult {
    pub breakpoints: Vec<PointInfo>,
    pub logpoints: Vec<PointInfo>,
}

/// Where a request resolved to.
struct Resolved {
    function: Option<String>,
    file: Option<String>,
    line: Option<u32>,
    addresses: Vec<u64>,
    /// Per address: the enclosing function [start, end), None at a function entry.
    scans: Vec<Option<(u64, u64)>>,
}

/// The agent's description of a variable: its symbolic location plus how to decode it.
pub(crate) fn recipe(v: &LocalVar) -> Value {
    let mut r = serde_json::to_value(&v.location).unwrap_or_else(|_| json!({ "kind": "unsupported" }));
    if let Some(a) = r.get("address").and_then(Value::as_u64) {
        r["address"] = json!(hex(a));
    }
    r["name"] = json!(v.name);
    r["size"] = json!(v.size);
    r["encoding"] = json!(v.encoding);
    r["typeName"] = json!(v.type_name);
    r
}

impl Engine {
    /// Add and remove breakpoints/logpoints of a live session.
    pub async fn set_points(self: &Arc<Engine>, id: &str, add: &[PointRequest], remove: &[String]) -> Result<PointsResult> {
        let session = self.session(id)?;
        session.ensure_running()?;
        for rid in remove {
            self.remove_point(&session, rid).await?;
        }
        for req in add {
            self.add_point(&session, req).await?;
        }
        let (breakpoints, logpoints) = session.debug.points();
        Ok(PointsResult { breakpoints, logpoints })
    }

    async fn remove_point(&self, session: &Session, rid: &str) -> Result<()> {
        let point = session.debug.lock().points.get(rid).cloned();
        let Some(point) = point else {
            let known: Vec<String> = session.debug.lock().points.keys().cloned().collect();
            return Err(StrobeError::validation(format!(
                "No breakpoint or logpoint '{rid}' in this session. Active: {}.",
                if known.is_empty() { "none".to_string() } else { known.join(", ") }
            )));
        };
        let frida = self.debugger_frida()?;
        // Each agent (the root's, the forks') stops the point first (no new pause can start),
        // then every thread paused on it is resumed: the ones the agents name and the ones we
        // know. Frida detaches a hook only once no thread is inside it.
        let method = if point.logpoint { "removeLogpoint" } else { "removeBreakpoint" };
        let paused_in = |reply: &Value, pid: u32| -> Vec<(u64, u32)> {
            reply.get("pausedThreads").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_u64).map(|t| (t, pid)).collect()
        };
        let mut waiting = paused_in(&frida.host().rpc(session.pid, method, json!([rid])).await?, session.pid);
        for pid in super::children::live_forks(session) {
            match frida.host().rpc(pid, method, json!([rid])).await {
                Ok(reply) => waiting.extend(paused_in(&reply, pid)),
                Err(e) => tracing::warn!("session {}: child {pid} keeps {rid}: {}", session.id, e.message),
            }
        }
        {
            let mut st = session.debug.lock();
            st.points.remove(rid);
            waiting.extend(st.paused.values().filter(|p| p.breakpoint_id.as_deref() == Some(rid)).map(|p| (p.thread_id, p.pid)));
            waiting.sort_unstable();
            waiting.dedup_by_key(|(tid, _)| *tid);
            for (tid, _) in &waiting {
                st.paused.remove(tid);
            }
        }
        for (tid, pid) in waiting {
            frida.host().post(pid, json!({ "type": format!("resume-{tid}") })).await?;
        }
        Ok(())
    }

    async fn add_point(&self, session: &Session, req: &PointRequest) -> Result<()> {
        let logpoint = req.message.is_some();
        validate(req)?;
        {
            let st = session.debug.lock();
            let n = st.points.values().filter(|p| p.logpoint == logpoint).count();
            let (max, what) = if logpoint { (MAX_LOGPOINTS, "logpoints") } else { (MAX_BREAKPOINTS, "breakpoints") };
            if n >= max {
                return Err(StrobeError::validation(format!("At most {max} {what} per session; remove some first (debug_breakpoint remove: [ids]).")));
            }
        }
        let r = self.resolve_point(session, req)?;
        let vars = LocalsInfo::cached(&session.binary_path)?.locals_at(r.addresses[0])?.map(|f| f.vars).unwrap_or_default();
        let params: Vec<Value> = vars.iter().filter(|v| v.is_parameter).map(recipe).collect();
        let id = {
            let mut st = session.debug.lock();
            st.next_id += 1;
            format!("{}-{}", if logpoint { "lp" } else { "bp" }, st.next_id)
        };
        let spec = json!({
            "id": id,
            "addresses": r.addresses.iter().map(|a| hex(*a)).collect::<Vec<_>>(),
            "condition": req.condition,
            "hitCount": req.hit_count,
            "message": req.message,
            "scans": r.scans.iter().map(|s| s.map(|(lo, hi)| json!({ "start": hex(lo), "end": hex(hi) }))).collect::<Vec<_>>(),
            "params": params,
            "vars": vars.iter().map(recipe).collect::<Vec<_>>(),
        });
        let method = if logpoint { "setLogpoint" } else { "setBreakpoint" };
        let reply = self.debugger_frida()?.host().rpc(session.pid, method, json!([&spec])).await.map_err(|e| {
            StrobeError::new(
                ErrorCode::ValidationError,
                format!("Could not set the {} at {}: {}. Try a nearby line or the function's entry (function: name).", if logpoint { "logpoint" } else { "breakpoint" }, hex(r.addresses[0]), e.message),
            )
        })?;
        let hardware = reply
            .get("probes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|p| p.get("kind").and_then(Value::as_str) == Some("hardware"))
            .map(|p| p.get("why").and_then(Value::as_str).unwrap_or("inline hook unsafe").to_string());
        let info = PointInfo {
            id: id.clone(),
            logpoint,
            function: r.function,
            file: r.file,
            line: r.line,
            address: hex(r.addresses[0]),
            addresses: r.addresses.iter().map(|a| hex(*a)).collect(),
            runtime_address: reply.get("runtimeAddresses").and_then(|a| a.get(0)).and_then(Value::as_str).map(str::to_string),
            condition: req.condition.clone(),
            hit_count: req.hit_count.filter(|&n| n > 0),
            message: req.message.clone(),
            hook: if hardware.is_some() { "hardware" } else { "inline" }.into(),
            hook_reason: hardware,
            agent_spec: spec,
        };
        // Known before any fork can pause on it (a pause on an unknown point counts as removed).
        session.debug.lock().points.insert(id.clone(), info.clone());
        // Forks run the same code: the point is theirs too (children.rs).
        let frida = self.debugger_frida()?;
        for pid in super::children::live_forks(session) {
            if let Err(e) = set_point_in(&frida, pid, &info).await {
                tracing::warn!("session {}: {id} not set in child {pid}: {}", session.id, e.message);
            }
        }
        Ok(())
    }

    fn resolve_point(&self, session: &Session, req: &PointRequest) -> Result<Resolved> {
        let symbols = self.session_symbols(session)?;
        let lines = LineTable::cached(&session.binary_path)?;
        if let Some(pattern) = &req.function {
            let p = Pattern::parse(pattern)?;
            let mut matches: Vec<&crate::symbols::FunctionInfo> =
                symbols.functions.iter().filter(|f| f.address != 0 && p.matches(f, &session.project_root)).collect();
            matches.dedup_by_key(|f| f.address);
            let f = match matches.as_slice() {
                [one] => *one,
                [] => {
                    return Err(StrobeError::validation(format!(
                        "No function matches '{pattern}'. Closest names: {}.",
                        symbols.closest_names(pattern, 5).join(", ")
                    )))
                }
                many => {
                    let names: Vec<&str> = many.iter().take(10).map(|f| f.name.as_str()).collect();
                    return Err(StrobeError::validation(format!(
                        "'{pattern}' matches {} functions ({}); a breakpoint needs exactly one. Use its full name.",
                        many.len(),
                        names.join(", ")
                    )));
                }
            };
            let (file, line) = match lines.address_to_line(f.address) {
                Some((file, line)) => (Some(file.to_string()), Some(line)),
                None => (f.file.clone(), f.line),
            };
            return Ok(Resolved { function: Some(f.name.clone()), file, line, addresses: vec![f.address], scans: vec![None] });
        }
        let (Some(file), Some(line)) = (&req.file, req.line) else { unreachable!("validated") };
        let resolved = lines.resolve_line(file, line)?;
        let f = function_at(&symbols, resolved.addresses[0]);
        // A function's very entry needs no jump-target or red-zone check.
        let scans = resolved
            .addresses
            .iter()
            .map(|&a| function_at(&symbols, a).filter(|f| f.address != a).map(|f| (f.address, f.address + f.size)))
            .collect();
        Ok(Resolved {
            function: f.map(|f| f.name.clone()),
            file: Some(resolved.file),
            line: Some(resolved.line),
            addresses: resolved.addresses,
            scans,
        })
    }

    /// The Frida runtime of live sessions.
    pub(crate) fn debugger_frida(&self) -> Result<Arc<crate::frida::FridaRuntime>> {
        self.frida
            .lock()
            .unwrap()
            .get()
            .cloned()
            .ok_or_else(|| StrobeError::new(ErrorCode::ProcessExited, "The Frida host is not running; the session's target is gone. Launch again."))
    }
}

fn validate(req: &PointRequest) -> Result<()> {
    match (&req.function, &req.file, req.line) {
        (Some(_), None, None) | (None, Some(_), Some(_)) => {}
        (Some(_), _, _) => return Err(StrobeError::validation("Give either 'function' or 'file'+'line', not both.")),
        (None, Some(_), None) => return Err(StrobeError::validation("'file' needs a 'line' (1-based).")),
        (None, None, Some(_)) => return Err(StrobeError::validation("'line' needs a 'file' (e.g. 'src/main.c' or 'main.c').")),
        (None, None, None) => return Err(StrobeError::validation("Each breakpoint needs 'function' (a name or pattern) or 'file'+'line'.")),
    }
    if req.line == Some(0) {
        return Err(StrobeError::validation("'line' is 1-based; 0 is not a line."));
    }
    if let Some(c) = &req.condition {
        if c.len() > MAX_CONDITION_BYTES {
            return Err(StrobeError::validation(format!("'condition' is {} bytes; at most {MAX_CONDITION_BYTES}.", c.len())));
        }
        if c.trim().is_empty() {
            return Err(StrobeError::validation("'condition' is empty; omit it to break on every hit."));
        }
    }
    if let Some(m) = &req.message {
        if m.len() > MAX_MESSAGE_BYTES {
            return Err(StrobeError::validation(format!("'message' is {} bytes; at most {MAX_MESSAGE_BYTES}.", m.len())));
        }
        if req.hit_count.is_some_and(|n| n > 0) {
            return Err(StrobeError::validation("'hitCount' applies to breakpoints only; a logpoint (with 'message') logs every hit."));
        }
    }
    Ok(())
}

impl Engine {
    /// A fresh agent in `pid` — the root after a re-attach (lifecycle.rs `reattach`), or a
    /// fork (children.rs) — gets every breakpoint and logpoint. Threads paused in an old
    /// agent of the pid were released when it unloaded; hit counts are per agent, so they
    /// start over. A point the root's new agent refuses is dropped, with a warning.
    pub(super) async fn install_points(&self, session: &Session, pid: u32) {
        let points: Vec<PointInfo> = {
            let mut st = session.debug.lock();
            st.paused.retain(|_, p| p.pid != pid);
            st.points.values().cloned().collect()
        };
        let Ok(frida) = self.frida_running() else { return };
        for p in points {
            if let Err(e) = set_point_in(&frida, pid, &p).await {
                tracing::warn!("session {}: {} could not be set in pid {pid}: {}", session.id, p.id, e.message);
                if pid == session.pid {
                    session.debug.lock().points.remove(&p.id);
                }
            }
        }
    }
}

/// Set point `p` in `pid`'s agent, with the spec the root's agent was sent.
async fn set_point_in(frida: &crate::frida::FridaRuntime, pid: u32, p: &PointInfo) -> Result<Value> {
    let method = if p.logpoint { "setLogpoint" } else { "setBreakpoint" };
    frida.host().rpc(pid, method, json!([p.agent_spec])).await
}
