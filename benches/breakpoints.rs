//! Conditional breakpoints and debug_eval latency, on a real Frida agent.
//!
//! 1. `visit` (tests/fixtures/c/condloop.c) is called N times; a breakpoint on it has a
//!    condition true only on the last call. Rows: no breakpoint; the condition compiled from
//!    the debug_eval language (`i == N-1 && it->key > 0`); the same condition as JavaScript
//!    (`js:` prefix, the old path). Reported: ns per iteration inside the target and the cost
//!    per false-condition hit (row minus no breakpoint).
//! 2. At that pause: debug_eval of 32 expressions, repeated; p50/p90 latency. Then a logpoint
//!    on `visit` (every hit over the logpoint budget): without a condition (the hits over the
//!    budget are counted natively, agent/src/js_gate.ts), and with a condition always true
//!    (every hit enters JavaScript). Reported: ns per hit.
//! 3. Probes on running code (tests/fixtures/c/probestress.c, four busy threads; every patch
//!    is written with the threads parked, agent/src/quiesce.ts): a logpoint set, then removed,
//!    on a function the threads run; then step-over from a breakpoint. p50/p90 per call.
//!
//! `cargo bench --bench breakpoints` (env: `COND_BENCH_HITS`, default 1,000,000;
//! `COND_BENCH_JS_HITS` for the JavaScript row, default 100,000; `EVAL_BENCH_CALLS`, default 50;
//! `PROBE_BENCH_ROUNDS`, default 30).

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use strobe::engine::{Engine, EngineConfig, EvalRequest, LaunchRequest, PointRequest, StepAction};

#[path = "support/session.rs"]
mod session;
use session::stdout_line;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn ns_per_iter(line: &str) -> f64 {
    line.split_whitespace().find_map(|w| w.strip_prefix("ns_per_iter=")).and_then(|v| v.parse().ok()).unwrap_or(f64::NAN)
}


/// condloop launched for `n` iterations and ready: its session, and the file whose creation starts the loop.
async fn launch_condloop(engine: &Arc<Engine>, binary: &PathBuf, n: u64) -> (String, PathBuf) {
    let go = tempfile::NamedTempFile::new().unwrap().into_temp_path();
    let go_path = go.to_path_buf();
    go.close().unwrap();
    let r = engine
        .launch(LaunchRequest {
            command: binary.display().to_string(),
            args: vec![n.to_string(), go_path.display().to_string()],
            project_root: repo().join("tests/fixtures").display().to_string(),
            ..Default::default()
        })
        .await
        .expect("launch");
    let id = r.session_id;
    stdout_line(engine, &id, "ready").await;
    (id, go_path)
}

/// One run: ns per iteration, and (with a condition) the eval latencies at the pause.
async fn run(engine: &Arc<Engine>, binary: &PathBuf, n: u64, condition: Option<String>, eval_calls: u64) -> (f64, Vec<f64>) {
    let (id, go_path) = launch_condloop(engine, binary, n).await;
    if let Some(c) = &condition {
        let bp = PointRequest { function: Some("visit".into()), condition: Some(c.clone()), ..Default::default() };
        engine.set_points(&id, &[bp], &[]).await.expect("breakpoint");
    }
    std::fs::write(&go_path, "go").unwrap();
    let mut latencies = Vec::new();
    if condition.is_some() {
        let p = engine.wait_for_pause(&id, Duration::from_secs(900)).await.expect("pause");
        assert_eq!(p.status, "paused", "the condition must be true once");
        let expressions: Vec<String> = (0..32)
            .map(|k| match k % 4 {
                0 => format!("it->key + {k}"),
                1 => "it->next->next->weight".to_string(),
                2 => format!("g_items[{}].key * i", k % 8),
                _ => "*it".to_string(),
            })
            .collect();
        for _ in 0..eval_calls {
            let t = Instant::now();
            let r = engine.eval(&id, EvalRequest { expressions: expressions.clone(), ..Default::default() }).await.expect("eval");
            latencies.push(t.elapsed().as_secs_f64() * 1000.0);
            assert!(r["results"][0].get("error").is_none(), "{r}");
        }
        engine.continue_session(&id, StepAction::Continue, None, Duration::from_secs(60)).await.expect("continue");
    }
    let line = stdout_line(engine, &id, "ns_per_iter=").await;
    let _ = engine.stop(&id, false).await;
    let _ = std::fs::remove_file(&go_path);
    (ns_per_iter(&line), latencies)
}

/// A logpoint on visit() for the whole loop: ns per iteration.
async fn logpoint_run(engine: &Arc<Engine>, binary: &PathBuf, n: u64, condition: Option<&str>) -> f64 {
    let (id, go_path) = launch_condloop(engine, binary, n).await;
    let lp = PointRequest { function: Some("visit".into()), condition: condition.map(str::to_string), message: Some("i={i}".into()), ..Default::default() };
    engine.set_points(&id, &[lp], &[]).await.expect("logpoint");
    std::fs::write(&go_path, "go").unwrap();
    let line = stdout_line(engine, &id, "ns_per_iter=").await;
    let _ = engine.stop(&id, false).await;
    let _ = std::fs::remove_file(&go_path);
    ns_per_iter(&line)
}

