//! The ingest loop: turns what the Frida host reports (output bytes, agent event
//! batches, detaches) into timeline rows and session state.

use std::collections::VecDeque;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::mpsc::UnboundedReceiver;

use super::output_lines::{Line, LineBuffers};
use super::{lifecycle, monotonic_ns, Engine, Session};
use crate::frida::HostEvent;
use crate::store::event::{Event, EventType};

/// How long a process's end waits for its output streams to close. Frida reads the stdio
/// pipes on its own: the last `write()`s before `exit` can arrive after the exit status, and
/// a partial line stored at the exit would be cut from its rest (seen in CI: "line " +
/// "5734\n"). A forked child that keeps the pipe open must not hold the end for long.
const END_WAITS_FOR_OUTPUT: Duration = Duration::from_millis(300);

pub(super) async fn run(engine: Weak<Engine>, mut rx: UnboundedReceiver<HostEvent>) {
    let mut lines = LineBuffers::default();
    // Process ends held until the process's output streams closed (or END_WAITS_FOR_OUTPUT).
    let mut held: VecDeque<(Instant, HostEvent)> = VecDeque::new();
    loop {
        // Partial output lines wait for their newline until they are due (output_lines.rs).
        let due = [lines.next_due(), held.front().map(|h| h.0)].into_iter().flatten().min();
        let ev = tokio::select! {
            biased; // output already queued may complete the partial line: read it first
            ev = rx.recv() => ev,
            _ = tokio::time::sleep_until(due.unwrap_or_else(Instant::now).into()), if due.is_some() => {
                let Some(engine) = engine.upgrade() else { return };
                let now = Instant::now();
                while held.front().is_some_and(|h| h.0 <= now) {
                    let (_, ev) = held.pop_front().unwrap();
                    process_end(&engine, &mut lines, ev);
                }
                let quiet = lines.expired(now);
                if !quiet.is_empty() {
                    tracing::debug!(lines = quiet.len(), "partial output lines stored after a quiet second");
                }
                store_lines(&engine, quiet);
                continue;
            }
        };
        let Some(ev) = ev else { return };
        let Some(engine) = engine.upgrade() else { return };
        match ev {
            HostEvent::Output { pid, fd, data } => {
                if data.is_empty() {
                    store_lines(&engine, lines.close(pid, fd));
                    // The process's end waited for this: what is held for it goes now.
                    if !lines.streams_open(pid) {
                        release(&engine, &mut lines, &mut held, pid);
                    }
                    continue;
                }
                if let Some(s) = engine.session_by_pid(pid) {
                    let ts = monotonic_ns() - s.start_mono_ns;
                    store_lines(&engine, lines.push(pid, fd, &data, ts));
                }
            }
            HostEvent::AgentMessage { pid, message, data } => {
                let Some(s) = engine.session_by_pid(pid) else {
                    // A loading thread waits for this ack whether or not anyone listens.
                    if message.get("type").and_then(Value::as_str) == Some("modules") {
                        if let Ok(frida) = engine.frida_running() {
                            tokio::spawn(async move { frida.host().post(pid, serde_json::json!({ "type": "modules-ack" })).await });
                        }
                    }
                    continue;
                };
                match message.get("type").and_then(Value::as_str) {
                    Some("events_bin") => {
                        let data = match message.get("outbox") {
                            Some(place) => outbox_batch(&engine, &s, pid, &message, place),
                            None => data,
                        };
                        super::decode::ingest(&engine, &s, pid, &message, data.as_deref())
                    }
                    // Not mapped: the agent's batches keep carrying their bytes.
                    Some("outbox") => {
                        if let Err(why) = s.outboxes.open(pid, &message) {
                            tracing::debug!(pid, "outbox not mapped: {why}");
                        }
                    }
                    Some("paused" | "conditionError") => super::debug_state::ingest(&engine, &s, pid, &message),
                    Some("logpoints") => super::debug_state::ingest_logpoints(&engine, &s, pid, &message),
                    Some("events") => {
                        if let Some(list) = message.get("events").and_then(Value::as_array) {
                            let rows = trace_rows(&engine, &s, pid, list);
                            engine.store.insert(rows);
                        }
                    }
                    // A library loaded: the agent's thread waits for the ack (modules.rs).
                    Some("modules") => {
                        let engine = engine.clone();
                        tokio::spawn(async move { engine.on_modules_loaded(&s, pid, &message).await });
                    }
                    Some("variable_snapshot") => super::memory::ingest_snapshot(&engine, &s, pid, &message),
                    Some("log") => tracing::debug!(pid, "agent: {}", message.get("message").unwrap_or(&serde_json::Value::Null)),
                    _ => {
                        lifecycle::on_agent_message(&engine, &s, pid, &message);
                    }
                }
            }
            // Exit status and detach (lifecycle.rs), once the process's output is in.
            HostEvent::Detached { pid, .. } | HostEvent::ExitStatus { pid, .. } => {
                let waiting = held.iter().find(|h| end_pid(&h.1) == Some(pid)).map(|h| h.0);
                // A detach that is not the process's end (Frida ended its session while the
                // process runs on: lifecycle.rs re-attaches) must be seen while it runs.
                let an_end = !matches!(&ev, HostEvent::Detached { reason, .. } if reason != "process-terminated");
                if waiting.is_some() || an_end && lines.streams_open(pid) {
                    held.push_back((waiting.unwrap_or_else(|| Instant::now() + END_WAITS_FOR_OUTPUT), ev));
                } else {
                    process_end(&engine, &mut lines, ev);
                }
            }
            HostEvent::ChildAdded { pid, parent_pid, origin, .. } => lifecycle::on_child_added(&engine, pid, parent_pid, origin),
            HostEvent::HostExited { status } => {
                for (_, ev) in held.drain(..) {
                    process_end(&engine, &mut lines, ev);
                }
                tracing::warn!("Frida host exited: {status}");
                engine.on_host_exited(&status);
                return;
            }
        }
    }
}

