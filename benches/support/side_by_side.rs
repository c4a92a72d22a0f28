//! Side by side in one run, for the benches on real programs (sqlite_real, lua_real,
//! rust_real, cxx_nodes): the
//! peer tool (uftrace with arguments and return values) and Strobe sessions of a driver that
//! prints "ready", waits for "go" and prints "workload ns=T … cpu_ns=U" (sqlite_driver.rs).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use serde_json::{json, Value};
use strobe::engine::{Engine, EngineConfig};
use strobe::store::{EventQuery, EventType};

use crate::sqlite_driver::{launch_waiting, repo, run_traced_marked, workload_cpu_ns, workload_ns};

/// uftrace on PATH, installing the Debian package when missing (as root).
#[allow(dead_code)] // rust_real has no uftrace row
pub fn uftrace() -> Option<PathBuf> {
    let found = || Command::new("sh").args(["-c", "command -v uftrace"]).output().ok().filter(|o| o.status.success()).map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    if let Some(p) = found() {
        return Some(p);
    }
    eprintln!("uftrace missing: apt-get install -y uftrace");
    let _ = Command::new("apt-get").args(["install", "-y", "uftrace"]).status();
    found()
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// uftrace's run of `exe args` tracing `functions` with `-A` specs `arg_specs` and every
/// return value: workload ns, its CPU ns and the traced calls it counted.
#[allow(dead_code)]
pub fn uftrace_run(uftrace: &Path, exe: &Path, args: &[String], functions: &[&str], arg_specs: &[&str]) -> (f64, f64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(uftrace);
    cmd.arg("record").arg("--no-libcall").arg("-d").arg(dir.path().join("data"));
    for f in functions {
        cmd.args(["-P", f]);
    }
    for a in arg_specs {
        cmd.args(["-A", a]);
    }
    for f in functions {
        cmd.args(["-R", &format!("{f}@retval")]);
    }
    let out = cmd.arg(exe).args(args).output().expect("uftrace record");
    let ns = workload_ns(&String::from_utf8_lossy(&out.stdout)).unwrap_or(f64::NAN);
    let cpu = workload_cpu_ns(&String::from_utf8_lossy(&out.stdout));
    let report = Command::new(uftrace).arg("report").arg("-d").arg(dir.path().join("data")).output().expect("uftrace report");
    let calls = String::from_utf8_lossy(&report.stdout)
        .lines()
        .filter(|l| functions.iter().any(|f| l.trim_end().ends_with(f)))
        .filter_map(|l| l.split_whitespace().rev().nth(1).and_then(|c| c.parse::<u64>().ok()))
        .sum();
    (ns, cpu, calls)
}

pub struct StrobeRun {
    pub ns: f64,
    pub cpu: f64,
    pub stored: i64,
    pub lost: u64,
    pub rows_per_sec: f64,
    pub plans: u64,
    /// Hooks on the replaceFast wrapper path (the rest attach).
    pub wrapped: usize,
    /// The agent's capture statistics after the workload (capture.ts captureStats).
    pub capture: Value,
    pub sample: Option<String>,
    /// A page of 500 enters read from the middle of the run (typed ones decoded at read).
    pub page_ms: f64,
    /// CPU from "go" to every row stored (launch and hooks left out; before the reads and the stop).
    pub cpu_split: crate::cpu::CpuSplit,
    /// The agent's outbox statistics after the workload (outbox.ts outboxStats).
    #[allow(dead_code)] // printed by sqlite_real's store mode only
    pub outbox: Value,
    /// What the session's rows hold in bytes (stored_bytes).
    pub stored_bytes: String,
}

/// What a session's rows cost the store in bytes (one session in the store): the events'
/// argument columns and the whole spans (`capture_spans`) beside them, per event row.
fn stored_bytes(db: &Path) -> String {
    let Ok(c) = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY) else { return String::new() };
    let one = |sql: &str| c.query_row(sql, [], |r| r.get::<_, Option<f64>>(0)).ok().flatten().unwrap_or(0.0);
    let rows = one("SELECT count(*) FROM events").max(1.0);
    let args = one("SELECT sum(length(arguments)) FROM events");
    let spans = one("SELECT count(*) FROM capture_spans");
    let span_bytes = one("SELECT sum(length(data)) FROM capture_spans");
    format!(
        "stored: {rows:.0} event rows, arguments {:.0} B a row; {spans:.0} whole spans of {:.0} B, {:.0} B a row",
        args / rows,
        span_bytes / spans.max(1.0),
        span_bytes / rows
    )
}

