//! Typed tracing on a real C program nobody here wrote (issue 18): SQLite, from the
//! amalgamation bundled in the `libsqlite3-sys` crate, built `-g -O0` with a small driver
//! (benches/real/sqlite_drv.c) running a query workload. Four functions taking struct
//! pointers are traced — sqlite3VdbeMemRelease(Mem *), sqlite3BtreeNext(BtCursor *, int),
//! sqlite3BtreePayloadSize(BtCursor *) (returns a field of the cursor) and
//! sqlite3VdbeIntValue(const Mem *) — side by side in one run: untraced, uftrace with
//! `-A`/`-R` on the same functions, Strobe with typed arguments at the default depth (native
//! capture, capture_plan.rs) in replaceFast wrappers and, for comparison, through
//! Interceptor.attach (`wrappers: false`), and Strobe integer-only (raw argument words). The
//! driver times its own query loop, so "ns per traced call" is (traced − untraced) / traced
//! calls; "CPU ns/call" is the same from the workload thread's CPU time.
//!
//! `cargo bench --bench sqlite_real` (env: `SQLITE_BENCH_ROWS`, default 1000;
//! `SQLITE_BENCH_QUERIES`, default 10; `SQLITE_BENCH_REPEAT`, runs of each row, default 3,
//! medians reported; `SQLITE_BENCH_TYPED_ONLY=1`, optionally with `SQLITE_BENCH_PERF=<file>`:
//! the typed row alone, see `typed_only`; `SQLITE_BENCH_TYPED_ONLY=store`: the typed row
//! alone, sessions one after another in one daemon, each until every row is stored, printing
//! rows/s end to end; with `SQLITE_BENCH_WORDS=1` the integer-only row instead). uftrace
//! (Debian package) is installed with apt-get when missing and this runs as root; otherwise
//! its row is skipped with a note.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use serde_json::{json, Value};
use strobe::engine::{Engine, EngineConfig};
use strobe::store::{EventQuery, EventType};

const FUNCTIONS: [&str; 4] = ["sqlite3VdbeMemRelease", "sqlite3BtreeNext", "sqlite3BtreePayloadSize", "sqlite3VdbeIntValue"];

#[path = "support/session.rs"]
mod session;
#[path = "support/sqlite_driver.rs"]
mod sqlite_driver;
use sqlite_driver::{build_driver, env_u64, launch_waiting, repo, run_traced, workload_cpu_ns, workload_ns};