fn end_pid(ev: &HostEvent) -> Option<u32> {
    match ev {
        HostEvent::Detached { pid, .. } | HostEvent::ExitStatus { pid, .. } => Some(*pid),
        _ => None,
    }
}

/// The held ends of `pid`, in the order they came.
fn release(engine: &Arc<Engine>, lines: &mut LineBuffers, held: &mut VecDeque<(Instant, HostEvent)>, pid: u32) {
    let (mine, rest): (VecDeque<_>, VecDeque<_>) = held.drain(..).partition(|h| end_pid(&h.1) == Some(pid));
    *held = rest;
    for (_, ev) in mine {
        process_end(engine, lines, ev);
    }
}

/// The bytes of a batch the agent left in its outbox (engine/outbox.rs): `place` is
/// `[start, length]`. One that cannot be found (not expected: the agent writes there only
/// after this daemon mapped the outbox) is counted in `eventsLost`, its `count` records.
fn outbox_batch(engine: &Engine, s: &Session, pid: u32, message: &Value, place: &Value) -> Option<Vec<u8>> {
    let at = |i: usize| place.get(i).and_then(Value::as_u64);
    let bytes = at(0).zip(at(1)).and_then(|(start, len)| s.outboxes.copy_out(pid, start, len));
    if bytes.is_none() {
        let count = message.get("count").and_then(Value::as_i64).unwrap_or(0);
        tracing::warn!(pid, "a fast-path batch named {place} in an outbox that is not mapped; its {count} records are counted lost");
        engine.store.count_lost(&s.id, count);
    }
    bytes
}

/// A process ended: its partial lines are stored as they are, then its end is recorded.
fn process_end(engine: &Arc<Engine>, lines: &mut LineBuffers, ev: HostEvent) {
    if let Some(pid) = end_pid(&ev) {
        store_lines(engine, lines.take(pid, None));
        // Every message of the process was read before its end: its outbox is done.
        if let Some(s) = engine.session_by_pid(pid) {
            s.outboxes.close(pid);
        }
    }
    match ev {
        HostEvent::Detached { pid, reason } => lifecycle::on_detached(engine, pid, &reason),
        HostEvent::ExitStatus { pid, code, signal } => lifecycle::on_exit_status(engine, pid, code, signal),
        _ => {}
    }
}

/// One stdout/stderr event per line, so queries and cursors work line by line.
fn store_lines(engine: &Engine, lines: Vec<Line>) {
    let rows: Vec<Event> = lines
        .into_iter()
        .filter_map(|l| {
            let s = engine.session_by_pid(l.pid)?;
            let mut e = Event::new(&s.id, if l.fd == 2 { EventType::Stderr } else { EventType::Stdout }, l.ts);
            e.pid = Some(l.pid as i64);
            e.text = Some(l.text);
            Some(e)
        })
        .collect();
    if !rows.is_empty() {
        // Numbered after the trace events stamped before them (store/hold.rs).
        engine.store.insert_output(rows);
    }
}

