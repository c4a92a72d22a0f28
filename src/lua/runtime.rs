//! The Lua runtime lives on its own thread (a Lua state is not `Send`). Front ends
//! talk to it through `LuaHost`; each request runs as its own task on the thread's
//! local executor, so a tool waiting on a target never blocks other clients.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

use mlua::{Lua, Value};
use tokio::sync::{mpsc, oneshot};

use super::convert::{to_json, to_lua};
use super::scripts::ScriptSources;
use super::tools::{self, LoadedTool};
pub use super::tools::ToolInfo;
use crate::engine::Engine;
use crate::error::{ErrorCode, Result, StrobeError};

enum Request {
    ListTools(oneshot::Sender<Vec<ToolInfo>>),
    CallTool { name: String, args: serde_json::Value, reply: oneshot::Sender<Result<serde_json::Value>> },
    RunFile { path: PathBuf, args: Vec<String>, reply: oneshot::Sender<Result<()>> },
    Eval { code: String, reply: oneshot::Sender<Result<String>> },
}

/// A handle to the Lua thread; cheap to clone.
#[derive(Clone)]
pub struct LuaHost {
    tx: mpsc::UnboundedSender<Request>,
}

struct State {
    lua: Lua,
    tools: BTreeMap<String, LoadedTool>,
    load_errors: Vec<String>,
}

impl LuaHost {
    /// Start the Lua thread and load the scripts. Load errors are logged and reported
    /// by the next tool call; the runtime still starts with the scripts that loaded.
    pub fn start(engine: Arc<Engine>, sources: ScriptSources) -> Result<LuaHost> {
        let (tx, mut rx) = mpsc::unbounded_channel::<Request>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<()>>();
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
                    let lua = match super::new_state(&engine) {
                        Ok(l) => l,
                        Err(e) => {
                            let _ = ready_tx.send(Err(StrobeError::internal(format!("Lua state: {e}"))));
                            return;
                        }
                    };
                    let mut load_errors = tools::install_libs(&lua, &sources);
                    let (tools, tool_errors) = tools::load_all(&lua, &sources);
                    load_errors.extend(tool_errors);
                    let state = Rc::new(State { lua, tools, load_errors });
                    let _ = ready_tx.send(Ok(()));
                    while let Some(req) = rx.recv().await {
                        let state = state.clone();
                        tokio::task::spawn_local(async move { handle(&state, req).await });
                    }
                });
            })
            .map_err(|e| StrobeError::internal(format!("cannot start the Lua thread: {e}")))?;
        ready_rx.recv().map_err(|_| StrobeError::internal("the Lua thread died while starting"))??;
        Ok(LuaHost { tx })
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
        self.ask(|reply| Request::CallTool { name: name.to_string(), args, reply }).await?
    }

    /// Run a Lua file with the `strobe` module (what `strobe run` does). Like the
    /// standalone interpreter, the script sees `arg[0]` (its path) and `arg[1..]`.
    pub async fn run_file(&self, path: PathBuf, args: Vec<String>) -> Result<()> {
        self.ask(|reply| Request::RunFile { path, args, reply }).await?
    }

    /// Evaluate a chunk and render its results (the REPL).
    pub async fn eval(&self, code: &str) -> Result<String> {
        self.ask(|reply| Request::Eval { code: code.to_string(), reply }).await?
    }
}

async fn handle(state: &State, req: Request) {
    match req {
        Request::ListTools(reply) => {
            let _ = reply.send(state.tools.values().map(|t| t.info.clone()).collect());
        }
        Request::CallTool { name, args, reply } => {
            let _ = reply.send(call_tool(state, &name, args).await);
        }
        Request::RunFile { path, args, reply } => {
            let r = async {
                let source = std::fs::read_to_string(&path)
                    .map_err(|e| StrobeError::validation(format!("cannot read {}: {e}", path.display())))?;
                let arg = state.lua.create_table().map_err(|e| StrobeError::internal(e.to_string()))?;
                let set = || -> mlua::Result<()> {
                    arg.set(0, path.display().to_string())?;
                    for (i, a) in args.iter().enumerate() {
                        arg.set(i + 1, a.as_str())?;
                    }
                    state.lua.globals().set("arg", arg.clone())
                };
                set().map_err(|e| StrobeError::internal(e.to_string()))?;
                state
                    .lua
                    .load(source)
                    .set_name(format!("@{}", path.display()))
                    .exec_async()
                    .await
                    .map_err(|e| super::error_from_lua(&e))
            }
            .await;
            let _ = reply.send(r);
        }
        Request::Eval { code, reply } => {
            let r = async {
                let values: mlua::MultiValue =
                    state.lua.load(code).set_name("=repl").eval_async().await.map_err(|e| super::error_from_lua(&e))?;
                let parts: Vec<String> = values
                    .into_iter()
                    .map(|v| match to_json(&state.lua, v.clone()) {
                        Ok(j) if !matches!(v, Value::String(_)) => serde_json::to_string_pretty(&j).unwrap_or_default(),
                        _ => v.to_string().unwrap_or_else(|_| format!("{v:?}")),
                    })
                    .collect();
                Ok(parts.join("\t"))
            }
            .await;
            let _ = reply.send(r);
        }
    }
}

async fn call_tool(state: &State, name: &str, args: serde_json::Value) -> Result<serde_json::Value> {
    let Some(tool) = state.tools.get(name) else {
        let names: Vec<&str> = state.tools.keys().map(String::as_str).collect();
        let mut msg = format!("Unknown tool '{name}'. Available tools: {}.", names.join(", "));
        if !state.load_errors.is_empty() {
            msg.push_str(&format!(" Some tool scripts failed to load: {}", state.load_errors.join("; ")));
        }
        return Err(StrobeError::validation(msg));
    };
    let args = if args.is_null() { serde_json::json!({}) } else { args };
    let problems = crate::schema::validate(&tool.info.input_schema, &args);
    if !problems.is_empty() {
        return Err(StrobeError::validation(format!(
            "Invalid arguments for {name}: {}. See the tool's inputSchema.",
            problems.join("; ")
        )));
    }
    let lua_args = to_lua(&state.lua, &args).map_err(|e| StrobeError::internal(e.to_string()))?;
    let out: Value = tool.handler.call_async(lua_args).await.map_err(|e| {
        let err = super::error_from_lua(&e);
        if err.code == ErrorCode::InternalError {
            tracing::error!("tool {name} ({}) failed: {e}", tool.info.origin);
        }
        err
    })?;
    to_json(&state.lua, out).map_err(|e| StrobeError::internal(format!("tool {name} returned a value that is not JSON: {e}")))
}
