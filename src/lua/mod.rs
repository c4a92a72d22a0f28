//! The only boundary between the core and Lua. Each `strobe.*` area lives in its own
//! file and exposes `register(lua, strobe_table, engine)`; `register_modules` below is
//! the one list that wires them all in.

mod caller; // which caller (MCP connection or local front end) a Lua call serves
mod complete;
mod convert;
mod debugger;
mod eval; // Session method eval (added by session.rs)
mod events;
mod fs;
mod hints;
mod investigate;
mod json;
mod loader;
mod memory; // Session methods read/write/watch (added by session.rs)
mod pool;
mod pretty;
mod process;
mod regex;
mod reload;
mod runtime;
mod sandbox;
mod scripts;
mod session;
mod settings;
mod spawn;
mod staging; // strobe.trace_pending, strobe.stage_breakpoints, strobe.staged
mod symbols;
mod test;
mod time;
mod tool_meta; // title, annotations, outputSchema of a tool script
mod tools;
mod util;
mod watchdog;
mod worker;
mod xml;

pub use loader::ScriptError;
pub use runtime::{EvalOutput, LuaHost, RunOutcome, ToolAnswer, ToolInfo};
pub use scripts::{read_trusted, set_trusted, ScriptSources};

use std::sync::Arc;

use mlua::{Lua, Table};

use crate::engine::Engine;

/// Every `strobe.*` module, in one visible list.
fn register_modules(lua: &Lua, strobe: &Table, engine: &Arc<Engine>) -> mlua::Result<()> {
    util::register(lua, strobe)?; // strobe.error, strobe.sleep, strobe.progress, strobe.log, strobe.now_ms
    json::register(lua, strobe)?; // strobe.json.encode/decode/array/null
    session::register(lua, strobe, engine)?; // strobe.launch, strobe.session, strobe.sessions
    staging::register(lua, strobe, engine)?; // strobe.trace_pending, strobe.stage_breakpoints, strobe.staged
    debugger::register(lua, strobe)?; // strobe.debugger limits; session:breakpoint/continue/locals/set_local
    symbols::register(lua, strobe, engine)?; // strobe.symbols
    process::register(lua, strobe)?; // strobe.exec, strobe.spawn
    fs::register(lua, strobe)?; // strobe.fs.read/write/list/exists/is_dir/mkdir/remove/glob
    regex::register(lua, strobe)?; // strobe.regex.new
    time::register(lua, strobe)?; // strobe.time.now_ms/monotonic_ms/format
    hints::register(lua, strobe)?; // strobe.hints, strobe.hint, strobe.scenario_steps
    pretty::register(lua, strobe)?; // strobe.inspect
    settings::register(lua, strobe, engine)?; // strobe.settings
    test::register(lua, strobe)?; // strobe.test.run/status/adapters and the run primitives
    xml::register(lua, strobe)?; // strobe.xml.decode
    Ok(())
}

/// Build a Lua state with the `strobe` global installed, under the watchdog (budget
/// hook, memory limit, no `os.exit`).
pub fn new_state(engine: &Arc<Engine>) -> mlua::Result<Lua> {
    let lua = Lua::new();
    watchdog::install(&lua, watchdog::STATE_MEMORY_LIMIT)?;
    let strobe = lua.create_table()?;
    register_modules(&lua, &strobe, engine)?;
    lua.globals().set("strobe", strobe)?;
    Ok(lua)
}

/// A coded error as a Lua error: the text is `CODE: message`, so it survives
/// `pcall`, `tostring` and tracebacks and can be recovered on the way out.
pub(crate) fn lua_err(e: crate::error::StrobeError) -> mlua::Error {
    mlua::Error::RuntimeError(e.to_string())
}

/// Recover the coded error from whatever a Lua call raised.
pub fn error_from_lua(e: &mlua::Error) -> crate::error::StrobeError {
    crate::error::StrobeError::from_lua_message(&e.to_string())
}
