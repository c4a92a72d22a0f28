//! What `strobe mcp` remembers of the traffic it relays, so that a daemon that dies
//! costs the client nothing but the requests in flight: the ids of the requests not yet
//! answered (each gets an error reply when the daemon dies), and the client's
//! `initialize` parameters (replayed to the fresh daemon, whose answer the client never
//! sees). Lines are only probed for these few fields.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

/// The id of the `initialize` the proxy replays to a fresh daemon.
pub const REPLAY_ID: &str = "strobe-proxy-reinit";

/// JSON-RPC "internal error": the daemon died before answering.
const DAEMON_DIED: i64 = -32603;

#[derive(Deserialize)]
struct Probe<'a> {
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    method: Option<String>,
    #[serde(borrow)]
    params: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct CancelParams {
    #[serde(rename = "requestId")]
    request_id: Value,
}

#[derive(Default)]
pub struct Tracker {
    /// Requests not answered yet: key (the id as a JSON value) → the id as the client wrote it.
    pending: HashMap<String, String>,
    /// The client's `initialize` params, once it sent them.
    init_params: Option<String>,
}

/// One message or a batch of them: each element's text.
fn messages(line: &str) -> Vec<&str> {
    if line.trim_start().starts_with('[') {
        serde_json::from_str::<Vec<&RawValue>>(line).map(|v| v.into_iter().map(RawValue::get).collect()).unwrap_or_default()
    } else {
        vec![line]
    }
}

/// How an id is looked up: its JSON value, except a number too large for one (its text).
fn key(raw: &str) -> String {
    match serde_json::from_str::<Value>(raw) {
        Ok(v) if !v.is_f64() => v.to_string(),
        _ => raw.trim().to_string(),
    }
}

impl Tracker {
    /// A line from the client, on its way to the daemon.
    pub fn client_sent(&mut self, line: &str) {
        for m in messages(line) {
            let Ok(p) = serde_json::from_str::<Probe>(m) else { continue };
            match (p.method.as_deref(), p.id) {
                (Some("notifications/cancelled"), None) => {
                    // The daemon sends no answer to a cancelled request.
                    if let Some(c) = p.params.and_then(|r| serde_json::from_str::<CancelParams>(r.get()).ok()) {
                        self.pending.remove(&key(&c.request_id.to_string()));
                    }
                }
                (Some(method), Some(id)) => {
                    if method == "initialize" {
                        self.init_params = Some(p.params.map(|r| r.get().to_string()).unwrap_or_else(|| "{}".into()));
                    }
                    self.pending.insert(key(id.get()), id.get().to_string());
                }
                _ => {}
            }
        }
    }

    /// A line from the daemon: false when it is the answer to the proxy's own replayed
    /// `initialize` (not for the client).
    pub fn daemon_sent(&mut self, line: &str) -> bool {
        let mut for_client = true;
        for m in messages(line) {
            let Ok(p) = serde_json::from_str::<Probe>(m) else { continue };
            let (None, Some(id)) = (p.method, p.id) else { continue };
            if key(id.get()) == key(&format!("\"{REPLAY_ID}\"")) {
                for_client = false;
            } else {
                self.pending.remove(&key(id.get()));
            }
        }
        for_client
    }

    /// The daemon died: an error reply for each request it had not answered.
    pub fn daemon_died(&mut self) -> Vec<String> {
        let message = "The strobe daemon stopped before answering (it crashed or was killed), and with it its sessions and their targets. \
                       Your next request starts a fresh daemon: launch the target again with debug_launch.";
        self.pending
            .drain()
            .map(|(_, raw)| {
                let error = serde_json::json!({ "code": DAEMON_DIED, "message": message });
                format!(r#"{{"jsonrpc":"2.0","id":{raw},"error":{error}}}"#)
            })
            .collect()
    }

    /// What to send a fresh daemon before the client's next request: its `initialize`
    /// (answered to the proxy) and `notifications/initialized`; nothing before the
    /// client initialized.
    pub fn replay(&self) -> Option<[String; 2]> {
        let params = self.init_params.as_ref()?;
        Some([
            format!(r#"{{"jsonrpc":"2.0","id":"{REPLAY_ID}","method":"initialize","params":{params}}}"#),
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_string(),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracks_pending_ids_cancellations_and_the_initialize_to_replay() {
        let mut t = Tracker::default();
        assert!(t.replay().is_none());
        t.client_sent(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}"#);
        assert!(t.daemon_sent(r#"{"jsonrpc":"2.0","id":0,"result":{}}"#));
        t.client_sent(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        t.client_sent(r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{}}"#);
        t.client_sent(r#"{"jsonrpc":"2.0","id":18446744073709551616000,"method":"ping"}"#);
        t.client_sent(r#"[{"jsonrpc":"2.0","id":5,"method":"ping"},{"jsonrpc":"2.0","id":6,"method":"ping"}]"#);
        t.client_sent(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":6}}"#);
        assert!(t.daemon_sent(r#"[{"jsonrpc":"2.0","id":5,"result":{}}]"#));
        assert!(t.daemon_sent(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"a","progress":1}}"#));
        let mut errors = t.daemon_died();
        errors.sort();
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(errors[0].starts_with(r#"{"jsonrpc":"2.0","id":"a","error":{"code":-32603"#), "{}", errors[0]);
        assert!(errors[1].starts_with(r#"{"jsonrpc":"2.0","id":18446744073709551616000,"#), "{}", errors[1]);
        let [init, initialized] = t.replay().unwrap();
        assert!(init.contains(r#""params":{"protocolVersion":"2025-06-18"}"#), "{init}");
        assert!(initialized.contains("notifications/initialized"));
        assert!(!t.daemon_sent(&format!(r#"{{"jsonrpc":"2.0","id":"{REPLAY_ID}","result":{{}}}}"#)));
    }
}
