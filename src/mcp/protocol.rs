//! JSON-RPC 2.0 and the MCP methods Strobe serves: `initialize`, `ping`,
//! `tools/list`, `tools/call`. Tools themselves are Lua scripts (see `crate::lua`).

use serde_json::{json, Value};

use crate::error::StrobeError;
use crate::lua::{ToolAnswer, ToolInfo};

/// Protocol versions we speak; the client's choice wins when we know it.
pub const SUPPORTED_VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
pub const LATEST_VERSION: &str = "2025-11-25";

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;

pub fn response(id: &Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

pub fn error_response(id: &Value, code: i64, message: impl Into<String>) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message.into() } })
}

/// A parse error as one line, carrying the request's id when a scan finds it (the
/// parser refused the line, but the client still waits for an answer to that id).
pub fn parse_error_line(line: &str, err: &serde_json::Error) -> String {
    let msg = format!("Parse error: {err}");
    let id = super::id_scan::scan_id(line).unwrap_or("null");
    let error = json!({ "code": PARSE_ERROR, "message": msg });
    format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{error}}}"#)
}

pub fn negotiate_version(requested: Option<&str>) -> &'static str {
    requested.and_then(|r| SUPPORTED_VERSIONS.iter().find(|v| **v == r).copied()).unwrap_or(LATEST_VERSION)
}

pub fn initialize_result(requested: Option<&str>) -> Value {
    json!({
        "protocolVersion": negotiate_version(requested),
        "capabilities": { "tools": { "listChanged": true } },
        "serverInfo": { "name": "strobe", "version": env!("CARGO_PKG_VERSION") },
        "instructions": "Strobe is a debugger. Launch the program with debug_launch (no trace patterns), read its output with debug_query({eventType:'stderr'}) first, then add targeted traces with debug_trace on the running session, query events, and stop with debug_session. When an investigation repeats steps (continue/inspect at many hits, many queries to summarise), write it as one debug_script Lua program instead."
    })
}

/// What a protocol version knows of tools: `annotations` came in 2025-03-26;
/// `title`, `outputSchema` and `structuredContent` in 2025-06-18. Versions are dates,
/// so they compare as text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolFeatures {
    pub annotations: bool,
    pub structured: bool,
}

impl ToolFeatures {
    pub fn of(version: &str) -> ToolFeatures {
        ToolFeatures { annotations: version >= "2025-03-26", structured: version >= "2025-06-18" }
    }
}

/// One tool as `tools/list` shows it to a client of `version`.
pub fn tool_listing(tool: &ToolInfo, version: &str) -> Value {
    let f = ToolFeatures::of(version);
    let mut out = json!({ "name": tool.name, "description": tool.description, "inputSchema": tool.input_schema });
    let obj = out.as_object_mut().expect("an object");
    if f.annotations {
        let mut annotations = tool.annotations.clone().unwrap_or_else(|| json!({}));
        // 2025-03-26 has the display name only inside annotations.
        if let (Some(t), Some(a)) = (&tool.title, annotations.as_object_mut()) {
            a.entry("title").or_insert_with(|| json!(t));
        }
        if annotations.as_object().is_some_and(|a| !a.is_empty()) {
            obj.insert("annotations".into(), annotations);
        }
    }
    if f.structured {
        if let Some(t) = &tool.title {
            obj.insert("title".into(), json!(t));
        }
        if let Some(s) = &tool.output_schema {
            obj.insert("outputSchema".into(), s.clone());
        }
    }
    out
}

/// A tool's answer as MCP content: the JSON result as compact text (no pretty
/// printing: indentation was ~30 % of every answer). A tool that declares its shape
/// also gives it as `structuredContent` (to clients that know it), the text keeping the
/// same JSON for older clients, as the spec asks.
pub fn tool_result(answer: &ToolAnswer, version: &str) -> Value {
    let mut out = json!({
        "content": [{ "type": "text", "text": serde_json::to_string(&answer.value).unwrap_or_default() }],
        "isError": false
    });
    if answer.structured && answer.value.is_object() && ToolFeatures::of(version).structured {
        out["structuredContent"] = answer.value.clone();
    }
    out
}

/// A tool error: `isError` with the spec's code and a message that says what to do.
pub fn tool_error(err: &StrobeError) -> Value {
    let body = json!({ "error": err.code.as_str(), "message": err.message });
    json!({
        "content": [{ "type": "text", "text": serde_json::to_string(&body).unwrap_or_default() }],
        "isError": true
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool() -> ToolInfo {
        ToolInfo {
            name: "t".into(),
            description: "d".into(),
            input_schema: json!({ "type": "object" }),
            title: Some("T".into()),
            annotations: Some(json!({ "readOnlyHint": true })),
            output_schema: Some(json!({ "type": "object" })),
            origin: String::new(),
        }
    }

    #[test]
    fn listing_follows_the_protocol_version() {
        let old = tool_listing(&tool(), "2024-11-05");
        assert_eq!(old, json!({ "name": "t", "description": "d", "inputSchema": { "type": "object" } }));
        let mid = tool_listing(&tool(), "2025-03-26");
        assert_eq!(mid["annotations"], json!({ "readOnlyHint": true, "title": "T" }));
        assert!(mid.get("title").is_none() && mid.get("outputSchema").is_none());
        let new = tool_listing(&tool(), "2025-06-18");
        assert_eq!((new["title"].as_str(), new["outputSchema"]["type"].as_str()), (Some("T"), Some("object")));
    }

    #[test]
    fn structured_content_only_when_declared_and_known() {
        let answer = ToolAnswer { value: json!({ "a": 1 }), structured: true };
        assert_eq!(tool_result(&answer, "2025-06-18")["structuredContent"], json!({ "a": 1 }));
        assert!(tool_result(&answer, "2025-03-26").get("structuredContent").is_none());
        let plain = ToolAnswer { structured: false, ..answer };
        assert!(tool_result(&plain, "2025-11-25").get("structuredContent").is_none());
    }
}
