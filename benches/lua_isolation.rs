//! A second client's latency while another client runs away in Lua: p50/p99 of
//! `tools/list` and `debug_query` (a tool script run in a Lua worker) against a real
//! daemon over its socket, idle and while another connection spins in a debug_script,
//! a tool script and a `strobe repl --connect` chunk (`while true do end`).
//!
//! Run: `cargo bench --bench lua_isolation` (`ISOLATION_SAMPLES=200` per phase).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

struct Client {
    writer: UnixStream,
    reader: BufReader<UnixStream>,
    next: u64,
}

impl Client {
    fn connect(socket: &Path) -> Client {
        let s = UnixStream::connect(socket).expect("connect to the daemon");
        let reader = BufReader::new(s.try_clone().unwrap());
        let mut c = Client { writer: s, reader, next: 0 };
        c.call("initialize", json!({ "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "bench", "version": "0" } }));
        c
    }

    fn send(&mut self, method: &str, params: Value) -> u64 {
        self.next += 1;
        let mut line = json!({ "jsonrpc": "2.0", "id": self.next, "method": method, "params": params }).to_string();
        line.push('\n');
        self.writer.write_all(line.as_bytes()).unwrap();
        self.next
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params);
        loop {
            let mut buf = String::new();
            assert!(self.reader.read_line(&mut buf).unwrap() > 0, "the daemon closed the connection");
            let msg: Value = serde_json::from_str(&buf).unwrap();
            if msg.get("id").and_then(Value::as_u64) == Some(id) {
                return msg;
            }
        }
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// `samples` alternating tools/list and debug_query calls, stopping early at `until`.
fn measure(c: &mut Client, samples: usize, until: Instant) -> Vec<Duration> {
    let mut out = Vec::new();
    for i in 0..samples {
        if Instant::now() >= until {
            break;
        }
        let t0 = Instant::now();
        let r = if i % 2 == 0 {
            c.call("tools/list", json!({}))
        } else {
            c.call("tools/call", json!({ "name": "debug_query", "arguments": { "sessionId": "no-such-session" } }))
        };
        assert!(r.get("result").is_some(), "{r}");
        out.push(t0.elapsed());
    }
    out
}

fn report(name: &str, mut lat: Vec<Duration>) {
    lat.sort();
    println!(
        "| {name} | {} | {:.2} ms | {:.2} ms | {:.2} ms |",
        lat.len(),
        percentile(&lat, 0.5).as_secs_f64() * 1e3,
        percentile(&lat, 0.99).as_secs_f64() * 1e3,
        lat.last().unwrap().as_secs_f64() * 1e3
    );
}

struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn main() {
    let samples: usize = std::env::var("ISOLATION_SAMPLES").ok().and_then(|s| s.parse().ok()).unwrap_or(200);
    let home = tempfile::tempdir().unwrap();
    let tools = home.path().join("scripts/tools");
    std::fs::create_dir_all(&tools).unwrap();
    std::fs::write(tools.join("spin.lua"), "return { name = \"spin\", handler = function() while true do end end }\n").unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let _daemon = Daemon(
        Command::new(env!("CARGO_BIN_EXE_strobe"))
            .arg("daemon")
            .env("STROBE_HOME", home.path())
            .env("STROBE_CACHE_DIR", repo.join("target/strobe-cache"))
            .spawn()
            .expect("start the daemon"),
    );
    let socket = home.path().join("strobe.sock");
    let deadline = Instant::now() + Duration::from_secs(30);
    while UnixStream::connect(&socket).is_err() {
        assert!(Instant::now() < deadline, "the daemon did not come up");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut bystander = Client::connect(&socket);
    let mut runaway = Client::connect(&socket);
    let far = Instant::now() + Duration::from_secs(3600);
    measure(&mut bystander, 20, far); // warm up
    println!("| second client, while the first... | calls | p50 | p99 | max |\n|---|---|---|---|---|");
    report("is idle", measure(&mut bystander, samples, far));

    runaway.send("tools/call", json!({ "name": "debug_script", "arguments": { "script": "while true do end", "timeoutMs": 60000 } }));
    std::thread::sleep(Duration::from_millis(300));
    report("spins in debug_script", measure(&mut bystander, samples, Instant::now() + Duration::from_secs(50)));

    let mut runaway2 = Client::connect(&socket);
    runaway2.send("tools/call", json!({ "name": "spin", "arguments": {} }));
    std::thread::sleep(Duration::from_millis(300));
    report("spins in a tool script (5 s budget)", measure(&mut bystander, samples, Instant::now() + Duration::from_millis(4000)));

    let mut runaway3 = Client::connect(&socket);
    runaway3.send("strobe/eval", json!({ "code": "while true do end" }));
    std::thread::sleep(Duration::from_millis(300));
    report("spins in a REPL chunk (10 s budget)", measure(&mut bystander, samples, Instant::now() + Duration::from_millis(9000)));
}
