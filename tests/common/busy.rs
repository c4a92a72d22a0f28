//! Busy-thread fixtures of the install stress tests (hookstress, probestress): launch one
//! and tell whether it is still alive.

use std::time::Duration;

use strobe::engine::LaunchRequest;
use strobe::store::EventType;

use super::harness::Harness;

/// Launch fixture `name` with `threads` busy threads; returns once it printed "ready".
pub async fn launch(h: &Harness, name: &str, threads: u32) -> String {
    let r = h
        .engine
        .launch(LaunchRequest {
            command: super::fixture(name).display().to_string(),
            args: vec![threads.to_string()],
            project_root: super::fixtures_src_dir().display().to_string(),
            ..Default::default()
        })
        .await
        .unwrap_or_else(|e| panic!("launch {name}: {e:?}"));
    super::events::wait_for_stdout(&h.engine, &r.session_id, "ready", Duration::from_secs(60)).await;
    r.session_id
}

/// How the target ended, if it did ("SIGSEGV", "exit 1", ...).
pub fn ended(h: &Harness, id: &str) -> Option<String> {
    let st = h.engine.status(id).unwrap();
    if st.status == "running" {
        return None;
    }
    Some(st.signal.clone().unwrap_or_else(|| format!("{} {:?} {:?}", st.status, st.exit_code, st.exit_reason)))
}

/// After a change on the target: let its threads run through the new code, then tell how it
/// died, if it did (waiting longer when the call failed: a target that just died may not be
/// reported yet). Prints the crash events under `what`.
pub async fn died_after(h: &Harness, id: &str, call_ok: bool, what: &str) -> Option<String> {
    let mut how = None;
    for _ in 0..if call_ok { 1 } else { 100 } {
        tokio::time::sleep(Duration::from_millis(15)).await;
        how = ended(h, id);
        if how.is_some() {
            break;
        }
    }
    let how = how?;
    eprintln!("{what}: the target died: {how}");
    for c in super::events::query_all(&h.engine, id, Some(EventType::Crash), None) {
        eprintln!("  crash: {c:?}");
    }
    Some(how)
}

/// Ask the fixture to quit; it must exit 0.
pub async fn quit_cleanly(h: &Harness, id: &str) {
    h.engine.send_stdin(id, b"quit\n").await.unwrap();
    super::events::wait_for_exit(&h.engine, id).await;
    let st = h.engine.status(id).unwrap();
    assert_eq!((st.exit_code, st.signal.as_deref()), (Some(0), None), "{st:?}");
}

/// `n` shell loops spinning on the machine's cores while alive (killed when dropped): a
/// loaded machine, where an agent or host that falls behind shows.
pub struct BusyLoops(Vec<std::process::Child>);

impl BusyLoops {
    pub fn start(n: usize) -> BusyLoops {
        let spin = || std::process::Command::new("sh").args(["-c", "while :; do :; done"]).spawn().expect("start a busy loop");
        BusyLoops((0..n).map(|_| spin()).collect())
    }
}

impl Drop for BusyLoops {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
