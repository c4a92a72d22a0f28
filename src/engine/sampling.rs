//! Fast-path tracing state of a session: events lost to a full ring, hot functions being
//! sampled (and the log of sampling switches), and the tuning knobs sent to the agent.
//!
//! The agent switches a fast-path function to sampling by itself when it runs above the hot
//! threshold (default 100 k calls/s, 1 call in 100 recorded), and a JS-path function when its
//! hooks take more than `tracing.costShare` of its threads' time (agent/src/cost_sampling.ts);
//! it reports each switch in the event stream (`decode.rs`, `ingest.rs`), kept here. The user can turn sampling off per
//! function with [`Engine::set_sampling`].

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::{monotonic_ns, Engine};
use crate::error::{ErrorCode, Result, StrobeError};
use crate::symbols::Pattern;

/// Most sampling switches kept per session (the oldest go first).
const MAX_SAMPLING_LOG: usize = 1000;

/// A function currently recorded 1 call in N.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SampledFunction {
    pub func_id: u32,
    pub func_name: String,
    /// Fraction of calls recorded: 0.01 = 1 call in 100.
    pub sample_rate: f64,
    /// Session time (ns since spawn) when sampling started.
    pub since_ns: i64,
}

/// One `sampling_state_change`, as the daemon keeps it on the session.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SamplingChange {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub func_id: u32,
    pub func_name: String,
    pub enabled: bool,
    pub sample_rate: f64,
    pub timestamp_ns: i64,
    /// "hot" (the agent measured the rate), "cost" (the agent measured its hooks' share of
    /// the time, JS-path functions) or "user" (turned off on request).
    pub reason: &'static str,
}

/// Per-session fast-path state (a field of `SessionState`).
#[derive(Debug, Default)]
pub(crate) struct TracingState {
    /// Records the agent could not deliver (ring full), running total.
    pub events_lost: u64,
    /// Calls skipped by sampling, running total.
    pub sampled_out: u64,
    pub sampled: BTreeMap<u32, SampledFunction>,
    /// Functions the user took out of sampling.
    pub never_sample: BTreeSet<u32>,
    pub log: Vec<SamplingChange>,
    /// `true` once the user asked for JS hooks only (`configure_tracing({mode: "js"})`).
    pub js_only: bool,
    /// Flow-control acknowledgements still to send (decode.rs).
    pub acks: AckBook,
    /// The agent options set through `configure_tracing` (merged), for agents that join
    /// later: followed children, a re-attached root (children.rs).
    pub agent_options: serde_json::Map<String, serde_json::Value>,
    /// Typed parameters and result of hooked functions of the session's image whose raw
    /// words are stored (word_shapes.rs), by function id.
    pub word_shapes: std::collections::HashMap<u32, std::sync::Arc<crate::store::word_shape::WordShape>>,
    /// `debug_trace argumentsAtExit`: exit events carry pointer parameters' pointees.
    pub args_at_exit: bool,
    /// Warnings about hooks installed since the last report (children.rs `add_hooks`: a
    /// watch can move a function to the JS path): debug_trace's next answer carries them.
    pub hook_warnings: Vec<String>,
}

/// Highest `events_bin` batch seq received from each agent (a followed child has its own
/// agent and numbering) and not yet acknowledged, and whether an ack task is running.
#[derive(Debug, Default)]
pub(crate) struct AckBook {
    unacked: BTreeMap<u32, u64>,
    running: bool,
}

impl AckBook {
    /// Note batch `seq` of `pid`'s agent; true when the caller must start the ack task.
    pub fn received(&mut self, pid: u32, seq: u64) -> bool {
        let e = self.unacked.entry(pid).or_insert(seq);
        *e = (*e).max(seq);
        !std::mem::replace(&mut self.running, true)
    }

