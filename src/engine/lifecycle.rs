//! The life of a session's processes, fed by the ingest loop: crash reports (one `crash`
//! event, symbolized here), how each process ended (exit code or signal), fork/exec children
//! (attached, hooked and resumed), and thread names for events.
//!
//! How a process ended is learned from, in order of trust: the host's `exit_status` (the
//! kernel's word, when Frida had not reaped the process yet), the agent's crash report (the
//! signal), the agent's `process_exit` (the code passed to `exit`/`_exit`). A process that
//! left none of these (e.g. `kill -9` from outside, after Frida reaped it) is reported as
//! killed by an unobservable signal.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{json, Value};

use super::{now_unix, Engine, Session};
use crate::symbols::SymbolIndex;

/// How a process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ProcessEnd {
    Code(i64),
    Signal(String),
}

impl ProcessEnd {
    /// "code: 3" / "signal: SIGSEGV": the wording of `PROCESS_EXITED` messages.
    pub fn describe(&self) -> String {
        match self {
            ProcessEnd::Code(c) => format!("code: {c}"),
            ProcessEnd::Signal(s) => format!("signal: {s}"),
        }
    }

    /// How a session's end reads everywhere (debug_continue, debug_session status and list):
    /// `(exitCode, signal)`, at most one of them set, from the `sessions.exit_code` column.
    pub(crate) fn from_db_code(code: Option<i64>) -> (Option<i64>, Option<String>) {
        match code {
            Some(c) if c < 0 => (None, Some(signal_name(-c as i32))),
            c => (c, None),
        }
    }

    /// The `sessions.exit_code` column: the code, or minus the signal number.
    pub(super) fn db_code(&self) -> Option<i64> {
        match self {
            ProcessEnd::Code(c) => Some(*c),
            ProcessEnd::Signal(s) => signal_number(s).map(|n| -(n as i64)),
        }
    }
}

/// A forked or exec'd process of a session.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChildProcess {
    pub pid: u32,
    pub parent_pid: u32,
    /// "fork" or "exec".
    pub origin: String,
    pub binary: String,
    /// "running" or "exited".
    pub status: String,
    pub exit_code: Option<i64>,
    pub signal: Option<String>,
}

/// Per-session lifecycle state, inside `SessionState`.
#[derive(Debug, Default)]
pub(crate) struct LifeState {
    /// (pid, tid) → name; `None` = looked up, has none.
    thread_names: HashMap<(u32, i64), Option<String>>,
    /// What each process told us about its end, until its session detaches.
    ends: HashMap<u32, ProcessEnd>,
    /// Trusted ends from the host (kernel status); they win over the agent's word.
    kernel_ends: HashMap<u32, ProcessEnd>,
    /// How the root process ended, once it did.
    pub root_end: Option<ProcessEnd>,
    pub children: BTreeMap<u32, ChildProcess>,
    /// Processes whose image is not the session's binary (an exec of another program).
    pid_symbols: HashMap<u32, Arc<SymbolIndex>>,
    /// The functions hooked in each followed child (children.rs).
    pub child_hooked: HashMap<u32, std::collections::BTreeSet<u32>>,
    /// `stop` is detaching: a session that ends now was ended by us, not lost.
    pub detaching: bool,
}

impl LifeState {
    /// A `{k:"thread", tid, name}` record from the agent.
    pub fn note_thread(&mut self, pid: u32, rec: &Value) {
        if let Some(tid) = rec.get("tid").and_then(Value::as_i64) {
            let name = rec.get("name").and_then(Value::as_str).map(str::to_string);
            self.thread_names.insert((pid, tid), name);
        }
    }

    /// The name of thread `tid` of `pid`: from the agent's records, else (hooks that bypass
    /// the JS path) read once from /proc while the thread lives.
    pub fn thread_name(&mut self, pid: u32, tid: Option<i64>) -> Option<String> {
        let tid = tid?;
        self.thread_names
            .entry((pid, tid))
            .or_insert_with(|| {
                std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")).ok().map(|s| s.trim_end().to_string())
            })
            .clone()
    }

    /// Does `pid` run another program than the session's binary (an exec)?
    pub fn has_own_image(&self, pid: u32) -> bool {
        self.pid_symbols.contains_key(&pid)
    }

    /// The symbols of a process that runs another program than the session's binary.
    pub fn image_of(&self, pid: u32) -> Option<Arc<SymbolIndex>> {
        self.pid_symbols.get(&pid).cloned()
    }

