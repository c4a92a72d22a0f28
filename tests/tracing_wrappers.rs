//! The replaceFast wrapper path (agent/src/wrappers.ts) against real processes: which
//! functions DWARF makes eligible, wrapped calls recording what attach records (arguments,
//! return values, durations, parent links both ways between wrapped and attached functions,
//! recursion), removal and re-adding, the exit drain, breakpoints and step-out demoting the
//! wrappers, and crash backtraces through a wrapped frame.
//!
//! Run: `cargo test --test tracing_wrappers -- --nocapture`. Fixture: tests/fixtures/c/wrapped.c.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use serde_json::{json, Value};
use strobe::engine::{LaunchRequest, PointRequest, StepAction, WatchTarget};
use strobe::store::{Event, EventType};
use strobe::symbols::{wrapper_abi, DebugInfo, SymbolIndex};

use common::harness::{harness, Harness};

/// Launch `wrapped MODE N` and wait for "ready" (the fixture then waits for a stdin line).
async fn launch(h: &Harness, mode: &str, n: u64, options: Value) -> String {
    let r = h
        .engine
        .launch(LaunchRequest {
            command: common::fixture("wrapped").display().to_string(),
            args: vec![mode.into(), n.to_string()],
            project_root: common::fixtures_src_dir().display().to_string(),
            ..Default::default()
        })
        .await
        .expect("launch wrapped");
    let id = r.session_id;
    wait_for_stdout(h, &id, "ready").await;
    h.engine.configure_tracing(&id, options).await.expect("configure tracing");
    id
}

async fn trace(h: &Harness, id: &str, add: &[&str], remove: &[&str]) {
    let add: Vec<String> = add.iter().map(|p| p.to_string()).collect();
    let remove: Vec<String> = remove.iter().map(|p| p.to_string()).collect();
    let t = h.engine.trace(Some(id), &add, &remove).await.expect("trace");
    assert!(t.warnings.is_empty(), "{t:?}");
}

