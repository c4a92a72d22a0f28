//! The Lua runtime lives on its own thread (a Lua state is not `Send`). Front ends
//! talk to it through `LuaHost`; each request runs as its own task on the thread's
//! local executor, so a tool waiting on a target never blocks other clients.
//! Scripts are (re)loaded here: at start, when a watched file changes, and when a tool
//! call names a new project root.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use mlua::{Function, Lua, MultiValue, Table, Value, Variadic};
use tokio::sync::{broadcast, mpsc, oneshot};

use super::convert::{to_json, to_lua};
use super::loader::{Loaded, ScriptError};
use super::reload::ScriptWatcher;
use super::scripts::ScriptSources;
pub use super::tools::ToolInfo;
use crate::engine::{Engine, StageScope};
use crate::error::{ErrorCode, Result, StrobeError};

enum Request {
    ListTools(oneshot::Sender<Vec<ToolInfo>>),
    CallTool { name: String, args: serde_json::Value, scope: StageScope, reply: oneshot::Sender<Result<serde_json::Value>> },
    RunFile { path: PathBuf, args: Vec<String>, reply: oneshot::Sender<Result<RunOutcome>> },
    Eval { code: String, scope: StageScope, reply: oneshot::Sender<EvalOutput> },
    Complete { line: String, reply: oneshot::Sender<(usize, Vec<String>)> },
    ScriptErrors(oneshot::Sender<Vec<ScriptError>>),
    Watch(oneshot::Sender<Result<()>>),
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

/// A handle to the Lua thread; cheap to clone.
#[derive(Clone)]
pub struct LuaHost {
    tx: mpsc::UnboundedSender<Request>,
    changes: broadcast::Sender<()>,
}

struct State {
    lua: Lua,
    engine: Arc<Engine>,
    sources: RefCell<ScriptSources>,
    loaded: RefCell<Loaded>,
    watcher: RefCell<Option<ScriptWatcher>>,
    changes: broadcast::Sender<()>,
    tx: mpsc::UnboundedSender<Request>,
    /// Text printed by REPL chunks, by the coroutine that runs them.
    captures: Rc<RefCell<HashMap<usize, String>>>,
}

impl LuaHost {
    /// Start the Lua thread and load the scripts. Load errors are logged and reported
    /// by tool calls; the runtime still starts with the scripts that loaded.
    pub fn start(engine: Arc<Engine>, sources: ScriptSources) -> Result<LuaHost> {
        let (tx, mut rx) = mpsc::unbounded_channel::<Request>();
        let (changes, _) = broadcast::channel(16);
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<()>>();
        let (own_tx, own_changes) = (tx.clone(), changes.clone());
        std::thread::Builder::new()
            .name("strobe-lua".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(StrobeError::internal(format!("Lua runtime: {e}"))));
                        return;
                    }
                };
                let local = tokio::task::LocalSet::new();
                local.block_on(&rt, async move {
                    let captures: Rc<RefCell<HashMap<usize, String>>> = Rc::default();
                    let lua = match super::new_state(&engine).and_then(|l| capture_print(&l, captures.clone()).map(|_| l)) {
                        Ok(l) => l,
                        Err(e) => {
                            let _ = ready_tx.send(Err(StrobeError::internal(format!("Lua state: {e}"))));
                            return;
                        }
                    };
                    let state = Rc::new(State {
                        lua,
                        engine,
                        sources: RefCell::new(sources),
                        loaded: RefCell::new(Loaded::default()),
                        watcher: RefCell::new(None),
                        changes: own_changes,
                        tx: own_tx,
                        captures,
                    });
                    reload(&state);
                    let _ = ready_tx.send(Ok(()));
                    while let Some(req) = rx.recv().await {
                        let state = state.clone();
                        tokio::task::spawn_local(async move { handle(&state, req).await });
                    }
                });
            })
            .map_err(|e| StrobeError::internal(format!("cannot start the Lua thread: {e}")))?;
        ready_rx.recv().map_err(|_| StrobeError::internal("the Lua thread died while starting"))??;
        Ok(LuaHost { tx, changes })
    }

    async fn ask<T>(&self, make: impl FnOnce(oneshot::Sender<T>) -> Request) -> Result<T> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(make(tx)).map_err(|_| StrobeError::internal("the Lua runtime has stopped"))?;
        rx.await.map_err(|_| StrobeError::internal("the Lua runtime dropped the request (a script crashed it?)"))
    }

    pub async fn list_tools(&self) -> Result<Vec<ToolInfo>> {
        self.ask(Request::ListTools).await
    }

    pub async fn call_tool(&self, name: &str, args: serde_json::Value) -> Result<serde_json::Value> {
        self.call_tool_as(StageScope::Local, name, args).await
    }

    /// Call a tool for `scope` (an MCP connection): what it stages is that caller's (caller.rs).
    pub async fn call_tool_as(&self, scope: StageScope, name: &str, args: serde_json::Value) -> Result<serde_json::Value> {
        self.ask(|reply| Request::CallTool { name: name.to_string(), args, scope, reply }).await?
    }

    /// Run a Lua file with the `strobe` module (what `strobe run` does). Like the
    /// standalone interpreter, the script sees `arg[0]` (its path) and `arg[1..]`. A file
    /// that returns a table with `steps` is a scenario and is run step by step.
    pub async fn run_file(&self, path: PathBuf, args: Vec<String>) -> Result<RunOutcome> {
        self.ask(|reply| Request::RunFile { path, args, reply }).await?
    }

    /// Evaluate a chunk (the REPL): expressions are returned, statements run.
    pub async fn eval(&self, code: &str) -> Result<EvalOutput> {
        self.eval_as(StageScope::Local, code).await
    }

    /// Evaluate a chunk for `scope` (`strobe repl --connect`: its connection).
    pub async fn eval_as(&self, scope: StageScope, code: &str) -> Result<EvalOutput> {
        self.ask(|reply| Request::Eval { code: code.to_string(), scope, reply }).await
    }

    /// Completions for the end of `line`: where the replaced word starts, and candidates.
    pub async fn complete(&self, line: &str) -> Result<(usize, Vec<String>)> {
        self.ask(|reply| Request::Complete { line: line.to_string(), reply }).await
    }

    /// Scripts that currently fail to load.
    pub async fn script_errors(&self) -> Result<Vec<ScriptError>> {
        self.ask(Request::ScriptErrors).await
    }

    /// Watch the script directories and reload on change (the daemon and the REPL do).
    pub async fn watch_scripts(&self) -> Result<()> {
        self.ask(Request::Watch).await?
    }

    /// Reload now (what a debounced file change does).
    pub fn request_reload(&self) {
        let _ = self.tx.send(Request::Reload);
    }

    /// Fires each time the tool list changes (for MCP `notifications/tools/list_changed`).
    pub fn subscribe_tool_changes(&self) -> broadcast::Receiver<()> {
        self.changes.subscribe()
    }
}

