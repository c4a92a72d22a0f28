//! A logpoint on a hot function of a real program, against gdb's `dprintf` on the same one.
//!
//! SQLite (benches/real/sqlite_drv.c over the amalgamation of `libsqlite3-sys`, `-g -O0`) runs
//! its query workload; the point is on `sqlite3BtreeNext(BtCursor *, int)` (about 80,000 hits
//! at the defaults), its message `ix={pCur->ix}`. Rows, interleaved in each round:
//! - untraced (under Strobe, nothing set);
//! - a logpoint without a condition: hits over the budget (2,000 messages a second) are
//!   counted in native code (agent/src/js_gate.ts);
//! - the same with a condition that always holds: every hit enters JavaScript (what every
//!   hit cost before the native count);
//! - the same with a condition that never holds: every hit enters JavaScript, none is logged
//!   (what entering JavaScript costs, without the messages);
//! - gdb `dprintf` on the same function and message (every hit printed; gdb stops the
//!   process at each one), when gdb is installed.
//!
//! Reported: the driver's workload wall time, and per call of the function (row minus
//! untraced, divided by the most hits a point counted). Medians over `LOGPOINT_BENCH_REPEAT` rounds (default 3).
//!
//! `cargo bench --bench logpoint_real` (env `SQLITE_BENCH_ROWS`, default 2,000;
//! `SQLITE_BENCH_QUERIES`, default 40; `LOGPOINT_BENCH_REPEAT`).

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use strobe::engine::{Engine, EngineConfig, PointRequest};
use strobe::store::EventType;

#[path = "support/session.rs"]
mod session;
#[path = "support/sqlite_driver.rs"]
mod sqlite_driver;
use sqlite_driver::{build_driver, env_u64, launch_waiting, repo, workload_ns};

const FUNCTION: &str = "sqlite3BtreeNext";
const MESSAGE: &str = "ix={pCur->ix}";

/// One run under Strobe with `point` set before the workload: (workload ns, the point's hits,
/// logpoint messages stored).
async fn strobe_run(engine: &Arc<Engine>, exe: &Path, args: &[String], point: Option<PointRequest>) -> (f64, u64, usize) {
    let id = launch_waiting(engine, exe, args).await;
    let set = match point {
        Some(p) => Some(engine.set_points(&id, &[p], &[]).await.expect("logpoint")),
        None => None,
    };
    engine.send_stdin(&id, b"go\n").await.expect("stdin");
    let line = session::stdout_line(engine, &id, "workload ns=").await;
    let hits = match set {
        Some(_) => engine.set_points(&id, &[], &[]).await.expect("points").logpoints.first().map_or(0, |p| p.hits),
        None => 0,
    };
    engine.send_stdin(&id, b"exit\n").await.expect("stdin");
    while engine.status(&id).map(|s| s.status == "running").unwrap_or(false) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    engine.store().flush();
    let messages = session::events_of(engine, &id, EventType::Logpoint);
    (workload_ns(&line).expect("workload line"), hits, messages)
}

/// One run under gdb with a dprintf: (workload ns, lines printed), or None without gdb.
fn gdb_run(exe: &Path, args: &[String]) -> Option<(f64, u64)> {
    let dprintf = format!("dprintf {FUNCTION},\"ix=%d\\n\",pCur->ix");
    let out = Command::new("gdb").args(["-batch", "-nx", "-ex", "set pagination off", "-ex", &dprintf, "-ex", "run", "--args"]).arg(exe).args(args).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    Some((workload_ns(&text)?, text.lines().filter(|l| l.starts_with("ix=")).count() as u64))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let exe = build_driver();
    let args = vec![env_u64("SQLITE_BENCH_ROWS", 2000).to_string(), env_u64("SQLITE_BENCH_QUERIES", 40).to_string()];
    let repeat = env_u64("LOGPOINT_BENCH_REPEAT", 3).max(1);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let home = tempfile::tempdir().unwrap();
    let _in_runtime = rt.enter();
    let engine = Engine::new(EngineConfig { home: home.path().to_path_buf(), cache_dir: repo().join("target").join("strobe-cache") }).unwrap();
    rt.block_on(engine.warm_up()).expect("Frida host");
    let plain = || PointRequest { function: Some(FUNCTION.into()), message: Some(MESSAGE.into()), ..Default::default() };
    let always = || PointRequest { condition: Some("pCur->ix >= 0".into()), ..plain() };
    let never = || PointRequest { condition: Some("pCur->ix < 0".into()), ..plain() };
    let mut rows: Vec<(&str, Vec<f64>, Vec<u64>, Vec<usize>)> = ["untraced", "logpoint, no condition", "logpoint, condition always true", "logpoint, condition never true", "gdb dprintf"]
        .iter()
        .map(|n| (*n, Vec::new(), Vec::new(), Vec::new()))
        .collect();
    for _ in 0..repeat {
        for (i, point) in [None, Some(plain()), Some(always()), Some(never())].into_iter().enumerate() {
            let (ns, hits, messages) = rt.block_on(strobe_run(&engine, &exe, &args, point));
            rows[i].1.push(ns);
            rows[i].2.push(hits);
            rows[i].3.push(messages);
        }
        if let Some((ns, printed)) = gdb_run(&exe, &args) {
            rows[4].1.push(ns);
            rows[4].2.push(printed);
            rows[4].3.push(printed as usize);
        }
    }
    let base = median(rows[0].1.clone());
    let calls = rows.iter().flat_map(|r| r.2.iter().copied()).max().unwrap_or(0);
    println!("logpoint on {FUNCTION} (SQLite, {} rows, {} queries), medians of {repeat}:", args[0], args[1]);
    println!("  {:<34} {:>12} {:>12} {:>8}   {}", "row", "workload ms", "ns per call", "hits", "messages per round");
    for (name, ns, hits, messages) in &rows {
        if ns.is_empty() {
            println!("  {name:<34} (gdb not installed)");
            continue;
        }
        let hit_count = hits.iter().copied().max().unwrap_or(0);
        // Per call of the function (a point whose condition never holds counts no hit).
        let per_hit = if calls > 0 && *name != "untraced" { format!("{:.0}", (median(ns.clone()) - base) / calls as f64) } else { "-".into() };
        println!("  {name:<34} {:>12.1} {per_hit:>12} {hit_count:>8}   {messages:?}", median(ns.clone()) / 1e6);
    }
}
