//! The tracing fast path against real processes: CModule hooks writing binary records, the
//! Rust decoder, exit drain, counted losses, hot-function sampling; and a re-attached agent
//! keeping the session's recipes, watches and depth.
//!
//! Run: `cargo test --test tracing_fastpath -- --nocapture`. Fixtures: tests/fixtures/c/hotloop.c,
//! tests/fixtures/c/types.c (the re-attach).

mod common;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use strobe::engine::sampling::SamplingRequest;
use strobe::engine::{LaunchRequest, PointRequest};
use strobe::store::{Event, EventQuery, EventType};

use common::harness::{harness, Harness};

/// Launch `hotloop MODE N wait`, wait for "ready", apply tracing options and patterns, and
/// send "go". Returns the session id.
async fn start(h: &Harness, mode: &str, n: u64, options: Value, patterns: &[&str]) -> String {
    let r = h
        .engine
        .launch(LaunchRequest {
            command: common::fixture("hotloop").display().to_string(),
            args: vec![mode.into(), n.to_string(), "wait".into()],
            project_root: common::fixtures_src_dir().display().to_string(),
            ..Default::default()
        })
        .await
        .expect("launch hotloop");
    let id = r.session_id;
    h.engine.store().set_max_events_per_session(&id, 50_000_000);
    wait_for_stdout(h, &id, "ready", Duration::from_secs(30)).await;
    h.engine.configure_tracing(&id, options).await.expect("configure tracing");
    let patterns: Vec<String> = patterns.iter().map(|p| p.to_string()).collect();
    let t = h.engine.trace(Some(&id), &patterns, &[]).await.expect("trace");
    assert!(t.hooked_functions >= 1, "hooked: {t:?}");
    h.engine.send_stdin(&id, b"go\n").await.expect("stdin");
    id
}

/// Launch `c_types ROUNDS INTERVAL_MS` and wait for its first line. Returns the session id.
async fn start_types(h: &Harness, rounds: u32, interval_ms: u32) -> String {
    let r = h
        .engine
        .launch(LaunchRequest {
            command: common::fixture("c_types").display().to_string(),
            args: vec![rounds.to_string(), interval_ms.to_string()],
            project_root: common::fixtures_src_dir().display().to_string(),
            ..Default::default()
        })
        .await
        .expect("launch c_types");
    wait_for_stdout(h, &r.session_id, "types start", Duration::from_secs(30)).await;
    r.session_id
}

fn query(h: &Harness, id: &str, event_type: Option<EventType>, after: Option<i64>) -> Vec<Event> {
    common::events::query_all(&h.engine, id, event_type, after)
}

/// Up to 500 enter events (after the cursor).
fn first_page(h: &Harness, id: &str, after: Option<i64>) -> Vec<Event> {
    let q = EventQuery { session_id: id.into(), event_type: Some(EventType::FunctionEnter), after_event_id: after, limit: 500, ..Default::default() };
    h.engine.query(&q).expect("query").events
}

async fn wait_for_stdout(h: &Harness, id: &str, needle: &str, timeout: Duration) -> String {
    common::events::wait_for_stdout(&h.engine, id, needle, timeout).await
}

async fn wait_for_exit(h: &Harness, id: &str) {
    common::events::wait_for_exit(&h.engine, id).await
}

fn trace_events(h: &Harness, id: &str) -> Vec<Event> {
    common::events::trace_events(&h.engine, id)
}

/// What must be equal between the JS and the fast path: kind, function, the declared
/// arguments, the return value, and the parent's function (ids differ between runs).
type Content = (EventType, String, Vec<String>, Option<String>, Option<String>);

