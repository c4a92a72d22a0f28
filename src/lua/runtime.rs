//! The Lua runtime: a pool of worker threads (`pool.rs`), each with its own Lua state
//! (a Lua state is not `Send`) and the scripts loaded. Front ends talk to it through
//! `LuaHost`; each request runs as its own task on a worker's local executor, so a tool
//! waiting on a target never blocks other clients, and one computing for long sends
//! later requests to another worker. Every request runs under the watchdog's budget
//! (`watchdog.rs`). REPL connections and debug_script calls get isolated states
//! (`sandbox.rs`). The workers themselves (request handling, script (re)loading at
//! start, on a watched file's change and when a tool call names a new project root) are
//! in `worker.rs`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tokio::sync::{broadcast, mpsc, oneshot};

use super::loader::ScriptError;
use super::pool::Pool;
use super::reload::ScriptWatcher;
use super::scripts::ScriptSources;
pub use super::tools::{ToolAnswer, ToolInfo};
use crate::engine::{Engine, StageScope};
use crate::error::{Result, StrobeError};
use crate::inflight::Inflight;

pub(super) enum Request {
    ListTools(oneshot::Sender<Vec<ToolInfo>>),
    CallTool { name: String, args: serde_json::Value, scope: StageScope, inflight: Inflight, reply: oneshot::Sender<Result<ToolAnswer>> },
    RunFile { path: PathBuf, args: Vec<String>, reply: oneshot::Sender<Result<RunOutcome>> },
    Eval { scope: StageScope, code: String, reply: oneshot::Sender<EvalOutput> },
    DropRepl(StageScope),
    Complete { scope: StageScope, line: String, reply: oneshot::Sender<(usize, Vec<String>)> },
    ScriptErrors(oneshot::Sender<Vec<ScriptError>>),
    Reload,
}

/// What evaluating a chunk produced: printed text, rendered results, or an error.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct EvalOutput {
    pub output: String,
    pub values: Vec<String>,
    pub error: Option<String>,
}

/// How `strobe run` went: a scenario counts its steps; a plain script that returns has none failed.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunOutcome {
    pub passed: usize,
    pub failed: usize,
}

/// What every worker shares: the engine, the script sources, the tool-change
/// notifications, the watcher and the pool itself.
pub(crate) struct Shared {
    pub engine: Arc<Engine>,
    pub sources: Mutex<ScriptSources>,
    pub(super) changes: broadcast::Sender<()>,
    pub(super) watcher: Mutex<Option<ScriptWatcher>>,
    pub(super) pool: Pool<mpsc::UnboundedSender<Request>>,
    /// Which worker holds each REPL connection's state.
    repl_homes: Mutex<HashMap<StageScope, usize>>,
    /// Last good versions of the scripts, for workers started after one broke.
    pub(super) last_good: super::loader::LastGood,
}

/// A handle to the Lua workers; cheap to clone.
#[derive(Clone)]
pub struct LuaHost {
    shared: Arc<Shared>,
}

/// Memory of an isolated state (a REPL connection's, a debug_script's).
pub const SANDBOX_MEMORY_LIMIT: usize = 256 << 20;
impl LuaHost {
    /// Start the first Lua worker and load the scripts. Load errors are logged and
    /// reported by tool calls; the runtime still starts with the scripts that loaded.
    /// More workers start when requests find every worker busy.
    pub fn start(engine: Arc<Engine>, sources: ScriptSources) -> Result<LuaHost> {
        let (changes, _) = broadcast::channel(16);
        let shared = Arc::new(Shared {
            engine,
            sources: Mutex::new(sources),
            changes,
            watcher: Mutex::new(None),
            pool: Pool::new(),
            repl_homes: Mutex::default(),
            last_good: Default::default(),
        });
        let (_, _, ready) = super::worker::spawn_worker(&shared)?;
        ready.recv().map_err(|_| StrobeError::internal("the Lua thread died while starting"))??;
        Ok(LuaHost { shared })
    }

    /// Workers running now (for benchmarks and diagnostics).
    pub fn workers(&self) -> usize {
        self.shared.pool.len()
    }

    /// A worker free to take a request, starting one if all are busy.
    fn route(&self) -> Result<(usize, mpsc::UnboundedSender<Request>)> {
        if let Some(w) = self.shared.pool.pick() {
            return Ok(w);
        }
        let (index, tx, _) = super::worker::spawn_worker(&self.shared)?;
        tracing::debug!("every Lua worker is busy: started worker {index}");
        Ok((index, tx))
    }

    async fn ask_at<T>(&self, worker: Option<usize>, make: impl FnOnce(oneshot::Sender<T>) -> Request) -> Result<T> {
        let tx = match worker.and_then(|i| self.shared.pool.get(i)) {
            Some(tx) => tx,
            None => self.route()?.1,
        };
        let (reply, rx) = oneshot::channel();
        tx.send(make(reply)).map_err(|_| StrobeError::internal("the Lua runtime has stopped"))?;
        rx.await.map_err(|_| StrobeError::internal("the Lua runtime dropped the request (a script crashed it?)"))
    }

    async fn ask<T>(&self, make: impl FnOnce(oneshot::Sender<T>) -> Request) -> Result<T> {
        self.ask_at(None, make).await
    }

