//! Hooks go in and out of a running process without crashing it: four threads call an
//! integer-only function (eligible for the replaceFast wrapper) in a tight loop while the
//! test adds and removes a trace on it 200 times, with a breakpoint elsewhere demoting the
//! wrappers to the attach path half-way. Every attempt that kills the target is counted (and
//! the target relaunched), and the test wants none (agent/src/quiesce.ts says why it once did).
//!
//! Run: `cargo test --test hook_install_stress -- --nocapture`. Fixture: tests/fixtures/c/hookstress.c.

mod common;

use std::time::Instant;

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
