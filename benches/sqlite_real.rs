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
//! medians reported; `SQLITE_BENCH_TYPED_ONLY=1`, optionally with `SQLITE_BENCH_PERF=<file>`
//! and `SQLITE_BENCH_FUNCTIONS=a,b` (those functions only):
//! the typed row alone, see `typed_only`; `SQLITE_BENCH_TYPED_ONLY=store`: the typed row
//! alone, sessions one after another in one daemon, each until every row is stored, printing
//! rows/s end to end and the CPU per stored row, from "go" to the last row committed, of the
//! store's writer thread, the rest of the daemon, the Frida host and the target's threads
//! other than the workload's (the agent's drain, Frida's); with
//! `SQLITE_BENCH_WORDS=1` the integer-only row instead). uftrace
//! (Debian package) is installed with apt-get when missing and this runs as root; otherwise
//! its row is skipped with a note.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

const FUNCTIONS: [&str; 4] = ["sqlite3VdbeMemRelease", "sqlite3BtreeNext", "sqlite3BtreePayloadSize", "sqlite3VdbeIntValue"];

#[path = "support/session.rs"]
mod session;
#[path = "support/sqlite_driver.rs"]
mod sqlite_driver;
#[path = "support/side_by_side.rs"]
mod side_by_side;
#[path = "support/cpu.rs"]
mod cpu;
use side_by_side::{bench_engine, every_call, median, print_accounting, print_runs, print_table, runtime, strobe_run, uftrace, uftrace_run, StrobeRun};
use sqlite_driver::{build_driver, env_u64, launch_waiting, workload_cpu_ns, workload_ns};

/// uftrace's `-A` specs for FUNCTIONS.
const UFTRACE_ARGS: [&str; 4] = ["sqlite3VdbeMemRelease@arg1", "sqlite3BtreeNext@arg1,arg2", "sqlite3BtreePayloadSize@arg1", "sqlite3VdbeIntValue@arg1"];

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
                uf.push(uftrace_run(u, &exe, &args, &FUNCTIONS, &UFTRACE_ARGS));
            }
            typed.push(strobe_run(&engine, &exe, &args, &FUNCTIONS, base.clone()).await);
            typed_attach.push(strobe_run(&engine, &exe, &args, &FUNCTIONS, attach.clone()).await);
            words.push(strobe_run(&engine, &exe, &args, &FUNCTIONS, words_only.clone()).await);
            typed_default.push(strobe_run(&engine, &exe, &args, &FUNCTIONS, defaults.clone()).await);
        }
        (untraced, uf, typed, typed_attach, words, typed_default)
    });

    let base_ns = median(untraced.iter().map(|r| r.0).collect());
    let base_cpu = median(untraced.iter().map(|r| r.1).collect());
    let calls = words.iter().map(|r| (r.stored + r.lost as i64) / 2).max().unwrap_or(0) as f64;
    let uf_ns = median(uf.iter().map(|r| r.0).collect());
    let uf_cpu = median(uf.iter().map(|r| r.1).collect());
    let uf_calls = uf.first().map(|r| r.2).unwrap_or(0);
    println!("SQLite {} rows, {} queries; traced: {}", args[0], args[1], FUNCTIONS.join(", "));
    println!("traced calls per run: {calls:.0} (Strobe: (stored + lost) / 2); uftrace counted {uf_calls}");
    let rows: [(&str, &[StrobeRun]); 4] = [
        ("Strobe typed (native, depth 3)", &typed),
        ("  same, Interceptor.attach", &typed_attach),
        ("Strobe integer-only", &words),
        ("Strobe typed, default sampling", &typed_default),
    ];
    print_table((base_ns, base_cpu), calls, uftrace.is_some().then_some((uf_ns, uf_cpu)), &rows);
    print_runs(&untraced, &uf, &[("typed", &typed), ("t-attach", &typed_attach), ("int-only", &words)]);
    println!("  t-default {:?} (sampled: stored {:?} of {} events)", typed_default.iter().map(|r| (r.ns / 1e5).round() / 10.0).collect::<Vec<_>>(), typed_default.iter().map(|r| r.stored).collect::<Vec<_>>(), 2.0 * calls);
    print_accounting(&[("typed", &typed), ("t-attach", &typed_attach), ("int-only", &words)], calls);
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
        // SQLITE_BENCH_FUNCTIONS=a,b: only those (where one function's cost goes).
        let patterns: Vec<String> = match std::env::var("SQLITE_BENCH_FUNCTIONS") {
            Ok(list) => list.split(',').map(str::to_string).collect(),
            Err(_) => FUNCTIONS.iter().map(|f| f.to_string()).collect(),
        };
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
            let r = strobe_run(&engine, exe, args, &FUNCTIONS, options.clone()).await;
            let c = r.cpu_split;
            let per_row = |secs: f64| secs * 1e9 / r.stored.max(1) as f64;
            println!(
                "{} session {}: {} stored, {} lost, {:.0} rows/s end to end, CPU {:.0} ms in the workload; CPU ns per row: writer {:.0}, rest of the daemon {:.0}, Frida host {:.0}, the target's other threads {:.0}",
                if words { "integer-only" } else { "typed" },
                i + 1,
                r.stored,
                r.lost,
                r.rows_per_sec,
                r.cpu / 1e6,
                per_row(c.writer),
                per_row(c.daemon_other),
                per_row(c.host),
                per_row(c.target_live - r.cpu / 1e9)
            );
            println!("  outbox: {}", r.outbox);
            println!("  {}", r.stored_bytes);
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
