//! A followed child that closes every descriptor before exec, as CPython's subprocess and
//! GLib's spawn do: with close_range() or closefrom() it used to close Frida's connection
//! too, and the child then hung in Frida's exec handling, never running the new program
//! (agent/src/fd_guard.ts). Fixture: tests/fixtures/c/forker.c (`closerange`, `closefrom`).
//!
//! Run: `cargo test --test fork_descriptors`.

mod common;

use std::time::Duration;

use strobe::engine::LaunchRequest;

use common::harness::harness;

async fn exec_after_closing(mode: &str) {
    let h = harness();
    let r = h
        .engine
        .launch(LaunchRequest {
            command: common::fixture("forker").display().to_string(),
            args: vec![mode.into()],
            project_root: common::fixtures_src_dir().display().to_string(),
            ..Default::default()
        })
        .await
        .expect("launch forker");
    let id = r.session_id;
    // The exec'd program runs (its own lines), and the parent sees it exit with its status.
    common::events::wait_for_stdout(&h.engine, &id, "execd pid", Duration::from_secs(60)).await;
    let line = common::events::wait_for_stdout(&h.engine, &id, "exited", Duration::from_secs(60)).await;
    assert!(line.contains("exited 5"), "the exec'd child's status: {line}");
    common::events::wait_for_exit(&h.engine, &id).await;
    let st = h.engine.status(&id).expect("status");
    assert_eq!(st.exit_code, Some(0), "{st:?}");
    let exec = st.children.iter().find(|c| c.origin == "exec").unwrap_or_else(|| panic!("the exec is followed: {st:?}"));
    assert_eq!(exec.exit_code, Some(5), "{st:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_closing_every_descriptor_with_close_range_still_execs() {
    exec_after_closing("closerange").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_closing_every_descriptor_with_closefrom_still_execs() {
    exec_after_closing("closefrom").await;
}
