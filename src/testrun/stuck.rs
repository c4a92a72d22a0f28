//! The stuck detector, one thread per run, sampling every 500 ms:
//! 1. output silence (nothing on stdout/stderr for `suspect_ms`) while no compiler runs,
//! 2. the tree's CPU delta over the last 2 s: ~0 (waiting: deadlock, sleep) or ~a full
//!    core (spinning: an infinite loop) — a warning goes out,
//! 3. a stack comparison: each thread's place (state, wait channel, syscall with user
//!    PC and SP, from /proc) at `first_stack_ms` of silence and again at `confirm_ms`;
//!    a thread still at exactly the same place confirms it (runtimes keep housekeeping
//!    threads ticking — Go's sysmon — so not every thread has to stay). (gdb would be exact for spinning
//!    threads too, but attaching it takes seconds under load; it runs once, for the report.)
//! The report carries every thread's backtrace (gdb); with `kill_on_stuck` the run is stopped.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::proctree;
use super::registry::{StuckReport, StuckWarning, TestRun, ThreadStack};

#[derive(Debug, Clone, Copy)]
pub struct Thresholds {
    pub suspect_ms: u64,
    pub first_stack_ms: u64,
    pub confirm_ms: u64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds { suspect_ms: 2000, first_stack_ms: 6000, confirm_ms: 8000 }
    }
}

const TICK: Duration = Duration::from_millis(500);
/// A core counts as spinning above this share of one CPU; waiting below the idle share.
const BUSY_SHARE: f64 = 0.7;
const IDLE_SHARE: f64 = 0.05;

pub fn watch(run: Arc<TestRun>, kill_on_stuck: bool, t: Thresholds, dump_signal: Option<i32>) {
    let _ = std::thread::Builder::new().name("strobe-stuck".into()).spawn(move || detect(run, kill_on_stuck, t, dump_signal));
}

fn detect(run: Arc<TestRun>, kill_on_stuck: bool, t: Thresholds, dump_signal: Option<i32>) {
    let hz = proctree::clock_ticks_per_sec() as f64;
    let mut cpu_history: Vec<(Instant, u64)> = Vec::new();
    let mut first_sample: Option<(u32, Vec<String>)> = None;
    let mut warned_for: Option<Instant> = None;
    // One report per process: its own later output (a stack dump) must not report it again.
    let mut reported: Vec<u32> = Vec::new();
    loop {
        std::thread::sleep(TICK);
        let (pid, last_output) = {
            let s = run.state.lock().unwrap();
            if s.exit.is_some() {
                return;
            }
            (s.pid, s.last_output.unwrap_or(run.started))
        };
        let Some(pid) = pid else { continue };
        let tree = proctree::tree(pid);
        let compiling = proctree::compiling(&tree);
        run.state.lock().unwrap().phase = Some(if compiling { "compiling" } else { "running" });
        let now = Instant::now();
        let ticks: u64 = tree.iter().map(|p| p.cpu_ticks).sum();
        // A process that left the tree takes its CPU time with it: start the window again.
        if cpu_history.last().is_some_and(|(_, last)| ticks < *last) {
            cpu_history.clear();
        }
        cpu_history.push((now, ticks));
        cpu_history.retain(|(at, _)| now.duration_since(*at) <= Duration::from_millis(2600));
        let silent_ms = now.duration_since(last_output).as_millis() as u64;
        if compiling || silent_ms < t.suspect_ms {
            first_sample = None;
            continue;
        }
        let (t0, c0) = cpu_history[0];
        let span = now.duration_since(t0).as_secs_f64();
        if span < 1.5 {
            continue;
        }
        let share = cpu_history.last().map(|c| c.1).unwrap_or(c0).saturating_sub(c0) as f64 / hz / span;
        let kind = if share >= BUSY_SHARE {
            "infinite_loop"
        } else if share <= IDLE_SHARE {
            "deadlock"
        } else {
            first_sample = None;
            continue; // working, just quiet
        };
        // The process doing the work: a leaf of the tree (the test binary, not cargo/npm).
        let leaves = proctree::leaves(&tree);
        let target = leaves.iter().max_by_key(|p| p.cpu_ticks).map(|p| p.pid).unwrap_or(pid);
        if reported.contains(&target) {
            continue;
        }
        if warned_for != Some(last_output) {
            warned_for = Some(last_output);
            let message = if kind == "deadlock" {
                format!("No output for {:.1} s and no CPU use: the current test may be deadlocked or waiting forever.", silent_ms as f64 / 1000.0)
            } else {
                format!("No output for {:.1} s with a core busy: the current test may loop forever.", silent_ms as f64 / 1000.0)
            };
            run.state.lock().unwrap().warnings.push(StuckWarning { at_ms: run.elapsed_ms(), pid: target, kind: kind.into(), silent_ms, message });
        }
        if silent_ms >= t.first_stack_ms && first_sample.as_ref().is_none_or(|(p, _)| *p != target) {
            first_sample = Some((target, proctree::thread_signature(target)));
            continue;
        }
        if silent_ms < t.confirm_ms {
            continue;
        }
        let Some((_, before)) = &first_sample else { continue };
        let now_sig = proctree::thread_signature(target);
        if !proctree::a_thread_stayed(before, &now_sig) {
            first_sample = Some((target, now_sig)); // it moved: compare against this one next time
            continue;
        }
        let (confirmed_at, silent_ms) = (run.elapsed_ms(), Instant::now().duration_since(last_output).as_millis() as u64);
        reported.push(target);
        // Report first: the dump signal may end the process (Go's SIGQUIT), and the run must
        // not be read as finished without its stuck test.
        let index = {
            let mut s = run.state.lock().unwrap();
            s.stuck.push(StuckReport { at_ms: confirmed_at, pid: target, kind: kind.into(), silent_ms, threads: Vec::new(), killed: kill_on_stuck });
            s.killed |= kill_on_stuck;
            s.capturing = true;
            s.stuck.len() - 1
        };
        if let Some(sig) = dump_signal {
            // SAFETY: signalling a process of this run's tree.
            unsafe { libc::kill(target as i32, sig) };
        }
        let after: Vec<ThreadStack> = super::stacks::capture(target, Duration::from_secs(20));
        {
            let mut s = run.state.lock().unwrap();
            s.stuck[index].threads = after;
            s.capturing = false;
        }
        if kill_on_stuck {
            super::runner::kill(&run);
        }
    }
}
