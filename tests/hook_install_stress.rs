//! Hooks go in and out of a running process without crashing it: four threads call an
//! integer-only function (eligible for the replaceFast wrapper) in a tight loop while the
//! test adds and removes a trace on it 200 times, with a breakpoint elsewhere demoting the
//! wrappers to the attach path half-way. Every attempt that kills the target is counted (and
//! the target relaunched), and the test wants none (agent/src/quiesce.ts says why it once did).
//!
//! Run: `cargo test --test hook_install_stress -- --nocapture`. Fixture: tests/fixtures/c/hookstress.c.

mod common;

use std::time::{Duration, Instant};

use strobe::engine::{LaunchRequest, PointRequest};
use strobe::store::EventType;

const ATTEMPTS: usize = 200;

use common::harness::{harness, Harness};

async fn launch(h: &Harness) -> String {
    let r = h
        .engine
        .launch(LaunchRequest {
            command: common::fixture("hookstress").display().to_string(),
            args: vec!["4".into()],
            project_root: common::fixtures_src_dir().display().to_string(),
            ..Default::default()
        })
        .await
        .expect("launch hookstress");
    common::events::wait_for_stdout(&h.engine, &r.session_id, "ready", Duration::from_secs(60)).await;
    r.session_id
}

/// How the target ended, if it did ("SIGSEGV", "exit 1", ...).
fn ended(h: &Harness, id: &str) -> Option<String> {
    let st = h.engine.status(id).unwrap();
    if st.status == "running" {
        return None;
    }
    Some(st.signal.clone().unwrap_or_else(|| format!("{} {:?} {:?}", st.status, st.exit_code, st.exit_reason)))
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
        }
        let r = if traced {
            h.engine.trace(Some(&id), &[], &["busy".to_string()]).await
        } else {
            h.engine.trace(Some(&id), &["busy".to_string()], &[]).await
        };
        // Let the threads run through the new code before looking (longer when the call
        // failed: a target that just died may not be reported yet).
        let mut how = None;
        for _ in 0..if r.is_ok() { 1 } else { 100 } {
            tokio::time::sleep(Duration::from_millis(15)).await;
            how = ended(&h, &id);
            if how.is_some() {
                break;
            }
        }
        if let Some(how) = how {
            eprintln!("attempt {attempt} ({}): the target died: {how}", if traced { "remove" } else { "add" });
            for c in common::events::query_all(&h.engine, &id, Some(EventType::Crash), None) {
                eprintln!("  crash: {}", format!("{c:?}").chars().take(2500).collect::<String>());
            }
            crashes.push((attempt, how));
            id = launch(&h).await;
            traced = false;
            demoted = false;
            continue;
        }
        r.expect("trace");
        traced = !traced;
    }
    h.engine.send_stdin(&id, b"quit\n").await.unwrap();
    common::events::wait_for_exit(&h.engine, &id).await;
    let st = h.engine.status(&id).unwrap();
    eprintln!("{ATTEMPTS} attempts in {:?}: {} crashed the target", started.elapsed(), crashes.len());
    assert_eq!(crashes, vec![], "hook changes crashed the target");
    assert_eq!((st.exit_code, st.signal.as_deref()), (Some(0), None), "{st:?}");
}
