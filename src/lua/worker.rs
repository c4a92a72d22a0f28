//! One Lua worker: an OS thread with its own Lua state, script set and local executor,
//! serving the requests `LuaHost` routes to it (`runtime.rs`), each as a task under the
//! watchdog's budget: tool calls, `strobe run` files, REPL chunks (in the caller's own
//! isolated state), completions, reloads.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

use mlua::{Function, Lua, MultiValue, Table, Value};
use tokio::sync::mpsc;

use super::convert::{to_json, to_lua};
use super::loader::Loaded;
use super::pool::{Tracked, WorkerLoad};
use super::runtime::{broadcast_reload, EvalOutput, Request, RunOutcome, Shared, ToolAnswer, SANDBOX_MEMORY_LIMIT};
use super::sandbox::Sandbox;
use super::watchdog::{with_budget, Budget, Budgeted, HINT_SLICE, REPL_SLICE, RUN_SLICE, TOOL_SLICE};
use crate::engine::StageScope;
use crate::error::{ErrorCode, Result, StrobeError};

/// One worker's Lua state and what it loaded.
struct State {
    lua: Lua,
    shared: Arc<Shared>,
    loaded: RefCell<Loaded>,
    /// The first worker announces tool-list changes (the others load the same files).
    primary: bool,
    /// REPL connections' isolated states (by connection key).
    repls: RefCell<HashMap<StageScope, Rc<Sandbox>>>,
}

/// What a REPL chunk may print per evaluation.
const REPL_OUTPUT_CAP: usize = 1 << 20;

pub(super) fn spawn_worker(shared: &Arc<Shared>) -> Result<(usize, mpsc::UnboundedSender<Request>, std::sync::mpsc::Receiver<Result<()>>)> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Request>();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<()>>();
    let load = Arc::new(WorkerLoad::default());
    let index = shared.pool.add(tx.clone(), load.clone());
    let shared_w = shared.clone();
    std::thread::Builder::new()
        .name(format!("strobe-lua-{index}"))
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = ready_tx.send(Err(StrobeError::internal(format!("Lua runtime: {e}"))));
                    return;
                }
            };
            super::pool::set_current(load.clone());
            let local = tokio::task::LocalSet::new();
            local.block_on(&rt, async move {
                let lua = match super::new_state(&shared_w.engine).and_then(|l| {
                    super::investigate::register(&l, shared_w.clone()).map(|_| l)
                }) {
                    Ok(l) => l,
                    Err(e) => {
                        let _ = ready_tx.send(Err(StrobeError::internal(format!("Lua state: {e}"))));
                        return;
                    }
                };
                let last_good = shared_w.last_good.clone();
                let state = Rc::new(State {
                    lua,
                    shared: shared_w,
                    loaded: RefCell::new(Loaded::sharing(last_good)),
                    primary: index == 0,
                    repls: RefCell::default(),
                });
                reload(&state);
                let _ = ready_tx.send(Ok(()));
                while let Some(req) = rx.recv().await {
                    let state = state.clone();
                    tokio::task::spawn_local(Tracked::new(load.clone(), async move { handle(&state, req).await }));
                }
            });
        })
        .map_err(|e| StrobeError::internal(format!("cannot start a Lua thread: {e}")))?;
    Ok((index, tx, ready_rx))
}

fn reload(state: &State) {
    let sources = state.shared.sources.lock().unwrap().clone();
    let outcome = with_budget(Budget::slice(TOOL_SLICE, "loading scripts"), || {
        state.loaded.borrow_mut().reload(&state.lua, &sources)
    });
    if !state.primary {
        return;
    }
    if let Some(w) = state.shared.watcher.lock().unwrap().as_mut() {
        w.update(&sources);
    }
    if outcome.reloaded {
        tracing::debug!("scripts loaded ({} tools, {} errors)", state.loaded.borrow().tools.len(), state.loaded.borrow().errors.len());
    }
    if outcome.tools_changed {
        let _ = state.shared.changes.send(());
    }
}

/// The REPL state of connection `repl` on this worker, made on first use.
fn repl_state(state: &State, scope: StageScope) -> mlua::Result<Rc<Sandbox>> {
    if let Some(s) = state.repls.borrow().get(&scope) {
        return Ok(s.clone());
    }
    let sources = state.shared.sources.lock().unwrap().clone();
    let sb = Rc::new(Sandbox::fresh(&state.shared.engine, &sources, SANDBOX_MEMORY_LIMIT, REPL_OUTPUT_CAP)?);
    state.repls.borrow_mut().insert(scope, sb.clone());
    Ok(sb)
}

