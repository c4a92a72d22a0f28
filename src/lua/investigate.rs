//! `strobe.script_run{script, sessionId?, args?, timeoutMs?, maxOutputBytes?}`, behind the
//! debug_script tool: run an LLM's Lua program in a fresh isolated state
//! (`sandbox.rs`) with the investigation helpers of `scripts/lib/investigate.lua`,
//! under its own budget (`timeoutMs`, on this worker, which takes no other requests
//! meanwhile). The answer: the returned value as JSON, the printed output (capped),
//! the sessions left running, the time taken, and on failure the error with the
//! script's line and a short traceback. Sessions the script launched are stopped at
//! the end (their events kept) unless it returned them as `keep`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use mlua::{Function, Lua, MultiValue, Table, Value};
use serde::Deserialize;
use serde_json::{json, Value as Json};

use super::convert::{to_json, to_lua, to_lua_keep_null};
use super::runtime::{Shared, SANDBOX_MEMORY_LIMIT};
use super::sandbox::Sandbox;
use super::session::args;
use super::watchdog::{Budget, Budgeted};

pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
pub const MAX_TIMEOUT_MS: u64 = 300_000;
pub const DEFAULT_MAX_OUTPUT: usize = 16 * 1024;
/// What the chunk is called in errors and tracebacks: `script:12: ...`.
const CHUNK_NAME: &str = "script";

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ScriptArgs {
    script: String,
    session_id: Option<String>,
    args: Option<Json>,
    timeout_ms: Option<u64>,
    max_output_bytes: Option<usize>,
}

pub fn register(lua: &Lua, shared: Arc<Shared>) -> mlua::Result<()> {
    let strobe: Table = lua.globals().get("strobe")?;
    strobe.set(
        "script_run",
        lua.create_async_function(move |lua, v: Value| {
            let shared = shared.clone();
            async move {
                let a: ScriptArgs = args(&lua, v, "debug_script")?;
                let out = run(&shared, a).await;
                to_lua_keep_null(&lua, &out)
            }
        })?,
    )
}

/// How the chunk ended.
struct Finished {
    result: Json,
    keep: Vec<String>,
}

async fn run(shared: &Shared, a: ScriptArgs) -> Json {
    let started = Instant::now();
    let timeout = Duration::from_millis(a.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS).clamp(1, MAX_TIMEOUT_MS));
    let cap = a.max_output_bytes.unwrap_or(DEFAULT_MAX_OUTPUT);
    let _reserved = super::pool::reserve_current();
    let sources = shared.sources.lock().unwrap().clone();
    let sb = match Sandbox::fresh(&shared.engine, &sources, SANDBOX_MEMORY_LIMIT, cap) {
        Ok(s) => s,
        Err(e) => return json!({ "error": { "code": "INTERNAL_ERROR", "message": format!("cannot create the script's Lua state: {e}") } }),
    };
    let budget = Budget { slice: timeout, deadline: Some(started + timeout), what: "the script" };
    // The watchdog interrupts Lua that computes past the deadline; the timeout ends a
    // script waiting on the engine (a continue, a wait_for) past it.
    // A client that asked for progress hears the script is alive each second (until the
    // script reports its own with strobe.progress).
    let ran = Budgeted::new(budget, tokio::time::timeout(timeout + Duration::from_millis(250), execute(&sb, &a)));
    let ran = crate::inflight::with_heartbeat(ran, || format!("the script is running (timeoutMs {})", timeout.as_millis())).await;
    let outcome = match ran {
        Ok(r) => r,
        Err(_) => Err(json!({
            "code": "SCRIPT_TIMEOUT",
            "message": format!("the script was still waiting after timeoutMs={} and was stopped. Give it a larger timeoutMs (max {MAX_TIMEOUT_MS}), or shorter waits (timeoutMs of continue/wait_for/run).", timeout.as_millis()),
        })),
    };
    let keep = outcome.as_ref().map(|f| f.keep.clone()).unwrap_or_default();
    let launched = sb.launched.borrow().clone();
    let mut stopped = Vec::new();
    for id in launched.iter().filter(|id| !keep.contains(id)) {
        if shared.engine.live_session_ids().contains(id) {
            let _ = shared.engine.stop(id, true).await;
            stopped.push(id.clone());
        }
    }
    let live = shared.engine.live_session_ids();
    let sessions: Vec<&String> = keep.iter().filter(|id| live.contains(id)).collect();
    let (mut output, dropped) = sb.output.borrow_mut().take();
    if dropped > 0 {
        output.push_str(&format!(
            "\n[output truncated: {dropped} more bytes not shown; raise maxOutputBytes, or return data instead of printing it]"
        ));
    }
    let mut out = json!({
        "output": output,
        "sessions": sessions,
        "elapsedMs": started.elapsed().as_millis() as u64,
    });
    if !stopped.is_empty() {
        out["stoppedSessions"] = json!(stopped);
    }
    match outcome {
        Ok(f) => out["result"] = f.result,
        Err(e) => out["error"] = e,
    }
    out
}

