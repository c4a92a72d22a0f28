//! Per-session debugger state — breakpoints, logpoints, paused threads — and the ingest of
//! the agent's `paused`, `logpoint` and `conditionError` messages into it and the timeline.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::{json, Value};

use super::{monotonic_ns, Engine, Session};
use crate::store::event::{Event, EventType};
use crate::symbols::SymbolIndex;

/// A breakpoint or logpoint as reported by `debug_breakpoint` and `debug_session status`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PointInfo {
    pub id: String,
    #[serde(skip)]
    pub logpoint: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// The primary static address (hex), as in the module's file; none while pending.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub address: String,
    /// Every hooked address (a `for` line has several blocks), static.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<String>,
    /// `address` in the running process (what `debug_memory` and `$pc` use); absent
    /// until the code is loaded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime_address: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hit_count: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Executions of the line (or calls) counted so far: those whose condition held, summed
    /// over the session's processes (`refresh_hits`).
    pub hits: u64,
    /// The file the code is in, when it is a shared library (not the program).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    /// "inline" (a patched jump), "hardware" (a debug register, when patching is unsafe),
    /// or "pending" (in no loaded code yet: set when a library that has it loads).
    pub hook: String,
    /// Why an inline hook could not be used, for hardware hooks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hook_reason: Option<String>,
    /// Not in loaded code yet (engine/pending_points.rs).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub pending: bool,
    /// What was asked, to resolve a pending point again.
    #[serde(skip)]
    pub request: super::breakpoints::PointRequest,
    /// What the agent was sent to set it (a re-attached agent gets it again).
    #[serde(skip)]
    pub agent_spec: serde_json::Value,
}

/// One frame of a paused thread's backtrace.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FrameInfo {
    /// Static address: as in the module's file (what `debug_breakpoint` reports).
    pub address: String,
    /// Where the code is in the running process (what `debug_memory` takes).
    pub runtime_address: String,
    /// The module's file name (the program, a shared library, libc).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// Code inlined into the next frame (same address; symbols/inlines.rs).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub inlined: bool,
}

/// A thread blocked at a breakpoint or step.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PausedThread {
    pub thread_id: u64,
    /// The process it belongs to: the session's root or a followed fork.
    pub pid: u32,
    pub breakpoint_id: Option<String>,
    /// "breakpoint" or "step".
    pub reason: String,
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
    /// Static address of the pc (module-relative, as breakpoints report).
    pub address: String,
    /// The pc in the running process.
    pub runtime_address: String,
    pub backtrace: Vec<FrameInfo>,
    pub arguments: Value,
    /// ns since session start.
    pub paused_at_ns: i64,
    #[serde(skip)]
    pub pc: u64,
    #[serde(skip)]
    pub slide: u64,
    #[serde(skip)]
    pub registers: BTreeMap<String, u64>,
    #[serde(skip)]
    pub seq: u64,
}

#[derive(Default)]
pub(crate) struct DebugInner {
    pub next_id: u32,
    pub points: BTreeMap<String, PointInfo>,
    /// Points removed: a pause on one of them that arrives late was resumed by the removal.
    /// (A pause on a point not known yet is real: a thread can hit a point before the
    /// agent's reply that installed it reaches us.)
    pub removed: std::collections::BTreeSet<String>,
    pub paused: BTreeMap<u64, PausedThread>,
    /// Incremented on every pause: `debug_continue` waits for it to move.
    pub pause_seq: u64,
}

impl DebugInner {
    /// A point's hit count as an agent reported it: counts only grow (a report may be older
    /// than one already applied).
    pub(crate) fn raise_hits(&mut self, id: &str, hits: u64) {
        if let Some(p) = self.points.get_mut(id) {
            p.hits = p.hits.max(hits);
        }
    }
}

