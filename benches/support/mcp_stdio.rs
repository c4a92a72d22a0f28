//! A minimal MCP client over `strobe mcp` (JSON-RPC lines on stdio), for benchmarks that
//! measure the real daemon as a client sees it. Requests can be pipelined: `send` returns the
//! id, `wait` collects the answer to one id (answers to others are kept for later).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

use serde_json::{json, Value};

pub struct Mcp {
    child: Child,
    stdin: ChildStdin,
    rx: Receiver<Value>,
    answers: HashMap<u64, Value>,
    next_id: u64,
}

impl Mcp {
    /// Start `strobe mcp` with its own `STROBE_HOME` and initialize the MCP session.
    pub fn start(strobe: &Path, home: &Path, cache: &Path) -> Mcp {
        let mut child = Command::new(strobe)
            .arg("mcp")
            .env("STROBE_HOME", home)
            .env("STROBE_CACHE_DIR", cache)
            .env("STROBE_IDLE_TIMEOUT_SECS", "600")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start strobe mcp");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    if tx.send(v).is_err() {
                        return;
                    }
                }
            }
        });
        let mut mcp = Mcp { child, stdin, rx, answers: HashMap::new(), next_id: 1 };
        let id = mcp.send(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "strobe-bench", "version": "1"}}),
        );
        mcp.wait(id).expect("initialize");
        mcp.notify("notifications/initialized");
        mcp
    }

    fn notify(&mut self, method: &str) {
        let line = json!({"jsonrpc": "2.0", "method": method}).to_string();
        writeln!(self.stdin, "{line}").and_then(|_| self.stdin.flush()).expect("write to strobe mcp");
    }

    /// Send a request; returns its id.
    pub fn send(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
        writeln!(self.stdin, "{line}").and_then(|_| self.stdin.flush()).expect("write to strobe mcp");
        id
    }

    /// Send a `tools/call`; returns its id.
    pub fn send_tool(&mut self, name: &str, args: Value) -> u64 {
        self.send("tools/call", json!({"name": name, "arguments": args}))
    }

    /// The `result` of request `id` (up to 10 minutes), or the JSON-RPC error.
    pub fn wait(&mut self, id: u64) -> Result<Value, Value> {
        loop {
            if let Some(v) = self.answers.remove(&id) {
                return match v.get("error") {
                    Some(e) => Err(e.clone()),
                    None => Ok(v.get("result").cloned().unwrap_or(Value::Null)),
                };
            }
            let v = self.rx.recv_timeout(Duration::from_secs(600)).expect("an answer from strobe mcp");
            if let Some(got) = v.get("id").and_then(Value::as_u64) {
                self.answers.insert(got, v);
            }
        }
    }

    /// The decoded JSON body of a tool answer: Ok for a result, Err for a tool error.
    pub fn wait_tool(&mut self, id: u64) -> Result<Value, Value> {
        let r = self.wait(id)?;
        let text = r["content"][0]["text"].as_str().unwrap_or("null");
        let body: Value = serde_json::from_str(text).unwrap_or(Value::String(text.to_string()));
        if r["isError"].as_bool() == Some(true) {
            Err(body)
        } else {
            Ok(body)
        }
    }

    /// Call a tool and wait for its answer.
    pub fn tool(&mut self, name: &str, args: Value) -> Result<Value, Value> {
        let id = self.send_tool(name, args);
        self.wait_tool(id)
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
