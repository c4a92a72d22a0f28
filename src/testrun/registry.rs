//! The runs this process knows, by id. A run records its output, exit, stuck warnings
//! and (once the Lua side parsed it) its result; finished runs beyond `KEEP` are dropped,
//! oldest first.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Instant;

use serde::Serialize;

/// Finished runs kept for `status` queries.
const KEEP: usize = 64;
/// Output kept per stream; beyond it the head is kept and the rest counted.
pub const OUTPUT_CAP: usize = 64 << 20;

static RUNS: LazyLock<Mutex<HashMap<String, Arc<TestRun>>>> = LazyLock::new(Mutex::default);

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StuckWarning {
    /// ms since the run started.
    pub at_ms: u64,
    pub pid: u32,
    /// "deadlock" (no CPU) or "infinite_loop" (a core busy), with no output.
    pub kind: String,
    pub silent_ms: u64,
    pub message: String,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadStack {
    pub pid: u32,
    pub thread: String,
    pub frames: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StuckReport {
    pub at_ms: u64,
    pub pid: u32,
    pub kind: String,
    pub silent_ms: u64,
    pub threads: Vec<ThreadStack>,
    pub killed: bool,
}

#[derive(Default)]
pub struct RunState {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub dropped_bytes: u64,
    pub last_output: Option<Instant>,
    pub pid: Option<u32>,
    /// Exit code, or the killing signal.
    pub exit: Option<(Option<i32>, Option<i32>)>,
    pub ended_ms: Option<u64>,
    /// Set by the detector from the process tree: "compiling" while a compiler runs.
    pub phase: Option<&'static str>,
    pub warnings: Vec<StuckWarning>,
    pub stuck: Vec<StuckReport>,
    pub killed: bool,
    /// The detector is capturing a stuck process's stacks: the run is not over for readers yet.
    pub capturing: bool,
    /// The first time the Lua side saw each test as current (ms since start).
    pub current_seen: HashMap<String, u64>,
    pub result: Option<serde_json::Value>,
    pub session_id: Option<String>,
}

pub struct TestRun {
    pub id: String,
    pub started: Instant,
    /// Whatever the Lua side needs to finish the run on any worker (adapter, output files, ...).
    pub meta: serde_json::Value,
    pub state: Mutex<RunState>,
}

impl TestRun {
    pub fn elapsed_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    pub fn append(&self, stderr: bool, bytes: &[u8]) {
        let mut s = self.state.lock().unwrap();
        s.last_output = Some(Instant::now());
        let buf = if stderr { &mut s.stderr } else { &mut s.stdout };
        let room = OUTPUT_CAP.saturating_sub(buf.len());
        buf.extend_from_slice(&bytes[..bytes.len().min(room)]);
        if bytes.len() > room {
            s.dropped_bytes += (bytes.len() - room) as u64;
        }
    }

    pub fn finished(&self) -> bool {
        self.state.lock().unwrap().exit.is_some()
    }
}

/// Milliseconds since the epoch, in hex: unique enough with a counter beside it.
pub fn now_tag() -> String {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
    format!("{t:x}")
}

fn new_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!("test-{}-{:x}-{}", now_tag(), std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

/// Register a new run and return it.
pub fn create(meta: serde_json::Value) -> Arc<TestRun> {
    let run = Arc::new(TestRun { id: new_id(), started: Instant::now(), meta, state: Mutex::default() });
    let mut runs = RUNS.lock().unwrap();
    let mut finished: Vec<(Instant, String)> =
        runs.values().filter(|r| r.finished()).map(|r| (r.started, r.id.clone())).collect();
    if finished.len() >= KEEP {
        finished.sort();
        for (_, id) in finished.iter().take(finished.len() + 1 - KEEP) {
            runs.remove(id);
        }
    }
    runs.insert(run.id.clone(), run.clone());
    run
}

pub fn get(id: &str) -> Option<Arc<TestRun>> {
    RUNS.lock().unwrap().get(id).cloned()
}

/// Runs still going (for diagnostics and the REPL).
pub fn running() -> Vec<Arc<TestRun>> {
    RUNS.lock().unwrap().values().filter(|r| !r.finished()).cloned().collect()
}
