//! The ingest loop: turns what the Frida host reports (output bytes, agent event
//! batches, detaches) into timeline rows and session state.

use std::sync::{Arc, Weak};

use serde_json::Value;
use tokio::sync::mpsc::UnboundedReceiver;

use super::{lifecycle, monotonic_ns, Engine, Session};
use crate::frida::HostEvent;
use crate::store::event::{Event, EventType};

pub(super) async fn run(engine: Weak<Engine>, mut rx: UnboundedReceiver<HostEvent>) {
    while let Some(ev) = rx.recv().await {
        let Some(engine) = engine.upgrade() else { return };
        match ev {
            HostEvent::Output { pid, fd, data } => {
                if data.is_empty() {
                    continue; // stream closed
                }
                if let Some(s) = engine.session_by_pid(pid) {
                    let kind = if fd == 2 { EventType::Stderr } else { EventType::Stdout };
                    let ts = monotonic_ns() - s.start_mono_ns;
                    // One event per line, so queries and cursors work line by line.
                    let text = String::from_utf8_lossy(&data);
                    let rows = text
                        .split_inclusive('\n')
                        .map(|line| {
                            let mut e = Event::new(&s.id, kind, ts);
                            e.pid = Some(pid as i64);
                            e.text = Some(line.to_string());
                            e
                        })
                        .collect();
                    // Numbered after the trace events stamped before them (store/hold.rs).
                    engine.store.insert_output(rows);
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
                    Some("events_bin") => super::decode::ingest(&engine, &s, pid, &message, data.as_deref()),
                    Some("paused" | "logpoint" | "conditionError") => super::debug_state::ingest(&engine, &s, pid, &message),
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
            // Exit status, exec and children: lifecycle.rs.
            HostEvent::Detached { pid, reason } => lifecycle::on_detached(&engine, pid, &reason),
            HostEvent::ExitStatus { pid, code, signal } => lifecycle::on_exit_status(&engine, pid, code, signal),
            HostEvent::ChildAdded { pid, parent_pid, origin, .. } => lifecycle::on_child_added(&engine, pid, parent_pid, origin),
            HostEvent::HostExited { status } => {
                tracing::warn!("Frida host exited: {status}");
                engine.on_host_exited(&status);
                return;
            }
        }
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
            _ => continue,
        };
        let Some(f) = rec.get("fn").and_then(Value::as_u64).and_then(|i| symbols.functions.get(i as usize)) else {
            continue;
        };
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
        match kind {
            EventType::FunctionEnter => {
                e.arguments = rec.get("args").map(|a| a.to_string());
                if let Some(c) = call {
                    st.open_calls.insert(key(c), e.id);
                }
            }
            _ => {
                e.return_value = rec.get("ret").map(|r| r.to_string());
                e.duration_ns = rec.get("dur").and_then(Value::as_f64).map(|d| d as i64);
                if let Some(c) = call {
                    st.open_calls.remove(&key(c));
                }
            }
        }
        rows.push(e);
    }
    rows
}
