//! The engine: sessions over processes, symbols and the event store. Front ends
//! (the MCP daemon, `strobe run`, the REPL) reach it only through the Lua runtime.

mod args_at_exit; // exit events re-read pointer parameters' pointees
mod backtrace; // pause and crash backtraces, symbolized per module (DWARF, ELF symbols)
mod breakpoints;
mod children; // hooks of followed forks and execs
mod crash_locals; // locals of a crash's frame, from the agent's stack snapshot
mod crash_report; // the crash event: symbolized backtrace (inlined calls too), locals
mod debug_state;
mod decode;
mod descendants; // stop kills what the target started, reported or not
mod eval; // debug_eval: expressions in a paused frame (src/eval)
mod event_limits; // settings → per-session FIFO limits
mod frame_vars;
mod ingest;
mod outbox; // fast-path batches through shared memory, not Frida's channel
mod python_target; // tracing Python code is not supported yet: say so
mod shebang; // `#!` scripts start as their interpreter's process
mod output_lines; // stdout/stderr pieces → one event per line
mod launch;
mod launch_points; // stopOnEntry, staged and launch breakpoints, set before the first instruction
mod memory;
mod modules; // shared libraries with DWARF: one session address space, per-module lookups
mod pending_points; // breakpoints in libraries not loaded yet
mod memory_expr; // debug_memory {expr} targets through the evaluator
mod point_compile; // conditions and templates compiled for the agent (src/eval/compile.rs)
mod point_resolve; // breakpoint requests → addresses and agent specs (no live process needed)
mod recipes;
mod registers; // crash registers: xmm as bytes and doubles
mod retention; // purge old retained sessions, cap the database size
mod lifecycle;
pub mod sampling;
mod session;
mod staging; // patterns and breakpoints staged for the next launch, per caller
mod stepping;
mod trace;
mod watches;
mod word_shapes; // typed text of fast-path hooks' raw words
mod capture_plan; // typed capture in native code: what to copy (issue 18)
mod capture_decode; // typed capture: the serializer's JSON from the copied bytes
mod capture_view; // typed capture: a record's copied blocks, indexed by address
mod capture_spans; // typed capture: a record's references to unchanged spans, resolved
mod capture_json; // typed capture: JSON text written as serde_json prints it
mod capture_lazy; // typed capture: enters stored as captured, decoded when read
mod code_names; // function pointers in typed values named as gdb does
pub mod capture_samples; // typed records kept for measuring the decoder (benches)

pub use launch::{LaunchRequest, LaunchResult};
pub use launch_points::{LaunchPoint, Origin};
pub use staging::{StageScope, Staged, StagedPoint};
pub use lifecycle::ChildProcess;

/// `(exitCode, signal)` of a `sessions.exit_code` column value (minus the signal when killed).
pub fn exit_fields(code: Option<i64>) -> (Option<i64>, Option<String>) {
    lifecycle::ProcessEnd::from_db_code(code)
}
pub use session::{Session, SessionStatus, StatusReport};
pub use breakpoints::{PointRequest, PointsResult, MAX_BREAKPOINTS, MAX_LOGPOINTS};
pub use debug_state::{FrameInfo, PausedThread, PointInfo};
pub use stepping::{ContinueResult, StepAction};
pub use trace::TraceResult;
pub use eval::EvalRequest;
pub use watches::{ActiveWatch, WatchTarget};
pub use memory::{MemoryTarget, MemoryRequest};

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, OnceCell};

use crate::error::{ErrorCode, Result, StrobeError};
use crate::frida::{FridaRuntime, HostEvent};
use crate::store::{EventQuery, QueryResult, SessionRow, Store};
use crate::symbols::SymbolCache;

/// Everything the engine needs to start; tests build it with temp paths.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// `$STROBE_HOME`: database, socket, settings.
    pub home: PathBuf,
    /// Shared cache: the Frida Python environment and compiled agents.
    pub cache_dir: PathBuf,
}

impl EngineConfig {
    pub fn from_env() -> EngineConfig {
        EngineConfig { home: crate::paths::strobe_home(), cache_dir: crate::paths::cache_dir() }
    }
}

