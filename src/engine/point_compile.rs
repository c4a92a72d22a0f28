//! A point's condition and logpoint template in the debug_eval language, compiled against the
//! point's frame (src/eval/compile.rs) so the agent evaluates them per hit without a round
//! trip. `js:` keeps JavaScript: `condition: "js:args[0] > 5"`, `message: "{js:vars.x}"`;
//! `{threadId}` and `{hit}` in a template are the agent's own.

use serde_json::{json, Value};

use crate::error::{ErrorCode, Result, StrobeError};
use crate::eval::compile::{compile_condition, compile_display, PointScope};
use crate::eval::scope::scope_at;
use std::path::Path;

use crate::symbols::{DebugInfo, LocalVar};

fn eval_error(what: &str, src: &str, e: crate::eval::EvalError) -> StrobeError {
    StrobeError::new(
        ErrorCode::EvalError,
        format!("{what} `{src}` {e}. Conditions and {{expressions}} use debug_eval's language (e.g. 'q->len == 64 && n > 0'); prefix 'js:' for JavaScript."),
    )
}

/// Add `compiled: {condition?, template?, types}` to an agent spec; rewrite `js:` parts to
/// the plain JavaScript the agent's old path takes.
/// `binary` is the file holding the point (the program or a library), `pc` the point's static
/// address in it, `offset` what turns that file's static addresses into session addresses.
pub(crate) fn compile_point(binary: &Path, offset: u64, vars: &[LocalVar], pc: u64, spec: &mut Value) -> Result<()> {
    let condition = spec["condition"].as_str().map(str::to_string);
    let message = spec["message"].as_str().map(str::to_string);
    if condition.is_none() && message.is_none() {
        return Ok(());
    }
    let info = DebugInfo::of_path(binary)?;
    let scope = scope_at(&info, pc);
    let at = PointScope { info: &info, vars, scope: scope.as_ref(), offset };
    let mut compiled = json!({});
    let mut roots = Vec::new();
    if let Some(c) = condition {
        match c.trim_start().strip_prefix("js:") {
            Some(js) => spec["condition"] = json!(js.trim()),
            None => {
                let out = compile_condition(&c, &at).map_err(|e| eval_error("condition", &c, e))?;
                compiled["condition"] = json!(out.js);
                compiled["source"] = json!(c);
                roots.extend(out.types);
                spec["condition"] = Value::Null;
            }
        }
    }
    if let Some(m) = message {
        let mut parts: Vec<Value> = Vec::new();
        let mut rest = m.as_str();
        while let Some(open) = rest.find('{') {
            let Some(close) = rest[open..].find('}') else { break };
            parts.push(json!(&rest[..open]));
            let inner = rest[open + 1..open + close].trim();
            if let Some(js) = inner.strip_prefix("js:") {
                parts.push(json!({ "legacy": js.trim() }));
            } else if inner == "threadId" || inner == "hit" {
                parts.push(json!({ "legacy": inner }));
            } else {
                let out = compile_display(inner, &at).map_err(|e| eval_error("logpoint expression", inner, e))?;
                roots.extend(out.types);
                parts.push(json!({ "js": out.js }));
            }
            rest = &rest[open + close + 1..];
        }
        parts.push(json!(rest));
        compiled["template"] = json!(parts);
    }
    compiled["types"] = info.agent_types(&roots);
    spec["compiled"] = compiled;
    Ok(())
}