    pub fn live_children(&self) -> Vec<u32> {
        self.children.values().filter(|c| c.status == "running").map(|c| c.pid).collect()
    }
}

/// Agent call ids are per agent: key open calls by process too.
pub(crate) fn call_key(pid: u32, call: u64) -> u64 {
    ((pid as u64) << 40) ^ call
}

/// The symbols that name `pid`'s function ids: its own image's after an exec of another
/// program, else the session's.
pub(crate) fn symbols_for(engine: &Engine, s: &Session, pid: u32) -> crate::error::Result<Arc<SymbolIndex>> {
    if let Some(sym) = s.state.lock().unwrap().life.pid_symbols.get(&pid).cloned() {
        return Ok(sym);
    }
    engine.session_symbols(s)
}

/// `crash` and `process_exit` messages; returns false for other types.
pub(super) fn on_agent_message(engine: &Engine, s: &Arc<Session>, pid: u32, message: &Value) -> bool {
    match message.get("type").and_then(Value::as_str) {
        Some("process_exit") => {
            if let Some(code) = message.get("code").and_then(Value::as_i64) {
                s.state.lock().unwrap().life.ends.entry(pid).or_insert(ProcessEnd::Code(code));
            }
            // The points' last hit counts: after the exit the agent can no longer be asked.
            let mut st = s.debug.lock();
            for (id, hits) in super::debug_state::reported_hits(message.get("points")) {
                st.raise_hits(id, hits);
            }
            true
        }
        Some("crash") => {
            let event = super::crash_report::crash_event(engine, s, pid, message);
            if let Some(sig) = &event.signal {
                s.state.lock().unwrap().life.ends.insert(pid, ProcessEnd::Signal(sig.clone()));
            }
            engine.store.insert(vec![event]);
            true
        }
        _ => false,
    }
}

/// The host's view of how `pid` ended (kernel status).
pub(super) fn on_exit_status(engine: &Engine, pid: u32, code: Option<i32>, signal: Option<i32>) {
    let Some(s) = engine.session_by_pid(pid) else { return };
    let end = match (code, signal) {
        (Some(c), _) => ProcessEnd::Code(c as i64),
        (None, Some(n)) => ProcessEnd::Signal(signal_name(n)),
        _ => return,
    };
    s.state.lock().unwrap().life.kernel_ends.insert(pid, end);
}

/// The Frida session of `pid` ended. An exec ("process-replaced") is not an end.
pub(super) fn on_detached(engine: &Arc<Engine>, pid: u32, reason: &str) {
    if reason == "process-replaced" {
        return;
    }
    let Some(s) = engine.session_by_pid(pid) else { return };
    let ours = s.state.lock().unwrap().life.detaching;
    if pid == s.pid && reason != "process-terminated" && !ours && s.is_running() && super::descendants::running(pid) {
        // The process lives on but Frida ended its session. Known cause: a fork made while
        // the forking thread was inside a traced function; Frida's teardown of the agent
        // copy in the child then closes the parent's session too (docs/performance.md).
        // A debugger keeps debugging: attach a fresh agent with the session's hooks.
        reattach(engine, s, reason.to_string());
        return;
    }
    if pid == s.pid && reason != "process-terminated" && !ours && s.is_running() {
        // The same race, the process already gone: its kernel status may still be on its way.
        let (engine, reason) = (engine.clone(), reason.to_string());
        engine.runtime.clone().spawn(async move {
            end_after_lost_session(&engine, &s, &format!("Frida had ended its session ({reason}) as it exited")).await;
        });
        return;
    }
    let end = {
        let mut st = s.state.lock().unwrap();
        let life = &mut st.life;
        let kernel = life.kernel_ends.remove(&pid);
        let agent = life.ends.remove(&pid);
        // The kernel's status wins when the host could read it (it also settles SIGSEGV
        // versus SIGBUS, which the agent can only infer).
        kernel.or(agent)
    };
    if pid != s.pid {
        let mut st = s.state.lock().unwrap();
        if let Some(c) = st.life.children.get_mut(&pid) {
            c.status = "exited".into();
            match &end {
                Some(ProcessEnd::Code(code)) => c.exit_code = Some(*code),
                Some(ProcessEnd::Signal(sig)) => c.signal = Some(sig.clone()),
                None => {}
            }
        }
        st.life.child_hooked.remove(&pid);
        st.watch.js_for_watch.remove(&pid);
        drop(st);
        // Its threads paused at breakpoints went with it.
        s.debug.lock().paused.retain(|_, p| p.pid != pid);
        engine.by_pid.lock().unwrap().remove(&pid);
        return;
    }
    if !s.is_running() || ours {
        return; // `stop` ends the session itself (as "stopped")
    }
    let reason_text = match &end {
        Some(e) => e.describe(),
        None if reason == "process-terminated" => "killed by a signal that could not be observed (no exit() call and no crash were seen; an outside `kill -9` is the usual cause)".to_string(),
        None => reason.to_string(),
    };
    end_root(engine, &s, end, reason_text);
}