    /// What to acknowledge now, per agent (the newest seq of each); empty ends the task.
    pub fn take(&mut self) -> Vec<(u32, u64)> {
        let due: Vec<(u32, u64)> = std::mem::take(&mut self.unacked).into_iter().collect();
        if due.is_empty() {
            self.running = false;
        }
        due
    }
}

impl TracingState {
    /// The `mode` of hooks requests: "auto" lets the agent choose the fast path per hook.
    pub fn hook_mode(&self) -> &'static str {
        if self.js_only { "js" } else { "auto" }
    }

    pub fn record_change(&mut self, change: SamplingChange) {
        if change.enabled {
            self.sampled.insert(
                change.func_id,
                SampledFunction {
                    func_id: change.func_id,
                    func_name: change.func_name.clone(),
                    sample_rate: change.sample_rate,
                    since_ns: change.timestamp_ns,
                },
            );
        } else {
            self.sampled.remove(&change.func_id);
        }
        if self.log.len() == MAX_SAMPLING_LOG {
            self.log.remove(0);
        }
        self.log.push(change);
    }

    pub fn sampled_functions(&self) -> Vec<SampledFunction> {
        self.sampled.values().cloned().collect()
    }
}

/// `debug_trace({sampling: {disable: [...], enable: [...]}})`: patterns over hooked functions.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SamplingRequest {
    /// Stop sampling these functions now and never sample them automatically again.
    #[serde(default)]
    pub disable: Vec<String>,
    /// Allow automatic sampling again.
    #[serde(default)]
    pub enable: Vec<String>,
}

/// What [`Engine::set_sampling`] did.
#[derive(Debug, Clone, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct SamplingUpdate {
    pub disabled: Vec<String>,
    pub enabled: Vec<String>,
    pub warnings: Vec<String>,
}

impl Engine {
    /// Tuning knobs of tracing: `mode` ("auto": fast path where possible, the default; "js":
    /// JS hooks only, for hooks added from now on), and for the agent's fast path
    /// `ringRecords`, `drainBatch` (records per binary batch) and `outbox` (batches through
    /// shared memory, engine/outbox.rs; all three before the first fast hook only),
    /// `drainIntervalMs`, `hotCallsPerSec` (0: no auto sampling), `sampleEvery`, `wrappers`,
    /// `costShare` (cost sampling, agent/src/cost_sampling.ts; it overrides the
    /// `tracing.costShare` setting for the session), and for typed capture `nativeCapture`,
    /// `typedValues` and `checkedReads` (agent/src/fastpath.ts CaptureOptions). Returns the
    /// agent's resulting settings.
    pub async fn configure_tracing(&self, session_id: &str, mut options: Value) -> Result<Value> {
        let Some(obj) = options.as_object_mut() else {
            return Err(StrobeError::validation("tracing options must be an object, e.g. {\"hotCallsPerSec\": 0}"));
        };
        let session = self.session(session_id)?;
        session.ensure_running()?;
        match obj.remove("mode") {
            None => {}
            Some(Value::String(m)) if m == "auto" || m == "js" => session.state.lock().unwrap().tracing.js_only = m == "js",
            Some(other) => {
                return Err(StrobeError::validation(format!("tracing mode {other} is not one of \"auto\", \"js\".")));
            }
        }
        let frida = self.frida_for_session()?;
        let reply = frida.host().rpc(session.pid, "tracingConfig", json!([options])).await?;
        // `{}` only reads the settings. Otherwise followed children trace the same way (an
        // option a child's agent refuses, such as a ring size after its first hook, is
        // logged; the root's reply is the answer), and so will agents that join later.
        if let Some(obj) = options.as_object().filter(|o| !o.is_empty()) {
            session.state.lock().unwrap().tracing.agent_options.extend(obj.clone());
            self.rpc_to_children(&session, "tracingConfig", json!([options]), false).await;
        }
        Ok(reply)
    }