/// Route `print` of REPL chunks into their output; everything else prints as usual.
fn capture_print(lua: &Lua, captures: Rc<RefCell<HashMap<usize, String>>>) -> mlua::Result<()> {
    let original: Function = lua.globals().get("print")?;
    let print = lua.create_function(move |lua, parts: Variadic<Value>| {
        let key = lua.current_thread().to_pointer() as usize;
        if let Some(buf) = captures.borrow_mut().get_mut(&key) {
            let text: Vec<String> = parts.iter().map(|v| v.to_string().unwrap_or_else(|_| format!("{v:?}"))).collect();
            buf.push_str(&text.join("\t"));
            buf.push('\n');
            return Ok(());
        }
        original.call::<()>(parts)
    })?;
    lua.globals().set("print", print)
}

fn reload(state: &State) {
    let outcome = state.loaded.borrow_mut().reload(&state.lua, &state.sources.borrow());
    if let Some(w) = state.watcher.borrow_mut().as_mut() {
        w.update(&state.sources.borrow());
    }
    if outcome.reloaded {
        tracing::debug!("scripts loaded ({} tools, {} errors)", state.loaded.borrow().tools.len(), state.loaded.borrow().errors.len());
    }
    if outcome.tools_changed {
        let _ = state.changes.send(());
    }
}

