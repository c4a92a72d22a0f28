//! `strobe.settings(projectRoot?)`: the effective settings, read from disk on every call.
//!
//! The argument is a project root path, or a table `{ projectRoot?, sessionId? }` (a
//! session stands for the project root it was launched with). Returns
//! `{ values = { ["events.maxPerSession"] = 200000, ... }, sources = {...}, warnings = {...} }`.

use std::path::PathBuf;
use std::sync::Arc;

use mlua::{Lua, Table, Value};
use serde::Deserialize;
use serde_json::json;

use super::convert::to_lua;
use super::session::args;
use crate::engine::Engine;

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SettingsArgs {
    project_root: Option<String>,
    session_id: Option<String>,
}

pub fn register(lua: &Lua, strobe: &Table, engine: &Arc<Engine>) -> mlua::Result<()> {
    let e = engine.clone();
    strobe.set(
        "settings",
        lua.create_function(move |lua, v: Value| {
            let a: SettingsArgs = match v {
                Value::String(s) => SettingsArgs { project_root: Some(s.to_str()?.to_string()), session_id: None },
                other => args(lua, other, "strobe.settings")?,
            };
            let root = match (a.project_root, a.session_id) {
                (Some(r), _) if !r.is_empty() => Some(PathBuf::from(r)),
                (_, Some(id)) => e.session_project_root(&id),
                _ => None,
            };
            let s = e.settings_for(root.as_deref());
            to_lua(
                lua,
                &json!({ "values": s.values_json(), "sources": s.sources_json(), "warnings": s.warnings }),
            )
        })?,
    )?;
    Ok(())
}
