//! The SQLite benchmark driver (benches/real/sqlite_drv.c over the amalgamation of the
//! `libsqlite3-sys` crate, built `-g -O0`), shared by the benches that trace real SQLite.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use strobe::engine::{Engine, LaunchRequest};

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[allow(dead_code)] // the benches' settings; tests/sqlite_values.rs reads none
pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The source directory of crate `name` in this workspace's dependency tree.
#[allow(dead_code)] // not every bench builds a bundled program
pub fn crate_dir(name: &str) -> PathBuf {
    let out = Command::new(env!("CARGO")).args(["metadata", "--format-version", "1"]).current_dir(repo()).output().expect("cargo metadata");
    let meta: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata JSON");
    let manifest = meta["packages"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["name"] == name))
        .and_then(|p| p["manifest_path"].as_str())
        .unwrap_or_else(|| panic!("{name} in the dependency tree"));
    Path::new(manifest).parent().unwrap().to_path_buf()
}

/// The amalgamation of the libsqlite3-sys crate.
#[allow(dead_code)] // lua_real builds no SQLite
fn sqlite_dir() -> PathBuf {
    crate_dir("libsqlite3-sys").join("sqlite3")
}

/// The driver, built once (`-fpatchable-function-entry=5`: entry nops uftrace patches; the
/// same binary for every row).
#[allow(dead_code)] // lua_real builds no SQLite
pub fn build_driver() -> PathBuf {
    let dir = repo().join("target").join("bench-real");
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("sqlite_drv");
    let src = repo().join("benches/real/sqlite_drv.c");
    let sqlite = sqlite_dir();
    let newer = |a: &Path, b: &Path| a.metadata().and_then(|m| m.modified()).ok() > b.metadata().and_then(|m| m.modified()).ok();
    if !exe.exists() || newer(&src, &exe) {
        eprintln!("building {} (SQLite -g -O0, about a minute)", exe.display());
        let st = Command::new("cc")
            .args(["-g", "-O0", "-fpatchable-function-entry=5", "-fno-omit-frame-pointer", "-I"])
            .arg(&sqlite)
            .arg("-o")
            .arg(&exe)
            .arg(&src)
            .arg(sqlite.join("sqlite3.c"))
            .args(["-lpthread", "-ldl", "-lm"])
            .status()
            .expect("cc");
        assert!(st.success(), "building the SQLite driver failed");
    }
    exe
}

/// "workload ns=T ..." -> T
#[allow(dead_code)] // not every bench reads the driver's timing
pub fn workload_ns(text: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix("workload ns=")).and_then(|r| r.split_whitespace().next()).and_then(|v| v.parse().ok())
}

/// "workload ns=T ... cpu_ns=U" -> U: the workload thread's CPU time (a busy machine does
/// not inflate it).
#[allow(dead_code)] // not every bench reads the driver's timing
pub fn workload_cpu_ns(text: &str) -> f64 {
    let line = text.lines().find(|l| l.starts_with("workload ns="));
    line.and_then(|l| l.split_whitespace().find_map(|w| w.strip_prefix("cpu_ns="))).and_then(|v| v.parse().ok()).unwrap_or(f64::NAN)
}

/// A driver session launched with `wait`, every event kept, at its "ready" line: trace, then
/// send "go" on stdin to run the workload.
#[allow(dead_code)] // not every bench launches under Strobe
pub async fn launch_waiting(engine: &std::sync::Arc<Engine>, exe: &Path, args: &[String]) -> String {
    let mut argv = args.to_vec();
    argv.push("wait".into());
    let r = engine
        .launch(LaunchRequest { command: exe.display().to_string(), args: argv, project_root: exe.parent().unwrap().display().to_string(), ..Default::default() })
        .await
        .expect("launch");
    engine.store().set_max_events_per_session(&r.session_id, 100_000_000);
    crate::session::stdout_line(engine, &r.session_id, "ready").await;
    r.session_id
}

/// What a traced workload run reports.
#[allow(dead_code)] // not every bench launches under Strobe
pub struct Traced {
    /// The agent's tracing settings while traced.
    pub settings: Value,
    /// The same after the workload (capture statistics: capture.ts captureStats).
    pub after: Value,
    /// The driver's "workload ns=…" line.
    pub line: String,
    /// Function events stored, and counted lost.
    pub stored: i64,
    pub lost: u64,
    /// From "go" to the last row committed.
    pub elapsed: Duration,
}

/// Trace `functions` with tracing `options` in a session of [`launch_waiting`], run the
/// workload, wait until every row is committed while the driver lives (it waits for a line
/// on stdin before exiting), then let it exit.
#[allow(dead_code)] // not every bench launches under Strobe
pub async fn run_traced(engine: &std::sync::Arc<Engine>, id: &str, functions: &[&str], options: Value) -> Traced {
    run_traced_marked(engine, id, functions, options, &mut || {}).await
}

/// [`run_traced`], calling `mark` just before "go" and whenever the stored count grew (its
/// last call is within 10 ms of the last row committed): a bench measures that window.
#[allow(dead_code)] // not every bench measures it
pub async fn run_traced_marked(engine: &std::sync::Arc<Engine>, id: &str, functions: &[&str], options: Value, mark: &mut (dyn FnMut() + Send)) -> Traced {
    engine.configure_tracing(id, options).await.expect("tracing options");
    let patterns: Vec<String> = functions.iter().map(|f| f.to_string()).collect();
    let t = engine.trace(Some(id), &patterns, &[]).await.expect("trace");
    assert_eq!(t.hooked_functions, functions.len(), "{t:?}");
    let settings = engine.configure_tracing(id, json!({})).await.expect("settings");
    mark();
    let t0 = Instant::now();
    engine.send_stdin(id, b"go\n").await.expect("stdin");
    let line = crate::session::stdout_line(engine, id, "workload ns=").await;
    let after = engine.configure_tracing(id, json!({})).await.expect("settings after the workload");
    // The daemon may still be decoding and storing what the agent sent: count once the
    // count stops growing, with the process alive, then check nothing more arrives at exit.
    let (stored, elapsed) = settle(engine, id, t0, mark).await;
    engine.send_stdin(id, b"exit\n").await.expect("stdin");
    while engine.status(id).map(|s| s.status == "running").unwrap_or(false) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(settle(engine, id, t0, &mut || {}).await.0, stored, "events stored after the driver exited");
    let lost = engine.status(id).expect("status").events_lost;
    Traced { settings, after, line, stored, lost, elapsed }
}

/// Function events stored once the session's count has not grown for 2 s, and the time from
/// `t0` to its last growth (polled every 10 ms: a typed run stores its 80 k rows in about
/// 0.1 s). The poll reads the store's committed counter, not a count of the rows: counting
/// function events by type scans the session's index, and doing that every 10 ms over
/// hundreds of thousands of rows took CPU from the pipeline being measured (the bench's own
/// thread in SQLite's VDBE held ≈ 7 % of a typed run's samples).
async fn settle(engine: &std::sync::Arc<Engine>, id: &str, t0: Instant, mark: &mut (dyn FnMut() + Send)) -> (i64, Duration) {
    let (mut seen, mut elapsed, mut still) = (-1, t0.elapsed(), Instant::now());
    while still.elapsed() < Duration::from_secs(2) && t0.elapsed() < Duration::from_secs(600) {
        engine.store().flush();
        let n = engine.store().count_events(id).unwrap_or(0);
        if n != seen {
            mark();
            (seen, elapsed, still) = (n, t0.elapsed(), Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    (crate::session::function_events(engine, id), elapsed)
}
