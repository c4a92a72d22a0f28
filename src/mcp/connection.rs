//! One MCP client connection: newline-delimited JSON-RPC in, responses out. Requests
//! run concurrently, each with its own cancellation token (`crate::inflight`):
//! `notifications/cancelled` stops one (no response is sent for it). The sessions a
//! connection launched are stopped (targets killed, data kept) when it goes away.
//!
//! End of input means the client sent its last request: a client that only shut down
//! its writing side still gets the answers to what it asked. A client that is gone
//! (its socket closed both ways: `hung_up`, or our write failed) has its requests
//! cancelled and its targets stopped at once.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::pending::{cancelled_request_id, Pending};
use super::lines::{next_line, too_long_message, Line, MAX_LINE_BYTES, NOT_UTF8_MESSAGE};
use super::protocol::*;
use crate::engine::{Engine, StageScope};
use crate::error::{ErrorCode, StrobeError};
use crate::inflight::Inflight;
use crate::lua::LuaHost;

/// Sessions one client may hold at once.
pub const MAX_SESSIONS_PER_CONNECTION: usize = 10;
/// Sessions the whole daemon may hold at once.
pub const MAX_SESSIONS_TOTAL: usize = 50;

pub struct Connection {
    /// Names this client's stage (patterns and breakpoints staged for its next launch).
    id: u64,
    engine: Arc<Engine>,
    lua: LuaHost,
    launched: Mutex<BTreeSet<String>>,
    /// Launches of this connection under way (counted against its limit).
    launching: Mutex<usize>,
    /// `initialize` received: only it and `ping` are served before.
    initialized: std::sync::atomic::AtomicBool,
    /// The protocol version `initialize` agreed on (what tool listings and results may contain).
    protocol: Mutex<Option<&'static str>>,
    /// Requests in flight, to cancel them.
    pending: Arc<Pending>,
}

/// How often a connection whose input ended checks whether its client is gone.
const HANGUP_CHECK_EVERY: Duration = Duration::from_millis(100);


/// Launches under way in the whole daemon; checking the limits and reserving a slot
/// happen under this lock, so concurrent launches cannot all slip past the limit.
static LAUNCHING: Mutex<usize> = Mutex::new(0);

static NEXT_CONNECTION_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// A reserved launch slot, released when the launch finished (either way).
struct LaunchSlot<'a>(&'a Connection);

impl Drop for LaunchSlot<'_> {
    fn drop(&mut self) {
        *LAUNCHING.lock().unwrap() -= 1;
        *self.0.launching.lock().unwrap() -= 1;
    }
}

impl Connection {
    pub fn new(engine: Arc<Engine>, lua: LuaHost) -> Arc<Connection> {
        let id = NEXT_CONNECTION_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Arc::new(Connection {
            id,
            engine,
            lua,
            launched: Mutex::new(BTreeSet::new()),
            launching: Mutex::new(0),
            initialized: Default::default(),
            protocol: Mutex::new(None),
            pending: Arc::default(),
        })
    }