/// The agent's hook paths: (wrapped function names, attached hook count, why wrappers are off).
async fn hook_paths(h: &Harness, id: &str) -> (BTreeSet<String>, u64, Option<String>) {
    let r = h.engine.configure_tracing(id, json!({})).await.expect("tracing settings");
    let p = &r["hookPaths"];
    let wrapped = p["wrapped"].as_array().expect("hookPaths.wrapped").iter().map(|v| v.as_str().unwrap().to_string()).collect();
    (wrapped, p["attached"].as_u64().unwrap(), p["off"].as_str().map(String::from))
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn query(h: &Harness, id: &str, event_type: EventType) -> Vec<Event> {
    common::events::query_all(&h.engine, id, Some(event_type), None)
}

async fn wait_for_stdout(h: &Harness, id: &str, needle: &str) -> String {
    common::events::wait_for_stdout(&h.engine, id, needle, Duration::from_secs(60)).await
}

async fn wait_for_exit(h: &Harness, id: &str) {
    common::events::wait_for_exit(&h.engine, id).await
}

fn trace_events(h: &Harness, id: &str) -> Vec<Event> {
    common::events::trace_events(&h.engine, id)
}

/// Per event: kind, function, declared arguments, return value, parent's function.
type Content = (EventType, String, Option<String>, Option<String>, Option<String>);

fn content(events: &[Event]) -> Vec<Content> {
    let by_id: HashMap<i64, &Event> = events.iter().map(|e| (e.id, e)).collect();
    let declared = |name: &str| match name {
        "w_leaf" => 2,
        "w_seven" => 7,
        _ => 1,
    };
    events
        .iter()
        .map(|e| {
            let name = e.function_name.clone().unwrap();
            // Raw register words (fast path): the declared ones; typed JSON (JS path): as is.
            let args = e.arguments.as_deref().map(|a| match serde_json::from_str::<Vec<String>>(a) {
                Ok(words) => words.into_iter().take(declared(&name)).collect::<Vec<_>>().join(","),
                Err(_) => serde_json::from_str::<serde_json::Value>(a).map(|v| v.to_string()).unwrap_or_else(|_| a.to_string()),
            });
            let parent = e.parent_event_id.map(|p| by_id[&p].function_name.clone().unwrap());
            (e.event_type, name, args, e.return_value.clone(), parent)
        })
        .collect()
}

#[test]
fn eligibility_follows_the_dwarf_signature() {
    let check = |binary: &str, expect: &[(&str, bool)]| {
        let index = SymbolIndex::load(&common::fixture(binary)).expect("load index");
        let info = DebugInfo::of(&index).expect("debug info");
        for (name, eligible) in expect {
            let qualified = |f: &&strobe::symbols::FunctionInfo| f.name == *name || f.name.ends_with(&format!("::{name}"));
            let f = index.functions.iter().find(qualified).unwrap_or_else(|| panic!("{name} not in {binary}"));
            let sig = info.signature(f.address).unwrap_or_else(|| panic!("{name} has no signature"));
            assert_eq!(wrapper_abi(&info, &sig).is_some(), *eligible, "{binary}: {name} {sig:?}");
        }
    };
    check(
        "wrapped",
        &[
            ("w_leaf", true),
            ("w_mid", true),
            ("w_rec", true),
            ("w_crash", true),       // pointer + long, void result
            ("w_sum", false),        // variadic
            ("w_seven", false),      // a 7th parameter lives on the stack
            ("w_scale", false),      // double parameter and result
            ("w_area", false),       // struct by value
        ],
    );
    check("rust_sample", &[("sample_checksum", false)]); // extern "C", but Rust
    // C++ units: wrapped only once the wrapper frames have unwind info (the "-eh" abi).
    let index = SymbolIndex::load(&common::fixture("cpp_sample")).expect("load index");
    let info = DebugInfo::of(&index).expect("debug info");
    let f = index.functions.iter().find(|f| f.name == "audio_gain" || f.name.ends_with("::audio_gain")).expect("audio_gain");
    assert_eq!(wrapper_abi(&info, &info.signature(f.address).unwrap()), Some("sysv-int-eh"), "extern \"C\" in a C++ unit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrapped_calls_record_what_attach_records() {
    let h = harness();
    let mut runs = Vec::new();
    for wrappers in [true, false] {
        let id = launch(&h, "calls", 0, json!({ "wrappers": wrappers, "hotCallsPerSec": 0, "costShare": 0 })).await;
        // Integer-only functions first (the fast path); typed ones in their own request (the
        // JS path: hooks added together stay on one path, src/engine/watches.rs).
        trace(&h, &id, &["w_leaf", "w_mid", "w_rec", "w_sum", "w_seven"], &[]).await;
        trace(&h, &id, &["w_scale", "w_area"], &[]).await;
        let (wrapped, attached, off) = hook_paths(&h, &id).await;
        if wrappers {
            assert_eq!(wrapped, names(&["w_leaf", "w_mid", "w_rec"]), "eligible fast-path hooks are wrapped");
            // w_seven's 7th parameter (on the stack), w_scale's double (xmm) and w_area's
            // struct (in one register) are captured natively, under attach.
            assert_eq!((attached, off), (4, None), "w_sum, w_seven, w_scale and w_area attach");
        } else {
            assert!(wrapped.is_empty() && attached == 7, "{wrapped:?} {attached}");
        }
        h.engine.send_stdin(&id, b"go\n").await.unwrap();
        assert!(wait_for_stdout(&h, &id, "calls done").await.contains("calls done 156"));
        wait_for_exit(&h, &id).await;
        let events = trace_events(&h, &id);
        for e in events.iter().filter(|e| e.event_type == EventType::FunctionExit) {
            assert!(e.duration_ns.is_some_and(|d| d > 0), "wrappers={wrappers}: {e:?}");
        }
        assert_eq!(h.engine.status(&id).unwrap().events_lost, 0);
        runs.push(content(&events));
    }
    let s = |x: &str| Some(x.to_string());
    let wrapped = &runs[0];
    let calls: Vec<(&str, Option<String>, Option<String>)> = wrapped
        .iter()
        .filter(|c| c.0 == EventType::FunctionEnter)
        .map(|c| (c.1.as_str(), c.2.clone(), c.4.clone()))
        .collect();
    let fast_calls: Vec<_> = calls.iter().filter(|c| !c.0.starts_with("w_scale") && !c.0.starts_with("w_area")).cloned().collect();
    assert_eq!(
        fast_calls,
        vec![
            // Integer-only functions: their words, typed by the daemon (word_shapes.rs).
            ("w_leaf", s(r#"{"a":2,"b":3}"#), None),
            ("w_mid", s(r#"{"x":4}"#), None),
            ("w_leaf", s(r#"{"a":4,"b":7}"#), s("w_mid")),                       // wrapped -> wrapped
            ("w_seven", s(r#"{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":4}"#), s("w_mid")), // wrapped -> attach (7th on the stack)
            ("w_rec", s(r#"{"n":3}"#), None),
            ("w_rec", s(r#"{"n":2}"#), s("w_rec")),                              // recursion
            ("w_rec", s(r#"{"n":1}"#), s("w_rec")),
            ("w_rec", s(r#"{"n":0}"#), s("w_rec")),
            ("w_sum", s("0x3"), None),                                           // variadic: raw words
            ("w_leaf", s(r#"{"a":3,"b":1}"#), s("w_sum")),                       // attach -> wrapped
        ],
        "{wrapped:#?}"
    );
    let returns: Vec<(&str, Option<String>)> =
        wrapped.iter().filter(|c| c.0 == EventType::FunctionExit && c.1 != "w_scale" && c.1 != "w_area").map(|c| (c.1.as_str(), c.3.clone())).collect();
    let hex = |v: u64| s(&format!("\"0x{v:x}\""));
    let int = |v: u64| s(&v.to_string());
    assert_eq!(
        returns,
        vec![
            ("w_leaf", int(23)),
            ("w_leaf", int(47)),
            ("w_seven", int(25)),
            ("w_mid", int(72)),
            ("w_rec", int(0)),
            ("w_rec", int(1)),
            ("w_rec", int(3)),
            ("w_rec", int(6)),
            ("w_leaf", int(31)),
            ("w_sum", hex(37)), // variadic: the raw register
        ]
    );
    assert!(calls.iter().any(|c| c.0 == "w_scale") && calls.iter().any(|c| c.0 == "w_area"), "typed calls traced: {calls:?}");
    assert_eq!(&runs[1], wrapped, "attach records the same content as the wrappers");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrapped_hook_can_be_removed_and_added_again() {
    let h = harness();
    let id = launch(&h, "rounds", 0, json!({})).await;
    trace(&h, &id, &["w_mid", "w_leaf"], &[]).await;
    assert_eq!(hook_paths(&h, &id).await.0, names(&["w_mid", "w_leaf"]));
    h.engine.send_stdin(&id, b"go\n").await.unwrap();
    wait_for_stdout(&h, &id, "round 1 ").await;
    trace(&h, &id, &[], &["w_mid"]).await;
    assert_eq!(hook_paths(&h, &id).await.0, names(&["w_leaf"]), "w_mid reverted");
    h.engine.send_stdin(&id, b"next\n").await.unwrap();
    wait_for_stdout(&h, &id, "round 2 ").await;
    trace(&h, &id, &["w_mid"], &[]).await;
    assert_eq!(hook_paths(&h, &id).await.0, names(&["w_mid", "w_leaf"]), "w_mid wrapped again");
    h.engine.send_stdin(&id, b"next\n").await.unwrap();
    assert!(wait_for_stdout(&h, &id, "round 3 ").await.contains("round 3 61"), "w_mid(3) = 37 + 24");
    h.engine.send_stdin(&id, b"quit\n").await.unwrap();
    wait_for_exit(&h, &id).await;
    let c = content(&trace_events(&h, &id));
    let enters: Vec<(&str, Option<&str>, Option<&str>)> =
        c.iter().filter(|c| c.0 == EventType::FunctionEnter).map(|c| (c.1.as_str(), c.2.as_deref(), c.4.as_deref())).collect();
    assert_eq!(
        enters,
        vec![
            ("w_mid", Some(r#"{"x":1}"#), None),
            ("w_leaf", Some(r#"{"a":1,"b":7}"#), Some("w_mid")),
            ("w_leaf", Some(r#"{"a":2,"b":7}"#), None), // round 2: w_mid not hooked
            ("w_mid", Some(r#"{"x":3}"#), None),
            ("w_leaf", Some(r#"{"a":3,"b":7}"#), Some("w_mid")),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_ending_in_exit_loses_nothing() {
    let h = harness();
    let n = 20_000u64;
    // A ring for every record of the burst (w_seven's typed enters take two slots): what is
    // checked is the drain at exit, not the ring's size.
    let id = launch(&h, "burst", n, json!({ "hotCallsPerSec": 0, "costShare": 0, "drainIntervalMs": 1000, "ringRecords": 1 << 18 })).await;
    trace(&h, &id, &["w_mid", "w_leaf", "w_seven"], &[]).await;
    assert_eq!(hook_paths(&h, &id).await.0, names(&["w_mid", "w_leaf"]));
    h.engine.send_stdin(&id, b"go\n").await.unwrap();
    wait_for_exit(&h, &id).await;
    let st = h.engine.status(&id).unwrap();
    assert_eq!((st.exit_code, st.events_lost), (Some(3), 0), "{st:?}");
    let enters = query(&h, &id, EventType::FunctionEnter).len() as u64;
    let exits = query(&h, &id, EventType::FunctionExit).len() as u64;
    assert_eq!((enters, exits), (3 * n, 3 * n), "w_mid, w_leaf and w_seven, every call, drained at exit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_breakpoint_demotes_wrappers_and_step_out_lands_in_the_caller() {
    let h = harness();
    let id = launch(&h, "calls", 0, json!({})).await;
    trace(&h, &id, &["w_leaf", "w_mid"], &[]).await;
    assert_eq!(hook_paths(&h, &id).await.0, names(&["w_leaf", "w_mid"]));
    let bp = PointRequest { function: Some("w_leaf".into()), hit_count: Some(2), ..Default::default() };
    h.engine.set_points(&id, &[bp], &[]).await.expect("breakpoint");
    let (wrapped, attached, off) = hook_paths(&h, &id).await;
    assert!(wrapped.is_empty() && attached == 2 && off.is_some(), "demoted: {wrapped:?} {attached} {off:?}");
    h.engine.send_stdin(&id, b"go\n").await.unwrap();
    let timeout = Duration::from_secs(30);
    let p = h.engine.wait_for_pause(&id, timeout).await.expect("pause");
    assert_eq!((p.status.as_str(), p.function.as_deref()), ("paused", Some("w_leaf")), "{p:?}");
    let out = h.engine.continue_session(&id, StepAction::parse("step-out").unwrap(), None, timeout).await.expect("step out");
    // Step-out runs the rest of the call's line and stops on the caller's next one.
    let call_line = common::line_of("c/wrapped.c", "WMID_CALLS");
    assert_eq!((out.function.as_deref(), out.line), (Some("w_mid"), Some(call_line + 1)), "{out:?}");
    let done = h.engine.continue_session(&id, StepAction::parse("continue").unwrap(), None, timeout).await.expect("continue");
    assert_eq!(done.status, "exited", "{done:?}");
    h.engine.store().flush();
    assert!(wait_for_stdout(&h, &id, "calls done").await.contains("156"));
    let leaf_calls = query(&h, &id, EventType::FunctionEnter).iter().filter(|e| e.function_name.as_deref() == Some("w_leaf")).count();
    assert_eq!(leaf_calls, 3, "tracing went on through the attach path");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_backtrace_goes_through_wrapped_frames() {
    let h = harness();
    let id = launch(&h, "crash", 0, json!({})).await;
    trace(&h, &id, &["w_crash", "w_crash_caller"], &[]).await;
    assert_eq!(hook_paths(&h, &id).await.0, names(&["w_crash", "w_crash_caller"]));
    h.engine.send_stdin(&id, b"go\n").await.unwrap();
    wait_for_exit(&h, &id).await;
    let crashes = query(&h, &id, EventType::Crash);
    assert_eq!(crashes.len(), 1, "{crashes:?}");
    let bt = crashes[0].backtrace.clone().unwrap_or_default();
    let frames: Vec<Value> = serde_json::from_str(&bt).unwrap_or_default();
    let fns: Vec<&str> = frames.iter().filter_map(|f| f["function"].as_str()).collect();
    let pos = |name: &str| fns.iter().position(|f| *f == name).unwrap_or_else(|| panic!("{name} not in the backtrace {fns:?} ({bt})"));
    assert_eq!(pos("w_crash"), 0, "{fns:?}");
    assert!(pos("w_crash_caller") < pos("main"), "{fns:?}");
}

/// A program that forks only through a library it loads later (dlopen; fixture
/// plugin_host.c): when the library arrives, its fork() import is routed through the fork
/// gate and the wrappers are demoted (a forked child must not return into wrapper code the
/// stale agent copy takes with it), and the child it forks is followed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_library_loaded_later_that_forks_gets_the_fork_gate() {
    let h = harness();
    let r = h
        .engine
        .launch(LaunchRequest {
            command: common::fixture("plugin_host").display().to_string(),
            project_root: common::fixtures_src_dir().display().to_string(),
            ..Default::default()
        })
        .await
        .expect("launch plugin_host");
    let id = r.session_id;
    wait_for_stdout(&h, &id, "ready").await;
    trace(&h, &id, &["host_tick", "host_child_work"], &[]).await;
    let gate = |r: &Value| r["forkGate"]["slots"].as_u64().expect("forkGate.slots");
    let before = h.engine.configure_tracing(&id, json!({})).await.expect("tracing settings");
    assert_eq!(gate(&before), 0, "the program itself does not fork: {before}");
    let (wrapped, _, off) = hook_paths(&h, &id).await;
    assert_eq!(wrapped, names(&["host_child_work", "host_tick"]), "wrapped while nothing forks ({off:?})");

    h.engine.send_stdin(&id, b"go\n").await.expect("stdin");
    wait_for_stdout(&h, &id, "child status 4").await;
    let after = h.engine.configure_tracing(&id, json!({})).await.expect("tracing settings");
    assert!(gate(&after) >= 1, "the plugin's fork() goes through the gate: {after}");
    // The gate held fork() until the host had confirmed every batch sent before it, and the
    // receipts went on arriving after it (forksafe.ts, "Receipts").
    assert_eq!(after["forkGate"]["receiptTimeouts"], 0, "fork() went ahead without the host's receipts: {after}");
    let mut settled = after.clone();
    for _ in 0..100 {
        if settled["forkGate"]["unconfirmed"] == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        settled = h.engine.configure_tracing(&id, json!({})).await.expect("tracing settings");
    }
    assert_eq!(settled["forkGate"]["unconfirmed"], 0, "every batch sent gets a receipt: {settled}");
    assert!(settled["forkGate"]["confirmed"].as_u64().is_some_and(|n| n >= 1), "receipts arrived: {settled}");
    let (wrapped, attached, off) = hook_paths(&h, &id).await;
    assert!(wrapped.is_empty() && attached == 2, "wrappers demoted once a loaded library forks: {wrapped:?} {attached}");
    assert!(off.as_deref().is_some_and(|o| o.contains("library loaded at run time")), "{off:?}");

    let child = trace_events(&h, &id)
        .into_iter()
        .find(|e| e.function_name.as_deref() == Some("host_child_work") && e.event_type == EventType::FunctionEnter)
        .expect("the forked child's call is traced");
    assert!(child.pid.is_some_and(|p| p != r.pid as i64), "the child's own pid: {:?} (root {})", child.pid, r.pid);
    h.engine.send_stdin(&id, b"end\n").await.expect("stdin");
    wait_for_exit(&h, &id).await;
    assert_eq!(h.engine.status(&id).expect("status").exit_code, Some(0));
}

/// Whether this CPU has AVX2 (c_ipa_avx2_O2 is built -mavx2); if not, says why the test is
/// skipped.
fn cpu_has_avx2(why: &str) -> bool {
    let cpu = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let has = cpu.split_whitespace().any(|w| w == "avx2");
    if !has {
        eprintln!("skipped: this CPU has no AVX2, so {why}");
    }
    has
}

/// The same with 256-bit registers (c_ipa_avx2_O2, -O2 -mavx2): vy_mix keeps a vector of four
/// doubles in ymm0 and its factors in ymm3, upper halves included, across calls to vy_step,
/// whose typed hook compares the struct it is passed with the copy it kept. That comparison
/// may run AVX2 code ending in vzeroupper, which zeroes every ymm register's upper half, and
/// the register-saving stub restores only their lower halves: the hook of a function from
/// such a unit compares with SSE2 only. The first call also allocates the thread's hook state
/// with libc's calloc, which the fixture makes clear a reused block with glibc's AVX2 memset
/// (vzeroupper again): the hook keeps the vector state around it (fast_hook.c vec_keep).
/// The traced run computes the untraced run's bits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn optimized_callers_keep_their_256_bit_registers_across_a_typed_wrapped_call() {
    if !cpu_has_avx2("neither the fixture nor the AVX2 comparison runs") {
        return;
    }
    let n = 2000u32;
    let exe = common::fixture("c_ipa_avx2_O2");
    let untraced = {
        use std::io::Write;
        let mut child = std::process::Command::new(&exe).arg(n.to_string()).envs(avx2_libc()).stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).spawn().expect("run c_ipa_avx2_O2");
        child.stdin.take().unwrap().write_all(b"go\nend\n").unwrap();
        let out = String::from_utf8(child.wait_with_output().unwrap().stdout).unwrap();
        out.lines().find(|l| l.starts_with("mix ")).expect("mix line").to_string()
    };
    for wrappers in [true, false] {
        ipa_avx2_run(&exe, n, wrappers, &untraced).await;
    }
}

/// A breakpoint or logpoint cannot keep the upper halves of vector registers (Frida's
/// trampoline saves 128 bits of each), so one in code GCC built for AVX says so: a logpoint on
/// c_ipa_avx2_O2's vy_step warns, one on c_ipa_O2's vx_step (plain x86-64) does not, and one
/// given at launch warns in the launch's answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_point_in_code_built_for_avx_warns_that_vector_registers_may_change() {
    if !cpu_has_avx2("the fixture cannot run") {
        return;
    }
    for (fixture, function, warns) in [("c_ipa_avx2_O2", "vy_step", true), ("c_ipa_O2", "vx_step", false)] {
        let h = harness();
        let r = h
            .engine
            .launch(LaunchRequest { command: common::fixture(fixture).display().to_string(), args: vec!["10".into()], project_root: common::fixtures_src_dir().display().to_string(), ..Default::default() })
            .await
            .expect("launch");
        let id = r.session_id;
        wait_for_stdout(&h, &id, "ready").await;
        let req = PointRequest { function: Some(function.into()), message: Some("step".into()), ..Default::default() };
        let points = h.engine.set_points(&id, &[req], &[]).await.expect("logpoint");
        assert_eq!(points.logpoints.len(), 1, "{points:?}");
        if warns {
            assert_eq!(points.warnings.len(), 1, "{points:?}");
            assert!(points.warnings[0].starts_with(&format!("function '{function}' is in code built for AVX")), "{points:?}");
        } else {
            assert!(points.warnings.is_empty(), "{points:?}");
        }
        h.engine.stop(&id, false).await.expect("stop");
    }
    // The same for one given at launch (staged ones go the same way).
    let h = harness();
    let logpoint = PointRequest { function: Some("vy_step".into()), message: Some("step".into()), ..Default::default() };
    let r = h
        .engine
        .launch(LaunchRequest {
            command: common::fixture("c_ipa_avx2_O2").display().to_string(),
            args: vec!["10".into()],
            project_root: common::fixtures_src_dir().display().to_string(),
            breakpoints: vec![logpoint],
            ..Default::default()
        })
        .await
        .expect("launch with a logpoint");
    assert!(r.warnings.iter().any(|w| w.starts_with("breakpoints[0] (function 'vy_step') is in code built for AVX")), "{:?}", r.warnings);
    h.engine.stop(&r.session_id, false).await.expect("stop");
}

/// A trace on the JS path (a watch on the function, tracing mode "js") runs Frida's
/// trampoline and the JS runtime, which keep only the lower halves of vector registers, so
/// one of a function whose callers may keep 256-bit values across the call (GCC IPA-RA with
/// AVX) says so: vy_step of c_ipa_avx2_O2 warns once a watch moves it to the JS path and when
/// traced in mode "js", not on its native hook; vx_step of c_ipa_O2 (no AVX) never warns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_js_path_trace_of_avx_code_kept_across_calls_warns() {
    let warning = |f: &str| format!("function '{f}' is traced on the JS path");
    let runs_avx2 = cpu_has_avx2("the -mavx2 fixture cannot run");
    for (fixture, function, global, avx) in [("c_ipa_avx2_O2", "vy_step", "vy_steps", true), ("c_ipa_O2", "vx_step", "vx_steps", false)] {
        if avx && !runs_avx2 {
            continue;
        }
        let h = harness();
        let launch = || LaunchRequest { command: common::fixture(fixture).display().to_string(), args: vec!["10".into()], project_root: common::fixtures_src_dir().display().to_string(), ..Default::default() };
        let id = h.engine.launch(launch()).await.expect("launch").session_id;
        wait_for_stdout(&h, &id, "ready").await;
        // The native hook: no warning.
        let t = h.engine.trace(Some(&id), &[function.to_string()], &[]).await.expect("trace");
        assert!(t.warnings.is_empty(), "{fixture}: {t:?}");
        // A watch on it moves it to the JS path: the warning comes with the watch.
        let watch = WatchTarget { variable: Some(global.into()), on: vec![function.into()], ..Default::default() };
        h.engine.update_watches(&id, vec![watch], &[]).await.expect("watch");
        let after_watch = h.engine.take_hook_warnings(&id);
        assert_eq!(after_watch.iter().filter(|w| w.starts_with(&warning(function))).count(), usize::from(avx), "{fixture}: {after_watch:?}");
        assert!(h.engine.take_hook_warnings(&id).is_empty(), "each warning is reported once");
        h.engine.stop(&id, false).await.expect("stop");

        // Tracing mode "js": the warning comes with the trace.
        let id = h.engine.launch(launch()).await.expect("launch").session_id;
        wait_for_stdout(&h, &id, "ready").await;
        h.engine.configure_tracing(&id, json!({ "mode": "js" })).await.expect("mode js");
        let t = h.engine.trace(Some(&id), &[function.to_string()], &[]).await.expect("trace");
        assert_eq!(t.warnings.iter().filter(|w| w.starts_with(&warning(function))).count(), usize::from(avx), "{fixture}: {t:?}");
        h.engine.stop(&id, false).await.expect("stop");
    }
}

/// glibc's string functions in their AVX2 forms, which end in vzeroupper, even on a CPU with
/// AVX-512, where glibc would pick forms that use only ymm16-31 and leave ymm0-15 alone.
fn avx2_libc() -> Vec<(String, String)> {
    vec![("GLIBC_TUNABLES".into(), "glibc.cpu.hwcaps=-AVX512F,-AVX512VL".into())]
}

/// One traced run of c_ipa_avx2_O2: vy_step wrapped (behind the register-saving stub) or
/// attached (Frida's trampoline), its result against the untraced run's.
async fn ipa_avx2_run(exe: &std::path::Path, n: u32, wrappers: bool, untraced: &str) {
    let h = harness();
    let r = h
        .engine
        .launch(LaunchRequest { command: exe.display().to_string(), args: vec![n.to_string()], project_root: common::fixtures_src_dir().display().to_string(), env: avx2_libc(), ..Default::default() })
        .await
        .expect("launch c_ipa_avx2_O2");
    let id = r.session_id;
    wait_for_stdout(&h, &id, "ready").await;
    h.engine.configure_tracing(&id, json!({ "hotCallsPerSec": 0, "costShare": 0, "wrappers": wrappers })).await.expect("configure tracing");
    trace(&h, &id, &["vy_step"], &[]).await;
    let (wrapped, _, off) = hook_paths(&h, &id).await;
    assert_eq!(wrapped, if wrappers { names(&["vy_step"]) } else { names(&[]) }, "wrappers {wrappers}: {off:?}");
    h.engine.send_stdin(&id, b"go\n").await.expect("stdin");
    let line = wait_for_stdout(&h, &id, "mix ").await;
    let settings = h.engine.configure_tracing(&id, json!({})).await.expect("settings");
    assert_eq!(line.trim(), untraced, "the traced run's result (wrappers {wrappers})");
    // The comparison ran: the struct was kept and compared call after call (deltas), on a
    // CPU where other hooks use the AVX2 loop.
    let capture = &settings["capture"];
    assert_eq!(capture["avx2"], json!(true), "{capture}");
    assert!(capture["walksDelta"].as_u64().unwrap_or(0) + capture["walksUnchanged"].as_u64().unwrap_or(0) >= u64::from(n) / 2, "{capture}");
    h.engine.send_stdin(&id, b"end\n").await.expect("stdin");
    wait_for_exit(&h, &id).await;
    let enters = query(&h, &id, EventType::FunctionEnter);
    assert_eq!(enters.len(), n as usize, "every call recorded");
    let last = enters.last().and_then(|e| e.arguments.clone()).unwrap_or_default();
    assert!(last.contains("\"name\":\"block\""), "the struct printed: {last}");
}

/// Code GCC optimized (c_ipa_O2, -O2): vx_mix keeps a double in xmm0, its factor in xmm2 and
/// its loop registers in ecx/edx across calls to vx_step, since GCC knows vx_step leaves them
/// alone (IPA-RA). vx_step is still wrapped (abi `sysv-int-saved`), through a stub that saves
/// every caller-saved register: the traced run computes the untraced run's bits exactly.
/// Without the stub's saves the result changes or the loop runs away (checked by removing them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn optimized_callers_keep_their_registers_across_a_wrapped_call() {
    let n = 2000u32;
    let mut acc = 0.5f64;
    for i in 0..n {
        acc = acc * 1.000001 + f64::from(i * 3 + 1);
    }
    let index = SymbolIndex::load(&common::fixture("c_ipa_O2")).expect("load index");
    let info = DebugInfo::of(&index).expect("debug info");
    let f = index.functions.iter().find(|f| f.name == "vx_step").expect("vx_step");
    let sig = info.signature(f.address).expect("signature");
    assert_eq!(wrapper_abi(&info, &sig), Some("sysv-int-saved"), "{sig:?}");

    let h = harness();
    let r = h
        .engine
        .launch(LaunchRequest {
            command: common::fixture("c_ipa_O2").display().to_string(),
            args: vec![n.to_string()],
            project_root: common::fixtures_src_dir().display().to_string(),
            ..Default::default()
        })
        .await
        .expect("launch c_ipa_O2");
    let id = r.session_id;
    wait_for_stdout(&h, &id, "ready").await;
    h.engine.configure_tracing(&id, json!({ "hotCallsPerSec": 0, "costShare": 0 })).await.expect("configure tracing");
    trace(&h, &id, &["vx_step"], &[]).await;
    let (wrapped, _, off) = hook_paths(&h, &id).await;
    assert_eq!(wrapped, names(&["vx_step"]), "wrappers off: {off:?}");
    h.engine.send_stdin(&id, b"go\n").await.expect("stdin");
    let line = wait_for_stdout(&h, &id, "mix ").await;
    assert_eq!(line.trim(), format!("mix {:016x}", acc.to_bits()), "the traced run's result");
    wait_for_exit(&h, &id).await;
    let exits = query(&h, &id, EventType::FunctionExit);
    assert_eq!(exits.len(), n as usize, "every call recorded");
    assert_eq!(exits.last().and_then(|e| e.return_value.clone()).as_deref(), Some(((n - 1) * 3 + 1).to_string().as_str()));
}

/// A C++ exception thrown by a traced function, or crossing one on its way to a `catch`
/// (through a frame with a destructor to run, and rethrown from a catch block), lands where
/// it does untraced, with the caller's registers intact (-O2 keeps the loop's totals in
/// callee-saved registers across the throws), on every hook path: wrapped C++ functions
/// (the program's unwinder knows the wrapper frames: agent/src/wrapper_unwind.ts) and
/// attached ones, native or JavaScript (the real return addresses are put back while the
/// exception unwinds: agent/src/unwinding.ts). Before, the first throw through a traced
/// function aborted the process ("terminate called after throwing …").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cxx_exceptions_cross_traced_frames() {
    let h = harness();
    // -O2 moves calls into the first 16 bytes of ex_through and ex_rethrow, which replaceFast
    // relocates into its trampoline: those attach, and the exception crosses Frida's leave
    // trampoline (agent/src/unwinding.ts).
    // Then every function on Interceptor.attach (native hooks, then JavaScript ones): the
    // exception crosses Frida's leave trampolines, and a catching function (ex_sum) returns
    // through its own.
    let all = ["ex_check", "ex_through", "ex_sum", "ex_rethrow"];
    let cases = [
        ("cpp_exceptions", json!({}), &all[..]),
        ("cpp_exceptions_O2", json!({}), &["ex_check", "ex_sum"][..]),
        ("cpp_exceptions", json!({ "wrappers": false }), &[][..]),
        ("cpp_exceptions_O2", json!({ "mode": "js" }), &[][..]),
    ];
    for (binary, options, wrapped_ones) in cases {
        let functions = &all[..];
        let expected = untraced_total(binary, &["100", "3"]);

        let id = launch_fixture(&h, binary, &["100", "3"]).await;
        h.engine.configure_tracing(&id, options.clone()).await.expect("tracing options");
        trace(&h, &id, functions, &[]).await;
        let (wrapped, _, _) = hook_paths(&h, &id).await;
        let settings = h.engine.configure_tracing(&id, json!({})).await.expect("tracing settings");
        assert_eq!(wrapped, names(wrapped_ones), "{binary} {options}: wrapped ({})", settings["hookPaths"]);
        assert_eq!(settings["hookPaths"]["unwind"]["unwinder"], json!(!wrapped_ones.is_empty()), "{}", settings["hookPaths"]);
        assert_eq!(settings["hookPaths"]["unwinding"]["hooked"], json!(true), "{}", settings["hookPaths"]);
        h.engine.send_stdin(&id, b"go\n").await.unwrap();
        wait_for_exit(&h, &id).await;
        assert!(query(&h, &id, EventType::Crash).is_empty(), "{binary} {options}: {:?}", query(&h, &id, EventType::Crash));
        let out = wait_for_stdout(&h, &id, "total ").await;
        assert!(out.contains(&expected), "{binary} {options}: traced {out:?}, untraced {expected:?}");
        // 3 rounds of 100 ex_sum → ex_through → ex_check calls and 100 ex_rethrow → ex_check.
        let enters = query(&h, &id, EventType::FunctionEnter);
        let count = |f: &str| enters.iter().filter(|e| e.function_name.as_deref() == Some(f)).count();
        assert_eq!((count("ex_sum"), count("ex_through"), count("ex_check"), count("ex_rethrow")), (3, 300, 600, 300), "{binary} {options}");
        // A frame the exception unwound left no exit: the calls after it still get their real
        // caller as parent (fast_hook.c strobe_call_push drops frames below the new call's
        // stack pointer), never the ex_check that threw — which calls nothing traced.
        let events = trace_events(&h, &id);
        let by_id: HashMap<i64, &Event> = events.iter().map(|e| (e.id, e)).collect();
        let parent_of = |e: &Event| e.parent_event_id.map(|p| by_id[&p].function_name.clone().unwrap_or_default());
        let wrong: Vec<_> = enters.iter().filter(|e| parent_of(e).as_deref() == Some("ex_check")).map(|e| (e.function_name.clone(), e.arguments.clone())).collect();
        assert!(wrong.is_empty(), "{binary}: calls whose parent is an ex_check that threw: {wrong:?}");
        let through_parents: BTreeSet<Option<String>> = enters.iter().filter(|e| e.function_name.as_deref() == Some("ex_through")).map(parent_of).collect();
        assert!(through_parents.iter().all(|p| p.as_deref() == Some("ex_sum")), "{binary}: {through_parents:?}");
        assert_unwound_exits(&events, "ex_check", |x| x % 7 == 3, &format!("{binary} {options}"));
        // 3 rounds of 14 throws from ex_sum's ex_through and 14 from ex_rethrow, each
        // leaving ex_check and the frame above it.
        let exits = query(&h, &id, EventType::FunctionExit);
        let unwound = |f: &str| exits.iter().filter(|e| e.function_name.as_deref() == Some(f) && e.unwound == Some(true)).count();
        assert_eq!((unwound("ex_sum"), unwound("ex_through"), unwound("ex_check"), unwound("ex_rethrow")), (0, 42, 84, 42), "{binary} {options}");
    }
    // The -O2 functions with an early call attach, and say why.
    let id = launch_fixture(&h, "cpp_exceptions_O2", &["1", "1"]).await;
    trace(&h, &id, &["ex_through", "ex_rethrow"], &[]).await;
    let settings = h.engine.configure_tracing(&id, json!({})).await.expect("tracing settings");
    let paths = &settings["hookPaths"];
    assert_eq!((paths["wrapped"].as_array().map(Vec::len), paths["attached"].as_u64()), (Some(0), Some(2)), "{paths}");
    let reasons: Vec<&str> = paths["fallbacks"].as_array().unwrap().iter().filter_map(|f| f["error"].as_str()).collect();
    assert!(reasons.len() == 2 && reasons.iter().all(|r| r.contains("a call within its first 16 bytes")), "{paths}");
    h.engine.stop(&id, false).await.ok();
}

/// Rust panics caught by catch_unwind (as a test harness catches a failing test's) unwind
/// through traced Rust functions — which attach — the same way (agent/src/unwinding.ts):
/// traced, the program prints what it prints untraced, every call recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_panics_cross_traced_frames() {
    let h = harness();
    let functions = ["panics::rp_check", "panics::rp_through", "panics::rp_sum"];
    let expected = untraced_total("rust_panics", &["40"]);
    for options in [json!({}), json!({ "mode": "js" })] {
        let id = launch_fixture(&h, "rust_panics", &["40"]).await;
        h.engine.configure_tracing(&id, options.clone()).await.expect("tracing options");
        trace(&h, &id, &functions, &[]).await;
        let settings = h.engine.configure_tracing(&id, json!({})).await.expect("tracing settings");
        assert_eq!(settings["hookPaths"]["unwinding"]["hooked"], json!(true), "{options}: {settings}");
        assert_eq!(settings["hookPaths"]["unwinding"]["panicHook"], json!(true), "{options}: {settings}");
        h.engine.send_stdin(&id, b"go\n").await.unwrap();
        wait_for_exit(&h, &id).await;
        assert!(query(&h, &id, EventType::Crash).is_empty(), "{options}: {:?} {:?}", query(&h, &id, EventType::Stderr).iter().map(|e| e.text.clone()).collect::<Vec<_>>(), query(&h, &id, EventType::Crash).iter().map(|e| (e.text.clone(), e.backtrace.clone())).collect::<Vec<_>>());
        let out = wait_for_stdout(&h, &id, "total ").await;
        assert!(out.contains(&expected), "{options}: traced {out:?}, untraced {expected:?}");
        let enters = query(&h, &id, EventType::FunctionEnter);
        let count = |f: &str| enters.iter().filter(|e| e.function_name.as_deref() == Some(f)).count();
        assert_eq!((count("panics::rp_sum"), count("panics::rp_through"), count("panics::rp_check")), (2, 80, 80), "{options}");
        assert_unwound_exits(&trace_events(&h, &id), "panics::rp_check", |x| x % 7 == 3, &options.to_string());
    }
}

/// Calls a longjmp leaves (lj_leaf jumps back to lj_run's setjmp through lj_mid) get exits
/// marked unwound, without a return value, on the wrapper, attach and JavaScript paths; the
/// calls after a jump get lj_run as their parent, not the lj_mid the jump left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn longjmp_leaves_unwound_exits() {
    let h = harness();
    let expected = untraced_total("c_longjmp", &["50"]);
    for options in every_hook_path() {
        let events = run_traced_to_end(&h, "c_longjmp", &["50"], &options, &["lj_leaf", "lj_mid", "lj_run"], &expected).await;
        assert_unwound_exits(&events, "lj_leaf", |x| x % 5 == 2, &options.to_string());
        assert_eq!(callers_of(&events, "lj_mid"), BTreeSet::from([Some("lj_run".to_string())]), "{options}");
        let unwound = events.iter().filter(|e| e.unwound == Some(true)).count();
        assert_eq!(unwound, 20, "{options}: 10 jumps, each leaving lj_leaf and lj_mid");
    }
}

/// A traced function's sibling call (-O2: tc_mid ends in a jump to tc_leaf) on every hook
/// path: tc_leaf enters with the stack pointer tc_mid entered with, yet tc_mid did not end
/// there: every call gets one exit, none unwound, with its return value, and tc_leaf's
/// parent is tc_mid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sibling_calls_are_not_unwound() {
    let h = harness();
    for options in every_hook_path() {
        let events = run_traced_to_end(&h, "c_tailcall_O2", &["20"], &options, &["tc_leaf", "tc_mid"], "total 650").await;
        assert_unwound_exits(&events, "tc_leaf", |_| false, &options.to_string());
        let exits: Vec<_> = events.iter().filter(|e| e.event_type == EventType::FunctionExit).collect();
        assert_eq!(exits.len(), 40, "{options}");
        assert!(exits.iter().all(|e| e.unwound.is_none() && e.return_value.is_some()), "{options}: {exits:?}");
        assert_eq!(callers_of(&events, "tc_leaf"), BTreeSet::from([Some("tc_mid".to_string())]), "{options}");
    }
}

/// A C++ exception thrown through a sibling call between traced functions (-O2: st_mid ends
/// in a jump to st_leaf, which throws): on the attach path both frames share one
/// return-address slot, which holds st_mid's leave trampoline when st_leaf enters. The
/// program prints what it prints untraced, every call has its exit, the throwing ones
/// unwound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exceptions_through_sibling_calls() {
    let h = harness();
    let expected = untraced_total("cpp_sibling_throw_O2", &["40"]);
    for options in every_hook_path() {
        let events = run_traced_to_end(&h, "cpp_sibling_throw_O2", &["40"], &options, &["st_leaf", "st_mid"], &expected).await;
        assert_unwound_exits(&events, "st_leaf", |x| x % 4 == 1, &options.to_string());
    }
}

/// Tracing options that put the traced functions on each hook path: wrapped where they can
/// be, all attached natively, all on the JavaScript path.
fn every_hook_path() -> [Value; 3] {
    [json!({}), json!({ "wrappers": false }), json!({ "mode": "js" })]
}

/// Launch a fixture (`launch_fixture`), set `options`, trace `functions`, send "go" and wait
/// for its end: no crash, its output holds `expected`; the trace events.
async fn run_traced_to_end(h: &Harness, binary: &str, args: &[&str], options: &Value, functions: &[&str], expected: &str) -> Vec<Event> {
    let id = launch_fixture(h, binary, args).await;
    h.engine.configure_tracing(&id, options.clone()).await.expect("tracing options");
    trace(h, &id, functions, &[]).await;
    h.engine.send_stdin(&id, b"go\n").await.unwrap();
    wait_for_exit(h, &id).await;
    let crashes: Vec<_> = query(h, &id, EventType::Crash).iter().map(|e| e.text.clone()).collect();
    assert!(crashes.is_empty(), "{binary} {options}: {crashes:?}");
    let out = wait_for_stdout(h, &id, "total ").await;
    assert!(out.contains(expected), "{binary} {options}: traced {out:?}, expected {expected:?}");
    trace_events(h, &id)
}

/// The functions of the parent events of `name`'s enters (None: no parent).
fn callers_of(events: &[Event], name: &str) -> BTreeSet<Option<String>> {
    let by_id: HashMap<i64, &Event> = events.iter().map(|e| (e.id, e)).collect();
    events
        .iter()
        .filter(|e| e.event_type == EventType::FunctionEnter && e.function_name.as_deref() == Some(name))
        .map(|e| e.parent_event_id.map(|p| by_id[&p].function_name.clone().unwrap_or_default()))
        .collect()
}

/// Replays one thread's enters and exits as a call stack: every exit is the innermost open
/// call's, every call has one, and `thrower`'s exits are marked unwound (no return value)
/// exactly when its first argument makes it throw; a caller an exception crossed is unwound
/// too, one that caught it returns.
fn assert_unwound_exits(events: &[Event], thrower: &str, throws: impl Fn(i64) -> bool, what: &str) {
    let mut stack: Vec<(String, bool)> = Vec::new(); // (function, a callee was unwound)
    let mut checked = 0;
    for e in events {
        let name = e.function_name.clone().unwrap_or_default();
        match e.event_type {
            EventType::FunctionEnter => {
                let args = e.arguments.clone().unwrap_or_default();
                let x: i64 = args.trim_matches(|c: char| !c.is_ascii_digit() && c != '-').split(|c: char| !c.is_ascii_digit() && c != '-').next().and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{what}: {name} args {args}"));
                stack.push((if name == thrower { format!("{name} {}", throws(x)) } else { name }, false));
            }
            EventType::FunctionExit => {
                let (top, callee_unwound) = stack.pop().unwrap_or_else(|| panic!("{what}: exit of {name} with no open call"));
                assert!(top.starts_with(&name), "{what}: exit of {name}, innermost open call {top}");
                let unwound = e.unwound == Some(true);
                assert_eq!(unwound, e.return_value.is_none(), "{what}: {name} unwound {unwound}, returned {:?}", e.return_value);
                if name == thrower {
                    assert_eq!(unwound, top.ends_with("true"), "{what}: {top} exit unwound {unwound}");
                    checked += 1;
                } else if unwound {
                    assert!(callee_unwound, "{what}: {name} unwound though no callee was");
                }
                if let Some(parent) = stack.last_mut() {
                    parent.1 |= unwound;
                }
            }
            _ => {}
        }
    }
    assert!(stack.is_empty(), "{what}: calls without an exit: {stack:?}");
    assert!(checked > 0, "{what}: no exit of {thrower}");
}

/// The "total …" line a fixture ends with, run untraced.
fn untraced_total(binary: &str, args: &[&str]) -> String {
    let line = untraced_last_line(binary, args);
    assert!(line.starts_with("total "), "{binary} untraced: {line:?}");
    line
}

/// The last line a fixture prints run untraced, given "go" on stdin.
fn untraced_last_line(binary: &str, args: &[&str]) -> String {
    let out = std::process::Command::new(common::fixture(binary))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(b"go\n")?;
            child.wait_with_output()
        })
        .expect("run untraced");
    String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or_default().to_string()
}

/// Launch a fixture that prints "ready" and waits for a stdin line.
async fn launch_fixture(h: &Harness, binary: &str, args: &[&str]) -> String {
    let r = h
        .engine
        .launch(LaunchRequest {
            command: common::fixture(binary).display().to_string(),
            args: args.iter().map(|a| a.to_string()).collect(),
            project_root: common::fixtures_src_dir().display().to_string(),
            ..Default::default()
        })
        .await
        .expect("launch");
    wait_for_stdout(h, &r.session_id, "ready").await;
    r.session_id
}