async fn handle(state: &State, req: Request) {
    match req {
        Request::ListTools(reply) => {
            let _ = reply.send(state.loaded.borrow().tools.values().map(|t| t.info.clone()).collect());
        }
        Request::CallTool { name, args, scope, inflight, reply } => {
            let call = Budgeted::new(Budget::slice(TOOL_SLICE, "the tool script"), call_tool(state, &name, args));
            let _ = reply.send(inflight.scope(super::caller::serving(scope, call)).await);
        }
        Request::RunFile { path, args, reply } => {
            let run = Budgeted::new(Budget::slice(RUN_SLICE, "the script"), run_file(state, &path, &args));
            let _ = reply.send(run.await);
        }
        Request::Eval { scope, code, reply } => {
            let out = match repl_state(state, scope) {
                Ok(sb) => {
                    let _busy = super::pool::reserve_current();
                    let run = Budgeted::new(Budget::slice(REPL_SLICE, "the REPL chunk"), eval(&sb, &code));
                    super::caller::serving(scope, run).await
                }
                Err(e) => EvalOutput { error: Some(format!("cannot create the REPL state: {e}")), ..Default::default() },
            };
            let _ = reply.send(out);
        }
        Request::DropRepl(scope) => {
            state.repls.borrow_mut().remove(&scope);
        }
        Request::Complete { scope, line, reply } => {
            let sb = state.repls.borrow().get(&scope).cloned();
            let lua = sb.as_ref().map(|s| &s.lua).unwrap_or(&state.lua);
            let found = with_budget(Budget::slice(HINT_SLICE, "completion"), || {
                super::complete::complete(lua, &state.shared.engine, &line)
            });
            let _ = reply.send(found);
        }
        Request::ScriptErrors(reply) => {
            let _ = reply.send(state.loaded.borrow().errors.clone());
        }
        Request::Reload => reload(state),
    }
}

/// A project root named by a tool call becomes a script source (once trusted).
fn note_project_root(state: &State, root: &str) -> Option<String> {
    let path = std::fs::canonicalize(root).ok()?;
    let added = {
        let mut s = state.shared.sources.lock().unwrap();
        let new = !s.project_roots.contains(&path);
        if new {
            s.project_roots.push(path.clone());
        }
        new
    };
    if added {
        reload(state);
        broadcast_reload(&state.shared);
    }
    let untrusted = state.shared.sources.lock().unwrap().untrusted_project_dirs().contains(&path);
    untrusted.then(|| {
        format!(
            "Project scripts in {0}/.strobe were not loaded: the directory is not trusted. If you trust its code, run `strobe trust {0}`; the daemon picks it up at once.",
            path.display()
        )
    })
}

async fn call_tool(state: &State, name: &str, args: serde_json::Value) -> Result<ToolAnswer> {
    let args = if args.is_null() { serde_json::json!({}) } else { args };
    let warning = args.get("projectRoot").and_then(|v| v.as_str()).and_then(|r| note_project_root(state, r));
    let errors = state.loaded.borrow().errors.clone();
    let result = run_tool(state, name, &args).await;
    let error_texts: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    match result {
        Ok(mut out) => {
            if let Some(obj) = out.value.as_object_mut() {
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

async fn run_tool(state: &State, name: &str, args: &serde_json::Value) -> Result<ToolAnswer> {
    let tool = state.loaded.borrow().tools.get(name).cloned();
    let Some(tool) = tool else {
        let names: Vec<String> = state.loaded.borrow().tools.keys().cloned().collect();
        return Err(StrobeError::validation(format!("Unknown tool '{name}'. Available tools: {}.", names.join(", "))));
    };
    let problems = tool.input.check(args);
    if !problems.is_empty() {
        return Err(StrobeError::validation(format!(
            "Invalid arguments for {name}: {}. See the tool's inputSchema.",
            problems.join("; ")
        )));
    }
    if let Some(req) = tool.requires {
        super::tools::check_requires(&state.shared.engine, name, req, args)?;
    }
    let lua_args = to_lua(&state.lua, args).map_err(|e| StrobeError::internal(e.to_string()))?;
    let out: Value = tool.handler.call_async(lua_args).await.map_err(|e| {
        let err = super::error_from_lua(&e);
        if err.code == ErrorCode::InternalError {
            tracing::error!("tool {name} ({}) failed: {e}", tool.info.origin);
        }
        err
    })?;
    let value = to_json(&state.lua, out)
        .map_err(|e| StrobeError::internal(format!("tool {name} returned a value that is not JSON: {e}")))?;
    Ok(ToolAnswer { value, structured: tool.info.output_schema.is_some() })
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

async fn eval(sb: &Sandbox, code: &str) -> EvalOutput {
    let lua = &sb.lua;
    let func = match lua.load(format!("return {code}")).set_name("=repl").into_function() {
        Ok(f) => Ok(f),
        Err(_) => lua.load(code).set_name("=repl").into_function(),
    };
    let func = match func {
        Ok(f) => f,
        Err(e) => return EvalOutput { error: Some(short_error(&e)), ..Default::default() },
    };
    let result = func.call_async::<MultiValue>(()).await;
    let (mut output, dropped) = sb.output.borrow_mut().take();
    if dropped > 0 {
        output.push_str(&format!("[... {dropped} more bytes of output not shown]\n"));
    }
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