pub struct Engine {
    config: EngineConfig,
    store: Arc<Store>,
    symbols: SymbolCache,
    /// The Frida host starts on first launch: a daemon that only answers queries never needs Python.
    frida: Mutex<Arc<OnceCell<Arc<FridaRuntime>>>>,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    by_pid: Mutex<HashMap<u32, Arc<Session>>>,
    /// Launches under way: binary → the session id reserved for it (launch.rs), so two
    /// concurrent launches of one binary cannot both spawn.
    launching: Mutex<HashMap<PathBuf, String>>,
    /// Patterns and breakpoints staged with no session, per caller (staging.rs).
    staged: Mutex<HashMap<StageScope, Staged>>,
    /// The multi-threaded runtime that owns the host's I/O tasks.
    runtime: tokio::runtime::Handle,
}

impl Engine {
    /// Opens the store under `config.home`. Must be called inside a tokio runtime.
    pub fn new(config: EngineConfig) -> Result<Arc<Engine>> {
        std::fs::create_dir_all(&config.home).map_err(|e| {
            StrobeError::internal(format!("cannot create STROBE_HOME {}: {e}", config.home.display()))
        })?;
        let store = Arc::new(Store::open(&config.home.join("strobe.db"))?);
        // Sessions that were live when a previous daemon died can never be resumed.
        for row in store.list_sessions()? {
            if row.status == "running" {
                store.update_session_status(&row.id, "exited", Some(now_unix()), row.exit_code)?;
            }
        }
        Ok(Arc::new(Engine {
            config,
            store,
            symbols: SymbolCache::new(),
            frida: Mutex::new(Arc::new(OnceCell::new())),
            sessions: Mutex::new(HashMap::new()),
            by_pid: Mutex::new(HashMap::new()),
            launching: Mutex::new(HashMap::new()),
            staged: Mutex::new(HashMap::new()),
            runtime: tokio::runtime::Handle::current(),
        }))
    }

    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }
    pub fn symbols(&self) -> &SymbolCache {
        &self.symbols
    }
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// The Frida runtime, started once on the engine's own runtime so that its I/O
    /// tasks outlive whichever thread first asked for it.
    async fn frida(self: &Arc<Engine>) -> Result<Arc<FridaRuntime>> {
        let cell = self.frida.lock().unwrap().clone();
        let engine = self.clone();
        if let Some(rt) = cell.get() {
            return Ok(rt.clone());
        }
        // Starting (or waiting for the warm-up to finish): the first time on a machine
        // this installs Frida for many seconds, so the client hears what is going on.
        let start = cell.get_or_try_init(|| async move {
            let (tx, rx) = mpsc::unbounded_channel::<HostEvent>();
            let cache = engine.config.cache_dir.clone();
            let rt = engine
                .runtime
                .spawn(async move { FridaRuntime::start(&cache, tx).await })
                .await
                .map_err(|e| StrobeError::internal(format!("Frida host start panicked: {e}")))??;
            let rt = Arc::new(rt);
            engine.runtime.spawn(ingest::run(Arc::downgrade(&engine), rx));
            Ok::<_, StrobeError>(rt)
        });
        let message = || format!("setting up Frida: {}", crate::frida::setup_phase().unwrap_or_else(|| "starting".into()));
        crate::inflight::with_heartbeat(start, message).await.cloned()
    }

    /// Fault injection, for tests: end the Frida session of `id`'s process while the process
    /// keeps running, as Frida itself rarely does (docs/performance.md, fork/exec races). The
    /// daemon then attaches a fresh agent with the session's state (lifecycle.rs `reattach`).
    /// Not a tool.
    #[doc(hidden)]
    pub async fn drop_agent_session(self: &Arc<Engine>, id: &str) -> Result<()> {
        let s = self.session(id)?;
        s.ensure_running()?;
        self.frida_running()?.host().detach(s.pid).await
    }

    /// Start the Frida host now (installing it on first use) so the first launch is fast.
    pub async fn warm_up(self: &Arc<Engine>) -> Result<()> {
        self.frida().await.map(|_| ())
    }

    /// Called by the ingest loop when the host process died: every live session lost
    /// its instrumentation, and the next launch starts a fresh host. Its targets (and what
    /// they started) are killed: nothing could stop them later, and they would run on as
    /// orphans, perhaps suspended or with threads held at a breakpoint.
    fn on_host_exited(&self, status: &str) {
        *self.frida.lock().unwrap() = Arc::new(OnceCell::new());
        let sessions: Vec<Arc<Session>> = self.sessions.lock().unwrap().values().cloned().collect();
        for s in sessions {
            if s.is_running() {
                let children = s.state.lock().unwrap().life.live_children();
                let killed = descendants::kill_family(s.pid, &children);
                if !killed.is_empty() {
                    tracing::warn!("session {}: killed {killed:?}, orphaned by the Frida host's exit", s.id);
                }
                s.mark_exited(None, Some(format!("killed: the Frida host exited ({status})")));
                let _ = self.store.update_session_status(&s.id, "exited", Some(now_unix()), None);
            }
        }
    }

    pub fn session(&self, id: &str) -> Result<Arc<Session>> {
        self.sessions.lock().unwrap().get(id).cloned().ok_or_else(|| {
            match self.store.get_session(id) {
                Ok(Some(row)) => StrobeError::new(
                    ErrorCode::ProcessExited,
                    format!(
                        "Session '{id}' ({}) is no longer live (status: {}); its events are still queryable with debug_query.",
                        row.binary_path, row.status
                    ),
                ),
                _ => StrobeError::session_not_found(id),
            }
        })
    }

    fn session_by_pid(&self, pid: u32) -> Option<Arc<Session>> {
        self.by_pid.lock().unwrap().get(&pid).cloned()
    }

    /// Query the timeline of a live or retained session.
    pub fn query(&self, q: &EventQuery) -> Result<QueryResult> {
        if !self.sessions.lock().unwrap().contains_key(&q.session_id)
            && !self.store.session_id_exists(&q.session_id)?
        {
            return Err(StrobeError::session_not_found(&q.session_id));
        }
        // Make what has already arrived visible before answering (unless the writer is far
        // behind under tracing load: then what is stored so far, see Store::catch_up).
        self.store.catch_up();
        let mut r = self.store.query(q)?;
        capture_lazy::decode_events(self, &q.session_id, &mut r.events);
        Ok(r)
    }

    pub fn status(&self, id: &str) -> Result<StatusReport> {
        if let Some(s) = self.sessions.lock().unwrap().get(id).cloned() {
            let mut r = s.report(self.store.count_events(id)?);
            r.events_lost += self.store.events_shed(id) as u64; // dropped by the store, too far behind
            return Ok(r);
        }
        match self.store.get_session(id)? {
            Some(row) => Ok(StatusReport::from_row(&row, self.store.count_events(id)?)),
            None => Err(StrobeError::session_not_found(id)),
        }
    }

    pub fn list(&self) -> Result<Vec<SessionRow>> {
        self.store.list_sessions()
    }

    /// Stop a session: the target is killed (a debugger does not leave its debuggee
    /// running untraced). Without `retain` the session's data is deleted.
    pub async fn stop(self: &Arc<Engine>, id: &str, retain: bool) -> Result<i64> {
        let live = self.sessions.lock().unwrap().get(id).cloned();
        // The live session knows how its process ended before the store row does (the
        // detach handler writes the row only after flushing the last events).
        let live_end = live.as_ref().and_then(|s| {
            let st = s.state.lock().unwrap();
            (st.status == SessionStatus::Exited).then(|| st.life.root_end.as_ref().and_then(|e| e.db_code()))
        });
        match live {
            Some(s) => {
                if s.is_running() {
                    let runtime = self.frida.lock().unwrap().get().cloned();
                    if let Some(rt) = runtime {
                        // Drain the agent's buffers first so no event in flight is lost, then
                        // kill before detaching: unloading the agent would release threads
                        // paused at breakpoints, and the program would run on while it dies.
                        s.state.lock().unwrap().life.detaching = true;
                        let _ = tokio::time::timeout(std::time::Duration::from_secs(3), rt.host().rpc(s.pid, "dispose", serde_json::json!([]))).await;
                        // The whole family goes: forked and exec'd children too, followed or
                        // not (read before the root dies: its orphans move to init).
                        let mut children = descendants::descendants(s.pid);
                        let _ = rt.host().kill(s.pid).await;
                        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), rt.host().detach(s.pid)).await;
                        for child in s.state.lock().unwrap().life.live_children() {
                            if !children.contains(&child) {
                                children.push(child);
                            }
                        }
                        for &child in &children {
                            let _ = rt.host().kill(child).await;
                            self.by_pid.lock().unwrap().remove(&child);
                        }
                        // Return once they are gone: a caller that checks right after must
                        // not find the debuggee still dying.
                        children.push(s.pid);
                        let left = descendants::wait_gone(&children, std::time::Duration::from_secs(3)).await;
                        if !left.is_empty() {
                            tracing::warn!("stop {id}: processes {left:?} still running 3 s after SIGKILL");
                        }
                    }
                    s.mark_stopped();
                }
                self.sessions.lock().unwrap().remove(id);
                self.by_pid.lock().unwrap().remove(&s.pid);
            }
            None => {
                if !self.store.session_id_exists(id)? {
                    return Err(StrobeError::session_not_found(id));
                }
            }
        }
        self.store.flush();
        let count = self.store.count_events(id)?;
        if retain {
            let row = self.store.get_session(id)?;
            let ended = row.as_ref().and_then(|r| r.ended_at).unwrap_or_else(now_unix);
            let (status, code) = match (live_end, row) {
                (Some(code), _) => ("exited", code),
                (None, Some(r)) if r.status == "exited" => ("exited", r.exit_code),
                (None, r) => ("stopped", r.and_then(|r| r.exit_code)),
            };
            self.store.update_session_status(id, status, Some(ended), code)?;
        } else {
            self.store.delete_session(id)?;
        }
        Ok(count)
    }

    /// Delete a session that is no longer live, with all its events.
    pub fn delete(&self, id: &str) -> Result<()> {
        if self.sessions.lock().unwrap().get(id).is_some_and(|s| s.is_running()) {
            return Err(StrobeError::validation(format!(
                "Session '{id}' is still running. Stop it first with debug_session {{action: 'stop', sessionId: '{id}'}}."
            )));
        }
        if !self.store.session_id_exists(id)? {
            return Err(StrobeError::session_not_found(id));
        }
        self.sessions.lock().unwrap().remove(id);
        self.store.delete_session(id)
    }

    /// Stop every live session (daemon shutdown, client disconnect of its owner).
    pub async fn stop_all(self: &Arc<Engine>) {
        let ids: Vec<String> = self.sessions.lock().unwrap().keys().cloned().collect();
        for id in ids {
            let _ = self.stop(&id, true).await;
        }
    }

    pub fn live_session_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.sessions.lock().unwrap().keys().cloned().collect();
        ids.sort();
        ids
    }

    /// Sessions whose target process still runs: what the session limits count (an
    /// exited or crashed session stays queryable but holds no process).
    pub fn running_session_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> =
            self.sessions.lock().unwrap().values().filter(|s| s.is_running()).map(|s| s.id.clone()).collect();
        ids.sort();
        ids
    }

    /// Write bytes to a live target's stdin.
    pub async fn send_stdin(self: &Arc<Engine>, id: &str, data: &[u8]) -> Result<()> {
        let s = self.session(id)?;
        s.ensure_running()?;
        self.frida().await?.host().input(s.pid, data).await
    }

    /// "Now" on a session's clock (ns since its start), for relative query times.
    /// For a session that is no longer live, its end.
    pub fn session_now_ns(&self, id: &str) -> i64 {
        if let Some(s) = self.sessions.lock().unwrap().get(id) {
            return monotonic_ns() - s.start_mono_ns;
        }
        match self.store.get_session(id) {
            Ok(Some(row)) => (row.ended_at.unwrap_or_else(now_unix) - row.started_at).max(0) * 1_000_000_000,
            _ => 0,
        }
    }
}

pub(crate) fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// CLOCK_MONOTONIC in ns: the agent stamps events with the same clock.
pub(crate) fn monotonic_ns() -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

pub(crate) fn canonical_or_same(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}