    pub async fn list_tools(&self) -> Result<Vec<ToolInfo>> {
        self.ask(Request::ListTools).await
    }

    pub async fn call_tool(&self, name: &str, args: serde_json::Value) -> Result<serde_json::Value> {
        Ok(self.call_tool_as(StageScope::Local, name, args).await?.value)
    }

    /// Call a tool for `scope` (an MCP connection): what it stages is that caller's (caller.rs).
    pub async fn call_tool_as(&self, scope: StageScope, name: &str, args: serde_json::Value) -> Result<ToolAnswer> {
        self.call_tool_inflight(scope, name, args, Inflight::default()).await
    }

    /// Call a tool as the MCP request `inflight`: cancelling it stops the call at its next
    /// wait or Lua instruction check, and its progress goes to that request's client.
    pub async fn call_tool_inflight(&self, scope: StageScope, name: &str, args: serde_json::Value, inflight: Inflight) -> Result<ToolAnswer> {
        self.ask(|reply| Request::CallTool { name: name.to_string(), args, scope, inflight, reply }).await?
    }

    /// Run a Lua file with the `strobe` module (what `strobe run` does). Like the
    /// standalone interpreter, the script sees `arg[0]` (its path) and `arg[1..]`. A file
    /// that returns a table with `steps` is a scenario and is run step by step.
    pub async fn run_file(&self, path: PathBuf, args: Vec<String>) -> Result<RunOutcome> {
        self.ask(|reply| Request::RunFile { path, args, reply }).await?
    }

    /// Evaluate a chunk (the in-process REPL): expressions are returned, statements run.
    pub async fn eval(&self, code: &str) -> Result<EvalOutput> {
        self.eval_as(StageScope::Local, code).await
    }

    /// The worker that holds the REPL state of `scope` (chosen on first use).
    fn repl_home(&self, scope: StageScope) -> Result<usize> {
        if let Some(i) = self.shared.repl_homes.lock().unwrap().get(&scope) {
            return Ok(*i);
        }
        let (i, _) = self.route()?;
        self.shared.repl_homes.lock().unwrap().insert(scope, i);
        Ok(i)
    }

    /// Evaluate a chunk for `scope` (`strobe repl --connect`: its connection) in that
    /// caller's own isolated state: globals persist between its chunks, and nothing it
    /// redefines reaches other clients.
    pub async fn eval_as(&self, scope: StageScope, code: &str) -> Result<EvalOutput> {
        let home = self.repl_home(scope)?;
        self.ask_at(Some(home), |reply| Request::Eval { scope, code: code.to_string(), reply }).await
    }

    /// The sessions launched on behalf of `scope` so far (forgotten here): its client
    /// went away, and these are the targets to stop.
    pub fn take_launched(&self, scope: StageScope) -> Vec<String> {
        super::caller::take_launched(scope)
    }

    /// Forget the REPL state of `scope` (its client went away).
    pub fn drop_repl(&self, scope: StageScope) {
        if let Some(i) = self.shared.repl_homes.lock().unwrap().remove(&scope) {
            if let Some(tx) = self.shared.pool.get(i) {
                let _ = tx.send(Request::DropRepl(scope));
            }
        }
    }

    /// Completions for the end of `line`: where the replaced word starts, and candidates.
    pub async fn complete(&self, line: &str) -> Result<(usize, Vec<String>)> {
        self.complete_as(StageScope::Local, line).await
    }

    /// Completions in the REPL state of `scope` (its own globals included).
    pub async fn complete_as(&self, scope: StageScope, line: &str) -> Result<(usize, Vec<String>)> {
        let home = self.shared.repl_homes.lock().unwrap().get(&scope).copied();
        self.ask_at(home, |reply| Request::Complete { scope, line: line.to_string(), reply }).await
    }

    /// Scripts that currently fail to load.
    pub async fn script_errors(&self) -> Result<Vec<ScriptError>> {
        self.ask(Request::ScriptErrors).await
    }

    /// Watch the script directories and reload on change (the daemon and the REPL do).
    pub async fn watch_scripts(&self) -> Result<()> {
        let mut watcher = self.shared.watcher.lock().unwrap();
        if watcher.is_some() {
            return Ok(());
        }
        let shared = Arc::downgrade(&self.shared);
        let mut w = ScriptWatcher::start(move || {
            if let Some(s) = shared.upgrade() {
                broadcast_reload(&s);
            }
        })
        .map_err(|e| StrobeError::internal(format!("cannot watch the script directories: {e}")))?;
        w.update(&self.shared.sources.lock().unwrap());
        *watcher = Some(w);
        Ok(())
    }

    /// Reload now (what a debounced file change does).
    pub fn request_reload(&self) {
        broadcast_reload(&self.shared);
    }

    /// Fires each time the tool list changes (for MCP `notifications/tools/list_changed`).
    pub fn subscribe_tool_changes(&self) -> broadcast::Receiver<()> {
        self.shared.changes.subscribe()
    }
}


pub(super) fn broadcast_reload(shared: &Shared) {
    for tx in shared.pool.all() {
        let _ = tx.send(Request::Reload);
    }
}