fn content(events: &[Event]) -> Vec<Content> {
    let by_id: std::collections::HashMap<i64, &Event> = events.iter().map(|e| (e.id, e)).collect();
    events
        .iter()
        .map(|e| {
            let name = e.function_name.clone().unwrap();
            let declared = match name.as_str() {
                "hot_args" => 6,
                "hot_leaf" => 2,
                _ => 1,
            };
            // Typed by the daemon from the words (word_shapes.rs): the declared parameters by
            // name; raw words (no DWARF shape): the declared ones.
            let args: Vec<String> = e
                .arguments
                .as_deref()
                .map(|a| match serde_json::from_str::<Vec<String>>(a) {
                    Ok(words) => words.into_iter().take(declared).collect(),
                    Err(_) => vec![serde_json::from_str::<Value>(a).unwrap().to_string()],
                })
                .unwrap_or_default();
            let parent = e.parent_event_id.map(|p| by_id[&p].function_name.clone().unwrap());
            (e.event_type, name, args, e.return_value.clone(), parent)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fast_path_events_are_correct_and_identical_to_the_js_path() {
    let h = harness();
    let mut runs = Vec::new();
    for mode in ["auto", "js"] {
        let id = start(&h, "args", 1, json!({ "mode": mode }), &["hot_*"]).await;
        wait_for_exit(&h, &id).await;
        let events = trace_events(&h, &id);
        let pid = h.engine.status(&id).unwrap().pid;
        assert_eq!(events.len(), 8, "{mode}: 4 calls, enter + exit each: {events:#?}");
        for e in &events {
            assert_eq!(e.thread_id, Some(pid), "{mode}: main thread id is the pid: {e:?}");
            assert_eq!(e.source_file.as_deref().map(|f| f.ends_with("hotloop.c")), Some(true), "{e:?}");
            if e.event_type == EventType::FunctionExit {
                assert!(e.duration_ns.unwrap() > 0, "{mode}: {e:?}");
            }
        }
        runs.push(content(&events));
        h.engine.stop(&id, true).await.unwrap();
    }
    let fast = &runs[0];
    let s = |x: &str| x.to_string();
    let hex = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    use EventType::{FunctionEnter as In, FunctionExit as Out};
    let expected = vec![
        (In, s("hot_args"), hex(&[r#"{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6}"#]), None, None),
        (Out, s("hot_args"), vec![], Some(s("91")), None),
        (In, s("hot_mid"), hex(&[r#"{"x":10}"#]), None, None),
        (In, s("hot_leaf"), hex(&[r#"{"a":10,"b":7}"#]), None, Some(s("hot_mid"))),
        (Out, s("hot_leaf"), vec![], Some(s("13")), Some(s("hot_mid"))),
        (Out, s("hot_mid"), vec![], Some(s("14")), None),
        (In, s("hot_leaf"), hex(&[r#"{"a":-1,"b":0}"#]), None, None),
        (Out, s("hot_leaf"), vec![], Some(s("-1")), None),
    ];
    assert_eq!(fast, &expected, "fast path content");
    assert_eq!(&runs[1], fast, "the JS path records the same content as the fast path");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threads_keep_their_own_call_stacks() {
    let h = harness();
    let n = 300;
    let id = start(&h, "threads", n, json!({ "hotCallsPerSec": 0 }), &["hot_mid", "hot_leaf"]).await;
    wait_for_exit(&h, &id).await;
    let events = trace_events(&h, &id);
    let st = h.engine.status(&id).unwrap();
    assert_eq!(events.len() as u64, 2 * n * 2 * 2, "2 threads × n × (mid + leaf) × (enter + exit); {st:?}");
    let by_id: std::collections::HashMap<i64, &Event> = events.iter().map(|e| (e.id, e)).collect();
    let tids: std::collections::BTreeSet<i64> = events.iter().filter_map(|e| e.thread_id).collect();
    assert_eq!(tids.len(), 2, "two worker threads: {tids:?}");
    for e in events.iter().filter(|e| e.function_name.as_deref() == Some("hot_leaf")) {
        let parent = by_id[&e.parent_event_id.expect("hot_leaf has a parent")];
        assert_eq!(parent.function_name.as_deref(), Some("hot_mid"));
        assert_eq!(parent.thread_id, e.thread_id, "parent on the same thread");
        assert_eq!(parent.event_type, EventType::FunctionEnter);
    }
    assert_eq!(h.engine.status(&id).unwrap().events_lost, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn burst_ending_in_exit_arrives_in_full() {
    let h = harness();
    let n = 20_000;
    let id = start(&h, "burst", n, json!({ "hotCallsPerSec": 0, "drainIntervalMs": 1000 }), &["hot_mid", "hot_leaf"]).await;
    wait_for_exit(&h, &id).await;
    let st = h.engine.status(&id).unwrap();
    assert_eq!(st.exit_code, Some(3), "{st:?}");
    assert_eq!(st.events_lost, 0);
    let enters = query(&h, &id, Some(EventType::FunctionEnter), None).len() as u64;
    let exits = query(&h, &id, Some(EventType::FunctionExit), None).len() as u64;
    assert_eq!((enters, exits), (2 * n, 2 * n), "every event of the burst, drained at exit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tiny_ring_counts_every_lost_event() {
    let h = harness();
    let n = 50_000;
    let opts = json!({ "hotCallsPerSec": 0, "ringRecords": 64, "drainIntervalMs": 50 });
    let id = start(&h, "loop", n, opts, &["hot_leaf"]).await;
    wait_for_exit(&h, &id).await;
    let stored = trace_events(&h, &id).len() as u64;
    let lost = h.engine.status(&id).unwrap().events_lost;
    eprintln!("tiny ring: {stored} stored, {lost} lost");
    assert!(lost > 0, "a 64-record ring cannot hold {n} calls between drains");
    assert_eq!(stored + lost, 2 * n, "stored + lost = every enter and exit of {n} calls");
}

/// Batches go through the outbox the daemon maps (agent/src/outbox.ts), lap after lap: each
/// burst is drained as ~30 batches of 64 records written back to back, after the daemon read
/// everything before (so each burst starts a new lap). The whole run is 1.8 MB, under the
/// outbox's 4 MiB less one batch's reservation: no batch may find it full, so every one must
/// go through it, none through Frida's channel. (Before the fix, the second batch of a lap
/// counted the unused bytes the lap skipped as unread and fell back.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bursts_of_batches_all_go_through_the_outbox() {
    let h = harness();
    let bursts = 10;
    let id = start(&h, "bursts", bursts, json!({ "hotCallsPerSec": 0, "costShare": 0, "drainBatch": 64 }), &["hot_leaf"]).await;
    wait_for_stdout(&h, &id, "bursts calls=", Duration::from_secs(60)).await;
    let expected = 2 * 1000 * bursts as usize;
    let deadline = Instant::now() + Duration::from_secs(60);
    while trace_events(&h, &id).len() < expected && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after = h.engine.configure_tracing(&id, json!({})).await.expect("tracing settings");
    let outbox = &after["outbox"];
    eprintln!("outbox: {outbox}");
    assert_eq!(trace_events(&h, &id).len(), expected, "every enter and exit stored");
    assert_eq!(h.engine.status(&id).unwrap().events_lost, 0);
    assert_eq!(outbox["ready"], json!(true), "{after}");
    assert!(outbox["batches"].as_u64().unwrap_or(0) >= (expected / 64) as u64, "{after}");
    assert_eq!(outbox["fallbacks"], json!(0), "no batch through Frida's channel: {after}");
    h.engine.send_stdin(&id, b"done\n").await.expect("stdin");
    wait_for_exit(&h, &id).await;
}

/// In a program that forks, the host holds the daemon's flow-control acks and sends them on
/// the fork gate's receipts (agent/src/forksafe.ts, "Receipts"), so that nothing reaches the
/// agent unasked while fork() copies Frida's queues. `forker burst` makes 4× the records the
/// agent may have in flight unacknowledged: all of them must be stored while the program still
/// runs (the agent asks for a receipt when its credit runs out), and its fork() afterwards
/// must not wait out the gate's deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_fork_gate_acks_ride_on_receipts_and_a_long_burst_is_stored_while_running() {
    let h = harness();
    let n: i64 = 262_144; // 2n records; 131,072 may be in flight unacknowledged
    let r = h
        .engine
        .launch(LaunchRequest {
            command: common::fixture("forker").display().to_string(),
            args: vec!["burst".into(), n.to_string()],
            project_root: common::fixtures_src_dir().display().to_string(),
            ..Default::default()
        })
        .await
        .expect("launch forker");
    let id = r.session_id;
    h.engine.store().set_max_events_per_session(&id, 50_000_000);
    wait_for_stdout(&h, &id, "ready", Duration::from_secs(30)).await;
    h.engine.configure_tracing(&id, json!({ "hotCallsPerSec": 0, "costShare": 0, "ringRecords": 1 << 20 })).await.expect("configure tracing");
    h.engine.trace(Some(&id), &["burst_work".to_string()], &[]).await.expect("trace");
    h.engine.send_stdin(&id, b"go\n").await.expect("stdin");
    wait_for_stdout(&h, &id, "burst done", Duration::from_secs(60)).await;

    let deadline = Instant::now() + Duration::from_secs(120);
    let mut stored = 0;
    while Instant::now() < deadline {
        stored = h.engine.store().count_events(&id).expect("count");
        if stored >= 2 * n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let settings = h.engine.configure_tracing(&id, json!({})).await.expect("tracing settings");
    assert!(stored >= 2 * n, "{stored} of {} events stored while the program waits: acks stopped? {settings}", 2 * n);
    let gate = &settings["forkGate"];
    assert!(gate["slots"].as_u64().is_some_and(|s| s >= 1) && gate["confirmed"].as_u64().is_some_and(|c| c >= 1), "{gate}");

    h.engine.send_stdin(&id, b"go\n").await.expect("stdin");
    wait_for_stdout(&h, &id, "exited 3", Duration::from_secs(60)).await;
    let after = h.engine.configure_tracing(&id, json!({})).await.expect("tracing settings");
    assert_eq!(after["forkGate"]["receiptTimeouts"], 0, "fork() waited out the deadline: {after}");
    h.engine.send_stdin(&id, b"end\n").await.expect("stdin");
    wait_for_exit(&h, &id).await;
    let st = h.engine.status(&id).expect("status");
    assert_eq!((st.exit_code, st.events_lost), (Some(0), 0), "{st:?}");
}

/// The hooks' timestamps are the program's CLOCK_MONOTONIC: `hotloop clock` passes its own
/// reading to each of 100 calls, 11 to 23 ms apart; the distance from that reading to the
/// enter's timestamp must stay the same over the ~2 s (a clock 0.1 % off would drift by
/// 2 ms), and time never goes back from one event to the next. Where the kernel keeps time
/// with the TSC the hooks read it instead of clock_gettime and the drain converts (fastpath.ts
/// setUpTsc): the check holds either way, and says which clock it checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hook_timestamps_follow_the_monotonic_clock() {
    let h = harness();
    let id = start(&h, "clock", 100, json!({ "hotCallsPerSec": 0 }), &["hot_leaf"]).await;
    let settings = h.engine.configure_tracing(&id, json!({})).await.expect("settings");
    let source = std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource").unwrap_or_default();
    let want = if source.trim() == "tsc" { "tsc" } else { "clock_gettime" };
    assert_eq!(settings["clock"], want, "the hooks' clock on a machine whose clocksource is {source:?}");
    eprintln!("hook clock: {want}");
    wait_for_exit(&h, &id).await;
    let events = trace_events(&h, &id);
    let mut offsets = Vec::new();
    for e in events.iter().filter(|e| e.event_type == EventType::FunctionEnter) {
        let args: Value = serde_json::from_str(e.arguments.as_deref().unwrap()).unwrap();
        let passed = match &args {
            Value::Object(m) => m["a"].as_i64().unwrap(),
            Value::Array(w) => i64::from_str_radix(w[0].as_str().unwrap().trim_start_matches("0x"), 16).unwrap(),
            other => panic!("hot_leaf arguments: {other}"),
        };
        offsets.push(passed - e.timestamp_ns);
    }
    assert_eq!(offsets.len(), 100, "100 enters");
    let mut sorted = offsets.clone();
    sorted.sort();
    let median = sorted[50];
    // The reading precedes the hook by a few µs; a preempted call may be late: 90 of 100 within
    // 30 µs (here: 90 % within 1–3 µs).
    let close = offsets.iter().filter(|o| (*o - median).abs() <= 30_000).count();
    let mut spread: Vec<i64> = offsets.iter().map(|o| (o - median).abs()).collect();
    spread.sort();
    let first_half = offsets[..50].iter().sum::<i64>() / 50;
    let second_half = offsets[50..].iter().sum::<i64>() / 50;
    eprintln!("{close} of 100 within 30 µs of the median (50th/90th/99th: {} / {} / {} ns); halves {first_half} / {second_half}", spread[50], spread[90], spread[99]);
    assert!(close >= 90, "the enter timestamps drift from the program's clock: offsets {offsets:?}");
    // One thread, one call at a time: every timestamp at or after the one before; every
    // duration under the 11 ms between calls.
    let mut by_id: Vec<&Event> = events.iter().collect();
    by_id.sort_by_key(|e| e.id);
    for w in by_id.windows(2) {
        assert!(w[1].timestamp_ns >= w[0].timestamp_ns, "time went back: {:?} then {:?}", w[0], w[1]);
    }
    for x in events.iter().filter(|e| e.event_type == EventType::FunctionExit) {
        let d = x.duration_ns.expect("an exit's duration");
        assert!((0..11_000_000).contains(&d), "duration {d} ns: {x:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_loop_is_sampled_until_sampling_is_disabled() {
    let h = harness();
    let id = start(&h, "spin", 0, json!({}), &["hot_leaf"]).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let st = h.engine.status(&id).unwrap();
        if st.sampled_functions.iter().any(|f| f.func_name == "hot_leaf") {
            assert!((st.sampled_functions[0].sample_rate - 0.01).abs() < 1e-9, "{st:?}");
            break;
        }
        assert!(Instant::now() < deadline, "hot_leaf was never sampled: {st:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Events recorded after sampling began carry `sampled: true` (waited for: on a loaded
    // machine the drain and the store can take longer than a fixed pause; 2 of 10 runs beside
    // four busy loops found none after 300 ms).
    let since = h.engine.store().next_event_id();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let sampled = first_page(&h, &id, Some(since));
        if sampled.iter().any(|e| e.sampled == Some(true)) {
            break;
        }
        let unmarked = sampled.len();
        assert!(Instant::now() < deadline, "sampled events carry sampled: true ({unmarked} events since sampling began, none marked)");
    }
    let (_, _, log) = h.engine.tracing_report(&id).unwrap();
    assert!(log.iter().any(|c| c.enabled && c.func_name == "hot_leaf" && c.reason == "hot"), "{log:?}");

    let req = SamplingRequest { disable: vec!["hot_leaf".into()], enable: vec![] };
    let u = h.engine.set_sampling(&id, &req).await.unwrap();
    assert_eq!(u.disabled, vec!["hot_leaf".to_string()]);
    assert!(h.engine.status(&id).unwrap().sampled_functions.is_empty());
    // Records already in the ring (or in flight) at the switch may still be marked; once an
    // unmarked one is stored, later ones are not (one thread: records keep call order). The
    // backlog ahead of the switch takes a while to store on a busy machine: wait for it.
    // (Full rate now: millions of rows; look at pages after a cursor, not at all of them.)
    let deadline = Instant::now() + Duration::from_secs(30);
    let first_unmarked = loop {
        let cursor = h.engine.store().next_event_id();
        tokio::time::sleep(Duration::from_millis(100)).await;
        if let Some(e) = first_page(&h, &id, Some(cursor)).iter().find(|e| e.sampled.is_none()) {
            break e.id;
        }
        assert!(Instant::now() < deadline, "no unsampled hot_leaf event within 30 s of disabling sampling");
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let later = first_page(&h, &id, Some(first_unmarked));
    assert!(!later.is_empty(), "hot_leaf is still traced");
    assert!(later.iter().all(|e| e.sampled.is_none()), "no sampled events after disabling");
    assert!(h.engine.status(&id).unwrap().sampled_functions.is_empty(), "not re-sampled automatically");
    let (_, _, log) = h.engine.tracing_report(&id).unwrap();
    assert!(log.iter().any(|c| !c.enabled && c.reason == "user"), "{log:?}");
    h.engine.stop(&id, false).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_tracing_options_are_errors_not_crashes() {
    let h = harness();
    let id = start(&h, "args", 1, json!({}), &["hot_leaf"]).await;
    let e = h.engine.configure_tracing(&id, json!("fast")).await.unwrap_err();
    assert_eq!(e.code, strobe::error::ErrorCode::ValidationError);
    let req = SamplingRequest { disable: vec!["no_such_fn".into()], enable: vec![] };
    wait_for_exit(&h, &id).await;
    let e = h.engine.set_sampling(&id, &req).await.unwrap_err();
    assert_eq!(e.code, strobe::error::ErrorCode::ProcessExited, "{e:?}");
}

/// Frida ends the agent session of a process that keeps running (it does so on its own in a
/// rare fork race): the daemon attaches a fresh agent, and its events carry what the session
/// set up before — typed arguments at the session's depth, watch values, logpoints — not
/// just hooks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reattached_agent_keeps_the_sessions_recipes_watches_and_depth() {
    use strobe::engine::WatchTarget;
    let h = harness();
    let id = start_types(&h, 600, 20).await;
    h.engine.trace(Some(&id), &["take_outer".to_string(), "tick_clock".to_string()], &[]).await.expect("trace");
    h.engine.set_serialization_depth(&id, 1).await.expect("depth");
    let watch = WatchTarget { variable: Some("g_clock->counter".into()), on: vec!["tick_clock".into()], ..Default::default() };
    h.engine.update_watches(&id, vec![watch], &[]).await.expect("watch");
    let logpoint = PointRequest { function: Some("tick_clock".into()), message: Some("tick {c}".into()), ..Default::default() };
    h.engine.set_points(&id, &[logpoint], &[]).await.expect("logpoint");

    // Events recorded after the depth and the watch applied: what the agent had buffered
    // before them (sent within ms) is stored before the mark.
    tokio::time::sleep(Duration::from_millis(300)).await;
    h.engine.store().flush();
    let set = query(&h, &id, None, None).iter().map(|e| e.id).max().unwrap_or(0);
    let (outer, clock) = wait_for_typed_calls(&h, &id, Some(set)).await;
    assert_eq!(outer["o"]["inner"], json!("<struct Inner>"), "depth 1 before: {outer}");
    assert!(clock.is_some(), "watch values before the drop");

    h.engine.drop_agent_session(&id).await.expect("drop the agent session");
    // What the old agent sent before it went (its last flush) is stored before the mark.
    tokio::time::sleep(Duration::from_millis(300)).await;
    h.engine.store().flush();
    let mark = query(&h, &id, None, None).iter().map(|e| e.id).max().unwrap_or(0);
    let (outer, clock) = wait_for_typed_calls(&h, &id, Some(mark)).await;
    assert_eq!(outer["o"]["inner"], json!("<struct Inner>"), "depth 1 after the re-attach: {outer}");
    assert_eq!(outer["o"]["values"], json!([10, 20, 30, 40]), "typed arguments after the re-attach: {outer}");
    let clock = clock.expect("watch values after the re-attach");
    assert!(clock["g_clock->counter"].is_i64(), "{clock}");
    // Points are set again once the hooks are (lifecycle.rs `reattach`).
    let deadline = Instant::now() + Duration::from_secs(20);
    while query(&h, &id, Some(EventType::Logpoint), Some(mark)).len() < 3 {
        assert!(Instant::now() < deadline, "the logpoint was not set again on the new agent");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(h.engine.set_points(&id, &[], &[]).await.expect("points").logpoints.len(), 1);
    assert_eq!(h.engine.status(&id).expect("status").status, "running");
    h.engine.stop(&id, false).await.expect("stop");
}

/// A fast-path function that a watch moved to the JS path, then unhooked and hooked again
/// while no watch covered it (so on the fast path again), must move to the JS path again
/// when a watch covers it later: its events then carry watch values.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_function_hooked_again_takes_a_later_watch() {
    use strobe::engine::WatchTarget;
    let h = harness();
    let id = start_types(&h, 3000, 10).await;
    let f = vec!["round_number".to_string()];
    let watch = || WatchTarget { variable: Some("g_counter".into()), label: Some("c".into()), on: f.clone(), ..Default::default() };
    h.engine.trace(Some(&id), &f, &[]).await.expect("trace");
    h.engine.update_watches(&id, vec![watch()], &[]).await.expect("watch");
    assert!(watched_round(&h, &id, None).await.is_some(), "the first watch reaches round_number's events");

    h.engine.update_watches(&id, vec![], &["c".to_string()]).await.expect("unwatch");
    h.engine.trace(Some(&id), &[], &f).await.expect("untrace");
    h.engine.trace(Some(&id), &f, &[]).await.expect("trace again");
    h.engine.update_watches(&id, vec![watch()], &[]).await.expect("watch again");
    tokio::time::sleep(Duration::from_millis(200)).await;
    h.engine.store().flush();
    let mark = query(&h, &id, None, None).iter().map(|e| e.id).max().unwrap_or(0);
    let values = watched_round(&h, &id, Some(mark)).await.expect("watch values after hooking again and watching again");
    assert!(values["c"].is_i64(), "{values}");
    h.engine.stop(&id, false).await.expect("stop");
}

/// The watch values of a `round_number` event after `after`, or `None` if 30 of its calls
/// had none.
async fn watched_round(h: &Harness, id: &str, after: Option<i64>) -> Option<Value> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let events = query(h, id, None, after);
        let rounds: Vec<&Event> = events.iter().filter(|e| e.function_name.as_deref() == Some("round_number")).collect();
        if let Some(w) = rounds.iter().find_map(|e| e.watch_values.as_deref().and_then(|w| serde_json::from_str::<Value>(w).ok())) {
            return Some(w);
        }
        if rounds.len() >= 60 || Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Wait for a `take_outer` enter (its typed arguments) and a `tick_clock` event with watch
/// values, after event `after`; the watch values are `None` if 200 tick_clock calls had none.
async fn wait_for_typed_calls(h: &Harness, id: &str, after: Option<i64>) -> (Value, Option<Value>) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let events = query(h, id, None, after);
        let outer = events
            .iter()
            .filter(|e| e.function_name.as_deref() == Some("take_outer") && e.event_type == EventType::FunctionEnter)
            .filter_map(|e| e.arguments.as_deref().and_then(|a| serde_json::from_str::<Value>(a).ok()))
            .rfind(|a| a.is_object());
        let clocks: Vec<&Event> = events.iter().filter(|e| e.function_name.as_deref() == Some("tick_clock")).collect();
        let watched = clocks.iter().rev().find_map(|e| e.watch_values.as_deref().and_then(|w| serde_json::from_str::<Value>(w).ok()));
        if let (Some(outer), Some(w)) = (&outer, &watched) {
            return (outer.clone(), Some(w.clone()));
        }
        if clocks.len() >= 200 || Instant::now() > deadline {
            let seen: Vec<Option<&str>> = events.iter().filter(|e| e.function_name.as_deref() == Some("take_outer")).take(4).map(|e| e.arguments.as_deref()).collect();
            let outer = outer.unwrap_or_else(|| {
                let last: Vec<String> = events.iter().rev().take(6).map(|e| format!("{:?} {:?} {:?}", e.event_type, e.function_name, e.text)).collect();
                panic!(
                    "a take_outer call with typed arguments: {} clock events, take_outer events' arguments {seen:?}; {} events after {after:?}, the last {last:?}; status {:?}",
                    clocks.len(),
                    events.len(),
                    h.engine.status(id)
                )
            });
            return (outer, watched);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
