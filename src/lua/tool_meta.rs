//! What a tool script declares about itself beyond name and description: `title`,
//! `annotations` (MCP behaviour hints) and `outputSchema` (the shape of its answers,
//! sent to clients as `structuredContent`). Checked when the script loads, so a typo
//! refuses the script instead of reaching clients.

use mlua::{Lua, Table};
use serde_json::{json, Map, Value};

use super::convert::to_json;
use crate::schema::CompiledSchema;

/// The MCP ToolAnnotations hints (all booleans).
const HINTS: [&str; 4] = ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"];

/// Fields the runtime adds to every successful answer (see `worker::call_tool`), so
/// every declared outputSchema allows them.
fn runtime_fields() -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(
        "scriptErrors".into(),
        json!({ "type": "array", "items": { "type": "object" }, "description": "Scripts that failed to load" }),
    );
    m.insert("scriptWarnings".into(), json!({ "type": "array", "items": { "type": "string" } }));
    m
}

pub struct ToolMeta {
    pub title: Option<String>,
    pub annotations: Option<Value>,
    pub output_schema: Option<Value>,
}

/// Read and check `title`, `annotations` and `outputSchema` of a tool definition.
pub fn read(lua: &Lua, o: &str, def: &Table) -> Result<ToolMeta, String> {
    let title: Option<String> = def.get("title").map_err(|_| format!("{o}: 'title' must be a string"))?;
    let annotations = match def.get::<Option<Table>>("annotations").map_err(|_| format!("{o}: 'annotations' must be a table"))? {
        None => None,
        Some(t) => Some(check_annotations(o, to_json(lua, mlua::Value::Table(t)).map_err(|e| format!("{o}: annotations: {e}"))?)?),
    };
    let output_schema = match def.get::<Option<Table>>("outputSchema").map_err(|_| format!("{o}: 'outputSchema' must be a table"))? {
        None => None,
        Some(t) => {
            let schema = to_json(lua, mlua::Value::Table(t)).map_err(|e| format!("{o}: outputSchema: {e}"))?;
            Some(check_output_schema(o, schema)?)
        }
    };
    Ok(ToolMeta { title, annotations, output_schema })
}

fn check_annotations(o: &str, v: Value) -> Result<Value, String> {
    let Value::Object(map) = v else {
        return Err(format!("{o}: annotations must be a table like {{ readOnlyHint = true }}"));
    };
    for (k, val) in &map {
        let ok = match k.as_str() {
            "title" => val.is_string(),
            k if HINTS.contains(&k) => val.is_boolean(),
            _ => return Err(format!("{o}: annotations.{k} is not an MCP hint (known: title, {})", HINTS.join(", "))),
        };
        if !ok {
            return Err(format!("{o}: annotations.{k} must be a {}", if k == "title" { "string" } else { "boolean" }));
        }
    }
    Ok(Value::Object(map))
}

/// An object schema (MCP requires `type: "object"`) that compiles, with the runtime's
/// fields added.
fn check_output_schema(o: &str, mut schema: Value) -> Result<Value, String> {
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err(format!("{o}: outputSchema must describe an object: type = \"object\""));
    }
    let props = schema.as_object_mut().expect("checked above").entry("properties").or_insert_with(|| json!({}));
    // An empty Lua table converts to an empty object already; anything else is the author's error.
    let Some(props) = props.as_object_mut() else {
        return Err(format!("{o}: outputSchema.properties must be a table of field schemas"));
    };
    for (k, v) in runtime_fields() {
        props.entry(k).or_insert(v);
    }
    CompiledSchema::compile(&schema).map_err(|e| format!("{o}: outputSchema is {e}"))?;
    Ok(schema)
}
