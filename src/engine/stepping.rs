//! `debug_continue`: resume paused threads, optionally stepping, and wait for the next pause,
//! the target's exit, or a timeout (then the answer is "running").
//!
//! Steps are one-shot hooks on the paused thread only (`installStepHooks`):
//! - step-over: every statement start of the current function on another line (whichever
//!   way control flows, the next line reached is among them), plus the return address;
//! - step-into: the same, plus the entry of every function with debug info that the current
//!   line calls directly (decoded by the agent);
//! - step-out: the caller's next line: every statement start of the caller on another line
//!   than the call's, taken only in a frame above the paused one (the return address, read
//!   at CFA - 8 with the CFA rule from `.eh_frame`, names the caller and the call's line).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{json, Value};

use super::debug_state::{function_at, hex, parse_hex, PausedThread};
use super::{Engine, Session, SessionStatus};
use crate::error::{Result, StrobeError};
use crate::inflight;
use crate::symbols::{LineTable, LocalsInfo};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepAction {
    Continue,
    StepOver,
    StepInto,
    StepOut,
}

impl StepAction {
    pub fn parse(s: &str) -> Result<StepAction> {
        Ok(match s {
            "continue" => StepAction::Continue,
            "step-over" => StepAction::StepOver,
            "step-into" => StepAction::StepInto,
            "step-out" => StepAction::StepOut,
            other => {
                return Err(StrobeError::validation(format!(
                    "Unknown action '{other}'. Use 'continue', 'step-over', 'step-into' or 'step-out'."
                )))
            }
        })
    }
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContinueResult {
    /// "paused", "running" or "exited".
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub breakpoint_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<u64>,
    /// The paused thread's process (the root, or a followed fork).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// How the process ended ("exited"): its exit code, or the signal that killed it (the
    /// same fields as `debug_session status`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// Says how it ended when neither is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_reason: Option<String>,
    /// Threads still paused after this call.
    pub paused_threads: usize,
    /// "running", but these processes are stopped by a signal (raise(SIGSTOP)).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stopped_by_signal: Vec<u32>,
    pub warnings: Vec<String>,
}

impl ContinueResult {
    /// The answer when thread `p` is the one to report as paused.
    fn paused_at(p: PausedThread, paused_threads: usize, warnings: Vec<String>) -> ContinueResult {
        ContinueResult {
            status: "paused".into(),
            breakpoint_id: p.breakpoint_id,
            thread_id: Some(p.thread_id),
            pid: Some(p.pid),
            reason: Some(p.reason),
            file: p.file,
            line: p.line,
            function: p.function,
            exit_code: None,
            signal: None,
            exit_reason: None,
            paused_threads,
            stopped_by_signal: Vec::new(),
            warnings,
        }
    }

