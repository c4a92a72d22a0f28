//! Typed tracing of a real Rust program nobody here wrote (issue 18): serde_json parsing a
//! JSON document (benches/real/serde_drv.rs, a debug build), tracing two of its functions that
//! take the parser by reference on every byte consumed — `Deserializer<StrRead>::eat_char(&mut
//! self)` and `<StrRead as Read>::discard(&mut self)` — whose typed arguments reach the input
//! as a `&[u8]` (100 elements printed) and a `&str` (1,024 bytes), and the scratch `Vec<u8>`.
//! Rows, interleaved: untraced; Strobe typed, native capture (capture_plan.rs); Strobe typed
//! through the JavaScript serializer (what Rust functions got before; a tenth of the
//! iterations); Strobe integer-only. uftrace has no row: it patches functions built with
//! patchable entries or mcount calls, which stable rustc does not emit.
//!
//! `cargo bench --bench rust_real` (env: `RUST_BENCH_ITERATIONS`, default 20 parses;
//! `RUST_BENCH_REPEAT`, default 3, medians reported).

use std::process::Command;

use serde_json::json;

#[path = "support/session.rs"]
mod session;
#[path = "support/sqlite_driver.rs"]
mod sqlite_driver;
#[path = "support/serde_driver.rs"]
mod serde_driver;
#[path = "support/side_by_side.rs"]
mod side_by_side;
#[path = "support/cpu.rs"]
mod cpu;
use serde_driver::build_serde_driver;
use side_by_side::{bench_engine, every_call, median, print_accounting, print_runs, print_share_row, print_table, runtime, strobe_run, StrobeRun};
use sqlite_driver::{env_u64, workload_cpu_ns, workload_ns};

const FUNCTIONS: [&str; 2] = ["serde_json::de::Deserializer<*>::eat_char", "<serde_json::read::StrRead as serde_json::read::Read>::discard"];
/// The JavaScript serializer's row runs this share of the iterations.
const JS_SHARE: u64 = 10;

fn main() {
    let exe = build_serde_driver();
    let iterations = env_u64("RUST_BENCH_ITERATIONS", 20);
    let args = vec![iterations.to_string()];
    let js_args = vec![(iterations / JS_SHARE).max(1).to_string()];
    let repeat = env_u64("RUST_BENCH_REPEAT", 3).max(1) as usize;

    let (untraced, typed, js, words) = runtime().block_on(async {
        let (_home, engine) = bench_engine().await;
        let base = every_call();
        let mut words_only = base.clone();
        words_only["typedValues"] = json!(false);
        let mut serializer = base.clone();
        serializer["nativeCapture"] = json!(false);
        let (mut untraced, mut typed, mut js, mut words) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for i in 0..repeat {
            let out = Command::new(&exe).args(&args).output().expect("run driver");
            let text = String::from_utf8_lossy(&out.stdout);
            untraced.push((workload_ns(&text).expect("workload line"), workload_cpu_ns(&text)));
            typed.push(strobe_run(&engine, &exe, &args, &FUNCTIONS, base.clone()).await);
            if i == 0 {
                js.push(strobe_run(&engine, &exe, &js_args, &FUNCTIONS, serializer.clone()).await);
            }
            words.push(strobe_run(&engine, &exe, &args, &FUNCTIONS, words_only.clone()).await);
        }
        (untraced, typed, js, words)
    });

    let base = (median(untraced.iter().map(|r| r.0).collect()), median(untraced.iter().map(|r| r.1).collect()));
    let calls = words.iter().map(|r| (r.stored + r.lost as i64) / 2).max().unwrap_or(0) as f64;
    println!("serde_json (debug build), {iterations} parses of a 200-object document; traced: {}", FUNCTIONS.join(", "));
    println!("traced calls per run: {calls:.0} (Strobe: (stored + lost) / 2)");
    let rows: [(&str, &[StrobeRun]); 2] = [("Strobe typed (native, depth 3)", &typed), ("Strobe integer-only", &words)];
    print_table(base, calls, None, &rows);
    if let Some(r) = js.first() {
        let share = iterations as f64 / (iterations / JS_SHARE).max(1) as f64;
        print_share_row("Strobe typed, JS serializer", r, base, share, None, &format!("{} parses", (iterations / JS_SHARE).max(1)));
    }
    print_runs(&untraced, &[], &[("typed", &typed), ("int-only", &words), ("js", &js)]);
    print_accounting(&[("typed", &typed), ("int-only", &words)], calls);
    if let Some(s) = typed.first().and_then(|r| r.sample.as_deref()) {
        println!("\na typed enter as stored: {}", &s[..s.len().min(900)]);
    }
}
