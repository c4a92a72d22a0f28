//! Output lines wait a moment before they get their ids, so that ids follow time.
//!
//! stdout/stderr reach the daemon straight from the target's pipe, while the agent batches
//! trace events (every 5–10 ms). A line printed after a traced call therefore arrives
//! before that call's events; numbered on arrival it got the smaller id, and a client
//! following `afterEventId` saw the line before the call that printed it. Held here until
//! the session's next batch of events comes in (lines stamped before the batch's first event
//! are numbered first) or until `HOLD` has passed, the lines get their ids in time order.
//! `Store::flush` (every query, the end of a process) releases everything.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::event::Event;

/// Longer than the agent's slowest flush interval (10 ms) plus transport.
pub(super) const HOLD: Duration = Duration::from_millis(30);

#[derive(Default)]
pub(super) struct HeldOutput {
    by_session: Mutex<HashMap<String, VecDeque<(Instant, Event)>>>,
}

impl HeldOutput {
    pub fn hold(&self, events: Vec<Event>) {
        let now = Instant::now();
        let mut held = self.by_session.lock().unwrap_or_else(|e| e.into_inner());
        for e in events {
            held.entry(e.session_id.clone()).or_default().push_back((now, e));
        }
    }

    /// Lines due now: held for `HOLD`, or (of `session`) stamped before `before_ns`; all of
    /// them with `everything`. In arrival order per session.
    pub fn take(&self, session: Option<(&str, i64)>, everything: bool) -> Vec<Event> {
        let mut held = self.by_session.lock().unwrap_or_else(|e| e.into_inner());
        if held.is_empty() {
            return Vec::new();
        }
        let now = Instant::now();
        let mut out = Vec::new();
        for (id, queue) in held.iter_mut() {
            let before = session.filter(|(s, _)| *s == id).map(|(_, ts)| ts);
            while let Some((at, e)) = queue.front() {
                let due = everything || now.duration_since(*at) >= HOLD || before.is_some_and(|ts| e.timestamp_ns < ts);
                if !due {
                    break;
                }
                out.push(queue.pop_front().expect("front exists").1);
            }
        }
        held.retain(|_, q| !q.is_empty());
        out
    }
}