async fn handle(state: &State, req: Request) {
    match req {
        Request::ListTools(reply) => {
            let _ = reply.send(state.loaded.borrow().tools.values().map(|t| t.info.clone()).collect());
        }
        Request::CallTool { name, args, scope, reply } => {
            let _ = reply.send(super::caller::serving(scope, call_tool(state, &name, args)).await);
        }
        Request::RunFile { path, args, reply } => {
            let _ = reply.send(run_file(state, &path, &args).await);
        }
        Request::Eval { code, scope, reply } => {
            let _ = reply.send(super::caller::serving(scope, eval(state, &code)).await);
        }
        Request::Complete { line, reply } => {
            let _ = reply.send(super::complete::complete(&state.lua, &state.engine, &line));
        }
        Request::ScriptErrors(reply) => {
            let _ = reply.send(state.loaded.borrow().errors.clone());
        }
        Request::Watch(reply) => {
            let r = if state.watcher.borrow().is_some() {
                Ok(())
            } else {
                let tx = state.tx.clone();
                match ScriptWatcher::start(move || {
                    let _ = tx.send(Request::Reload);
                }) {
                    Ok(mut w) => {
                        w.update(&state.sources.borrow());
                        *state.watcher.borrow_mut() = Some(w);
                        Ok(())
                    }
                    Err(e) => Err(StrobeError::internal(format!("cannot watch the script directories: {e}"))),
                }
            };
            let _ = reply.send(r);
        }
        Request::Reload => reload(state),
    }
}

/// A project root named by a tool call becomes a script source (once trusted).
fn note_project_root(state: &State, root: &str) -> Option<String> {
    let path = std::fs::canonicalize(root).ok()?;
    let added = {
        let mut s = state.sources.borrow_mut();
        let new = !s.project_roots.contains(&path);
        if new {
            s.project_roots.push(path.clone());
        }
        new
    };
    if added {
        reload(state);
    }
    let untrusted = state.sources.borrow().untrusted_project_dirs().contains(&path);
    untrusted.then(|| {
        format!(
            "Project scripts in {0}/.strobe were not loaded: the directory is not trusted. If you trust its code, run `strobe trust {0}`; the daemon picks it up at once.",
            path.display()
        )
    })
}

async fn call_tool(state: &State, name: &str, args: serde_json::Value) -> Result<serde_json::Value> {
    let args = if args.is_null() { serde_json::json!({}) } else { args };
    let warning = args.get("projectRoot").and_then(|v| v.as_str()).and_then(|r| note_project_root(state, r));
    let errors = state.loaded.borrow().errors.clone();
    let result = run_tool(state, name, &args).await;
    let error_texts: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    match result {
        Ok(mut out) => {
            if let Some(obj) = out.as_object_mut() {
                if !errors.is_empty() {
                    obj.insert("scriptErrors".into(), serde_json::to_value(&errors).unwrap_or_default());
                }
                if let Some(w) = warning {
                    obj.insert("scriptWarnings".into(), serde_json::json!([w]));
                }
            }
            Ok(out)
        }
        Err(mut e) => {
            if let Some(w) = warning {
                e.message.push_str(&format!(" ({w})"));
            }
            if !errors.is_empty() {
                e.message.push_str(&format!(" (Some scripts failed to load: {}.)", error_texts.join("; ")));
            }
            Err(e)
        }
    }
}