/// uftrace on PATH, installing the Debian package when missing (as root).
fn uftrace() -> Option<PathBuf> {
    let found = || Command::new("sh").args(["-c", "command -v uftrace"]).output().ok().filter(|o| o.status.success()).map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    if let Some(p) = found() {
        return Some(p);
    }
    eprintln!("uftrace missing: apt-get install -y uftrace");
    let _ = Command::new("apt-get").args(["install", "-y", "uftrace"]).status();
    found()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// uftrace's run: workload ns, its CPU ns and the traced calls it counted.
fn uftrace_run(uftrace: &Path, exe: &Path, args: &[String]) -> (f64, f64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(uftrace);
    cmd.arg("record").arg("--no-libcall").arg("-d").arg(dir.path().join("data"));
    for f in FUNCTIONS {
        cmd.args(["-P", f]);
    }
    cmd.args(["-A", "sqlite3VdbeMemRelease@arg1", "-A", "sqlite3BtreeNext@arg1,arg2", "-A", "sqlite3BtreePayloadSize@arg1", "-A", "sqlite3VdbeIntValue@arg1"]);
    for f in FUNCTIONS {
        cmd.args(["-R", &format!("{f}@retval")]);
    }
    let out = cmd.arg(exe).args(args).output().expect("uftrace record");
    let ns = workload_ns(&String::from_utf8_lossy(&out.stdout)).unwrap_or(f64::NAN);
    let cpu = workload_cpu_ns(&String::from_utf8_lossy(&out.stdout));
    let report = Command::new(uftrace).arg("report").arg("-d").arg(dir.path().join("data")).output().expect("uftrace report");
    let calls = String::from_utf8_lossy(&report.stdout)
        .lines()
        .filter(|l| FUNCTIONS.iter().any(|f| l.trim_end().ends_with(f)))
        .filter_map(|l| l.split_whitespace().rev().nth(1).and_then(|c| c.parse::<u64>().ok()))
        .sum();
    (ns, cpu, calls)
}



struct StrobeRun {
    ns: f64,
    cpu: f64,
    stored: i64,
    lost: u64,
    rows_per_sec: f64,
    plans: u64,
    /// Hooks on the replaceFast wrapper path (the rest attach).
    wrapped: usize,
    /// The agent's capture statistics after the workload (capture.ts captureStats).
    capture: Value,
    sample: Option<String>,
    /// A page of 500 enters read from the middle of the run (typed ones decoded at read).
    page_ms: f64,
}

impl StrobeRun {
    /// Typed records' payload bytes and pointees visited, per record; reads that faulted
    /// (a signal and Frida's exception dispatch each) and reads checked with process_vm_readv.
    fn capture_line(&self) -> String {
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

async fn strobe_run(engine: &Arc<Engine>, exe: &Path, args: &[String], options: Value) -> StrobeRun {
    let id = launch_waiting(engine, exe, args).await;
    let run = run_traced(engine, &id, &FUNCTIONS, options).await;
    // One typed enter, to show what was stored.
    let q = EventQuery { session_id: id.clone(), event_type: Some(EventType::FunctionEnter), limit: 1, ..Default::default() };
    let sample = engine.query(&q).ok().and_then(|r| r.events.first().and_then(|e| e.arguments.clone()));
    let page = EventQuery { limit: 500, offset: (run.stored / 4) as usize, ..q };
    let t = std::time::Instant::now();
    let read = engine.query(&page).map(|r| r.events.len()).unwrap_or(0);
    let page_ms = t.elapsed().as_secs_f64() * 1e3;
    assert_eq!(read, 500, "a page of 500 enters");
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
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// An engine with its Frida host up, in a temporary home (kept alive by the returned dir).
async fn bench_engine() -> (tempfile::TempDir, Arc<Engine>) {
    let home = tempfile::tempdir().unwrap();
    let cache_dir = repo().join("target").join("strobe-cache");
    let engine = Engine::new(EngineConfig { home: home.path().to_path_buf(), cache_dir }).unwrap();
    engine.warm_up().await.expect("Frida host");
    (home, engine)
}

/// Tracing options recording every call: no rate sampling and no cost sampling (a JS-path
/// fallback would otherwise be thinned to 1 call in 100, which reads as missing events).
fn every_call() -> Value {
    json!({ "hotCallsPerSec": 0, "costShare": 0, "ringRecords": 1 << 20 })
}

fn main() {
    let exe = build_driver();
    let args = vec![env_u64("SQLITE_BENCH_ROWS", 1000).to_string(), env_u64("SQLITE_BENCH_QUERIES", 10).to_string()];
    if std::env::var("SQLITE_BENCH_TYPED_ONLY").as_deref() == Ok("store") {
        return typed_stored(&exe, &args);
    }
    if std::env::var("SQLITE_BENCH_TYPED_ONLY").is_ok() {
        return typed_only(&exe, &args, std::env::var("SQLITE_BENCH_PERF").ok().map(PathBuf::from));
    }
    let repeat = env_u64("SQLITE_BENCH_REPEAT", 3).max(1) as usize;
    let uftrace = uftrace();

    let (untraced, uf, typed, typed_attach, words, typed_default) = runtime().block_on(async {
        let (_home, engine) = bench_engine().await;
        let base = every_call();
        let mut words_only = base.clone();
        words_only["typedValues"] = json!(false);
        let mut attach = base.clone();
        attach["wrappers"] = json!(false);
        // What a user gets without options: rate and cost sampling on (1 call in 100 recorded
        // once a function's hooks take over half of its time): not every call is an event.
        let defaults = json!({ "ringRecords": 1 << 20 });
        let mut typed_default = Vec::new();
        let (mut untraced, mut uf, mut typed, mut typed_attach, mut words) = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        // Interleaved, so a slow spell of the shared machine does not land on one row only.
        for _ in 0..repeat {
            let out = Command::new(&exe).args(&args).output().expect("run driver");
            let text = String::from_utf8_lossy(&out.stdout);
            untraced.push((workload_ns(&text).expect("workload line"), workload_cpu_ns(&text)));
            if let Some(u) = &uftrace {
                uf.push(uftrace_run(u, &exe, &args));
            }
            typed.push(strobe_run(&engine, &exe, &args, base.clone()).await);
            typed_attach.push(strobe_run(&engine, &exe, &args, attach.clone()).await);
            words.push(strobe_run(&engine, &exe, &args, words_only.clone()).await);
            typed_default.push(strobe_run(&engine, &exe, &args, defaults.clone()).await);
        }
        (untraced, uf, typed, typed_attach, words, typed_default)
    });

    let base_ns = median(untraced.iter().map(|r| r.0).collect());
    let base_cpu = median(untraced.iter().map(|r| r.1).collect());
    let calls = words.iter().map(|r| (r.stored + r.lost as i64) / 2).max().unwrap_or(0) as f64;
    let uf_ns = median(uf.iter().map(|r| r.0).collect());
    let uf_cpu = median(uf.iter().map(|r| r.1).collect());
    let uf_calls = uf.first().map(|r| r.2).unwrap_or(0);
    let per_call = |ns: f64| (ns - base_ns) / calls;
    let cpu_per_call = |ns: f64| (ns - base_cpu) / calls;
    let uf_per_call = per_call(uf_ns);
    println!("SQLite {} rows, {} queries; traced: {}", args[0], args[1], FUNCTIONS.join(", "));
    println!("traced calls per run: {calls:.0} (Strobe: (stored + lost) / 2); uftrace counted {uf_calls}");
    println!("{:<28} {:>12} {:>14} {:>10} {:>12} {:>12} {:>10} {:>12}", "run", "workload ms", "ns/traced call", "× uftrace", "CPU ns/call", "rows stored", "lost", "rows/s e2e");
    println!("{:<28} {:>12.1} {:>14} {:>10} {:>12} {:>12} {:>10} {:>12}", "untraced", base_ns / 1e6, "-", "-", "-", "-", "-", "-");
    if uftrace.is_some() {
        println!("{:<28} {:>12.1} {:>14.0} {:>10.2} {:>12.0} {:>12} {:>10} {:>12}", "uftrace -A/-R", uf_ns / 1e6, uf_per_call, 1.0, cpu_per_call(uf_cpu), "-", "-", "-");
    } else {
        println!("uftrace: not available (apt-get install uftrace failed); its row is skipped");
    }
    let rows = [
        ("Strobe typed (native, depth 3)", &typed),
        ("  same, Interceptor.attach", &typed_attach),
        ("Strobe integer-only", &words),
        ("Strobe typed, default sampling", &typed_default),
    ];
    for (name, runs) in rows {
        let ns = median(runs.iter().map(|r| r.ns).collect());
        let cpu = median(runs.iter().map(|r| r.cpu).collect());
        let mid = &runs[runs.len() / 2];
        println!(
            "{:<28} {:>12.1} {:>14.0} {:>10.2} {:>12.0} {:>12} {:>10} {:>12.0}",
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
    println!("\nEach run (workload ms):");
    println!("  untraced  {:?}", untraced.iter().map(|n| (n.0 / 1e5).round() / 10.0).collect::<Vec<_>>());
    println!("  uftrace   {:?}", uf.iter().map(|r| (r.0 / 1e5).round() / 10.0).collect::<Vec<_>>());
    println!("  typed     {:?}", typed.iter().map(|r| (r.ns / 1e5).round() / 10.0).collect::<Vec<_>>());
    println!("  t-attach  {:?}", typed_attach.iter().map(|r| (r.ns / 1e5).round() / 10.0).collect::<Vec<_>>());
    println!("  int-only  {:?}", words.iter().map(|r| (r.ns / 1e5).round() / 10.0).collect::<Vec<_>>());
    println!("  t-default {:?} (sampled: stored {:?} of {} events)", typed_default.iter().map(|r| (r.ns / 1e5).round() / 10.0).collect::<Vec<_>>(), typed_default.iter().map(|r| r.stored).collect::<Vec<_>>(), 2.0 * calls);
    for (name, runs) in [("typed", &typed), ("t-attach", &typed_attach), ("int-only", &words)] {
        for r in runs.iter() {
            let total = r.stored + r.lost as i64;
            println!(
                "{name}: {} stored + {} lost = {total} of {} events: {}; native plans {}, wrapped hooks {}; {}",
                r.stored,
                r.lost,
                2.0 * calls,
                if total as f64 == 2.0 * calls { "every event accounted for" } else { "MISMATCH" },
                r.plans,
                r.wrapped,
                r.capture_line()
            );
        }
    }
    if let Some(s) = typed.first().and_then(|r| r.sample.as_deref()) {
        println!("\na typed enter as stored: {}", &s[..s.len().min(600)]);
    }
}

/// `SQLITE_BENCH_TYPED_ONLY=1`: only the typed row (every call recorded; with
/// `SQLITE_BENCH_WORDS=1` the integer-only row), once, printing the driver's line (workload
/// and CPU ns) — a quick check while working on the hook. With
/// `SQLITE_BENCH_PERF=<file>` also, `perf record` samples the driver during the workload,
/// and the anonymous executable mappings (CModules, the capture walk, trampolines: no
/// symbols for perf) are saved next to it as `<file>.<address>.bin`, for `objdump -b binary
/// --adjust-vma=0x<address>` on the hot addresses.
fn typed_only(exe: &Path, args: &[String], perf_out: Option<PathBuf>) {
    runtime().block_on(async {
        let (_home, engine) = bench_engine().await;
        let id = launch_waiting(&engine, exe, args).await;
        let pid = engine.status(&id).expect("status").pid;
        let perf = perf_out.as_ref().map(|out| {
            let perf = Command::new("perf").args(["record", "-F", "20000", "-g", "-o"]).arg(out).args(["-p", &pid.to_string()]).spawn().expect("perf");
            std::thread::sleep(std::time::Duration::from_millis(500));
            perf
        });
        let mut options = every_call();
        if std::env::var_os("SQLITE_BENCH_WORDS").is_some() {
            options["typedValues"] = json!(false); // the integer-only row instead
        }
        engine.configure_tracing(&id, options).await.expect("options");
        let patterns: Vec<String> = FUNCTIONS.iter().map(|f| f.to_string()).collect();
        engine.trace(Some(&id), &patterns, &[]).await.expect("trace");
        engine.send_stdin(&id, b"go\n").await.expect("stdin");
        let line = session::stdout_line(&engine, &id, "workload ns=").await;
        if let (Some(mut perf), Some(out)) = (perf, perf_out) {
            let _ = Command::new("kill").args(["-INT", &perf.id().to_string()]).status();
            let _ = perf.wait();
            save_code_pages(pid, &out);
        }
        let after = engine.configure_tracing(&id, json!({})).await.expect("settings after the workload");
        println!("{line}\ncapture: {}", after["capture"]);
        engine.send_stdin(&id, b"exit\n").await.expect("stdin");
        engine.stop(&id, false).await.ok();
    });
}

/// `SQLITE_BENCH_TYPED_ONLY=store`: the typed row `SQLITE_BENCH_REPEAT` times (default 3) in
/// one daemon, each waiting until every row is stored. The first session meets a fresh store
/// (the file, its WAL and SQLite's page cache grow as it goes), the later ones a warm one,
/// as in a daemon that has run before; a profile of the daemon shows the store's work on
/// typed rows, not a session's deletion racing it.
fn typed_stored(exe: &Path, args: &[String]) {
    let words = std::env::var_os("SQLITE_BENCH_WORDS").is_some();
    runtime().block_on(async {
        let (_home, engine) = bench_engine().await;
        let mut options = every_call();
        if words {
            options["typedValues"] = json!(false); // the integer-only row, for comparison
        }
        for i in 0..env_u64("SQLITE_BENCH_REPEAT", 3).max(1) {
            let r = strobe_run(&engine, exe, args, options.clone()).await;
            println!(
                "{} session {}: {} stored, {} lost, {:.0} rows/s end to end, CPU {:.0} ms in the workload",
                if words { "integer-only" } else { "typed" },
                i + 1,
                r.stored,
                r.lost,
                r.rows_per_sec,
                r.cpu / 1e6
            );
        }
    });
}

/// The anonymous executable mappings of `pid`, each to `<out>.<start address>.bin`.
fn save_code_pages(pid: i64, out: &Path) {
    use std::io::{Read, Seek};
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let mut mem = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
    for l in maps.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() != 5 || !f[1].contains('x') {
            continue;
        }
        let (a, b) = f[0].split_once('-').unwrap();
        let (a, b) = (u64::from_str_radix(a, 16).unwrap(), u64::from_str_radix(b, 16).unwrap());
        let mut buf = vec![0u8; (b - a) as usize];
        if mem.seek(std::io::SeekFrom::Start(a)).is_ok() && mem.read_exact(&mut buf).is_ok() {
            std::fs::write(out.with_extension(format!("{a:x}.bin")), &buf).unwrap();
        }
    }
}
