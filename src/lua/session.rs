//! `strobe.launch{...}`, `strobe.session(id)`, `strobe.sessions()` and the Session object. A Session holds only its id and
//! resolves it again on every call, so a stale one fails with a message that says why.

use std::sync::Arc;

use mlua::{Lua, LuaSerdeExt, Table, UserData, UserDataFields, UserDataMethods, UserDataRef, Value};
use serde::Deserialize;

use super::convert::to_lua;
use super::lua_err;
use crate::engine::{Engine, LaunchRequest};
use crate::error::StrobeError;

pub struct LuaSession {
    pub id: String,
    pub pid: u32,
    pub(crate) engine: Arc<Engine>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct LaunchArgs {
    command: String,
    #[serde(default)]
    args: Vec<String>,
    cwd: Option<String>,
    project_root: String,
    #[serde(default)]
    env: std::collections::BTreeMap<String, String>,
    /// Set before the first instruction, like debug_breakpoint's `add` items.
    #[serde(default)]
    breakpoints: Vec<crate::engine::PointRequest>,
    #[serde(default)]
    stop_on_entry: bool,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct TraceArgs {
    #[serde(default)]
    add: Vec<String>,
    #[serde(default)]
    remove: Vec<String>,
    /// `{disable = {...}, enable = {...}}`: hot-function sampling per pattern.
    sampling: Option<crate::engine::sampling::SamplingRequest>,
    /// Exit events also carry pointer parameters' pointees (engine/args_at_exit.rs).
    #[serde(rename = "argumentsAtExit")]
    arguments_at_exit: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct StopArgs {
    #[serde(default)]
    retain: bool,
}

/// Decode a Lua table into an argument struct; a wrong shape is the caller's mistake.
pub(crate) fn args<T: for<'de> Deserialize<'de> + Default>(lua: &Lua, v: Value, what: &str) -> mlua::Result<T> {
    if v.is_nil() {
        return Ok(T::default());
    }
    lua.from_value(v).map_err(|e| lua_err(StrobeError::validation(format!("{what}: {e}"))))
}

impl UserData for LuaSession {
    fn add_fields<F: UserDataFields<Self>>(fields: &mut F) {
        fields.add_field_method_get("id", |_, this| Ok(this.id.clone()));
        fields.add_field_method_get("pid", |_, this| Ok(this.pid));
    }

    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_meta_method("__tostring", |_, this, ()| Ok(format!("Session({}, pid {})", this.id, this.pid)));
        super::memory::add_methods(methods); // read, write, watch, watches, set_depth
        super::debugger::add_methods(methods); // breakpoint, continue, paused, locals, set_local, debug_state
        super::eval::add_methods(methods); // eval

        // session:trace{add = {...}, remove = {...}} -> {activePatterns, hookedFunctions, ...}
        methods.add_async_method("trace", |lua, this: UserDataRef<Self>, v: Value| {
            let engine = this.engine.clone();
            let id = this.id.clone();
            async move {
                let a: TraceArgs = args(&lua, v, "session:trace")?;
                if let Some(on) = a.arguments_at_exit {
                    engine.set_arguments_at_exit(&id, on).await.map_err(lua_err)?;
                }
                let mut r = engine.trace(Some(&id), &a.add, &a.remove).await.map_err(lua_err)?;
                if let Some(sampling) = &a.sampling {
                    let u = engine.set_sampling(&id, sampling).await.map_err(lua_err)?;
                    r.warnings.extend(u.warnings);
                    r.sampled_functions = engine.tracing_report(&id).map_err(lua_err)?.1;
                }
                to_lua(&lua, &r)
            }
        });

        // session:query{eventType=..., function={contains=...}, limit=...} -> {events, totalCount, hasMore, ...}
        methods.add_method("query", |lua, this, v: Value| {
            let q = super::events::query_from_lua(lua, &this.engine, &this.id, v)?;
            let r = this.engine.query(&q).map_err(lua_err)?;
            super::events::query_result_to_lua(lua, &this.id, &r)
        });

        // session:wait_for{eventType="stdout", text="ready", ["function"]={...}, timeoutMs=5000}
        // -> the first matching event that arrives, or nil at the timeout.
        methods.add_async_method("wait_for", |lua, this: UserDataRef<Self>, v: Table| {
            let engine = this.engine.clone();
            let id = this.id.clone();
            async move {
                let timeout = std::time::Duration::from_millis(v.get::<Option<u64>>("timeoutMs")?.unwrap_or(10_000));
                let text: Option<String> = v.get("text")?;
                v.set("timeoutMs", Value::Nil)?;
                v.set("text", Value::Nil)?;
                v.set("limit", 500)?;
                let mut q = super::events::query_from_lua(&lua, &engine, &id, Value::Table(v))?;
                let deadline = std::time::Instant::now() + timeout;
                let mut pace = crate::inflight::Pace::new();
                loop {
                    crate::inflight::check().map_err(lua_err)?;
                    if pace.due() {
                        crate::inflight::heartbeat("waiting for a matching event (session:wait_for)");
                    }
                    let r = engine.query(&q).map_err(lua_err)?;
                    let hit = r.events.iter().find(|e| match &text {
                        Some(t) => e.text.as_deref().is_some_and(|x| x.contains(t.as_str())),
                        None => true,
                    });
                    if let Some(e) = hit {
                        return super::convert::to_lua_keep_null(&lua, &super::events::event_json(&id, e));
                    }
                    if let Some(last) = r.last_event_id {
                        q.after_event_id = Some(last);
                    }
                    if std::time::Instant::now() >= deadline {
                        return Ok(Value::Nil);
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            }
        });

        // session:status() -> {status, pid, eventCount, exitCode, ...}
        methods.add_method("status", |lua, this, ()| {
            let r = this.engine.status(&this.id).map_err(lua_err)?;
            to_lua(lua, &r)
        });

        // session:stop{retain=false} -> number of events collected
        methods.add_async_method("stop", |lua, this: UserDataRef<Self>, v: Value| {
            let engine = this.engine.clone();
            let id = this.id.clone();
            async move {
                let a: StopArgs = args(&lua, v, "session:stop")?;
                engine.stop(&id, a.retain).await.map_err(lua_err)
            }
        });

        // session:stdin("text") writes to the target's standard input.
        methods.add_async_method("stdin", |_, this: UserDataRef<Self>, data: mlua::String| {
            let engine = this.engine.clone();
            let id = this.id.clone();
            let bytes = data.as_bytes().to_vec();
            async move { engine.send_stdin(&id, &bytes).await.map_err(lua_err) }
        });

        // session:is_running()
        methods.add_method("is_running", |_, this, ()| {
            Ok(this.engine.status(&this.id).map(|s| s.status == "running").unwrap_or(false))
        });
    }
}

pub fn register(lua: &Lua, strobe: &Table, engine: &Arc<Engine>) -> mlua::Result<()> {
    let e = engine.clone();
    strobe.set(
        "launch",
        lua.create_async_function(move |lua, v: Value| {
            let engine = e.clone();
            async move {
                let a: LaunchArgs = args(&lua, v, "strobe.launch")?;
                let req = LaunchRequest {
                    command: a.command,
                    args: a.args,
                    cwd: a.cwd,
                    project_root: a.project_root,
                    env: a.env.into_iter().collect(),
                    breakpoints: a.breakpoints,
                    stop_on_entry: a.stop_on_entry,
                    scope: super::caller::current(),
                };
                let r = engine.launch(req).await.map_err(lua_err)?;
                super::caller::note_launched(&r.session_id);
                let s = lua.create_userdata(LuaSession { id: r.session_id.clone(), pid: r.pid, engine: engine.clone() })?;
                Ok((s, to_lua(&lua, &r)?))
            }
        })?,
    )?;

    let e = engine.clone();
    strobe.set(
        "session",
        lua.create_function(move |lua, id: String| {
            let st = e.status(&id).map_err(lua_err)?;
            lua.create_userdata(LuaSession { id, pid: st.pid as u32, engine: e.clone() })
        })?,
    )?;

    let e = engine.clone();
    strobe.set(
        "sessions",
        lua.create_function(move |lua, ()| {
            let rows = e.list().map_err(lua_err)?;
            let list: Vec<serde_json::Value> = rows
                .iter()
                .map(|r| {
                    // The same representation as status and debug_continue: exitCode or signal.
                    let (exit_code, signal) = crate::engine::exit_fields(r.exit_code);
                    serde_json::json!({
                        "sessionId": r.id, "binaryPath": r.binary_path, "pid": r.pid,
                        "startedAt": r.started_at, "endedAt": r.ended_at, "status": r.status,
                        "exitCode": exit_code, "signal": signal,
                    })
                })
                .collect();
            to_lua(lua, &list)
        })?,
    )?;

    let e = engine.clone();
    strobe.set(
        "delete_session",
        lua.create_function(move |_, id: String| e.delete(&id).map_err(lua_err))?,
    )?;

    let e = engine.clone();
    strobe.set(
        "stop_session",
        lua.create_async_function(move |_, (id, retain): (String, Option<bool>)| {
            let engine = e.clone();
            async move { engine.stop(&id, retain.unwrap_or(false)).await.map_err(lua_err) }
        })?,
    )?;
    Ok(())
}
