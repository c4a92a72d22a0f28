//! `strobe.symbols(binary, pattern [, projectRoot])`: the functions of a binary that
//! match a trace pattern, with file and line — what a script needs to pick targets.

use std::path::Path;
use std::sync::Arc;

use mlua::{Lua, Table};

use super::convert::to_lua;
use super::lua_err;
use crate::engine::Engine;
use crate::symbols::Pattern;

pub fn register(lua: &Lua, strobe: &Table, engine: &Arc<Engine>) -> mlua::Result<()> {
    let e = engine.clone();
    strobe.set(
        "symbols",
        lua.create_function(move |lua, (binary, pattern, root): (String, String, Option<String>)| {
            let index = e.symbols().get(Path::new(&binary)).map_err(lua_err)?;
            let pattern = Pattern::parse(&pattern).map_err(lua_err)?;
            let root = root.unwrap_or_else(|| "/".into());
            let found: Vec<_> = index.matching(&pattern, Path::new(&root));
            to_lua(lua, &found)
        })?,
    )?;
    Ok(())
}