/// The `{id, hits}` entries of an agent's `points` list (`debuggerStatus`, `process_exit`).
pub(crate) fn reported_hits(points: Option<&Value>) -> impl Iterator<Item = (&str, u64)> {
    points.and_then(Value::as_array).into_iter().flatten().filter_map(|p| Some((p.get("id")?.as_str()?, p.get("hits")?.as_u64()?)))
}

/// The debugger half of a session.
#[derive(Default)]
pub struct DebugState {
    pub(crate) inner: Mutex<DebugInner>,
}

impl DebugState {
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, DebugInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn paused_threads(&self) -> Vec<PausedThread> {
        self.lock().paused.values().cloned().collect()
    }

    pub fn points(&self) -> (Vec<PointInfo>, Vec<PointInfo>) {
        let st = self.lock();
        let (lp, bp): (Vec<PointInfo>, Vec<PointInfo>) = st.points.values().cloned().partition(|p| p.logpoint);
        (bp, lp)
    }
}

pub(crate) fn hex(a: u64) -> String {
    format!("0x{a:x}")
}

pub(crate) fn parse_hex(v: Option<&Value>) -> Option<u64> {
    let s = v?.as_str()?;
    u64::from_str_radix(s.trim_start_matches("0x"), 16).ok()
}

/// The function holding session address `pc`. The session's index is sorted per module
/// (libraries are appended, engine/modules.rs), hence a scan.
pub(crate) fn function_at(symbols: &SymbolIndex, pc: u64) -> Option<&crate::symbols::FunctionInfo> {
    symbols.functions.iter().filter(|f| f.address <= pc && pc < f.address.wrapping_add(f.size.max(1))).max_by_key(|f| f.address)
}

/// Session time of an agent timestamp (CLOCK_MONOTONIC ns), or now.
fn session_ts(s: &Session, ts: Option<f64>) -> i64 {
    ts.map(|t| t as i64 - s.start_mono_ns).unwrap_or_else(|| monotonic_ns() - s.start_mono_ns)
}

/// Handle a batch of logpoint messages from the agent (logpoint_messages.ts):
/// `{ "type": "logpoints", "items": [[logpointId, message, threadId, ts], ...] }`.
pub(super) fn ingest_logpoints(engine: &Engine, s: &Arc<Session>, pid: u32, msg: &Value) {
    let Some(items) = msg.get("items").and_then(Value::as_array) else { return };
    let st = s.debug.lock();
    let events: Vec<Event> = items
        .iter()
        .filter_map(|item| {
            let [id, message, tid, ts] = item.as_array()?.as_slice() else { return None };
            let mut e = Event::new(&s.id, EventType::Logpoint, session_ts(s, ts.as_f64()));
            e.pid = Some(pid as i64);
            e.thread_id = tid.as_i64();
            let id = id.as_str()?.to_string();
            if let Some(p) = st.points.get(&id) {
                e.function_name = p.function.clone();
                e.source_file = p.file.clone();
                e.line_number = p.line.map(i64::from);
            }
            e.breakpoint_id = Some(id);
            e.logpoint_message = message.as_str().map(str::to_string);
            e.text = e.logpoint_message.clone();
            Some(e)
        })
        .collect();
    drop(st);
    engine.store.insert(events);
}

