//! Hooks go in and out of a running process without crashing it: four threads call an
//! integer-only function (eligible for the replaceFast wrapper) in a tight loop while the
//! test adds and removes a trace on it 200 times, with a breakpoint elsewhere demoting the
//! wrappers to the attach path half-way. Every attempt that kills the target is counted (and
//! the target relaunched), and the test wants none (agent/src/quiesce.ts says why it once did).
//! A removed trace's hook stays, switched off, so adding it again writes no code: the second
//! test traces, 200 times, a function never hooked before that four threads are running.
//!
//! Run: `cargo test --test hook_install_stress -- --nocapture`. Fixtures:
//! tests/fixtures/c/hookstress.c, hookfresh.c.

mod common;

use std::time::Instant;

use serde_json::Value;
use strobe::engine::PointRequest;

const ATTEMPTS: usize = 200;

use common::busy::{died_after, quit_cleanly};
use common::harness::{harness, Harness};

async fn launch(h: &Harness) -> String {
    common::busy::launch(h, "hookstress", 4).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adding_and_removing_traces_on_busy_threads_never_crashes_the_target() {
    let h = harness();
    let started = Instant::now();
    let mut id = launch(&h).await;
    let mut crashes: Vec<(usize, String)> = Vec::new();
    let mut traced = false;
    let mut demoted = false;
    for attempt in 0..ATTEMPTS {
        if attempt == ATTEMPTS / 2 && !demoted {
            // A breakpoint that never hits: it moves every wrapped hook to the attach path.
            let bp = PointRequest { function: Some("never_called".into()), ..Default::default() };
            h.engine.set_points(&id, &[bp], &[]).await.expect("breakpoint");
            demoted = true;
            if let Ok(settings) = h.engine.configure_tracing(&id, serde_json::json!({})).await {
                eprintln!("after the demotion, patching: {}", settings["hookPaths"]["patching"]);
            }
        }
        let r = if traced {
            h.engine.trace(Some(&id), &[], &["busy".to_string()]).await
        } else {
            h.engine.trace(Some(&id), &["busy".to_string()], &[]).await
        };
        let what = format!("attempt {attempt} ({})", if traced { "remove" } else { "add" });
        if let Some(how) = died_after(&h, &id, r.is_ok(), &what).await {
            crashes.push((attempt, how));
            id = launch(&h).await;
            traced = false;
            demoted = false;
            continue;
        }
        r.expect("trace");
        traced = !traced;
    }
    eprintln!("{ATTEMPTS} attempts in {:?}: {} crashed the target", started.elapsed(), crashes.len());
    // How the patches went (parks retried, threads found in page faults, ...): for a failure's log.
    if let Ok(settings) = h.engine.configure_tracing(&id, serde_json::json!({})).await {
        eprintln!("patching: {}", settings["hookPaths"]["patching"]);
    }
    assert_eq!(crashes, vec![], "hook changes crashed the target");
    quit_cleanly(&h, &id).await;
}

/// 200 traces added, each on a function the four threads are running and nothing hooked
/// before (hookfresh's fresh_00 .. fresh_c7): every one a new patch of running code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tracing_functions_never_hooked_before_while_threads_run_them_never_crashes_the_target() {
    let h = harness();
    let started = Instant::now();
    let mut id = common::busy::launch(&h, "hookfresh", 4).await;
    let mut crashes: Vec<(usize, String)> = Vec::new();
    for attempt in 0..ATTEMPTS {
        let name = format!("fresh_{attempt:02x}");
        h.engine.send_stdin(&id, format!("use {attempt:02x}\n").as_bytes()).await.expect("stdin");
        common::events::wait_for_stdout(&h.engine, &id, &format!("using {attempt:02x}"), std::time::Duration::from_secs(30)).await;
        let r = h.engine.trace(Some(&id), &[name.clone()], &[]).await;
        if let Some(how) = died_after(&h, &id, r.is_ok(), &format!("attempt {attempt} ({name})")).await {
            crashes.push((attempt, how));
            id = common::busy::launch(&h, "hookfresh", 4).await;
            continue;
        }
        r.expect("trace");
    }
    let settings = h.engine.configure_tracing(&id, serde_json::json!({})).await.expect("settings");
    let patching = &settings["hookPaths"]["patching"];
    eprintln!("{ATTEMPTS} new patches in {:?}: {} crashed the target; patching: {patching}", started.elapsed(), crashes.len());
    assert_eq!(crashes, vec![], "hook installs crashed the target");
    // Each add wrote code with the threads parked (none reused a kept hook).
    assert!(patching["flushes"].as_u64().unwrap() >= ATTEMPTS as u64, "{patching}");
    let wrapped = settings["hookPaths"]["wrapped"].as_array().map_or(0, Vec::len);
    assert_eq!(wrapped, ATTEMPTS, "each in a replaceFast wrapper: {}", settings["hookPaths"]);
    quit_cleanly(&h, &id).await;
}