/// Section 3: ms per logpoint set, per logpoint removal, per step-over (`rounds` each).
async fn probe_changes(engine: &Arc<Engine>, binary: &PathBuf, rounds: u64) -> [Vec<f64>; 3] {
    let r = engine
        .launch(LaunchRequest {
            command: binary.display().to_string(),
            args: vec!["4".into()],
            project_root: repo().join("tests/fixtures").display().to_string(),
            ..Default::default()
        })
        .await
        .expect("launch probestress");
    let id = r.session_id;
    stdout_line(engine, &id, "ready").await;
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1000.0;
    let [mut set, mut removed, mut steps] = [Vec::new(), Vec::new(), Vec::new()];
    for _ in 0..rounds {
        let lp = PointRequest { function: Some("busy_int".into()), condition: Some("a < 0".into()), message: Some("a={a}".into()), ..Default::default() };
        let t = Instant::now();
        let r = engine.set_points(&id, &[lp], &[]).await.expect("logpoint");
        set.push(ms(t));
        let t = Instant::now();
        engine.set_points(&id, &[], &[r.logpoints[0].id.clone()]).await.expect("remove the logpoint");
        removed.push(ms(t));
    }
    let bp = PointRequest { function: Some("busy_double".into()), ..Default::default() };
    let r = engine.set_points(&id, &[bp], &[]).await.expect("breakpoint");
    let p = engine.wait_for_pause(&id, Duration::from_secs(60)).await.expect("pause");
    for _ in 0..rounds {
        let t = Instant::now();
        let s = engine.continue_session(&id, StepAction::StepOver, p.thread_id, Duration::from_secs(60)).await.expect("step-over");
        steps.push(ms(t));
        assert_eq!(s.status, "paused", "{s:?}");
    }
    engine.set_points(&id, &[], &[r.breakpoints[0].id.clone()]).await.expect("remove the breakpoint");
    // How the patches went: retries while a thread stood in the patched bytes or held Frida's
    // transaction open (otherTransactions), and patches forced after too many tries.
    if let Ok(cfg) = engine.configure_tracing(&id, serde_json::json!({})).await {
        println!("  patching: {}", cfg["hookPaths"]["patching"]);
    }
    let _ = engine.stop(&id, false).await;
    [set, removed, steps]
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    let out = repo().join("target").join("fixtures");
    let st = Command::new("bash").arg(repo().join("tests/fixtures/build.sh")).arg(&out).status().expect("run build.sh");
    assert!(st.success(), "tests/fixtures/build.sh failed");
    let binary = out.join("condloop");
    let n = env_u64("COND_BENCH_HITS", 1_000_000);
    let js_n = env_u64("COND_BENCH_JS_HITS", 100_000);
    let eval_calls = env_u64("EVAL_BENCH_CALLS", 50);

    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let home = tempfile::tempdir().unwrap();
        let engine = Engine::new(EngineConfig { home: home.path().to_path_buf(), cache_dir: repo().join("target").join("strobe-cache") }).unwrap();
        engine.warm_up().await.expect("Frida host");
        let (base, _) = run(&engine, &binary, n, None, 0).await;
        let t = Instant::now();
        let (compiled, mut lat) = run(&engine, &binary, n, Some(format!("i == {} && it->key > 0", n - 1)), eval_calls).await;
        let compiled_wall = t.elapsed().as_secs_f64();
        let (js, _) = run(&engine, &binary, js_n, Some(format!("js:args[0] == {} && vars.it !== null", js_n - 1)), 0).await;
        println!("conditional breakpoint on visit(), condition true on the last call only");
        println!("  {:<34} {:>10} {:>14}", "row", "ns/iter", "ns/hit");
        println!("  {:<34} {:>10.1} {:>14}", "no breakpoint", base, "-");
        println!("  {:<34} {:>10.1} {:>14.1}   ({n} hits, {compiled_wall:.1} s wall)", "compiled condition (debug_eval)", compiled, compiled - base);
        println!("  {:<34} {:>10.1} {:>14.1}   ({js_n} hits)", "JavaScript condition (js:)", js, js - base);
        if !lat.is_empty() {
            let p50 = percentile(&mut lat, 0.5);
            let p90 = percentile(&mut lat, 0.9);
            println!("debug_eval of 32 expressions at the pause, {} calls: p50 {p50:.2} ms, p90 {p90:.2} ms", lat.len());
        }
        let native = logpoint_run(&engine, &binary, n, None).await;
        let every = logpoint_run(&engine, &binary, js_n, Some("i >= 0")).await;
        println!("logpoint on visit() (at most 2,000 messages a second, the rest counted)");
        println!("  {:<34} {:>10.1} {:>14.1}   ({n} hits)", "no condition (native count)", native, native - base);
        println!("  {:<34} {:>10.1} {:>14.1}   ({js_n} hits)", "condition always true (JS per hit)", every, every - base);
        let rounds = env_u64("PROBE_BENCH_ROUNDS", 30);
        let [mut set, mut removed, mut steps] = probe_changes(&engine, &out.join("probestress"), rounds).await;
        println!("probes on four busy threads (probestress), {rounds} calls each:");
        for (what, v) in [("logpoint set", &mut set), ("logpoint removed", &mut removed), ("step-over", &mut steps)] {
            println!("  {what:<18} p50 {:>7.2} ms  p90 {:>7.2} ms", percentile(v, 0.5), percentile(v, 0.9));
        }
    });
}
