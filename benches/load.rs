//! The daemon under ingest load, as an MCP client sees it: `debug_query` latency (p50/p99 of a
//! one-event query of a hot session) while 1, 3 and 10 hot sessions ingest, the daemon's RSS
//! before, during and after, and how long stopping the ten busy sessions takes (all stop
//! requests sent at once) and how each is recorded.
//!
//! Real daemon (`strobe mcp` started by this bench in a private `STROBE_HOME`), real Frida,
//! ten copies of `tests/fixtures/c/hotloop` in `spin` mode (`hot_leaf` forever) with
//! `hot_leaf` traced (default settings: hot-function sampling, `events.maxPerSession`
//! 200,000, so eviction runs all along).
//!
//! `cargo bench --bench load` (env: `LOAD_BENCH_SECS` seconds of queries per phase, default 6;
//! `LOAD_BENCH_SESSIONS` phases, default "1,3,10"). Numbers on a shared machine are noisy:
//! run it twice and read the medians.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

#[path = "support/mcp_stdio.rs"]
mod mcp_stdio;
use mcp_stdio::Mcp;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn build_hotloop() -> PathBuf {
    let out = repo().join("target").join("fixtures");
    let st = Command::new("bash").arg(repo().join("tests/fixtures/build.sh")).arg(&out).status().expect("run build.sh");
    assert!(st.success(), "tests/fixtures/build.sh failed");
    out.join("hotloop")
}

/// Resident set of `pid` in MiB (VmRSS).
fn rss_mib(pid: u32) -> f64 {
    status_mib(pid, "VmRSS:")
}

