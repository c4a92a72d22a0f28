//! Session methods for values in the target: `session:read{}`, `session:write{}`,
//! `session:watch{}`, `session:watches()` and `session:set_depth(n)` (added to the Session
//! object by `session.rs`). Arguments use the MCP field names (`targets`, `depth`, `poll`).
//!
//! `read` targets are globals/statics by name (with `->`/`.` chains) or raw
//! `{address, size, type}`; a `frame` source for locals of a paused thread can be added
//! as another target kind in `engine/memory.rs` without changing this surface.

use mlua::{LuaSerdeExt, UserDataMethods, UserDataRef, Value};
use serde::Deserialize;

use super::convert::to_lua;
use super::lua_err;
use super::session::{args, LuaSession};
use crate::engine::{MemoryRequest, MemoryTarget, WatchTarget};

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    #[serde(default)]
    targets: Vec<MemoryTarget>,
    pid: Option<u32>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct WatchArgs {
    #[serde(default)]
    add: Vec<WatchTarget>,
    #[serde(default)]
    remove: Vec<String>,
}

pub(super) fn add_methods<M: UserDataMethods<LuaSession>>(methods: &mut M) {
    // session:read{targets={{variable="g_clock->counter"}, {address="0x…", size=4, type="u32"}}, depth=1,
    //              poll={intervalMs=100, durationMs=1000}, pid=N} -> {results=[...]} or {polling=true, ...}
    // pid: a followed fork instead of the session's root.
    methods.add_async_method("read", |lua, this: UserDataRef<LuaSession>, v: Value| {
        let engine = this.engine.clone();
        let id = this.id.clone();
        async move {
            let req: MemoryRequest = args(&lua, v, "session:read")?;
            let r = engine.read_memory(&id, req).await.map_err(lua_err)?;
            to_lua(&lua, &r)
        }
    });

    // session:write{targets={{variable="g_counter", value=100}}, pid=N} -> {results=[{label, address, previousValue, newValue}]}
    methods.add_async_method("write", |lua, this: UserDataRef<LuaSession>, v: Value| {
        let engine = this.engine.clone();
        let id = this.id.clone();
        async move {
            let a: WriteArgs = args(&lua, v, "session:write")?;
            let r = engine.write_memory(&id, a.targets, a.pid).await.map_err(lua_err)?;
            to_lua(&lua, &r)
        }
    });

    // session:watch{add={{variable="g_clock->counter", on={"tick_*"}}}, remove={"label"}}
    //   -> active watches, warnings (about functions the watches moved to the JS path)
    methods.add_async_method("watch", |lua, this: UserDataRef<LuaSession>, v: Value| {
        let engine = this.engine.clone();
        let id = this.id.clone();
        async move {
            let a: WatchArgs = args(&lua, v, "session:watch")?;
            let list = engine.update_watches(&id, a.add, &a.remove).await.map_err(lua_err)?;
            Ok((lua.to_value(&list)?, lua.to_value(&engine.take_hook_warnings(&id))?))
        }
    });

    // session:watches() -> the active watches (empty once the session is no longer live)
    methods.add_method("watches", |lua, this, ()| lua.to_value(&this.engine.watches(&this.id)));

    // session:set_depth(n) -> n; serializationDepth 1-10 for typed arguments and watches
    methods.add_async_method("set_depth", |_, this: UserDataRef<LuaSession>, depth: i64| {
        let engine = this.engine.clone();
        let id = this.id.clone();
        async move { engine.set_serialization_depth(&id, depth).await.map_err(lua_err) }
    });
}
