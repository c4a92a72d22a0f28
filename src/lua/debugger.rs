//! The active debugger on Session objects: `session:breakpoint{}`, `session:continue{}`,
//! `session:paused()`, `session:locals{}`, `session:set_local{}`, `session:debug_state()`.
//! (`add_methods` is called from the Session's method list in `session.rs`.)

use std::time::Duration;

use mlua::{Lua, Table, UserDataMethods, UserDataRef, Value};
use serde::Deserialize;

use super::convert::{to_json, to_lua};
use super::lua_err;
use super::session::{args, LuaSession};
use crate::engine::{PointRequest, StepAction};
use crate::error::StrobeError;

/// How long `session:continue{}` waits for the next pause by default.
pub const DEFAULT_CONTINUE_TIMEOUT_MS: u64 = 10_000;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct BreakpointArgs {
    #[serde(default)]
    add: Vec<PointRequest>,
    #[serde(default)]
    remove: Vec<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ContinueArgs {
    action: Option<String>,
    thread_id: Option<u64>,
    timeout_ms: Option<u64>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct LocalsArgs {
    thread_id: Option<u64>,
}

pub fn add_methods<M: UserDataMethods<LuaSession>>(methods: &mut M) {
    // session:breakpoint{add = {{file=, line=, condition=, hitCount=, message=} | {["function"]=...}}, remove = {ids}}
    // -> {breakpoints = {...}, logpoints = {...}}
    methods.add_async_method("breakpoint", |lua, this: UserDataRef<LuaSession>, v: Value| {
        let engine = this.engine.clone();
        let id = this.id.clone();
        async move {
            let a: BreakpointArgs = args(&lua, v, "session:breakpoint")?;
            let r = engine.set_points(&id, &a.add, &a.remove).await.map_err(lua_err)?;
            to_lua(&lua, &r)
        }
    });

    // session:continue{action="continue"|"step-over"|"step-into"|"step-out", threadId=, timeoutMs=}
    // -> {status="paused"|"running"|"exited", breakpointId, threadId, file, line, ["function"], ...}
    methods.add_async_method("continue", |lua, this: UserDataRef<LuaSession>, v: Value| {
        let engine = this.engine.clone();
        let id = this.id.clone();
        async move {
            let a: ContinueArgs = args(&lua, v, "session:continue")?;
            let action = StepAction::parse(a.action.as_deref().unwrap_or("continue")).map_err(lua_err)?;
            let timeout = Duration::from_millis(a.timeout_ms.unwrap_or(DEFAULT_CONTINUE_TIMEOUT_MS).min(300_000));
            let r = engine.continue_session(&id, action, a.thread_id, timeout).await.map_err(lua_err)?;
            to_lua(&lua, &r)
        }
    });

    // session:wait_pause{timeoutMs=} -> like continue's answer, without resuming anything:
    // the most recently paused thread, or status "running" at the timeout, or "exited".
    methods.add_async_method("wait_pause", |lua, this: UserDataRef<LuaSession>, v: Value| {
        let engine = this.engine.clone();
        let id = this.id.clone();
        async move {
            let a: ContinueArgs = args(&lua, v, "session:wait_pause")?;
            let timeout = Duration::from_millis(a.timeout_ms.unwrap_or(DEFAULT_CONTINUE_TIMEOUT_MS).min(300_000));
            let r = engine.wait_for_pause(&id, timeout).await.map_err(lua_err)?;
            to_lua(&lua, &r)
        }
    });

    // session:paused() -> list of paused threads {threadId, breakpointId, file, line, function, backtrace, arguments}
    methods.add_async_method("paused", |lua, this: UserDataRef<LuaSession>, ()| {
        let engine = this.engine.clone();
        let id = this.id.clone();
        async move {
            let s = engine.session(&id).map_err(lua_err)?;
            to_lua(&lua, &engine.paused_threads(&s).await)
        }
    });

    // session:debug_state() -> {breakpoints, logpoints, pausedThreads}
    methods.add_async_method("debug_state", |lua, this: UserDataRef<LuaSession>, ()| {
        let engine = this.engine.clone();
        let id = this.id.clone();
        async move {
            let t = lua.create_table()?;
            let (bp, lp, paused) = match engine.session(&id) {
                Ok(s) => {
                    if s.is_running() {
                        engine.refresh_hits(&s).await; // hits of points that did not stop
                    }
                    let (bp, lp) = s.debug.points();
                    (bp, lp, engine.paused_threads(&s).await)
                }
                Err(_) => Default::default(),
            };
            t.set("breakpoints", to_lua(&lua, &bp)?)?;
            t.set("logpoints", to_lua(&lua, &lp)?)?;
            t.set("pausedThreads", to_lua(&lua, &paused)?)?;
            Ok(t)
        }
    });

    // session:locals{threadId=} -> {threadId, function, file, line, locals = {{name, type, value|error, location}}}
    methods.add_async_method("locals", |lua, this: UserDataRef<LuaSession>, v: Value| {
        let engine = this.engine.clone();
        let id = this.id.clone();
        async move {
            let a: LocalsArgs = args(&lua, v, "session:locals")?;
            let (p, vars) = engine.locals(&id, a.thread_id).await.map_err(lua_err)?;
            let t = lua.create_table()?;
            t.set("threadId", p.thread_id)?;
            t.set("function", p.function)?;
            t.set("file", p.file)?;
            t.set("line", p.line)?;
            t.set("locals", to_lua(&lua, &vars)?)?;
            Ok(t)
        }
    });

    // session:set_local{name=, value=, threadId=} -> {name, type, previousValue, newValue, location}
    methods.add_async_method("set_local", |lua, this: UserDataRef<LuaSession>, t: Table| {
        let engine = this.engine.clone();
        let id = this.id.clone();
        async move {
            let name: String = t.get::<Option<String>>("name")?.ok_or_else(|| lua_err(StrobeError::validation("session:set_local needs 'name'.")))?;
            let value = to_json(&lua, t.get::<Value>("value")?)?;
            let thread_id: Option<u64> = t.get("threadId")?;
            let r = engine.set_local(&id, thread_id, &name, value).await.map_err(lua_err)?;
            to_lua(&lua, &r)
        }
    });
}

/// `strobe.debugger`: the limits and defaults scripts need to explain themselves.
pub fn register(lua: &Lua, strobe: &Table) -> mlua::Result<()> {
    let t = lua.create_table()?;
    t.set("max_breakpoints", crate::engine::MAX_BREAKPOINTS)?;
    t.set("max_logpoints", crate::engine::MAX_LOGPOINTS)?;
    t.set("continue_timeout_ms", DEFAULT_CONTINUE_TIMEOUT_MS)?;
    strobe.set("debugger", t)
}
