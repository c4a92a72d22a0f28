//! Tracing benchmark: one hot loop (tests/fixtures/c/hotloop.c, `hot_leaf` called N times),
//! side by side: unhooked, JS hooks, the native fast path as CModule attach callbacks and as a
//! replaceFast wrapper (agent/src/wrappers.ts; hot_leaf is eligible), each with full recording
//! and with the drain deferred (the hook's own cost), and the wrapper with hot-function
//! sampling. For each: ns per call measured inside the target, end-to-end events/s from the
//! first hooked call to the last row queryable in SQLite, events lost.
//!
//! `cargo bench --bench tracing` (env: `TRACING_BENCH_CALLS` fast-path calls, default 2 M;
//! `TRACING_BENCH_JS_CALLS` JS-path calls, default 100 k; `TRACING_BENCH_DRAIN_BATCH` records
//! per binary batch, default 16 384; `TRACING_BENCH_ONLY` runs only the rows whose name starts
//! with it; `TRACING_BENCH_REPEAT` runs every row that many times, interleaved, and reports
//! medians with each run's numbers).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use strobe::engine::{Engine, EngineConfig, LaunchRequest};

#[path = "support/cpu.rs"]
mod cpu;

#[path = "support/session.rs"]
mod session;
use session::{function_events, stdout_line};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn build_fixture() -> PathBuf {
    let out = repo().join("target").join("fixtures");
    let st = Command::new("bash").arg(repo().join("tests/fixtures/build.sh")).arg(&out).status().expect("run build.sh");
    assert!(st.success(), "tests/fixtures/build.sh failed");
    out.join("hotloop")
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// "loop calls=N ns=T ns_per_iter=X sum=S" -> X
fn ns_per_iter(line: &str) -> f64 {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("ns_per_iter="))
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN)
}

#[derive(Clone)]
struct Row {
    name: &'static str,
    calls: u64,
    ns_per_call: f64,
    stored: i64,
    lost: u64,
    sampled_out_note: String,
    events_per_sec: f64,
    /// CPU seconds from the first call to the last row committed.
    cpu: cpu::CpuSplit,
}



async fn traced_run(engine: &Arc<Engine>, hotloop: &Path, name: &'static str, calls: u64, options: Value) -> Row {
    let r = engine
        .launch(LaunchRequest {
            command: hotloop.display().to_string(),
            args: vec!["loop".into(), calls.to_string(), "wait".into()],
            project_root: repo().join("tests/fixtures").display().to_string(),
            ..Default::default()
        })
        .await
        .expect("launch");
    let id = r.session_id;
    engine.store().set_max_events_per_session(&id, 100_000_000);
    stdout_line(engine, &id, "ready").await;
    engine.configure_tracing(&id, options).await.expect("tracing options");
    engine.trace(Some(&id), &["hot_leaf".to_string()], &[]).await.expect("trace");
    // Which hook path the agent took (wrappers.ts): the row's label must be true.
    let paths = engine.configure_tracing(&id, json!({})).await.expect("tracing settings");
    let wrapped = paths["hookPaths"]["wrapped"].as_array().is_some_and(|w| !w.is_empty());
    let t0 = Instant::now();
    let cpu0 = cpu::sample();
    engine.send_stdin(&id, b"go\n").await.expect("stdin");
    let line = stdout_line(engine, &id, "calls=").await;
    // Wait for the exit drain, then until the stored count stops growing.
    while engine.status(&id).map(|s| s.status == "running").unwrap_or(false) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    engine.store().flush();
    let stored = function_events(engine, &id);
    let elapsed = t0.elapsed();
    let cpu = cpu::sample() - cpu0;
    let st = engine.status(&id).expect("status");
    let mut note = st.sampled_functions.iter().map(|f| format!("{} sampled at {}", f.func_name, f.sample_rate)).collect::<Vec<_>>().join(", ");
    if wrapped != name.starts_with("wrapper") {
        note.push_str(if wrapped { " (hooked by a wrapper!)" } else { " (hooked by attach!)" });
    }
    engine.stop(&id, false).await.expect("stop");
    Row {
        name,
        calls,
        ns_per_call: ns_per_iter(&line),
        stored,
        lost: st.events_lost,
        sampled_out_note: note,
        events_per_sec: stored as f64 / elapsed.as_secs_f64(),
        cpu,
    }
}

