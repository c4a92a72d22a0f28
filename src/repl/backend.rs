//! Where REPL chunks run: the in-process Lua runtime, or the daemon over its socket
//! (JSON-RPC `strobe/eval` and `strobe/complete`, which are not MCP methods).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

use anyhow::Context as _;
use serde_json::{json, Value};

use crate::lua::{EvalOutput, LuaHost};

pub trait Backend: Send {
    fn eval(&mut self, code: &str) -> anyhow::Result<EvalOutput>;
    /// Where the completed word starts, and the candidates.
    fn complete(&mut self, line: &str) -> (usize, Vec<String>);
}

/// The engine and Lua runtime in this process.
pub struct LocalBackend {
    pub lua: LuaHost,
    pub rt: tokio::runtime::Handle,
}

impl Backend for LocalBackend {
    fn eval(&mut self, code: &str) -> anyhow::Result<EvalOutput> {
        Ok(self.rt.block_on(self.lua.eval(code))?)
    }
    fn complete(&mut self, line: &str) -> (usize, Vec<String>) {
        self.rt.block_on(self.lua.complete(line)).unwrap_or((line.len(), Vec::new()))
    }
}

/// The running daemon, over `$STROBE_HOME/strobe.sock`.
pub struct RemoteBackend {
    writer: UnixStream,
    reader: BufReader<UnixStream>,
    next_id: u64,
}

impl RemoteBackend {
    pub fn connect(socket: &Path) -> anyhow::Result<RemoteBackend> {
        let stream = UnixStream::connect(socket).with_context(|| {
            format!(
                "no strobe daemon answers at {} (start one with `strobe daemon`, or let your MCP client start `strobe mcp`)",
                socket.display()
            )
        })?;
        let reader = BufReader::new(stream.try_clone()?);
        let mut backend = RemoteBackend { writer: stream, reader, next_id: 0 };
        // The daemon serves nothing but `initialize` and `ping` before `initialize`.
        backend.call("initialize", json!({ "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "strobe-repl", "version": env!("CARGO_PKG_VERSION") } }))?;
        Ok(backend)
    }

    fn call(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        self.next_id += 1;
        let id = self.next_id;
        let mut line = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }).to_string();
        line.push('\n');
        self.writer.write_all(line.as_bytes())?;
        loop {
            let mut buf = String::new();
            if self.reader.read_line(&mut buf)? == 0 {
                anyhow::bail!("the daemon closed the connection");
            }
            let msg: Value = serde_json::from_str(&buf)?;
            // Skip notifications (tools/list_changed) and anything not ours.
            if msg.get("id").and_then(Value::as_u64) != Some(id) {
                continue;
            }
            if let Some(err) = msg.get("error") {
                anyhow::bail!("{}", err.get("message").and_then(Value::as_str).unwrap_or("daemon error"));
            }
            return Ok(msg.get("result").cloned().unwrap_or(Value::Null));
        }
    }
}

impl Backend for RemoteBackend {
    fn eval(&mut self, code: &str) -> anyhow::Result<EvalOutput> {
        let r = self.call("strobe/eval", json!({ "code": code }))?;
        Ok(EvalOutput {
            output: r.get("output").and_then(Value::as_str).unwrap_or("").to_string(),
            values: r
                .get("values")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(|v| v.as_str().map(String::from)).collect())
                .unwrap_or_default(),
            error: r.get("error").and_then(Value::as_str).map(String::from),
        })
    }
    fn complete(&mut self, line: &str) -> (usize, Vec<String>) {
        match self.call("strobe/complete", json!({ "line": line })) {
            Ok(r) => (
                r.get("start").and_then(Value::as_u64).unwrap_or(line.len() as u64) as usize,
                r.get("candidates")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(|v| v.as_str().map(String::from)).collect())
                    .unwrap_or_default(),
            ),
            Err(_) => (line.len(), Vec::new()),
        }
    }
}