async fn execute(sb: &Sandbox, a: &ScriptArgs) -> Result<Finished, Json> {
    let lua = &sb.lua;
    let internal = |e: mlua::Error| json!({ "code": "INTERNAL_ERROR", "message": e.to_string() });
    let inv: Table = lua
        .load("return require('investigate')")
        .eval()
        .map_err(|e| json!({ "code": "INTERNAL_ERROR", "message": format!("scripts/lib/investigate.lua failed to load: {e}") }))?;
    let script_args = match &a.args {
        Some(v) => to_lua(lua, v).map_err(internal)?,
        None => Value::Nil,
    };
    let install: Function = inv.get("install").map_err(internal)?;
    install.call_async::<()>((a.session_id.clone(), script_args)).await.map_err(|e| error_json(&e))?;
    let chunk = lua.load(a.script.as_str()).set_name(format!("={CHUNK_NAME}")).into_function().map_err(|e| error_json(&e))?;
    let values: MultiValue = chunk.call_async(()).await.map_err(|e| error_json(&e))?;
    let first = values.into_iter().next().unwrap_or(Value::Nil);
    let finish: Function = inv.get("finish").map_err(internal)?;
    let done: Table = finish.call(first).map_err(|e| error_json(&e))?;
    let result = to_json(lua, done.get::<Value>("result").map_err(internal)?).map_err(|e| {
        json!({ "code": "VALIDATION_ERROR", "message": format!("the script's return value is not JSON data: {e}") })
    })?;
    let keep: Vec<String> = done.get::<Vec<String>>("keep").unwrap_or_default();
    Ok(Finished { result, keep })
}

/// A Lua error as `{code, message, line, traceback}`: the line is the first place in
/// the script the error names, the traceback keeps only the script's own frames.
fn error_json(e: &mlua::Error) -> Json {
    let text = e.to_string();
    let coded = crate::error::StrobeError::from_lua_message(&text);
    let (head, trace) = match text.split_once("stack traceback:") {
        Some((h, t)) => (h, t),
        None => (text.as_str(), ""),
    };
    let head = head.trim();
    let head = head
        .strip_prefix("runtime error: ")
        .or_else(|| head.strip_prefix("syntax error: "))
        .unwrap_or(head)
        .lines()
        .next()
        .unwrap_or("")
        .trim();
    let line_re = regex::Regex::new(&format!(r"\b{CHUNK_NAME}:(\d+)")).expect("valid regex");
    let line = line_re.captures(&text).and_then(|c| c[1].parse::<u32>().ok());
    let traceback: Vec<&str> =
        trace.lines().map(str::trim).filter(|l| l.starts_with(&format!("{CHUNK_NAME}:"))).take(8).collect();
    let code = match coded.code {
        crate::error::ErrorCode::InternalError => "SCRIPT_ERROR".to_string(),
        c => c.as_str().to_string(),
    };
    let message = if coded.code == crate::error::ErrorCode::InternalError { head.to_string() } else { coded.message };
    let mut out = json!({ "code": code, "message": message, "traceback": traceback });
    if let Some(l) = line {
        out["line"] = json!(l);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_script_line() {
        let lua = Lua::new();
        let e = lua.load("local x = 1\nlocal y = nil\nreturn y.z").set_name("=script").exec().unwrap_err();
        let j = error_json(&e);
        assert_eq!(j["line"], 3, "{j}");
        assert_eq!(j["code"], "SCRIPT_ERROR");
        assert!(j["message"].as_str().unwrap().contains("attempt to index"), "{j}");
        let e = lua.load("local x = = 1").set_name("=script").into_function().unwrap_err();
        assert_eq!(error_json(&e)["line"], 1);
    }
}