    /// Why a session "running" may never pause: a process stopped by a signal.
    fn note_stopped(&mut self, session: &Session) {
        for pid in job_stopped(session) {
            self.warnings.push(format!("Process {pid} is stopped by a signal (SIGSTOP or SIGTSTP, e.g. raise(SIGSTOP)), not at a breakpoint: it cannot reach one. debug_continue({{action: 'continue'}}) sends it SIGCONT."));
            self.stopped_by_signal.push(pid);
        }
    }
}

/// The session's processes (root and followed forks) stopped by a job-control signal.
fn job_stopped(session: &Session) -> Vec<u32> {
    let mut pids = vec![session.pid];
    pids.extend(super::children::live_forks(session));
    pids.into_iter().filter(|&pid| super::descendants::job_stopped(pid)).collect()
}

impl Engine {
    /// Resume (all paused threads for `continue` without a thread; one thread otherwise) and
    /// wait up to `timeout` for the next pause or the exit.
    pub async fn continue_session(self: &Arc<Engine>, id: &str, action: StepAction, thread_id: Option<u64>, timeout: Duration) -> Result<ContinueResult> {
        let session = self.session(id)?;
        if session.status() != SessionStatus::Running {
            return Ok(self.exited_result(&session));
        }
        let mut warnings = Vec::new();
        let targets: Vec<PausedThread> = match (action, thread_id) {
            (StepAction::Continue, None) => session.debug.paused_threads(),
            _ => vec![self.paused_thread(&session, thread_id)?],
        };
        // Nothing paused: 'continue' just waits for the next pause (e.g. right after setting
        // breakpoints); steps need a paused thread (paused_thread() above said so).
        let frida = self.debugger_frida()?;
        if action != StepAction::Continue {
            let t = &targets[0];
            let (hooks, w) = self.step_hooks(&session, t, action).await?;
            warnings.extend(w);
            let mut req = json!({ "threadId": t.thread_id, "oneShot": hooks });
            if action == StepAction::StepOut {
                // Only the caller's frame ends the step, not this frame or a deeper one.
                if let Some(sp) = t.registers.get("rsp") {
                    req["aboveSp"] = json!(hex(*sp));
                }
            }
            let reply = frida.host().rpc(t.pid, "installStepHooks", json!([req])).await?;
            let installed = reply.get("installed").and_then(Value::as_array).map_or(0, Vec::len);
            for s in reply.get("skipped").and_then(Value::as_array).into_iter().flatten() {
                tracing::debug!("step hook skipped: {s}");
            }
            if installed == 0 {
                warnings.push("No step location could be hooked safely here; the thread runs until the next breakpoint.".into());
            }
        }
        let seq_before = {
            let mut st = session.debug.lock();
            for t in &targets {
                st.paused.remove(&t.thread_id);
            }
            st.pause_seq
        };
        for t in &targets {
            // One thread that cannot be resumed (its process is gone) must not leave the
            // others stopped and unlisted.
            if let Err(e) = frida.host().post(t.pid, json!({ "type": format!("resume-{}", t.thread_id) })).await {
                warnings.push(format!("Thread {} (pid {}) could not be resumed: {}", t.thread_id, t.pid, e.message));
            }
        }
        if action == StepAction::Continue && thread_id.is_none() {
            // A process that stopped itself (raise(SIGSTOP)) waits for SIGCONT, as under gdb.
            for pid in job_stopped(&session) {
                // SAFETY: kill(2) with a pid and a signal number touches no memory of ours.
                if unsafe { libc::kill(pid as libc::pid_t, libc::SIGCONT) } == 0 {
                    warnings.push(format!("Process {pid} had stopped itself with a signal (SIGSTOP or SIGTSTP), not at a breakpoint: sent it SIGCONT."));
                }
            }
        }
        let deadline = Instant::now() + timeout;
        let mut pace = inflight::Pace::new();
        loop {
            {
                let st = session.debug.lock();
                if st.pause_seq > seq_before {
                    let p = st.paused.values().filter(|p| p.seq > seq_before).min_by_key(|p| p.seq).cloned();
                    if let Some(p) = p {
                        return Ok(ContinueResult::paused_at(p, st.paused.len(), warnings));
                    }
                }
            }
            if session.status() != SessionStatus::Running {
                let mut r = self.exited_result(&session);
                r.warnings = warnings;
                return Ok(r);
            }
            if Instant::now() >= deadline {
                let paused = session.debug.lock().paused.len();
                let mut r = ContinueResult { status: if paused > 0 { "paused" } else { "running" }.into(), paused_threads: paused, warnings, ..Default::default() };
                r.note_stopped(&session);
                return Ok(r);
            }
            wait_tick(&mut pace, deadline, timeout).await?;
        }
    }

    /// Wait (without resuming anything) until some thread is paused — the most recently paused
    /// one is reported — or the target exits, or `timeout` passes ("running").
    pub async fn wait_for_pause(self: &Arc<Engine>, id: &str, timeout: Duration) -> Result<ContinueResult> {
        let session = self.session(id)?;
        let deadline = Instant::now() + timeout;
        let mut pace = inflight::Pace::new();
        loop {
            {
                let st = session.debug.lock();
                if let Some(p) = st.paused.values().max_by_key(|p| p.seq).cloned() {
                    return Ok(ContinueResult::paused_at(p, st.paused.len(), Vec::new()));
                }
            }
            if session.status() != SessionStatus::Running {
                return Ok(self.exited_result(&session));
            }
            if Instant::now() >= deadline {
                let mut r = ContinueResult { status: "running".into(), ..Default::default() };
                r.note_stopped(&session);
                return Ok(r);
            }
            wait_tick(&mut pace, deadline, timeout).await?;
        }
    }

    fn exited_result(&self, session: &Session) -> ContinueResult {
        let st = session.state.lock().unwrap();
        let (exit_code, signal) = match &st.life.root_end {
            Some(super::lifecycle::ProcessEnd::Code(c)) => (Some(*c), None),
            Some(super::lifecycle::ProcessEnd::Signal(s)) => (None, Some(s.clone())),
            None => (st.exit_code, None),
        };
        let exit_reason = (exit_code.is_none() && signal.is_none()).then(|| st.exit_reason.clone()).flatten();
        ContinueResult { status: "exited".into(), exit_code, signal, exit_reason, ..Default::default() }
    }

