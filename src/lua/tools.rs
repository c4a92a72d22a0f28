//! MCP tools defined by scripts: each `scripts/tools/*.lua` returns
//! `{ name, description, inputSchema, title?, annotations?, outputSchema?, requires?,
//! handler = function(args) ... end, on_unload? }` (title, annotations, outputSchema:
//! `tool_meta.rs`). The inputSchema is compiled once, when the script loads.
//! `requires` declares a precondition on `args.sessionId` that the runtime enforces
//! before the handler runs: `"session"` (it exists), `"running"` (its process is alive)
//! or `"paused"` (a thread is stopped).

use mlua::{Function, Lua, Table};
use serde::Serialize;

use super::convert::to_json;
use super::scripts::ScriptFile;
use crate::engine::Engine;
use crate::error::{ErrorCode, StrobeError};
use crate::schema::CompiledSchema;

/// What `tools/list` shows of a tool (`mcp::protocol::tool_listing` picks what the
/// client's protocol version knows).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ToolInfo {
    pub name: String,
    pub description: String,
    pub input_schema: serde_json::Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<serde_json::Value>,
    /// The script that defines it.
    #[serde(skip)]
    pub origin: String,
}

/// A tool's successful answer, and whether the tool declares its shape (`outputSchema`):
/// then MCP clients get it as `structuredContent` too.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolAnswer {
    pub value: serde_json::Value,
    pub structured: bool,
}

impl std::ops::Deref for ToolAnswer {
    type Target = serde_json::Value;
    fn deref(&self) -> &serde_json::Value {
        &self.value
    }
}

/// A precondition a tool declares with `requires = "..."`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requirement {
    Session,
    Running,
    Paused,
}

impl Requirement {
    fn parse(s: &str) -> Option<Requirement> {
        match s {
            "session" => Some(Requirement::Session),
            "running" => Some(Requirement::Running),
            "paused" => Some(Requirement::Paused),
            _ => None,
        }
    }
}

#[derive(Clone)]
pub struct LoadedTool {
    pub info: ToolInfo,
    /// `info.input_schema`, compiled.
    pub input: CompiledSchema,
    pub handler: Function,
    pub requires: Option<Requirement>,
}

/// Check what a tool script returned.
pub fn from_def(lua: &Lua, file: &ScriptFile, def: &Table) -> Result<LoadedTool, String> {
    let o = &file.origin;
    let name: String = def.get("name").map_err(|_| format!("{o}: the returned table needs a string 'name'"))?;
    let description: String = def.get::<Option<String>>("description").ok().flatten().unwrap_or_default();
    let schema: Option<Table> = def.get("inputSchema").map_err(|_| format!("{o}: 'inputSchema' must be a table"))?;
    let input_schema = match schema {
        Some(t) => to_json(lua, mlua::Value::Table(t)).map_err(|e| format!("{o}: inputSchema: {e}"))?,
        None => serde_json::json!({ "type": "object" }),
    };
    let input = CompiledSchema::compile(&input_schema).map_err(|e| format!("{o}: inputSchema is {e}"))?;
    let meta = super::tool_meta::read(lua, o, def)?;
    let handler: Function = def.get("handler").map_err(|_| format!("{o}: 'handler' must be a function"))?;
    let requires = match def.get::<Option<String>>("requires").map_err(|_| format!("{o}: 'requires' must be a string"))? {
        None => None,
        Some(r) => Some(Requirement::parse(&r).ok_or_else(|| {
            format!("{o}: requires = '{r}' is not one of 'session', 'running', 'paused'")
        })?),
    };
    let info = ToolInfo {
        name,
        description,
        input_schema,
        title: meta.title,
        annotations: meta.annotations,
        output_schema: meta.output_schema,
        origin: o.clone(),
    };
    Ok(LoadedTool { info, input, handler, requires })
}

/// Enforce a tool's precondition on its `sessionId` argument, with an error that says
/// what to do instead.
pub fn check_requires(engine: &Engine, tool: &str, req: Requirement, args: &serde_json::Value) -> Result<(), StrobeError> {
    let what = match req {
        Requirement::Session => "an existing session",
        Requirement::Running => "a running session",
        Requirement::Paused => "a paused session",
    };
    let Some(id) = args.get("sessionId").and_then(|v| v.as_str()) else {
        return Err(StrobeError::validation(format!(
            "{tool} needs {what}: pass sessionId. Call debug_session {{action: 'list'}} to see sessions, or debug_launch to start one."
        )));
    };
    let st = engine.status(id)?;
    if req == Requirement::Session {
        return Ok(());
    }
    if st.status != "running" && st.status != "paused" {
        let code = st.exit_code.map(|c| format!(" (exit code {c})")).unwrap_or_default();
        return Err(StrobeError::new(
            ErrorCode::ProcessExited,
            format!(
                "{tool} needs {what}, but the process of session '{id}' is {}{code}. Its events are still queryable with debug_query; start it again with debug_launch.",
                st.status
            ),
        ));
    }
    if req == Requirement::Paused && st.status != "paused" {
        return Err(StrobeError::validation(format!(
            "{tool} needs {what}, but no thread of session '{id}' is paused. Set a breakpoint and wait for it to hit, then call {tool} again."
        )));
    }
    Ok(())
}