/// The root process ended (`end`: how, when known): the session is "exited".
fn end_root(engine: &Engine, s: &Session, end: Option<ProcessEnd>, reason_text: String) {
    let code = match &end {
        Some(ProcessEnd::Code(c)) => Some(*c),
        _ => None,
    };
    s.state.lock().unwrap().life.root_end = end.clone();
    // Its threads paused at breakpoints went with it (status must not list them).
    s.debug.lock().paused.retain(|_, p| p.pid != s.pid);
    // The last output and events are stored before anyone can see "exited": a client that
    // polls the status and then queries must find every event.
    engine.store.flush();
    s.mark_exited(code, Some(reason_text));
    let _ = engine.store.update_session_status(&s.id, "exited", Some(now_unix()), end.and_then(|e| e.db_code()));
}

/// Instrument the root process again after Frida ended its session while it kept running.
/// Events between the two sessions are lost; the fresh agent gets the session's hooks,
/// recipes, watches, tracing options and sampling choices (children.rs), and its
/// breakpoints and logpoints (threads paused in the old agent were released, hit counts
/// start over: the warning says so).
fn reattach(engine: &Arc<Engine>, s: Arc<Session>, reason: String) {
    let engine = engine.clone();
    engine.runtime.clone().spawn(async move {
        let result = match engine.frida().await {
            Ok(frida) => instrument(&engine, &frida, &s, s.pid, &s.binary_path.clone()).await,
            Err(e) => Err(e),
        };
        if result.is_ok() {
            // The new agent reports libraries loaded from now on (modules.rs).
            engine.load_modules(&s).await;
            engine.install_points(&s, s.pid).await;
        }
        match result {
            Ok(()) => tracing::warn!(
                "session {}: Frida ended the session of pid {} ({reason}) while it kept running; \
                 re-attached with the session's hooks, watches, tracing options, breakpoints and \
                 logpoints (events in between are lost; paused threads were resumed, hit counts \
                 start over)",
                s.id,
                s.pid
            ),
            // It ended meanwhile (its exit status went with the lost session).
            Err(_) if !super::descendants::running(s.pid) => {
                end_after_lost_session(&engine, &s, &format!("Frida had ended its session ({reason}) while it kept running")).await;
            }
            // Still "running": the process is, and `stop` must kill it.
            Err(e) => tracing::warn!(
                "session {}: Frida ended the session of pid {} ({reason}) while it kept running, and attaching \
                 again failed: {}; it runs untraced until the session is stopped",
                s.id,
                s.pid,
                e.message
            ),
        }
    });
}

