//! Experiment: Strobe's tool surface on rmcp. Tools come from a runtime list (as Lua
//! scripts would provide them), so no #[tool] macros; served over stdio.
use std::sync::Arc;

use rmcp::model::*;
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Value};

#[derive(Clone)]
struct Dynamic;

fn tools() -> Vec<Tool> {
    let schema: JsonObject = serde_json::from_value(json!({
        "type": "object", "required": ["sessionId"],
        "properties": {"sessionId": {"type": "string"}, "limit": {"type": "integer"}}
    })).unwrap();
    let mut t = Tool::new("debug_query", "Query events", Arc::new(schema));
    let mut a = ToolAnnotations::default();
    a.read_only_hint = Some(true);
    t.annotations = Some(a);
    vec![t]
}

impl ServerHandler for Dynamic {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
    async fn list_tools(&self, _r: Option<PaginatedRequestParams>, _c: RequestContext<RoleServer>) -> Result<ListToolsResult, McpError> {
        let mut r = ListToolsResult::default();
        r.tools = tools();
        Ok(r)
    }
    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools().into_iter().find(|t| t.name == name)
    }
    async fn call_tool(&self, req: CallToolRequestParams, _c: RequestContext<RoleServer>) -> Result<CallToolResponse, McpError> {
        if req.name != "debug_query" {
            return Err(McpError::invalid_params(format!("Unknown tool {}", req.name), None));
        }
        let args = Value::Object(req.arguments.unwrap_or_default());
        Ok(CallToolResponse::Complete(CallToolResult::structured(json!({"echo": args}))))
    }
}

#[tokio::main]
async fn main() {
    let service = Dynamic.serve(rmcp::transport::stdio()).await;
    match service {
        Ok(s) => {
            let r = s.waiting().await;
            eprintln!("service ended: {r:?}");
        }
        Err(e) => eprintln!("serve failed: {e:?}"),
    }
}
