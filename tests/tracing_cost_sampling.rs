//! Sampling that follows cost (agent/src/cost_sampling.ts): a JS-path function whose hooks
//! take most of its thread's time is sampled although it is called far below the 100 k
//! calls/s of rate sampling, reported in `sampledFunctions` with its events marked
//! `sampled`; with the `tracing.costShare` setting at 0 it is recorded in full.
//!
//! The native hooks weigh their typed-value capture the same way (fastpath_c.ts check_rate).
//!
//! Run: `cargo test --test tracing_cost_sampling -- --nocapture`. Fixture: hotloop `structs`
//! (hot_pair(struct pair *) forever), its argument serialized by JS hooks
//! (`configure_tracing({mode: "js"})`), or captured natively (the default).

mod common;

use std::time::{Duration, Instant};

use common::harness::{harness, Harness};
use serde_json::json;
use strobe::engine::LaunchRequest;
use strobe::store::{EventQuery, EventType};

/// Launch `hotloop structs 0 wait`, trace hot_pair through JS hooks, start the loop.
async fn spin_traced(h: &Harness) -> String {
    spin_traced_with(h, json!({ "mode": "js" })).await
}

/// The same with tracing options `options` (hot_pair's hooks as they choose).
async fn spin_traced_with(h: &Harness, options: serde_json::Value) -> String {
    let r = h
        .engine
        .launch(LaunchRequest {
            command: common::fixture("hotloop").display().to_string(),
            args: vec!["structs".into(), "0".into(), "wait".into()],
            project_root: common::fixtures_src_dir().display().to_string(),
            ..Default::default()
        })
        .await
        .expect("launch hotloop");
    let id = r.session_id;
    common::events::wait_for_stdout(&h.engine, &id, "ready", Duration::from_secs(60)).await;
    h.engine.configure_tracing(&id, options).await.expect("tracing options");
    let t = h.engine.trace(Some(&id), &["hot_pair".to_string()], &[]).await.expect("trace");
    assert!(t.warnings.is_empty(), "{t:?}");
    h.engine.send_stdin(&id, b"go\n").await.unwrap();
    id
}

fn hot_pair_events(h: &Harness, id: &str) -> Vec<strobe::store::Event> {
    h.engine.store().flush();
    common::events::query_all(&h.engine, id, Some(EventType::FunctionEnter), None)
}

/// Until hot_pair is sampled: the change that switched it on.
async fn wait_sampled(h: &Harness, id: &str) -> strobe::engine::sampling::SamplingChange {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, sampled, log) = h.engine.tracing_report(&id).unwrap();
        if let Some(f) = sampled.iter().find(|f| f.func_name == "hot_pair") {
            let change = log.iter().rev().find(|c| c.func_name == "hot_pair" && c.enabled).cloned().expect("a sampling change");
            assert_eq!(f.sample_rate, 0.01, "{f:?}");
            return change;
        }
        assert!(Instant::now() < deadline, "hot_pair never sampled: {log:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_js_hook_is_sampled_by_cost_below_the_rate_threshold() {
    let h = harness();
    let id = spin_traced(&h).await;
    let change = wait_sampled(&h, &id).await;
    assert_eq!(change.reason, "cost", "{change:?}");
    // Below the rate threshold: the calls recorded before sampling took at least 1/100 k s each.
    let before: Vec<_> = hot_pair_events(&h, &id).into_iter().filter(|e| e.timestamp_ns < change.timestamp_ns).collect();
    assert!(before.len() >= 2, "{before:?}");
    let span = (before.last().unwrap().timestamp_ns - before[0].timestamp_ns) as f64;
    let rate = (before.len() - 1) as f64 / (span / 1e9);
    assert!(rate < 100_000.0, "{rate} calls/s");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after: Vec<_> = hot_pair_events(&h, &id).into_iter().filter(|e| e.timestamp_ns > change.timestamp_ns).collect();
    assert!(!after.is_empty() && after.iter().all(|e| e.sampled == Some(true)), "events after the switch are marked sampled");
    assert!(before.iter().all(|e| e.sampled != Some(true)), "events before it are not");
    h.engine.stop(&id, false).await.expect("stop");
}

/// hot_pair's typed argument copied by the native hook takes most of the loop's time: with
/// rate sampling off (`hotCallsPerSec: 0`) only its cost can switch sampling on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_native_typed_hook_is_sampled_by_cost() {
    let h = harness();
    let id = spin_traced_with(&h, json!({ "hotCallsPerSec": 0 })).await;
    let change = wait_sampled(&h, &id).await;
    assert_eq!(change.reason, "cost", "{change:?}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    // One page after the switch (the spinning process never stops adding events; reading them
    // all would decode without end).
    h.engine.store().flush();
    let q = EventQuery { session_id: id.clone(), event_type: Some(EventType::FunctionEnter), time_from_ns: Some(change.timestamp_ns + 1), limit: 50, ..Default::default() };
    let events = h.engine.query(&q).expect("query").events;
    let typed = events.first().expect("events after the switch");
    assert_eq!(typed.sampled, Some(true), "{typed:?}");
    let args: serde_json::Value = serde_json::from_str(typed.arguments.as_deref().unwrap_or("null")).unwrap();
    assert_eq!(args.pointer("/p/name"), Some(&json!("pair")), "the typed argument: {typed:?}");
    let report = h.engine.configure_tracing(&id, json!({})).await.expect("tracing report");
    assert!(report.pointer("/capture/records").and_then(|v| v.as_u64()).unwrap_or(0) > 0, "the native hook captured: {report}");
    h.engine.stop(&id, false).await.expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cost_sampling_is_off_with_the_setting_at_zero() {
    let h = harness();
    std::fs::write(h.home.path().join("settings.json"), r#"{"tracing.costShare": 0}"#).unwrap();
    let id = spin_traced(&h).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (_, sampled, log) = h.engine.tracing_report(&id).unwrap();
    assert!(sampled.is_empty() && log.is_empty(), "{sampled:?} {log:?}");
    h.engine.store().flush();
    let q = EventQuery { session_id: id.clone(), event_type: Some(EventType::FunctionEnter), limit: 500, ..Default::default() };
    let first = h.engine.query(&q).expect("query").events;
    assert!(first.len() == 500 && first.iter().all(|e| e.sampled != Some(true)), "{first:?}");
    let stored = h.engine.status(&id).unwrap().event_count;
    assert!(stored > 2000, "every call recorded: {stored} events");
    // Killed rather than stopped: a stop first stores the backlog of a full-rate JS hook.
    let pid = h.engine.status(&id).unwrap().pid;
    std::process::Command::new("kill").args(["-9", &pid.to_string()]).status().unwrap();
}