/// A `/proc/<pid>/status` size field in MiB (`RssAnon:`: the heap, without mapped file pages).
fn status_mib(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn daemon_pid(home: &Path) -> u32 {
    for _ in 0..200 {
        if let Some(pid) = std::fs::read_to_string(home.join("strobe.pid")).ok().and_then(|s| s.trim().parse().ok()) {
            return pid;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("no strobe.pid in {}", home.display());
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    percentile(v, 0.5)
}

/// Launch a copy of hotloop in spin mode with `hot_leaf` traced; returns the session id.
fn launch_hot(mcp: &mut Mcp, exe: &Path) -> String {
    // Staged: hooked while the process is suspended (not raced with the running loop).
    mcp.tool("debug_trace", json!({"add": ["hot_leaf"]})).unwrap_or_else(|e| panic!("debug_trace: {e}"));
    let r = mcp
        .tool("debug_launch", json!({"command": exe, "args": ["spin", "0"], "projectRoot": repo().join("tests/fixtures")}))
        .unwrap_or_else(|e| panic!("debug_launch {}: {e}", exe.display()));
    r["sessionId"].as_str().expect("sessionId").to_string()
}

fn event_count(mcp: &mut Mcp, sid: &str) -> i64 {
    mcp.tool("debug_session", json!({"action": "status", "sessionId": sid}))
        .ok()
        .and_then(|s| s["eventCount"].as_i64())
        .unwrap_or(0)
}

struct Phase {
    sessions: usize,
    queries: usize,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
    rss_median: f64,
    rss_max: f64,
}

fn measure(mcp: &mut Mcp, sid: &str, daemon: u32, sessions: usize, secs: u64) -> Phase {
    let mut lat = Vec::new();
    let mut rss = Vec::new();
    let end = Instant::now() + Duration::from_secs(secs);
    let mut last_rss = Instant::now() - Duration::from_secs(1);
    while Instant::now() < end {
        let t = Instant::now();
        mcp.tool("debug_query", json!({"sessionId": sid, "limit": 1})).unwrap_or_else(|e| panic!("debug_query: {e}"));
        lat.push(t.elapsed().as_secs_f64() * 1e3);
        if last_rss.elapsed() >= Duration::from_millis(250) {
            rss.push(rss_mib(daemon));
            last_rss = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    lat.sort_by(|a, b| a.total_cmp(b));
    let rss_max = rss.iter().copied().fold(f64::NAN, f64::max);
    Phase {
        sessions,
        queries: lat.len(),
        p50_ms: percentile(&lat, 0.5),
        p99_ms: percentile(&lat, 0.99),
        max_ms: *lat.last().unwrap_or(&f64::NAN),
        rss_median: median(&mut rss),
        rss_max,
    }
}

fn main() {
    let secs: u64 = std::env::var("LOAD_BENCH_SECS").ok().and_then(|v| v.parse().ok()).unwrap_or(6);
    let phases: Vec<usize> = std::env::var("LOAD_BENCH_SESSIONS")
        .unwrap_or_else(|_| "1,3,10".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let most = phases.iter().copied().max().unwrap_or(10);
    let hotloop = build_hotloop();
    let tmp = tempfile::Builder::new().prefix("strobe-bench-load").tempdir_in(repo().join("target")).unwrap();
    let home = tmp.path().join("home");
    let bin = tmp.path().join("bin");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&bin).unwrap();
    // One live session per binary: one copy per session.
    let exes: Vec<PathBuf> = (0..most)
        .map(|i| {
            let p = bin.join(format!("hotloop{i}"));
            std::fs::copy(&hotloop, &p).unwrap();
            p
        })
        .collect();

    let mut mcp = Mcp::start(Path::new(env!("CARGO_BIN_EXE_strobe")), &home, &repo().join("target").join("strobe-cache"));
    mcp.tool("debug_session", json!({"action": "list"})).expect("list");
    let daemon = daemon_pid(&home);
    std::thread::sleep(Duration::from_secs(1));
    let rss_before = rss_mib(daemon);

    let mut sids: Vec<String> = Vec::new();
    let mut rows = Vec::new();
    for &n in &phases {
        while sids.len() < n {
            let sid = launch_hot(&mut mcp, &exes[sids.len()]);
            sids.push(sid);
        }
        // Hot: events arrive (and, at 200 k per session, eviction starts soon).
        let deadline = Instant::now() + Duration::from_secs(120);
        while event_count(&mut mcp, &sids[n - 1]) == 0 {
            assert!(Instant::now() < deadline, "no events from {}", sids[n - 1]);
            std::thread::sleep(Duration::from_millis(200));
        }
        std::thread::sleep(Duration::from_secs(2));
        let row = measure(&mut mcp, &sids[0], daemon, n, secs);
        eprintln!(
            "{:>2} hot sessions: {} queries, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; daemon RSS median {:.0} MiB, max {:.0} MiB",
            row.sessions, row.queries, row.p50_ms, row.p99_ms, row.max_ms, row.rss_median, row.rss_max
        );
        rows.push(row);
    }

    let running = sids
        .iter()
        .filter(|sid| {
            mcp.tool("debug_session", json!({"action": "status", "sessionId": sid})).ok().and_then(|s| s["status"].as_str().map(str::to_string))
                == Some("running".into())
        })
        .count();
    println!("\n{running} of {} sessions still running before the stop", sids.len());
    // Stop them all at once, retained so that how each ended can be read back.
    let t = Instant::now();
    let ids: Vec<u64> = sids
        .iter()
        .map(|sid| mcp.send_tool("debug_session", json!({"action": "stop", "sessionId": sid, "retain": true})))
        .collect();
    let mut each = Vec::new();
    for id in ids {
        if let Err(e) = mcp.wait_tool(id) {
            eprintln!("stop failed: {e}");
        }
        each.push(t.elapsed().as_secs_f64());
    }
    let stop_all = t.elapsed().as_secs_f64();
    let listed = mcp.tool("debug_session", json!({"action": "list"})).expect("list");
    let sessions = listed["sessions"].as_array().cloned().unwrap_or_default();
    let mut statuses: std::collections::BTreeMap<String, usize> = Default::default();
    for s in sessions.iter().filter(|s| sids.iter().any(|x| Some(x.as_str()) == s["sessionId"].as_str())) {
        let how = match (s["status"].as_str(), s.get("signal").and_then(Value::as_str)) {
            (Some(st), Some(sig)) => format!("{st} ({sig})"),
            (Some(st), None) => st.to_string(),
            _ => "?".into(),
        };
        *statuses.entry(how).or_default() += 1;
    }
    let rss_stopped = rss_mib(daemon);
    std::thread::sleep(Duration::from_secs(5));
    let rss_after = rss_mib(daemon);
    let anon_after = status_mib(daemon, "RssAnon:");

    println!("\nquery latency under ingest load (debug_query limit 1 on a hot session, sequential, 20 ms apart)\n");
    println!("| hot sessions | queries | p50 ms | p99 ms | max ms | daemon RSS median / max MiB |");
    println!("|---|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | {:.1} | {:.1} | {:.1} | {:.0} / {:.0} |",
            r.sessions, r.queries, r.p50_ms, r.p99_ms, r.max_ms, r.rss_median, r.rss_max
        );
    }
    println!("\ndaemon RSS: before {rss_before:.0} MiB, right after the stops {rss_stopped:.0} MiB, 5 s later {rss_after:.0} MiB ({anon_after:.0} MiB of it heap, RssAnon)");
    println!(
        "stop of {} busy sessions (sent at once, retain): all answered in {:.2} s (answers at {}); recorded: {:?}",
        sids.len(),
        stop_all,
        each.iter().map(|s| format!("{s:.2}")).collect::<Vec<_>>().join(", "),
        statuses
    );
    let _ = Command::new("kill").arg(daemon.to_string()).status();
}