    /// Serve until the peer's input ends, then clean up its sessions: after the answers
    /// to its requests when it still reads them, at once when `hung_up()` says it is gone.
    pub async fn serve<R, W>(self: Arc<Self>, reader: R, mut writer: W, hung_up: impl Fn() -> bool)
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (out_tx, mut out_rx) = mpsc::unbounded_channel::<String>();
        let write_task = tokio::spawn(async move {
            while let Some(msg) = out_rx.recv().await {
                let mut line = msg;
                line.push('\n');
                if writer.write_all(line.as_bytes()).await.is_err() || writer.flush().await.is_err() {
                    break;
                }
            }
        });
        // Tell the client when hot reload changed the tool list.
        let mut changes = self.lua.subscribe_tool_changes();
        let notify_out = out_tx.clone();
        let notify_task = tokio::spawn(async move {
            while let Ok(()) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) = changes.recv().await {
                let msg = json!({ "jsonrpc": "2.0", "method": "notifications/tools/list_changed" });
                if notify_out.send(msg.to_string()).is_err() {
                    break;
                }
            }
        });
        let mut reader = BufReader::new(reader);
        let mut tasks = tokio::task::JoinSet::new();
        let mut gone = false;
        loop {
            let line = match next_line(&mut reader, MAX_LINE_BYTES).await {
                Ok(Some(Line::Text(line))) => line,
                Ok(Some(Line::TooLong(n))) => {
                    let _ = out_tx.send(error_response(&Value::Null, INVALID_REQUEST, too_long_message(n)).to_string());
                    continue;
                }
                Ok(Some(Line::NotUtf8)) => {
                    let _ = out_tx.send(error_response(&Value::Null, PARSE_ERROR, NOT_UTF8_MESSAGE).to_string());
                    continue;
                }
                Ok(None) => break,
                Err(_) => {
                    gone = true; // a reset connection
                    break;
                }
            };
            if line.trim().is_empty() {
                continue;
            }
            let msg: Option<Value> = serde_json::from_str(&line).ok();
            if let Some(id) = msg.as_ref().and_then(cancelled_request_id) {
                self.pending.cancel(&id); // at once, not behind the request it cancels
                continue;
            }
            // Requests run concurrently: one sent right behind `initialize` (without
            // waiting for its answer) must already find the connection initialized.
            let is_init = |m: &&Value| m.get("method") == Some(&json!("initialize")) && m.get("jsonrpc") == Some(&json!("2.0")) && m.get("id").is_some();
            if let Some(init) = msg.as_ref().filter(is_init) {
                self.initialize(init.get("params").unwrap_or(&Value::Null));
            }
            let request = msg.as_ref().and_then(|m| Some((m.get("id")?.clone(), m)));
            let inflight = match request {
                Some((id, m)) if !m.is_array() && m.get("method").is_some() => {
                    let token = m.pointer("/params/_meta/progressToken").filter(|t| t.is_string() || t.is_number()).cloned();
                    Some((id, Inflight::new(token, &out_tx)))
                }
                _ => None,
            };
            let tracked = inflight.as_ref().map(|(id, req)| self.pending.track(id, req));
            let conn = self.clone();
            let out = out_tx.clone();
            tasks.spawn(async move {
                let req = inflight.map(|(_, r)| r).unwrap_or_default();
                let cancel = req.cancel.clone();
                let resp = conn.handle_parsed(&line, msg, req).await;
                drop(tracked);
                // The MCP spec: no response to a cancelled request.
                if let Some(resp) = resp.filter(|_| !cancel.is_cancelled()) {
                    let _ = out.send(resp);
                }
            });
            while tasks.try_join_next().is_some() {}
        }
        // The input ended. Answer what the client asked while it still reads; stop
        // checking once it is gone.
        while !gone && !tasks.is_empty() {
            tokio::select! {
                _ = tasks.join_next() => {}
                _ = tokio::time::sleep(HANGUP_CHECK_EVERY) => gone = hung_up() || write_task.is_finished(),
            }
        }
        if gone {
            tracing::info!("client gone with {} requests in flight: cancelling them", tasks.len());
            self.pending.cancel_all();
            self.cleanup().await;
        }
        // Cancelled work ends at its next wait or Lua instruction check; a launch under
        // way finishes first, and is stopped by the cleanup below.
        while tasks.join_next().await.is_some() {}
        notify_task.abort();
        drop(out_tx);
        let _ = write_task.await;
        self.cleanup().await;
    }

    fn scope(&self) -> StageScope {
        StageScope::Connection(self.id)
    }

    async fn cleanup(&self) {
        // What it staged was for its own next launch, which will not come.
        self.engine.clear_staged(self.scope());
        self.lua.drop_repl(self.scope());
        // What it launched, also through calls that never answered (cancelled, or the
        // client gone first).
        let mut ids: BTreeSet<String> = std::mem::take(&mut *self.launched.lock().unwrap());
        ids.extend(self.lua.take_launched(self.scope()));
        for id in ids {
            if self.engine.live_session_ids().contains(&id) {
                tracing::info!("client disconnected: stopping its session {id} (data kept)");
                let _ = self.engine.stop(&id, true).await;
            }
        }
    }

    /// Handle one line; the encoded answer, `None` for notifications.
    pub async fn handle_line(&self, line: &str) -> Option<String> {
        self.handle_parsed(line, serde_json::from_str(line).ok(), Inflight::default()).await
    }

    /// Handle one line, parsed already (`None`: it is not JSON) and served as request `req`.
    async fn handle_parsed(&self, line: &str, msg: Option<Value>, req: Inflight) -> Option<String> {
        let msg: Value = match msg {
            Some(v) => v,
            None => match serde_json::from_str::<Value>(line) {
                Ok(v) => v,
                Err(e) => return Some(parse_error_line(line, &e)),
            },
        };
        if let Some(batch) = msg.as_array() {
            if batch.is_empty() {
                return Some(error_response(&Value::Null, INVALID_REQUEST, "Invalid Request: an empty batch").to_string());
            }
            // JSON-RPC batches: answer each request, skip notifications.
            let raw = raw_batch_ids(line);
            let mut out = Vec::new();
            for (i, m) in batch.iter().enumerate() {
                if let Some(r) = self.handle_message(m, Inflight::default()).await {
                    out.push(encode(r, raw.get(i).and_then(Option::as_deref)));
                }
            }
            return (!out.is_empty()).then(|| format!("[{}]", out.join(",")));
        }
        let raw = raw_id(line);
        self.handle_message(&msg, req).await.map(|r| encode(r, raw.as_deref()))
    }

    async fn handle_message(&self, msg: &Value, req: Inflight) -> Option<Value> {
        let id = msg.get("id").cloned();
        let Some(method) = msg.get("method").and_then(Value::as_str) else {
            if msg.get("result").is_some() || msg.get("error").is_some() {
                return None; // a response to something we never ask; ignore
            }
            return Some(error_response(&id.unwrap_or(Value::Null), INVALID_REQUEST, "Invalid Request: 'method' is missing"));
        };
        if msg.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return id.map(|id| error_response(&id, INVALID_REQUEST, "Invalid Request: 'jsonrpc' must be \"2.0\""));
        }
        let id = id?; // notifications (initialized, cancelled, ...) need no answer
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        if method == "initialize" {
            self.initialize(&params);
        } else if method != "ping" && !self.initialized.load(std::sync::atomic::Ordering::SeqCst) {
            return Some(error_response(&id, INVALID_REQUEST, format!("Invalid Request: send 'initialize' before '{method}'")));
        }
        Some(match method {
            "initialize" => response(&id, initialize_result(params.get("protocolVersion").and_then(Value::as_str))),
            "ping" => response(&id, json!({})),
            "tools/list" => match self.lua.list_tools().await {
                Ok(tools) => {
                    let tools: Vec<Value> = tools.iter().map(|t| tool_listing(t, self.version())).collect();
                    response(&id, json!({ "tools": tools }))
                }
                Err(e) => error_response(&id, INVALID_PARAMS, e.to_string()),
            },
            "tools/call" => {
                let Some(name) = params.get("name").and_then(Value::as_str) else {
                    return Some(error_response(&id, INVALID_PARAMS, "tools/call needs params.name (the tool to call)"));
                };
                let args = params.get("arguments").cloned().unwrap_or(json!({}));
                match self.call_tool(name, args, req).await {
                    Ok(result) => response(&id, result),
                    // The MCP spec: an unknown tool is a protocol error, not a tool result.
                    Err(e) => error_response(&id, INVALID_PARAMS, e.message),
                }
            }
            // Not MCP: `strobe repl --connect` evaluates Lua in the daemon's runtime.
            "strobe/eval" => match self.lua.eval_as(self.scope(), params.get("code").and_then(Value::as_str).unwrap_or("")).await {
                Ok(out) => response(&id, json!(out)),
                Err(e) => error_response(&id, INVALID_PARAMS, e.to_string()),
            },
            "strobe/complete" => match self.lua.complete_as(self.scope(), params.get("line").and_then(Value::as_str).unwrap_or("")).await {
                Ok((start, candidates)) => response(&id, json!({ "start": start, "candidates": candidates })),
                Err(e) => error_response(&id, INVALID_PARAMS, e.to_string()),
            },
            other => error_response(&id, METHOD_NOT_FOUND, format!("Method not found: {other}")),
        })
    }

    /// The tool's MCP result; `Err` (a protocol error) only when no tool has that name.
    async fn call_tool(&self, name: &str, args: Value, req: Inflight) -> Result<Value, StrobeError> {
        // Settings are re-read on every call: an edited events.maxPerSession applies now.
        self.engine.apply_event_limits();
        let _slot = if name == "debug_launch" {
            match self.reserve_launch() {
                Ok(slot) => Some(slot),
                Err(e) => return Ok(tool_error(&e)),
            }
        } else {
            None
        };
        match self.lua.call_tool_inflight(self.scope(), name, args, req).await {
            Ok(result) => {
                if name == "debug_launch" {
                    if let Some(id) = result.get("sessionId").and_then(Value::as_str) {
                        self.launched.lock().unwrap().insert(id.to_string());
                    }
                }
                // Sessions a debug_script kept belong to this connection too.
                if let Some(kept) = result.get("sessions").and_then(Value::as_array).filter(|_| name == "debug_script") {
                    let mut mine = self.launched.lock().unwrap();
                    mine.extend(kept.iter().filter_map(Value::as_str).map(String::from));
                }
                Ok(tool_result(&result, self.version()))
            }
            Err(e) if e.code == ErrorCode::ValidationError && e.message.starts_with("Unknown tool") => Err(e),
            Err(e) => Ok(tool_error(&e)),
        }
    }

    /// `initialize` with these params: the connection is initialized, at the version agreed.
    fn initialize(&self, params: &Value) {
        *self.protocol.lock().unwrap() = Some(negotiate_version(params.get("protocolVersion").and_then(Value::as_str)));
        self.initialized.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// The agreed protocol version (what tool listings and results may contain).
    fn version(&self) -> &'static str {
        self.protocol.lock().unwrap().unwrap_or(LATEST_VERSION)
    }

    /// Check the session limits, counting launches under way, and hold a slot.
    fn reserve_launch(&self) -> Result<LaunchSlot<'_>, StrobeError> {
        let mut global = LAUNCHING.lock().unwrap();
        let mut mine_launching = self.launching.lock().unwrap();
        // Only running targets count: exited and crashed sessions hold no process.
        let live = self.engine.running_session_ids();
        let mine = self.launched.lock().unwrap().iter().filter(|id| live.contains(id)).count();
        if let Some(e) = session_limit_error(mine + *mine_launching, live.len() + *global) {
            return Err(e);
        }
        *global += 1;
        *mine_launching += 1;
        Ok(LaunchSlot(self))
    }
}

