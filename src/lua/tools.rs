//! MCP tools defined by scripts: each `scripts/tools/*.lua` returns
//! `{ name, description, inputSchema, handler = function(args) ... end }`.

use std::collections::BTreeMap;

use mlua::{Function, Lua, Table};
use serde::Serialize;

use super::convert::to_json;
use super::scripts::{ScriptFile, ScriptSources};

/// What `tools/list` shows of a tool.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolInfo {
    pub name: String,
    pub description: String,
    pub input_schema: serde_json::Value,
    /// The script that defines it.
    #[serde(skip)]
    pub origin: String,
}

pub struct LoadedTool {
    pub info: ToolInfo,
    pub handler: Function,
}

/// Run one tool script and check what it returned.
fn load_one(lua: &Lua, file: &ScriptFile) -> Result<LoadedTool, String> {
    let chunk = lua.load(file.source.as_str()).set_name(format!("@{}", file.origin));
    let def: Table = chunk.eval().map_err(|e| e.to_string())?;
    let name: String = def.get("name").map_err(|_| format!("{}: the returned table needs a string 'name'", file.origin))?;
    let description: String = def.get::<Option<String>>("description").ok().flatten().unwrap_or_default();
    let schema: Option<Table> = def.get("inputSchema").map_err(|_| format!("{}: 'inputSchema' must be a table", file.origin))?;
    let input_schema = match schema {
        Some(t) => to_json(lua, mlua::Value::Table(t)).map_err(|e| format!("{}: inputSchema: {e}", file.origin))?,
        None => serde_json::json!({ "type": "object" }),
    };
    let handler: Function = def.get("handler").map_err(|_| format!("{}: 'handler' must be a function", file.origin))?;
    Ok(LoadedTool { info: ToolInfo { name, description, input_schema, origin: file.origin.clone() }, handler })
}

/// Load every tool script. A script that fails is reported (file and line) and skipped.
pub fn load_all(lua: &Lua, sources: &ScriptSources) -> (BTreeMap<String, LoadedTool>, Vec<String>) {
    let mut tools = BTreeMap::new();
    let mut errors = Vec::new();
    for file in sources.list("tools") {
        match load_one(lua, &file) {
            Ok(t) => {
                tools.insert(t.info.name.clone(), t);
            }
            Err(e) => {
                tracing::error!("tool script failed to load: {e}");
                errors.push(e);
            }
        }
    }
    (tools, errors)
}

/// Make `scripts/lib/*.lua` available to `require` (by file stem) without touching
/// the file system search path.
pub fn install_libs(lua: &Lua, sources: &ScriptSources) -> Vec<String> {
    let mut errors = Vec::new();
    let preload: mlua::Result<Table> = lua.globals().get::<Table>("package").and_then(|p| p.get("preload"));
    let Ok(preload) = preload else {
        return vec!["the Lua 'package' library is missing".into()];
    };
    for file in sources.list("lib") {
        let stem = file.name.trim_start_matches("lib/").trim_end_matches(".lua").to_string();
        match lua.load(file.source.as_str()).set_name(format!("@{}", file.origin)).into_function() {
            Ok(f) => {
                if let Err(e) = preload.set(stem, f) {
                    errors.push(e.to_string());
                }
            }
            Err(e) => errors.push(e.to_string()),
        }
    }
    errors
}