impl StrobeRun {
    /// Typed records' payload bytes and pointees visited, per record; reads that faulted
    /// (a signal and Frida's exception dispatch each) and reads checked with process_vm_readv.
    pub fn capture_line(&self) -> String {
        let c = &self.capture;
        let n = |k: &str| c[k].as_u64().unwrap_or(0);
        let records = n("records").max(1);
        format!(
            "payload {} B and {:.1} pointees visited per typed record, faulted reads {}, checked reads {}; 500 enters read in {:.1} ms",
            n("payloadBytes") / records,
            n("visits") as f64 / records as f64,
            n("faultsRecovered"),
            n("checkedReads"),
            self.page_ms
        )
    }
}

/// One Strobe session of the driver tracing `functions` with tracing `options`.
pub async fn strobe_run(engine: &Arc<Engine>, exe: &Path, args: &[String], functions: &[&str], options: Value) -> StrobeRun {
    let id = launch_waiting(engine, exe, args).await;
    let (mut at_go, mut last) = (None, None);
    let processes = crate::cpu::Processes::find(); // the target is running: found too
    let run = run_traced_marked(engine, &id, functions, options, &mut || {
        let now = processes.sample();
        if at_go.is_none() {
            at_go = Some(now);
        } else {
            last = Some(now);
        }
    })
    .await;
    let cpu_split = last.zip(at_go).map(|(b, a)| b - a).unwrap_or_default();
    // One typed enter, to show what was stored.
    let q = EventQuery { session_id: id.clone(), event_type: Some(EventType::FunctionEnter), limit: 1, ..Default::default() };
    let sample = engine.query(&q).ok().and_then(|r| r.events.first().and_then(|e| e.arguments.clone()));
    let page = EventQuery { limit: 500, offset: (run.stored / 4) as usize, ..q };
    let t = std::time::Instant::now();
    let read = engine.query(&page).map(|r| r.events.len()).unwrap_or(0);
    let page_ms = t.elapsed().as_secs_f64() * 1e3;
    assert_eq!(read, 500, "a page of 500 enters");
    let stored_bytes = stored_bytes(&engine.config().home.join("strobe.db"));
    engine.stop(&id, false).await.expect("stop");
    StrobeRun {
        ns: workload_ns(&run.line).unwrap_or(f64::NAN),
        cpu: workload_cpu_ns(&run.line),
        stored: run.stored,
        lost: run.lost,
        rows_per_sec: run.stored as f64 / run.elapsed.as_secs_f64(),
        plans: run.settings["capture"]["plans"].as_u64().unwrap_or(0),
        wrapped: run.settings["hookPaths"]["wrapped"].as_array().map_or(0, Vec::len),
        capture: run.after["capture"].clone(),
        sample,
        page_ms,
        cpu_split,
        outbox: run.after["outbox"].clone(),
        stored_bytes,
    }
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// An engine with its Frida host up, in a temporary home (kept alive by the returned dir).
pub async fn bench_engine() -> (tempfile::TempDir, Arc<Engine>) {
    let home = tempfile::tempdir().unwrap();
    let cache_dir = repo().join("target").join("strobe-cache");
    let engine = Engine::new(EngineConfig { home: home.path().to_path_buf(), cache_dir }).unwrap();
    engine.warm_up().await.expect("Frida host");
    (home, engine)
}

/// Tracing options recording every call: no rate sampling and no cost sampling (a JS-path
/// fallback would otherwise be thinned to 1 call in 100, which reads as missing events), and
/// a ring of 2^20 records (`BENCH_RING_RECORDS` sets another size; the agent's default is 2^17;
/// `BENCH_DRAIN_MS` sets the agent's drain interval, `BENCH_DRAIN_BATCH` its records per batch,
/// `BENCH_OUTBOX=0` sends batches through Frida's channel instead of the outbox).
pub fn every_call() -> Value {
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let mut o = json!({ "hotCallsPerSec": 0, "costShare": 0, "ringRecords": env("BENCH_RING_RECORDS").unwrap_or(1 << 20) });
    if let Some(ms) = env("BENCH_DRAIN_MS") {
        o["drainIntervalMs"] = json!(ms);
    }
    if let Some(n) = env("BENCH_DRAIN_BATCH") {
        o["drainBatch"] = json!(n);
    }
    // 0: batches carry their bytes through Frida's channel, as before the outbox.
    if env("BENCH_OUTBOX") == Some(0) {
        o["outbox"] = json!(false);
    }
    o
}

/// The table both benches print: per row, medians of workload ms, ns and CPU ns per traced
/// call over the untraced run (`base`: workload ns and CPU ns), the ratio to uftrace's, and
/// the middle run's rows stored, lost and rows/s end to end.
pub fn print_table(base: (f64, f64), calls: f64, uf: Option<(f64, f64)>, rows: &[(&str, &[StrobeRun])]) {
    let per_call = |ns: f64| (ns - base.0) / calls;
    let cpu_per_call = |ns: f64| (ns - base.1) / calls;
    let uf_per_call = uf.map(|u| per_call(u.0)).unwrap_or(f64::NAN);
    println!("{:<32} {:>12} {:>14} {:>10} {:>12} {:>12} {:>10} {:>12}", "run", "workload ms", "ns/traced call", "× uftrace", "CPU ns/call", "rows stored", "lost", "rows/s e2e");
    println!("{:<32} {:>12.1} {:>14} {:>10} {:>12} {:>12} {:>10} {:>12}", "untraced", base.0 / 1e6, "-", "-", "-", "-", "-", "-");
    match uf {
        Some((ns, cpu)) => println!("{:<32} {:>12.1} {:>14.0} {:>10.2} {:>12.0} {:>12} {:>10} {:>12}", "uftrace -A/-R", ns / 1e6, uf_per_call, 1.0, cpu_per_call(cpu), "-", "-", "-"),
        None => println!("uftrace: no row (not installed, or it cannot patch this program)"),
    }
    for (name, runs) in rows {
        if runs.is_empty() {
            continue;
        }
        let ns = median(runs.iter().map(|r| r.ns).collect());
        let cpu = median(runs.iter().map(|r| r.cpu).collect());
        let mid = &runs[runs.len() / 2];
        println!(
            "{:<32} {:>12.1} {:>14.0} {:>10.2} {:>12.0} {:>12} {:>10} {:>12.0}",
            name,
            ns / 1e6,
            per_call(ns),
            per_call(ns) / uf_per_call,
            cpu_per_call(cpu),
            mid.stored,
            mid.lost,
            mid.rows_per_sec
        );
    }
}

/// The row of a run that made `1 / share` of the iterations (the JavaScript serializer's,
/// slow): the same per-call arithmetic as `print_table` on its own call count, over that
/// share of the untraced time; `ran` says how much it ran.
#[allow(dead_code)] // sqlite_real has no such row
pub fn print_share_row(name: &str, r: &StrobeRun, base: (f64, f64), share: f64, uf_per_call: Option<f64>, ran: &str) {
    let calls = (r.stored + r.lost as i64) as f64 / 2.0;
    let per_call = (r.ns - base.0 / share) / calls;
    let ratio = uf_per_call.map_or_else(|| "-".to_string(), |u| format!("{:.0}", per_call / u));
    println!(
        "{:<32} {:>12.1} {:>14.0} {:>10} {:>12.0} {:>12} {:>10} {:>12.0}   ({ran})",
        name,
        r.ns / 1e6,
        per_call,
        ratio,
        (r.cpu - base.1 / share) / calls,
        r.stored,
        r.lost,
        r.rows_per_sec
    );
}

/// Each run's workload ms, row by row (the table's medians hide the spread): the untraced
/// runs, uftrace's (when it ran), then each Strobe row's.
pub fn print_runs(untraced: &[(f64, f64)], uf: &[(f64, f64, u64)], rows: &[(&str, &[StrobeRun])]) {
    let ms = |ns: f64| (ns / 1e5).round() / 10.0;
    println!("\nEach run (workload ms):");
    println!("  untraced  {:?}", untraced.iter().map(|r| ms(r.0)).collect::<Vec<_>>());
    if !uf.is_empty() {
        println!("  uftrace   {:?}", uf.iter().map(|r| ms(r.0)).collect::<Vec<_>>());
    }
    for (name, runs) in rows {
        println!("  {name:<9} {:?}", runs.iter().map(|r| ms(r.ns)).collect::<Vec<_>>());
    }
}

/// Per run of each row: stored + lost against the 2 × `calls` events the workload made.
pub fn print_accounting(rows: &[(&str, &[StrobeRun])], calls: f64) {
    for (name, runs) in rows {
        for r in runs.iter() {
            let total = r.stored + r.lost as i64;
            let c = &r.cpu_split;
            let per_row = |secs: f64| secs * 1e9 / r.stored.max(1) as f64;
            println!(
                "{name}: {} stored + {} lost = {total} of {} events: {}; native plans {}, wrapped hooks {}; {}; CPU ns a stored row from go to the last: writer {:.0}, rest of the daemon {:.0}, Frida host {:.0}, the target's threads but the workload {:.0}",
                r.stored,
                r.lost,
                2.0 * calls,
                if total as f64 == 2.0 * calls { "every event accounted for" } else { "MISMATCH" },
                r.plans,
                r.wrapped,
                r.capture_line(),
                per_row(c.writer),
                per_row(c.daemon_other),
                per_row(c.host),
                per_row(c.target_live - r.cpu / 1e9)
            );
            println!("  {}", r.stored_bytes);
        }
    }
}