fn main() {
    let hotloop = build_fixture();
    let fast_calls = env_u64("TRACING_BENCH_CALLS", 2_000_000);
    let js_calls = env_u64("TRACING_BENCH_JS_CALLS", 100_000);

    let out = Command::new(&hotloop).args(["loop", &fast_calls.to_string()]).output().expect("run hotloop");
    let native = ns_per_iter(&String::from_utf8_lossy(&out.stdout));

    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let rows_of = rt.block_on(async {
        let home = tempfile::tempdir().unwrap();
        let cache_dir = repo().join("target").join("strobe-cache");
        let engine = Engine::new(EngineConfig { home: home.path().to_path_buf(), cache_dir }).unwrap();
        engine.warm_up().await.expect("Frida host");
        let batch = env_u64("TRACING_BENCH_DRAIN_BATCH", 16384);
        let no_sampling = json!({ "hotCallsPerSec": 0, "ringRecords": 1 << 20, "drainBatch": batch });
        // The hook alone: the ring holds the whole run and is drained after the loop, so the
        // daemon's decoding and SQLite do not compete with the loop for the 2 cores.
        let deferred = json!({ "hotCallsPerSec": 0, "ringRecords": (4 * fast_calls).next_power_of_two(), "drainIntervalMs": 1000, "drainBatch": batch });
        let attach = |mut v: Value| {
            v["wrappers"] = json!(false);
            v
        };
        let mut runs_of: Vec<(&'static str, Vec<Row>)> = Vec::new();
        let only = std::env::var("TRACING_BENCH_ONLY").unwrap_or_default();
        let repeat = env_u64("TRACING_BENCH_REPEAT", 1).max(1);
        let runs: [(&'static str, u64, Value); 6] = [
            ("JS hooks", js_calls, json!({ "mode": "js", "hotCallsPerSec": 0, "costShare": 0 })),
            ("attach", fast_calls, attach(no_sampling.clone())),
            ("attach, drain later", fast_calls, attach(deferred.clone())),
            ("wrapper", fast_calls, no_sampling),
            ("wrapper, drain later", fast_calls, deferred),
            ("wrapper, sampling", fast_calls, json!({ "drainBatch": batch })),
        ];
        // `only` picks rows by name: "wrapper" alone runs every wrapper row. Repeats are
        // interleaved (row A, row B, row A, ...) so that a slow spell of the machine does
        // not land on one row's runs only.
        let runs: Vec<_> = runs.into_iter().filter(|(name, _, _)| name.starts_with(only.as_str())).collect();
        for _ in 0..repeat {
            for (name, calls, options) in &runs {
                let row = traced_run(&engine, &hotloop, name, *calls, options.clone()).await;
                match runs_of.iter_mut().find(|(n, _)| n == name) {
                    Some((_, v)) => v.push(row),
                    None => runs_of.push((name, vec![row])),
                }
            }
        }
        runs_of
    });
    // Each row is reported by its median run by end-to-end rate, with the median ns/call of
    // its runs; every run is listed in the order run and checked for unaccounted events.
    let rows: Vec<Row> = rows_of
        .iter()
        .map(|(_, runs)| {
            let mut by_rate: Vec<&Row> = runs.iter().collect();
            by_rate.sort_by(|a, b| a.events_per_sec.total_cmp(&b.events_per_sec));
            let mut ns: Vec<f64> = runs.iter().map(|r| r.ns_per_call).collect();
            ns.sort_by(f64::total_cmp);
            Row { ns_per_call: ns[ns.len() / 2], ..by_rate[runs.len() / 2].clone() }
        })
        .collect();

    println!("tracing benchmark: hot_leaf(a, b) in a loop, enter + exit hooked");
    println!("{:<22} {:>10} {:>12} {:>12} {:>14} {:>8}", "run", "calls", "ns/call", "rows stored", "rows/s e2e", "lost");
    println!("{:<22} {:>10} {:>12.1} {:>12} {:>14} {:>8}", "unhooked", fast_calls, native, "-", "-", "-");
    for r in &rows {
        println!(
            "{:<22} {:>10} {:>12.1} {:>12} {:>14.0} {:>8}  {}",
            r.name, r.calls, r.ns_per_call, r.stored, r.events_per_sec, r.lost, r.sampled_out_note
        );
    }
    println!("\nCPU ns per stored row: store writer thread / other daemon threads (ingest, decode) / Frida host / target (hooked loop + agent drain)");
    for r in &rows {
        let per_row = |s: f64| if r.stored > 0 { s / r.stored as f64 * 1e9 } else { 0.0 };
        let c = r.cpu;
        println!(
            "{:<22} {:>8.0} {:>8.0} {:>8.0} {:>8.0}",
            r.name,
            per_row(c.writer),
            per_row(c.daemon_other),
            per_row(c.host),
            per_row(c.target)
        );
    }
    if rows_of.iter().any(|(_, runs)| runs.len() > 1) {
        println!("\nEach run (rows/s e2e, ns/call), in the order run:");
        for (name, runs) in &rows_of {
            let list: Vec<String> = runs.iter().map(|r| format!("{:.0} k, {:.1}", r.events_per_sec / 1e3, r.ns_per_call)).collect();
            println!("{:<22} {}", name, list.join(" | "));
        }
    }
    for r in rows_of.iter().filter(|(name, _)| *name == "attach" || *name == "wrapper").flat_map(|(_, runs)| runs) {
        let expected = 2 * r.calls as i64;
        println!(
            "{}: {} of {} events stored, {} counted as lost (stored + lost = {}): {}",
            r.name,
            r.stored,
            expected,
            r.lost,
            r.stored + r.lost as i64,
            if r.stored + r.lost as i64 == expected { "every event accounted for" } else { "MISMATCH" }
        );
    }
}