/// A crash in bytes a hook just patched is most likely Strobe's, and its report says so with
/// how the patch went: hookfresh's "torn" runs `padded` from byte 14, where a thread that
/// stood there during the write would go on. Untraced it returns; traced (a 16-byte jump over
/// its nops) it crashes in the jump, and the crash event names the patched function's entry
/// and the park's account (tries, where the parked threads stood).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_in_freshly_patched_bytes_is_reported_as_strobes() {
    let h = harness();
    let id = common::busy::launch(&h, "hookfresh", 2).await;
    h.engine.send_stdin(&id, b"torn\n").await.expect("stdin");
    common::events::wait_for_stdout(&h.engine, &id, "torn 2", std::time::Duration::from_secs(10)).await;
    h.engine.trace(Some(&id), &["padded".to_string()], &[]).await.expect("trace padded");
    let settings = h.engine.configure_tracing(&id, serde_json::json!({})).await.expect("settings");
    assert_eq!(settings["hookPaths"]["wrapped"], serde_json::json!(["padded"]), "{}", settings["hookPaths"]);
    h.engine.send_stdin(&id, b"torn\n").await.expect("stdin");
    let mut crashes = Vec::new();
    for _ in 0..200 {
        crashes = common::events::query_all(&h.engine, &id, Some(strobe::store::EventType::Crash), None);
        if !crashes.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let crash = crashes.first().expect("the torn call crashed the target");
    let text = crash.text.as_deref().unwrap_or("");
    assert!(text.starts_with("SIGSEGV"), "{text}");
    assert!(text.contains("which Strobe patched for a hook") && text.contains("likely Strobe's fault"), "{text}");
    let patch: serde_json::Value = serde_json::from_str(text.split("Patch: ").nth(1).expect("the patch's account")).expect("patch JSON");
    let entry = u64::from_str_radix(patch["entry"].as_str().unwrap().trim_start_matches("0x"), 16).unwrap();
    let registers: serde_json::Value = serde_json::from_str(crash.registers.as_deref().expect("registers")).expect("registers JSON");
    let pc = registers["rip"].as_str().and_then(|r| u64::from_str_radix(r.trim_start_matches("0x"), 16).ok());
    assert_eq!(pc, Some(entry + 14), "crashed at byte 14 of the patched entry: {text} {registers}");
    assert!(patch["tries"].as_u64().is_some_and(|t| t >= 1) && patch["forced"].is_null(), "{patch}");
    assert!(text.contains("in the entry bytes of padded at 0x"), "{text}");
    // Where the parked threads stood, by name: the two workers in their loop, the main thread
    // in a system call.
    let parked: Vec<&str> = patch["parked"].as_array().expect("the park's threads").iter().filter_map(Value::as_str).collect();
    assert!(parked.iter().filter(|p| p.contains(" <worker") || p.contains(" <fresh_")).count() == 2, "{parked:?}");
    assert!(patch["patching"]["flushes"].as_u64().is_some_and(|f| f >= 1), "{patch}");
}