/// Handle `paused` and `conditionError` from the agent.
pub(super) fn ingest(engine: &Engine, s: &Arc<Session>, pid: u32, msg: &Value) {
    let ts = session_ts(s, msg.get("ts").and_then(Value::as_f64));
    let tid = msg.get("threadId").and_then(Value::as_u64);
    let mut e = match msg.get("type").and_then(Value::as_str) {
        Some("paused") => Event::new(&s.id, EventType::Pause, ts),
        _ => Event::new(&s.id, EventType::ConditionError, ts),
    };
    e.pid = Some(pid as i64);
    e.thread_id = tid.map(|t| t as i64);
    match e.event_type {
        EventType::Pause => {
            let pc = parse_hex(msg.get("address")).unwrap_or(0);
            // Every module's frames, inlined code included (as for crashes).
            let backtrace = super::backtrace::symbolize(engine, msg.get("frames").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]));
            let here = backtrace.first().cloned().unwrap_or_else(|| FrameInfo {
                address: hex(pc),
                runtime_address: hex(pc),
                module: None,
                function: None,
                file: None,
                line: None,
                inlined: false,
            });
            let registers: BTreeMap<String, u64> = msg
                .get("registers")
                .and_then(Value::as_object)
                .map(|o| o.iter().filter_map(|(k, v)| Some((k.clone(), parse_hex(Some(v))?))).collect())
                .unwrap_or_default();
            let bp = msg.get("breakpointId").and_then(Value::as_str).map(str::to_string);
            e.function_name = here.function.clone();
            e.source_file = here.file.clone();
            e.line_number = here.line.map(i64::from);
            e.breakpoint_id = bp.clone();
            e.backtrace = Some(json!(backtrace).to_string());
            e.arguments = msg.get("arguments").map(Value::to_string);
            e.locals = msg.get("locals").filter(|v| !v.is_null()).map(Value::to_string);
            e.registers = Some(json!(registers.iter().map(|(k, v)| (k.clone(), hex(*v))).collect::<BTreeMap<_, _>>()).to_string());
            let removed = bp.as_ref().is_some_and(|id| s.debug.lock().removed.contains(id));
            // A pause on a breakpoint removed meanwhile was already resumed by the removal.
            if let Some(tid) = tid.filter(|_| !removed) {
                let mut st = s.debug.lock();
                st.pause_seq += 1;
                let seq = st.pause_seq;
                let step = msg.get("step").and_then(Value::as_bool).unwrap_or(false);
                st.paused.insert(
                    tid,
                    PausedThread {
                        thread_id: tid,
                        pid,
                        breakpoint_id: bp,
                        reason: if step { "step" } else { "breakpoint" }.into(),
                        function: here.function,
                        file: here.file,
                        line: here.line,
                        address: here.address,
                        runtime_address: here.runtime_address,
                        backtrace,
                        arguments: msg.get("arguments").cloned().unwrap_or(Value::Null),
                        paused_at_ns: ts,
                        pc,
                        slide: parse_hex(msg.get("slide")).unwrap_or(0),
                        registers,
                        seq,
                    },
                );
            }
        }
        _ => {
            let id = msg.get("breakpointId").and_then(Value::as_str).unwrap_or_default().to_string();
            let cond = msg.get("condition").and_then(Value::as_str).unwrap_or_default();
            let err = msg.get("error").and_then(Value::as_str).unwrap_or_default();
            e.text = Some(format!("condition `{cond}` of {id} failed: {err}"));
            e.breakpoint_id = Some(id);
        }
    }
    // A launch's internal gate (launch_points.rs) is not the user's pause.
    if e.breakpoint_id.as_deref().is_some_and(|b| b.starts_with(super::launch_points::GATE_PREFIX)) {
        return;
    }
    engine.store.insert(vec![e]);
}

impl Engine {
    /// Bring every point's `hits` up to date from the agents (root and followed forks).
    /// No point installed, no call: a status poll must not post to the agents for nothing
    /// (a message from the host still queued when the program forks crashes the child:
    /// docs/performance.md, "Fork/exec following").
    pub(crate) async fn refresh_hits(&self, s: &Session) {
        if s.debug.lock().points.values().all(|p| p.pending) {
            return;
        }
        let Ok(frida) = self.debugger_frida() else { return };
        let mut totals: BTreeMap<String, u64> = BTreeMap::new();
        let mut pids = vec![s.pid];
        pids.extend(super::children::live_forks(s));
        for pid in pids {
            let Ok(reply) = frida.host().rpc(pid, "debuggerStatus", json!([])).await else { continue };
            for (id, hits) in reported_hits(reply.get("points")) {
                *totals.entry(id.to_string()).or_default() += hits;
            }
        }
        let mut st = s.debug.lock();
        for (id, hits) in totals {
            st.raise_hits(&id, hits);
        }
    }
}
