//! Typed tracing of functions that take C++ node containers (`std::map`,
//! `std::unordered_map`), on an index of real text nobody here wrote: the first 2,000
//! identifiers of the SQLite amalgamation (libsqlite3-sys's sqlite3.c), counted in both
//! containers by benches/real/nodes_drv.cpp (built `-g -O2`), then looked up one after another.
//! Traced: `index_count(const std::map<std::string, int> &, const std::string &)` and
//! `hash_count(const std::unordered_map<std::string, int> &, const std::string &)`; a typed
//! record prints each container's first 100 entries. Side by side in one run: untraced,
//! uftrace with `-A`/`-R` (the containers' addresses only), Strobe typed at the default depth
//! (native capture: the node walk, capture_walk.c `cap_nodes`), the same through the
//! JavaScript serializer (`nativeCapture: false`, what these functions got before the node
//! walk; a twentieth of the iterations), and Strobe integer-only.
//!
//! `cargo bench --bench cxx_nodes` (env: `NODES_BENCH_ITERATIONS`, default 20,000, two traced
//! calls each; `NODES_BENCH_REPEAT`, runs of each row, default 3, medians reported).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

#[path = "support/session.rs"]
mod session;
#[path = "support/sqlite_driver.rs"]
mod sqlite_driver;
#[path = "support/side_by_side.rs"]
mod side_by_side;
#[path = "support/cpu.rs"]
mod cpu;
use side_by_side::{bench_engine, every_call, median, print_accounting, print_runs, print_share_row, print_table, runtime, strobe_run, uftrace, uftrace_run, StrobeRun};
use sqlite_driver::{crate_dir, env_u64, repo, workload_cpu_ns, workload_ns};

const FUNCTIONS: [&str; 2] = ["index_count", "hash_count"];
const UFTRACE_ARGS: [&str; 2] = ["index_count@arg1,arg2", "hash_count@arg1,arg2"];
/// The JavaScript serializer's row runs this share of the iterations.
const JS_SHARE: u64 = 20;

/// The driver, built once (`-fpatchable-function-entry=5`: entry nops uftrace patches).
fn build_nodes_driver() -> PathBuf {
    let dir = repo().join("target").join("bench-real");
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("nodes_drv");
    let src = repo().join("benches/real/nodes_drv.cpp");
    let newer = |a: &Path, b: &Path| a.metadata().and_then(|m| m.modified()).ok() > b.metadata().and_then(|m| m.modified()).ok();
    if !exe.exists() || newer(&src, &exe) {
        let st = Command::new("c++").args(["-g", "-O2", "-fpatchable-function-entry=5", "-o"]).arg(&exe).arg(&src).status().expect("c++");
        assert!(st.success(), "building the node-container driver failed");
    }
    exe
}

fn main() {
    let exe = build_nodes_driver();
    let text = crate_dir("libsqlite3-sys").join("sqlite3").join("sqlite3.c").display().to_string();
    let iterations = env_u64("NODES_BENCH_ITERATIONS", 20_000);
    let args = vec![text.clone(), iterations.to_string()];
    let js_args = vec![text, (iterations / JS_SHARE).to_string()];
    let repeat = env_u64("NODES_BENCH_REPEAT", 3).max(1) as usize;
    let uftrace = uftrace();

    let (untraced, uf, typed, js, words) = runtime().block_on(async {
        let (_home, engine) = bench_engine().await;
        let base = every_call();
        let mut words_only = base.clone();
        words_only["typedValues"] = json!(false);
        let mut serializer = base.clone();
        serializer["nativeCapture"] = json!(false);
        let (mut untraced, mut uf, mut typed, mut js, mut words) = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        // Interleaved, so a slow spell of the shared machine does not land on one row only.
        for i in 0..repeat {
            let out = Command::new(&exe).args(&args).output().expect("run driver");
            let text = String::from_utf8_lossy(&out.stdout);
            untraced.push((workload_ns(&text).expect("workload line"), workload_cpu_ns(&text)));
            if let Some(u) = &uftrace {
                uf.push(uftrace_run(u, &exe, &args, &FUNCTIONS, &UFTRACE_ARGS));
            }
            typed.push(strobe_run(&engine, &exe, &args, &FUNCTIONS, base.clone()).await);
            if i == 0 {
                js.push(strobe_run(&engine, &exe, &js_args, &FUNCTIONS, serializer.clone()).await);
            }
            words.push(strobe_run(&engine, &exe, &args, &FUNCTIONS, words_only.clone()).await);
        }
        (untraced, uf, typed, js, words)
    });

    let base = (median(untraced.iter().map(|r| r.0).collect()), median(untraced.iter().map(|r| r.1).collect()));
    let calls = words.iter().map(|r| (r.stored + r.lost as i64) / 2).max().unwrap_or(0) as f64;
    let uf_med = uftrace.is_some().then(|| (median(uf.iter().map(|r| r.0).collect()), median(uf.iter().map(|r| r.1).collect())));
    println!("C++ node containers (-O2 -g), {iterations} iterations; traced: {}", FUNCTIONS.join(", "));
    println!("traced calls per run: {calls:.0} (Strobe: (stored + lost) / 2)");
    let rows: [(&str, &[StrobeRun]); 2] = [("Strobe typed (native, depth 3)", &typed), ("Strobe integer-only", &words)];
    print_table(base, calls, uf_med, &rows);
    // The serializer's row ran a twentieth of the iterations.
    if let Some(r) = js.first() {
        let uf_per_call = uf_med.map(|u| (u.0 - base.0) / calls);
        print_share_row("Strobe typed, JS serializer", r, base, JS_SHARE as f64, uf_per_call, &format!("{} iterations, native plans {}", iterations / JS_SHARE, r.plans));
    }
    print_runs(&untraced, &uf, &[("typed", &typed), ("int-only", &words), ("js", &js)]);
    print_accounting(&[("typed", &typed), ("int-only", &words)], calls);
    if let Some(s) = typed.first().and_then(|r| r.sample.as_deref()) {
        println!("\na typed enter as stored: {}", &s[..s.len().min(900)]);
    }
}