    /// Turn hot-function sampling off (`disable`) or allow it again (`enable`) for the hooked
    /// functions matching the patterns.
    pub async fn set_sampling(&self, session_id: &str, req: &SamplingRequest) -> Result<SamplingUpdate> {
        let session = self.session(session_id)?;
        session.ensure_running()?;
        let symbols = self.session_symbols(&session)?;
        let hooked: Vec<u32> = session.state.lock().unwrap().hooked.iter().copied().collect();
        let mut update = SamplingUpdate::default();
        let mut resolve = |patterns: &[String], names: &mut Vec<String>| -> Result<Vec<u32>> {
            let mut ids = Vec::new();
            for text in patterns {
                let p = Pattern::parse(text)?;
                let before = ids.len();
                for &id in &hooked {
                    let f = &symbols.functions[id as usize];
                    if p.matches(f, &session.project_root) {
                        ids.push(id);
                        names.push(f.name.clone());
                    }
                }
                if ids.len() == before {
                    update.warnings.push(format!(
                        "Sampling pattern '{text}' matches no hooked function; add it with debug_trace first."
                    ));
                }
            }
            Ok(ids)
        };
        let mut disabled_names = Vec::new();
        let mut enabled_names = Vec::new();
        let disable = resolve(&req.disable, &mut disabled_names)?;
        let enable = resolve(&req.enable, &mut enabled_names)?;
        if disable.is_empty() && enable.is_empty() {
            return Ok(update);
        }
        let frida = self.frida_for_session()?;
        frida
            .host()
            .rpc(session.pid, "sampling", json!([{ "disable": disable, "enable": enable }]))
            .await?;
        self.rpc_to_children(&session, "sampling", json!([{ "disable": disable, "enable": enable }]), true).await;
        let now = monotonic_ns() - session.start_mono_ns;
        let mut st = session.state.lock().unwrap();
        for (&id, name) in disable.iter().zip(&disabled_names) {
            st.tracing.never_sample.insert(id);
            if st.tracing.sampled.contains_key(&id) {
                st.tracing.record_change(SamplingChange {
                    kind: "sampling_state_change",
                    func_id: id,
                    func_name: name.clone(),
                    enabled: false,
                    sample_rate: 1.0,
                    timestamp_ns: now,
                    reason: "user",
                });
            }
        }
        for id in &enable {
            st.tracing.never_sample.remove(id);
        }
        update.disabled = disabled_names;
        update.enabled = enabled_names;
        Ok(update)
    }

    /// (events lost, functions being sampled, sampling log) of a live session.
    pub fn tracing_report(&self, session_id: &str) -> Result<(u64, Vec<SampledFunction>, Vec<SamplingChange>)> {
        let session = self.session(session_id)?;
        let st = session.state.lock().unwrap();
        let lost = st.tracing.events_lost + self.store.events_shed(session_id) as u64;
        Ok((lost, st.tracing.sampled_functions(), st.tracing.log.clone()))
    }

    fn frida_for_session(&self) -> Result<std::sync::Arc<crate::frida::FridaRuntime>> {
        self.frida.lock().unwrap().get().cloned().ok_or_else(|| {
            StrobeError::new(ErrorCode::ProcessExited, "The Frida host is not running; the session's target is gone. Launch again.")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::AckBook;

    #[test]
    fn every_agent_gets_its_own_newest_batch_acknowledged() {
        let mut book = AckBook::default();
        assert!(book.received(100, 5), "the first batch starts the ack task");
        assert!(!book.received(200, 2), "a child's batch joins the running task");
        assert!(!book.received(100, 4), "an older seq does not lower the newest");
        assert_eq!(book.take(), vec![(100, 5), (200, 2)]);
        assert!(!book.received(200, 3), "the task runs until a round finds nothing");
        assert_eq!(book.take(), vec![(200, 3)]);
        assert_eq!(book.take(), vec![], "nothing new: the task ends");
        assert!(book.received(100, 6), "the next batch starts a new task");
    }
}
