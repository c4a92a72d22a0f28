//! Start a test command in its own process group, collect its output into the run, note
//! its exit, and stop it on request (SIGINT first, so frameworks that write their report
//! at interruption — pytest's JUnit XML — still do; then SIGTERM, then SIGKILL).

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use super::registry::{self, TestRun};
use crate::error::{Result, StrobeError};

pub struct RunSpec {
    pub cmd: Vec<String>,
    pub cwd: String,
    pub env: BTreeMap<String, String>,
    pub meta: serde_json::Value,
    /// Kill the run when the detector confirms a stuck test.
    pub kill_on_stuck: bool,
    /// Tune the detector (tests use the defaults).
    pub stuck: super::stuck::Thresholds,
    /// Sent to a confirmed stuck process before gdb attaches: the runtime then prints its
    /// own stacks (Python's faulthandler registered by the pytest adapter on SIGUSR1).
    pub dump_signal: Option<i32>,
}

pub fn start(spec: RunSpec) -> Result<Arc<TestRun>> {
    let Some((program, rest)) = spec.cmd.split_first() else {
        return Err(StrobeError::validation("the adapter returned an empty command"));
    };
    let mut cmd = Command::new(program);
    cmd.args(rest).current_dir(&spec.cwd).envs(&spec.env).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.process_group(0);
    let mut child = cmd.spawn().map_err(|e| {
        StrobeError::validation(format!("cannot run '{}' in {}: {e}. Is the test toolchain installed and on PATH?", spec.cmd.join(" "), spec.cwd))
    })?;
    let run = registry::create(spec.meta);
    let pid = child.id();
    run.state.lock().unwrap().pid = Some(pid);
    let mut readers = Vec::new();
    for (stderr, stream) in [(false, child.stdout.take().map(|s| Box::new(s) as Box<dyn Read + Send>)), (true, child.stderr.take().map(|s| Box::new(s) as Box<dyn Read + Send>))] {
        let Some(mut stream) = stream else { continue };
        let r = run.clone();
        readers.push(std::thread::spawn(move || {
            let mut buf = [0u8; 16384];
            while let Ok(n) = stream.read(&mut buf) {
                if n == 0 {
                    break;
                }
                r.append(stderr, &buf[..n]);
            }
        }));
    }
    let r = run.clone();
    std::thread::Builder::new()
        .name("strobe-testrun".into())
        .spawn(move || {
            let status = child.wait();
            // Output written just before exit still counts: wait for both pipes to close.
            for t in readers {
                let _ = t.join();
            }
            let mut s = r.state.lock().unwrap();
            s.exit = Some(match status {
                Ok(st) => (st.code(), st.signal()),
                Err(_) => (None, None),
            });
            s.ended_ms = Some(r.elapsed_ms());
        })
        .map_err(|e| StrobeError::internal(format!("cannot start the test run's thread: {e}")))?;
    super::stuck::watch(run.clone(), spec.kill_on_stuck, spec.stuck, spec.dump_signal);
    Ok(run)
}

/// Stop the run's whole process group, politely first. Returns at once.
pub fn kill(run: &Arc<TestRun>) {
    let pid = {
        let mut s = run.state.lock().unwrap();
        if s.exit.is_some() {
            return;
        }
        s.killed = true; // also set by the detector for killOnStuck, before its dump signal
        s.pid
    };
    let Some(pid) = pid else { return };
    let r = run.clone();
    std::thread::spawn(move || {
        for (sig, wait_ms) in [(libc::SIGINT, 2000u64), (libc::SIGTERM, 2000), (libc::SIGKILL, 0)] {
            // SAFETY: signalling the process group we created for this run.
            unsafe { libc::kill(-(pid as i32), sig) };
            let mut waited = 0;
            while waited < wait_ms && !r.finished() {
                std::thread::sleep(Duration::from_millis(50));
                waited += 50;
            }
            if r.finished() {
                return;
            }
        }
    });
}