/// Agent records: `{k:"enter"|"exit", fn, call, parent, tid, ts, args?, ret?, dur?}`.
fn trace_rows(engine: &Engine, s: &Arc<Session>, pid: u32, list: &[Value]) -> Vec<Event> {
    let Ok(symbols) = lifecycle::symbols_for(engine, s, pid) else { return Vec::new() };
    let mut rows = Vec::with_capacity(list.len());
    let mut st = s.state.lock().unwrap();
    // Call ids are per agent: a child's must not meet its parent's.
    let key = |c: u64| if pid == s.pid { c } else { lifecycle::call_key(pid, c) };
    for rec in list {
        let kind = match rec.get("k").and_then(Value::as_str) {
            Some("enter") => EventType::FunctionEnter,
            Some("exit") => EventType::FunctionExit,
            Some("thread") => {
                st.life.note_thread(pid, rec);
                continue;
            }
            Some("sampling") => {
                note_cost_sampling(&mut st, s, &symbols, rec);
                continue;
            }
            _ => continue,
        };
        let Some(f_index) = rec.get("fn").and_then(Value::as_u64) else { continue };
        let Some(f) = symbols.functions.get(f_index as usize) else { continue };
        let ts = rec.get("ts").and_then(Value::as_f64).map(|t| t as i64 - s.start_mono_ns).unwrap_or(0);
        let mut e = Event::new(&s.id, kind, ts);
        e.id = engine.store.next_event_id();
        e.pid = Some(pid as i64);
        e.thread_id = rec.get("tid").and_then(Value::as_i64);
        e.thread_name = st.life.thread_name(pid, e.thread_id);
        e.function_name = Some(f.name.clone());
        e.function_name_raw = Some(f.raw_name.clone());
        e.source_file = f.file.clone();
        e.line_number = f.line.map(|l| l as i64);
        let call = rec.get("call").and_then(Value::as_u64);
        e.parent_event_id = rec.get("parent").and_then(Value::as_u64).and_then(|p| st.open_calls.get(&key(p)).copied());
        e.watch_values = rec.get("watch").filter(|w| !w.is_null()).map(|w| w.to_string()); // watches.rs
        // A JS-path function's events arrive in order with its sampling switches.
        if st.tracing.sampled.contains_key(&(f_index as u32)) {
            e.sampled = Some(true);
        }
        // Raw words of a function with a word shape (word_shapes.rs): typed like the fast path's.
        let shape = if st.life.has_own_image(pid) { None } else { st.tracing.word_shapes.get(&(f_index as u32)).cloned() };
        match kind {
            EventType::FunctionEnter => {
                e.arguments = rec.get("args").map(|a| match (&shape, a.as_array()) {
                    (Some(shape), Some(words)) => typed_words(|out| shape.push_args(out, &words.iter().map(word_of).collect::<Vec<_>>())),
                    _ => a.to_string(),
                });
                if let Some(c) = call {
                    st.open_calls.insert(key(c), e.id);
                }
            }
            _ => {
                e.return_value = rec.get("ret").map(|r| match (&shape, r.as_str()) {
                    (Some(shape), Some(_)) => typed_words(|out| shape.push_ret(out, word_of(r))),
                    _ => r.to_string(),
                });
                e.duration_ns = rec.get("dur").and_then(Value::as_f64).map(|d| d as i64);
                // Pointer parameters read again at exit (args_at_exit.rs).
                e.arguments = rec.get("args").filter(|a| a.is_object()).map(|a| a.to_string());
                if let Some(c) = call {
                    st.open_calls.remove(&key(c));
                }
            }
        }
        rows.push(e);
    }
    rows
}

/// `{k:"sampling", fn, on, every, ts}`: the agent sampled a JS-path function by cost
/// (agent/src/cost_sampling.ts), or stopped.
fn note_cost_sampling(st: &mut super::session::SessionState, s: &Session, symbols: &crate::symbols::SymbolIndex, rec: &Value) {
    let Some(func) = rec.get("fn").and_then(Value::as_u64).map(|f| f as u32) else { return };
    let Some(f) = symbols.functions.get(func as usize) else { return };
    let enabled = rec.get("on").and_then(Value::as_u64) == Some(1);
    if enabled && st.tracing.never_sample.contains(&func) {
        return; // raced a user's disable
    }
    let every = rec.get("every").and_then(Value::as_u64).unwrap_or(1).max(1);
    let ts = rec.get("ts").and_then(Value::as_f64).map(|t| t as i64 - s.start_mono_ns).unwrap_or(0);
    st.tracing.record_change(super::sampling::SamplingChange {
        kind: "sampling_state_change",
        func_id: func,
        func_name: f.name.clone(),
        enabled,
        sample_rate: if enabled { 1.0 / every as f64 } else { 1.0 },
        timestamp_ns: ts,
        reason: "cost",
    });
}

/// A raw word as the JS path sends it: a NativePointer's hex text.
fn word_of(v: &Value) -> u64 {
    v.as_str().and_then(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok()).unwrap_or(0)
}

fn typed_words(write: impl FnOnce(&mut Vec<u8>)) -> String {
    let mut out = Vec::new();
    write(&mut out);
    String::from_utf8(out).unwrap_or_default()
}