/// The root process ended after Frida ended its session (`why`): the host reports the
/// kernel's status of a process it spawned (exit_status), which may still be on its way.
async fn end_after_lost_session(engine: &Engine, s: &Session, why: &str) {
    let mut end = None;
    for _ in 0..100 {
        end = s.state.lock().unwrap().life.kernel_ends.remove(&s.pid);
        if end.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let end = end.or_else(|| s.state.lock().unwrap().life.ends.remove(&s.pid));
    if !s.is_running() {
        return; // stopped meanwhile
    }
    let text = match &end {
        Some(e) => e.describe(),
        None => format!("ended untraced, exit status unknown: {why}"),
    };
    end_root(engine, s, end, text);
}

/// A fork or exec of one of our processes, suspended: attach, hook, resume. Never leaves it
/// suspended, whatever fails.
pub(super) fn on_child_added(engine: &Arc<Engine>, pid: u32, parent_pid: u32, origin: String) {
    let engine = engine.clone();
    let session = engine.session_by_pid(parent_pid).or_else(|| engine.session_by_pid(pid));
    engine.runtime.clone().spawn(async move {
        let Ok(frida) = engine.frida().await else { return };
        let Some(s) = session.filter(|s| s.is_running()) else {
            let _ = frida.host().resume(pid).await;
            return;
        };
        let binary = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_else(|_| s.binary_path.clone());
        engine.by_pid.lock().unwrap().insert(pid, s.clone());
        if pid != s.pid {
            // Known before it runs, so that a stop meanwhile kills it too.
            let child = ChildProcess {
                pid,
                parent_pid,
                origin: origin.clone(),
                binary: binary.display().to_string(),
                status: "running".into(),
                exit_code: None,
                signal: None,
            };
            s.state.lock().unwrap().life.children.insert(pid, child);
        }
        if let Err(e) = instrument(&engine, &frida, &s, pid, &binary).await {
            tracing::warn!("session {}: could not instrument {origin} child {pid}: {}", s.id, e.message);
        }
        if !s.is_running() {
            // The session was stopped while the child was being set up.
            let _ = frida.host().kill(pid).await;
            return;
        }
        if let Err(e) = frida.host().resume(pid).await {
            tracing::warn!("session {}: could not resume child {pid}: {}", s.id, e.message);
        }
    });
}

async fn instrument(
    engine: &Engine,
    frida: &crate::frida::FridaRuntime,
    s: &Session,
    pid: u32,
    binary: &Path,
) -> crate::error::Result<()> {
    let same_image = super::canonical_or_same(binary) == s.binary_path;
    let symbols = if same_image { engine.session_symbols(s).ok() } else { engine.symbols.get(binary).ok() };
    let image_base = symbols.as_ref().map(|x| x.image_base).unwrap_or(0);
    let init = json!({
        "sessionId": s.id,
        "imageBase": format!("0x{image_base:x}"),
        "followChildren": super::children::follow_children(),
        // A re-attach or a fork runs the same image past `main`; an exec starts it anew.
        "mainStarted": same_image,
    });
    frida.host().attach(pid, frida.agent_js(), init).await?;
    let Some(symbols) = symbols else { return Ok(()) };
    {
        // A fresh agent hooks nothing yet (after an exec, the pid's old hooks went with its image).
        let mut st = s.state.lock().unwrap();
        st.life.child_hooked.remove(&pid);
        st.watch.js_for_watch.remove(&pid);
        if !same_image {
            st.life.pid_symbols.insert(pid, symbols.clone());
        }
    }
    // The session's patterns, matched against this image (a fork: the hooks the parent has).
    super::children::sync_child(engine, frida, s, pid, &symbols, true).await
}

const SIGNALS: &[(i32, &str)] = &[
    (libc::SIGHUP, "SIGHUP"),
    (libc::SIGINT, "SIGINT"),
    (libc::SIGQUIT, "SIGQUIT"),
    (libc::SIGILL, "SIGILL"),
    (libc::SIGTRAP, "SIGTRAP"),
    (libc::SIGABRT, "SIGABRT"),
    (libc::SIGBUS, "SIGBUS"),
    (libc::SIGFPE, "SIGFPE"),
    (libc::SIGKILL, "SIGKILL"),
    (libc::SIGUSR1, "SIGUSR1"),
    (libc::SIGSEGV, "SIGSEGV"),
    (libc::SIGUSR2, "SIGUSR2"),
    (libc::SIGPIPE, "SIGPIPE"),
    (libc::SIGALRM, "SIGALRM"),
    (libc::SIGTERM, "SIGTERM"),
    (libc::SIGXCPU, "SIGXCPU"),
    (libc::SIGXFSZ, "SIGXFSZ"),
    (libc::SIGSYS, "SIGSYS"),
];

pub(crate) fn signal_name(n: i32) -> String {
    SIGNALS.iter().find(|(k, _)| *k == n).map(|(_, s)| s.to_string()).unwrap_or_else(|| format!("signal {n}"))
}

pub(crate) fn signal_number(name: &str) -> Option<i32> {
    SIGNALS.iter().find(|(_, s)| *s == name).map(|(k, _)| *k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_describe_and_encode() {
        assert_eq!(ProcessEnd::Code(3).describe(), "code: 3");
        assert_eq!(ProcessEnd::Signal("SIGSEGV".into()).describe(), "signal: SIGSEGV");
        assert_eq!(ProcessEnd::Signal("SIGSEGV".into()).db_code(), Some(-11));
        assert_eq!(ProcessEnd::from_db_code(Some(-11)), (None, Some("SIGSEGV".to_string())));
        assert_eq!(ProcessEnd::from_db_code(Some(3)), (Some(3), None));
        assert_eq!(signal_name(9), "SIGKILL");
        assert_eq!(signal_name(64), "signal 64");
        assert_ne!(call_key(1, 5), call_key(2, 5));
    }
}
