//! What the caller stages for its next launch (engine/staging.rs), scoped to the caller
//! (caller.rs): `strobe.trace_pending{add, remove, clear}`,
//! `strobe.stage_breakpoints{add, remove, clear}` and `strobe.staged()`.

use std::sync::Arc;

use mlua::{Lua, Table, Value};
use serde::Deserialize;

use super::convert::to_lua;
use super::lua_err;
use super::session::args;
use crate::engine::{Engine, PointRequest};

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct StagePatternArgs {
    #[serde(default)]
    add: Vec<String>,
    #[serde(default)]
    remove: Vec<String>,
    #[serde(default)]
    clear: bool,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct StagePointArgs {
    #[serde(default)]
    add: Vec<PointRequest>,
    #[serde(default)]
    remove: Vec<String>,
    #[serde(default)]
    clear: bool,
}

pub fn register(lua: &Lua, strobe: &Table, engine: &Arc<Engine>) -> mlua::Result<()> {
    // strobe.trace_pending{add=, remove=, clear=} -> {mode = "pending", activePatterns}
    let e = engine.clone();
    strobe.set(
        "trace_pending",
        lua.create_function(move |lua, v: Value| {
            let a: StagePatternArgs = args(lua, v, "strobe.trace_pending")?;
            let patterns = e.stage_patterns(super::caller::current(), &a.add, &a.remove, a.clear).map_err(lua_err)?;
            to_lua(lua, &serde_json::json!({ "mode": "pending", "activePatterns": patterns, "hookedFunctions": 0, "warnings": [] }))
        })?,
    )?;

    // strobe.stage_breakpoints{add={{["function"]=...}|{file=, line=}...}, remove={"staged-1"}, clear=}
    // -> list of {id = "staged-N", function|file+line, condition?, hitCount?, message?}
    let e = engine.clone();
    strobe.set(
        "stage_breakpoints",
        lua.create_function(move |lua, v: Value| {
            let a: StagePointArgs = args(lua, v, "strobe.stage_breakpoints")?;
            let staged = e.stage_points(super::caller::current(), &a.add, &a.remove, a.clear).map_err(lua_err)?;
            to_lua(lua, &staged)
        })?,
    )?;

    // strobe.staged() -> {patterns = {...}, breakpoints = {...}}: what the next launch applies.
    let e = engine.clone();
    strobe.set("staged", lua.create_function(move |lua, ()| to_lua(lua, &e.staged(super::caller::current())))?)?;
    Ok(())
}