async fn run_tool(state: &State, name: &str, args: &serde_json::Value) -> Result<serde_json::Value> {
    let tool = state.loaded.borrow().tools.get(name).cloned();
    let Some(tool) = tool else {
        let names: Vec<String> = state.loaded.borrow().tools.keys().cloned().collect();
        return Err(StrobeError::validation(format!("Unknown tool '{name}'. Available tools: {}.", names.join(", "))));
    };
    let problems = crate::schema::validate(&tool.info.input_schema, args);
    if !problems.is_empty() {
        return Err(StrobeError::validation(format!(
            "Invalid arguments for {name}: {}. See the tool's inputSchema.",
            problems.join("; ")
        )));
    }
    if let Some(req) = tool.requires {
        super::tools::check_requires(&state.engine, name, req, args)?;
    }
    let lua_args = to_lua(&state.lua, args).map_err(|e| StrobeError::internal(e.to_string()))?;
    let out: Value = tool.handler.call_async(lua_args).await.map_err(|e| {
        let err = super::error_from_lua(&e);
        if err.code == ErrorCode::InternalError {
            tracing::error!("tool {name} ({}) failed: {e}", tool.info.origin);
        }
        err
    })?;
    to_json(&state.lua, out).map_err(|e| StrobeError::internal(format!("tool {name} returned a value that is not JSON: {e}")))
}

async fn run_file(state: &State, path: &Path, args: &[String]) -> Result<RunOutcome> {
    let lua = &state.lua;
    let internal = |e: mlua::Error| StrobeError::internal(e.to_string());
    let source = std::fs::read_to_string(path)
        .map_err(|e| StrobeError::validation(format!("cannot read {}: {e}", path.display())))?;
    let arg = lua.create_table().map_err(internal)?;
    arg.set(0, path.display().to_string()).map_err(internal)?;
    for (i, a) in args.iter().enumerate() {
        arg.set(i + 1, a.as_str()).map_err(internal)?;
    }
    lua.globals().set("arg", arg).map_err(internal)?;
    let values: MultiValue = lua
        .load(source)
        .set_name(format!("@{}", path.display()))
        .call_async(())
        .await
        .map_err(|e| super::error_from_lua(&e))?;
    let scenario = match values.into_iter().next() {
        Some(Value::Table(t)) if t.contains_key("steps").unwrap_or(false) => t,
        _ => return Ok(RunOutcome::default()),
    };
    let runner: Table = lua
        .load("return require('scenario')")
        .eval()
        .map_err(|e| StrobeError::internal(format!("the scenario runner (scripts/lib/scenario.lua) failed to load: {e}")))?;
    let run: Function = runner.get("run").map_err(internal)?;
    let report: Table =
        run.call_async((scenario, path.display().to_string())).await.map_err(|e| super::error_from_lua(&e))?;
    Ok(RunOutcome {
        passed: report.get::<Option<usize>>("passed").ok().flatten().unwrap_or(0),
        failed: report.get::<Option<usize>>("failed").ok().flatten().unwrap_or(0),
    })
}

async fn eval(state: &State, code: &str) -> EvalOutput {
    let lua = &state.lua;
    let func = match lua.load(format!("return {code}")).set_name("=repl").into_function() {
        Ok(f) => Ok(f),
        Err(_) => lua.load(code).set_name("=repl").into_function(),
    };
    let thread = match func.and_then(|f| lua.create_thread(f)) {
        Ok(t) => t,
        Err(e) => return EvalOutput { error: Some(short_error(&e)), ..Default::default() },
    };
    let key = thread.to_pointer() as usize;
    state.captures.borrow_mut().insert(key, String::new());
    let result = thread.into_async::<MultiValue>(()).await;
    let output = state.captures.borrow_mut().remove(&key).unwrap_or_default();
    match result {
        Ok(values) => EvalOutput {
            output,
            values: values.iter().map(|v| super::pretty::render(v, 0)).collect(),
            error: None,
        },
        Err(e) => EvalOutput { output, values: Vec::new(), error: Some(short_error(&e)) },
    }
}

/// A Lua error as one readable text, without the Rust-side wrapping and traceback.
fn short_error(e: &mlua::Error) -> String {
    let text = e.to_string();
    let text = text.split("\nstack traceback:").next().unwrap_or(&text).trim();
    text.strip_prefix("runtime error: ").unwrap_or(text).to_string()
}
