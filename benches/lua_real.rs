//! Typed tracing on a real interpreter nobody here wrote (issue 18's first finding): Lua 5.4,
//! from the sources bundled in the `lua-src` crate (mlua's vendored Lua), built `-g -O2` as
//! distributions build it, with a small driver (benches/real/lua_drv.c) whose loop makes
//! table lookups. Traced: the two lookup functions, each taking two struct pointers —
//! luaH_getshortstr(Table *, TString *) and luaH_get(Table *, const TValue *) — side by side in
//! one run: untraced, uftrace with `-A`/`-R`, Strobe with typed arguments at the default depth
//! (native capture; `-O2` code takes Interceptor.attach, symbols/abi.rs), the same through the
//! JavaScript serializer (`nativeCapture: false`: what every `-O2` program got before native
//! capture served GCC's IPA-RA units; fewer iterations, it is slow), Strobe integer-only, and
//! typed with the default sampling. ns per traced call = (traced − untraced) ÷ traced calls.
//!
//! `cargo bench --bench lua_real` (env: `LUA_BENCH_ITERATIONS`, default 20,000, three traced
//! calls each; `LUA_BENCH_REPEAT`, runs of each row, default 3, medians reported). uftrace
//! (Debian package) is installed with apt-get when missing and this runs as root.

use std::process::Command;

use serde_json::json;

#[path = "support/session.rs"]
mod session;
#[path = "support/sqlite_driver.rs"]
mod sqlite_driver;
#[path = "support/lua_driver.rs"]
mod lua_driver;
#[path = "support/side_by_side.rs"]
mod side_by_side;
#[path = "support/cpu.rs"]
mod cpu;
use lua_driver::build_lua_driver;
use side_by_side::{bench_engine, every_call, median, print_accounting, print_runs, print_share_row, print_table, runtime, strobe_run, uftrace, uftrace_run, StrobeRun};
use sqlite_driver::{env_u64, workload_cpu_ns, workload_ns};

const FUNCTIONS: [&str; 2] = ["luaH_getshortstr", "luaH_get"];
const UFTRACE_ARGS: [&str; 2] = ["luaH_getshortstr@arg1,arg2", "luaH_get@arg1,arg2"];
/// The JavaScript serializer's row runs this share of the iterations.
const JS_SHARE: u64 = 10;

fn main() {
    let exe = build_lua_driver();
    let iterations = env_u64("LUA_BENCH_ITERATIONS", 20_000);
    let args = vec![iterations.to_string()];
    let js_args = vec![(iterations / JS_SHARE).to_string()];
    let repeat = env_u64("LUA_BENCH_REPEAT", 3).max(1) as usize;
    let uftrace = uftrace();

    let (untraced, uf, typed, js, words, typed_default) = runtime().block_on(async {
        let (_home, engine) = bench_engine().await;
        let base = every_call();
        let mut words_only = base.clone();
        words_only["typedValues"] = json!(false);
        let mut serializer = base.clone();
        serializer["nativeCapture"] = json!(false);
        let defaults = json!({ "ringRecords": 1 << 20 });
        let (mut untraced, mut uf, mut typed, mut js, mut words, mut typed_default) = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
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
            typed_default.push(strobe_run(&engine, &exe, &args, &FUNCTIONS, defaults.clone()).await);
        }
        (untraced, uf, typed, js, words, typed_default)
    });

    let base = (median(untraced.iter().map(|r| r.0).collect()), median(untraced.iter().map(|r| r.1).collect()));
    let calls = words.iter().map(|r| (r.stored + r.lost as i64) / 2).max().unwrap_or(0) as f64;
    let uf_calls = uf.first().map(|r| r.2).unwrap_or(0);
    let uf_med = uftrace.is_some().then(|| (median(uf.iter().map(|r| r.0).collect()), median(uf.iter().map(|r| r.1).collect())));
    println!("Lua 5.4 (-O2 -g), {iterations} iterations; traced: {}", FUNCTIONS.join(", "));
    println!("traced calls per run: {calls:.0} (Strobe: (stored + lost) / 2); uftrace counted {uf_calls} (the whole run)");
    let rows: [(&str, &[StrobeRun]); 3] = [("Strobe typed (native, depth 3)", &typed), ("Strobe integer-only", &words), ("Strobe typed, default sampling", &typed_default)];
    print_table(base, calls, uf_med, &rows);
    // The serializer's row ran a tenth of the iterations.
    if let Some(r) = js.first() {
        let uf_per_call = uf_med.map(|u| (u.0 - base.0) / calls);
        print_share_row("Strobe typed, JS serializer", r, base, JS_SHARE as f64, uf_per_call, &format!("{} iterations", iterations / JS_SHARE));
    }
    print_runs(&untraced, &uf, &[("typed", &typed), ("int-only", &words), ("t-default", &typed_default), ("js", &js)]);
    print_accounting(&[("typed", &typed), ("int-only", &words)], calls);
    if let Some(s) = typed.first().and_then(|r| r.sample.as_deref()) {
        println!("\na typed enter as stored: {}", &s[..s.len().min(900)]);
    }
}