#[derive(serde::Deserialize)]
struct IdOnly {
    id: Option<Box<serde_json::value::RawValue>>,
}

/// The request's id as sent: ids beyond 64-bit integers parse as floats, and must be
/// echoed byte for byte, not rounded.
fn raw_id(line: &str) -> Option<Box<serde_json::value::RawValue>> {
    serde_json::from_str::<IdOnly>(line).ok()?.id
}

fn raw_batch_ids(line: &str) -> Vec<Option<Box<serde_json::value::RawValue>>> {
    let items: Vec<Box<serde_json::value::RawValue>> = serde_json::from_str(line).unwrap_or_default();
    items.iter().map(|m| raw_id(m.get())).collect()
}

/// A response as one line, with the id exactly as the client wrote it when the parsed
/// id lost precision (a float). Responses begin `{"jsonrpc":"2.0","id":` (ordered keys).
fn encode(mut resp: Value, raw: Option<&serde_json::value::RawValue>) -> String {
    let (Some(raw), true) = (raw, resp.get("id").is_some_and(Value::is_f64)) else {
        return resp.to_string();
    };
    resp["id"] = Value::Null;
    let text = resp.to_string();
    match text.strip_prefix(r#"{"jsonrpc":"2.0","id":null"#) {
        Some(rest) => format!(r#"{{"jsonrpc":"2.0","id":{}{rest}"#, raw.get()),
        None => text,
    }
}

/// `SESSION_LIMIT` when one more launch would exceed a limit, given the live sessions of
/// this connection (`mine`) and of the whole daemon (`total`).
fn session_limit_error(mine: usize, total: usize) -> Option<StrobeError> {
    if mine >= MAX_SESSIONS_PER_CONNECTION {
        return Some(StrobeError::new(
            ErrorCode::SessionLimit,
            format!("This connection already has {mine} live sessions (max {MAX_SESSIONS_PER_CONNECTION}). Stop one with debug_session {{action: 'stop'}} first."),
        ));
    }
    if total >= MAX_SESSIONS_TOTAL {
        return Some(StrobeError::new(
            ErrorCode::SessionLimit,
            format!("The daemon already has {total} live sessions (max {MAX_SESSIONS_TOTAL}, across all clients). Stop sessions you no longer need with debug_session {{action: 'stop'}}."),
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_per_connection_and_in_total() {
        assert!(session_limit_error(0, 0).is_none());
        assert!(session_limit_error(9, 49).is_none());
        let e = session_limit_error(10, 10).unwrap();
        assert_eq!(e.code, ErrorCode::SessionLimit);
        assert!(e.message.contains("max 10"));
        let e = session_limit_error(3, 50).unwrap();
        assert_eq!(e.code, ErrorCode::SessionLimit);
        assert!(e.message.contains("max 50"));
    }
}