    /// The one-shot hook addresses for a step of thread `t`.
    async fn step_hooks(&self, session: &Session, t: &PausedThread, action: StepAction) -> Result<(Vec<Value>, Vec<String>)> {
        let symbols = self.session_symbols(session)?;
        let lines = LineTable::cached(&session.binary_path)?;
        let info = LocalsInfo::cached(&session.binary_path)?;
        let mut hooks = Vec::new();
        let mut warnings = Vec::new();
        let func = function_at(&symbols, t.pc).map(|f| (f.address, f.address + f.size));
        let scan = |lo: u64, hi: u64| json!({ "start": hex(lo), "end": hex(hi) });
        let current_line = lines.address_to_line(t.pc).map(|(_, l)| l);

        if action != StepAction::StepOut {
            match func {
                Some((lo, hi)) => {
                    for a in lines.statement_starts(lo, hi, current_line) {
                        hooks.push(json!({ "address": hex(a), "scan": scan(lo, hi) }));
                    }
                }
                None => warnings.push("The paused address is in no function with debug info; stepping falls back to the return address.".into()),
            }
        }
        if action == StepAction::StepInto {
            if let (Some((lo, hi)), Some(line)) = (func, current_line) {
                let ranges: Vec<(String, String)> = lines.line_ranges(lo, hi, line).into_iter().map(|(a, b)| (hex(a), hex(b))).collect();
                let reply = self.debugger_frida()?.host().rpc(t.pid, "callTargets", json!([ranges])).await?;
                for target in reply.as_array().into_iter().flatten().filter_map(|v| parse_hex(Some(v))) {
                    if let Some(f) = symbols.functions.iter().find(|f| f.address == target) {
                        hooks.push(json!({ "address": hex(f.address) }));
                    }
                }
            }
        }
        // Hardware slots are few (4): try the lines right after the PC first, then the rest.
        hooks.sort_by_key(|h| {
            let a = parse_hex(h.get("address")).unwrap_or(0);
            (a < t.pc, a)
        });
        // The return address: where this frame's caller continues (first: it must not miss).
        match info.cfa_rule(t.pc).and_then(|(reg, off)| Some(t.registers.get(&reg)?.wrapping_add_signed(off))) {
            Some(cfa) => {
                let reply = self
                    .debugger_frida()?
                    .host()
                    .rpc(
                        t.pid,
                        "readLocals",
                        json!([t.thread_id, [{ "name": "return address", "kind": "static", "address": hex(cfa.wrapping_sub(8).wrapping_sub(t.slide)), "size": 8, "encoding": "pointer" }]]),
                    )
                    .await?;
                let ra = reply.get(0).and_then(|r| parse_hex(r.get("value")));
                match ra.map(|ra| ra.wrapping_sub(t.slide)).filter(|ra| function_at(&symbols, *ra).is_some()) {
                    Some(ra) if action == StepAction::StepOut => {
                        hooks.extend(caller_next_lines(&symbols, &lines, ra).into_iter().map(|(a, f)| json!({ "address": hex(a), "scan": scan(f.0, f.1) })));
                    }
                    Some(ra) => {
                        let f = function_at(&symbols, ra).map(|f| (f.address, f.address + f.size)).unwrap_or((ra, ra + 1));
                        hooks.insert(0, json!({ "address": hex(ra), "scan": scan(f.0, f.1) }));
                    }
                    None if action == StepAction::StepOut => {
                        warnings.push("The caller has no debug info (e.g. main returning into libc); the thread runs on.".into())
                    }
                    None => {}
                }
            }
            None => warnings.push("No unwind information at this PC; the return address is unknown.".into()),
        }
        Ok((hooks, warnings))
    }
}

/// Where step-out stops: the caller's next line after the call returning to `ra` (every
/// statement start of the caller on another line than the call's: the rest of the call's
/// line runs first, whichever way it branches), or `ra` itself when the caller has no other
/// line. Each with its function's range.
fn caller_next_lines(symbols: &crate::symbols::SymbolIndex, lines: &LineTable, ra: u64) -> Vec<(u64, (u64, u64))> {
    let Some(f) = function_at(symbols, ra) else { return Vec::new() };
    let range = (f.address, f.address + f.size);
    let call_line = lines.address_to_line(ra.wrapping_sub(1)).map(|(_, l)| l);
    let mut out: Vec<(u64, (u64, u64))> = match call_line {
        Some(_) => lines.statement_starts(range.0, range.1, call_line).into_iter().map(|a| (a, range)).collect(),
        None => Vec::new(),
    };
    if out.is_empty() {
        out.push((ra, range));
    }
    // Hardware slots are few: the lines right after the call first.
    out.sort_by_key(|(a, _)| (*a < ra, *a));
    out
}

/// One turn of a pause wait: ends the wait when the client cancelled the request,
/// reports how long it has waited (a progress heartbeat, once a second), then sleeps.
async fn wait_tick(pace: &mut inflight::Pace, deadline: Instant, timeout: Duration) -> Result<()> {
    inflight::check()?;
    if pace.due() {
        let left = deadline.saturating_duration_since(Instant::now());
        inflight::heartbeat(&format!(
            "waiting for a pause or the exit ({} s of {} s)",
            (timeout - left.min(timeout)).as_secs(),
            timeout.as_secs()
        ));
    }
    tokio::time::sleep(Duration::from_millis(15)).await;
    Ok(())
}
