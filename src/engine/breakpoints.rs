//! `debug_breakpoint` on a live session: have the agents (the root's and its forks') hook
//! the addresses `point_resolve.rs` found. One call is all or nothing: every item is checked
//! before anything changes, and an item an agent refuses takes the call's other additions
//! back out. Removals all happen before any thread they held is resumed.

use std::sync::Arc;

use serde::Serialize;
use serde_json::{json, Value};

use super::debug_state::{hex, PointInfo};
use super::point_resolve::{prepare, PointTarget, Prepared};
use super::{Engine, Session};
use crate::error::{ErrorCode, Result, StrobeError};

pub use super::point_resolve::PointRequest;
pub(crate) use super::point_resolve::validate;

pub const MAX_BREAKPOINTS: usize = 50;
pub const MAX_LOGPOINTS: usize = 100;

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PointsResult {
    pub breakpoints: Vec<PointInfo>,
    pub logpoints: Vec<PointInfo>,
    /// About points just added, e.g. one in code built for AVX (`PointTarget::avx_warning`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// A thread to resume once every removal is done: (thread id, its process).
pub(crate) type Waiting = Vec<(u64, u32)>;

/// An error about item `i` of the caller's list, in the caller's terms.
fn item_error(i: usize, req: &PointRequest, e: StrobeError) -> StrobeError {
    StrobeError::new(e.code, format!("add[{i}] ({}): {} Nothing was changed.", req.describe(), e.message))
}

/// What an agent's refusal says, without the RPC wrapping or its JavaScript stack trace.
fn agent_reason(e: &StrobeError) -> String {
    let text = e.message.split_once(" failed: ").map_or(e.message.as_str(), |(_, why)| why);
    let first = text.lines().next().unwrap_or(text).trim();
    first.strip_prefix("Error: ").unwrap_or(first).to_string()
}

impl Engine {
    /// Add and remove breakpoints/logpoints of a live session.
    pub async fn set_points(self: &Arc<Engine>, id: &str, add: &[PointRequest], remove: &[String]) -> Result<PointsResult> {
        let session = self.session(id)?;
        session.ensure_running()?;
        {
            let st = session.debug.lock();
            if let Some(unknown) = remove.iter().find(|r| !st.points.contains_key(*r)) {
                let known: Vec<String> = st.points.keys().cloned().collect();
                return Err(StrobeError::validation(format!(
                    "No breakpoint or logpoint '{unknown}' in this session. Active: {}. Nothing was changed.",
                    if known.is_empty() { "none".to_string() } else { known.join(", ") }
                )));
            }
        }
        let target = self.point_target(&session)?;
        // Code not loaded yet, in a program that loads libraries: pending (pending_points.rs).
        let mut pending = Vec::new();
        let mut prepared = Vec::new();
        for (i, req) in add.iter().enumerate() {
            match prepare(&target, req) {
                Ok(p) => prepared.push(p),
                Err(e) if super::pending_points::may_load_later(&session.binary_path, &e) => pending.push(req.clone()),
                Err(e) => return Err(item_error(i, req, e)),
            }
        }
        check_limits(&session, &prepared, remove)?;
        let warnings: Vec<String> = prepared.iter().filter_map(|p| target.avx_warning(p, &p.request.describe())).collect();
        self.install_all(&session, prepared).await?;
        for req in pending {
            self.add_pending_point(&session, &req);
        }
        let mut waiting = Waiting::new();
        for rid in remove {
            waiting.extend(self.unset_point(&session, rid).await?);
        }
        self.resume_waiting(waiting).await?;
        self.refresh_hits(&session).await;
        let (breakpoints, logpoints) = session.debug.points();
        Ok(PointsResult { breakpoints, logpoints, warnings })
    }

    /// What points of `session` resolve against: its binary and project root.
    pub(crate) fn point_target(&self, session: &Session) -> Result<PointTarget> {
        Ok(PointTarget {
            binary: session.binary_path.clone(),
            project_root: session.project_root.clone(),
            symbols: self.session_symbols(session)?,
            libraries: self.dwarf_libraries(session),
        })
    }

    /// Set every prepared point in the root's agent (and its forks'), or none: an item the
    /// root's agent refuses removes the ones set before it. Returns them in order.
    pub(crate) async fn install_all(&self, session: &Session, prepared: Vec<Prepared>) -> Result<Vec<PointInfo>> {
        let mut done: Vec<PointInfo> = Vec::new();
        for (i, p) in prepared.into_iter().enumerate() {
            match self.install_one(session, &p, None).await {
                Ok(info) => done.push(info),
                Err(e) => {
                    let mut waiting = Waiting::new();
                    for info in &done {
                        waiting.extend(self.unset_point(session, &info.id).await.unwrap_or_default());
                    }
                    let _ = self.resume_waiting(waiting).await;
                    return Err(item_error(i, &p.request, e));
                }
            }
        }
        Ok(done)
    }

    /// Set one point (id `bp-N`/`lp-N`, or `id` when given) in the root and its forks.
    pub(crate) async fn install_one(&self, session: &Session, p: &Prepared, id: Option<&str>) -> Result<PointInfo> {
        let logpoint = p.request.message.is_some();
        let id = {
            let mut st = session.debug.lock();
            st.next_id += 1;
            id.map(str::to_string).unwrap_or_else(|| format!("{}-{}", if logpoint { "lp" } else { "bp" }, st.next_id))
        };
        let mut spec = p.spec.clone();
        spec["id"] = json!(id);
        let method = if logpoint { "setLogpoint" } else { "setBreakpoint" };
        let frida = self.debugger_frida()?;
        let reply = frida.host().rpc(session.pid, method, json!([&spec])).await.map_err(|e| {
            // The process may have ended meanwhile: that is not the request's fault.
            if e.code == ErrorCode::ProcessExited {
                return e;
            }
            StrobeError::new(
                ErrorCode::ValidationError,
                format!(
                    "could not set the {} at {}: {}. Try a nearby line or the function's entry (function: name).",
                    if logpoint { "logpoint" } else { "breakpoint" },
                    hex(p.addresses[0]),
                    agent_reason(&e)
                ),
            )
        })?;
        let hardware = reply
            .get("probes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|p| p.get("kind").and_then(Value::as_str) == Some("hardware"))
            .map(|p| p.get("why").and_then(Value::as_str).unwrap_or("inline hook unsafe").to_string());
        // Static addresses as in the file that has the code (a library's own).
        let to_static = |a: u64| hex(a.wrapping_sub(p.offset));
        let info = PointInfo {
            id: id.clone(),
            logpoint,
            function: p.function.clone(),
            file: p.file.clone(),
            line: p.line,
            address: to_static(p.addresses[0]),
            addresses: p.addresses.iter().map(|a| to_static(*a)).collect(),
            runtime_address: reply.get("runtimeAddresses").and_then(|a| a.get(0)).and_then(Value::as_str).map(str::to_string),
            module: p.module.clone(),
            pending: false,
            request: p.request.clone(),
            condition: p.request.condition.clone(),
            hit_count: p.request.hit_count.filter(|&n| n > 0),
            message: p.request.message.clone(),
            hits: 0,
            hook: if hardware.is_some() { "hardware" } else { "inline" }.into(),
            hook_reason: hardware,
            agent_spec: spec,
        };
        // Known before any fork can pause on it.
        session.debug.lock().points.insert(id.clone(), info.clone());
        // Forks run the same code: the point is theirs too (children.rs).
        for pid in super::children::live_forks(session) {
            if let Err(e) = set_point_in(&frida, pid, &info).await {
                tracing::warn!("session {}: {id} not set in child {pid}: {}", session.id, e.message);
            }
        }
        Ok(info)
    }

    /// Take point `rid` out of every agent and the session; returns the threads it held,
    /// still paused (the caller resumes them once all its removals are done).
    pub(crate) async fn unset_point(&self, session: &Session, rid: &str) -> Result<Waiting> {
        let Some(point) = session.debug.lock().points.get(rid).cloned() else { return Ok(Waiting::new()) };
        let frida = self.debugger_frida()?;
        // Each agent (the root's, the forks') stops the point first (no new pause can start);
        // the threads paused on it are the ones the agents name and the ones we know.
        let method = if point.logpoint { "removeLogpoint" } else { "removeBreakpoint" };
        let paused_in = |reply: &Value, pid: u32| -> Waiting {
            reply.get("pausedThreads").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_u64).map(|t| (t, pid)).collect()
        };
        let mut waiting = paused_in(&frida.host().rpc(session.pid, method, json!([rid])).await?, session.pid);
        for pid in super::children::live_forks(session) {
            match frida.host().rpc(pid, method, json!([rid])).await {
                Ok(reply) => waiting.extend(paused_in(&reply, pid)),
                Err(e) => tracing::warn!("session {}: child {pid} keeps {rid}: {}", session.id, e.message),
            }
        }
        let mut st = session.debug.lock();
        st.points.remove(rid);
        st.removed.insert(rid.to_string());
        waiting.extend(st.paused.values().filter(|p| p.breakpoint_id.as_deref() == Some(rid)).map(|p| (p.thread_id, p.pid)));
        waiting.sort_unstable();
        waiting.dedup_by_key(|(tid, _)| *tid);
        for (tid, _) in &waiting {
            st.paused.remove(tid);
        }
        Ok(waiting)
    }

    /// Resume threads that removed breakpoints held. Frida detaches a hook only once no
    /// thread is inside it, so this comes after the removals.
    pub(crate) async fn resume_waiting(&self, waiting: Waiting) -> Result<()> {
        if waiting.is_empty() {
            return Ok(());
        }
        let frida = self.debugger_frida()?;
        for (tid, pid) in waiting {
            frida.host().post(pid, json!({ "type": format!("resume-{tid}") })).await?;
        }
        Ok(())
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

/// The per-session limits, counting what this call adds and removes.
pub(crate) fn check_limits(session: &Session, prepared: &[Prepared], remove: &[String]) -> Result<()> {
    let st = session.debug.lock();
    for (logpoint, max, what) in [(false, MAX_BREAKPOINTS, "breakpoints"), (true, MAX_LOGPOINTS, "logpoints")] {
        let kept = st.points.values().filter(|p| p.logpoint == logpoint && !remove.contains(&p.id)).count();
        let added = prepared.iter().filter(|p| p.request.message.is_some() == logpoint).count();
        if kept + added > max {
            return Err(StrobeError::validation(format!(
                "At most {max} {what} per session ({kept} set, {added} more asked); remove some first (debug_breakpoint remove: [ids]). Nothing was changed."
            )));
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
        for p in points.into_iter().filter(|p| !p.pending) {
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
pub(super) async fn set_point_in(frida: &crate::frida::FridaRuntime, pid: u32, p: &PointInfo) -> Result<Value> {
    let method = if p.logpoint { "setLogpoint" } else { "setBreakpoint" };
    frida.host().rpc(pid, method, json!([p.agent_spec])).await
}
