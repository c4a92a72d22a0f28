//! Typed records kept as they arrived, to measure the decoder offline on real target memory
//! (`benches/capture_decode.rs`): a bench turns keeping on for a session, runs the workload,
//! then decodes the kept records in a loop. Off unless a bench asks; never used by tools.

use std::sync::Arc;

use super::capture_plan::CapturePlan;
use super::Engine;
use crate::error::Result;

/// One typed enter or exit as the hook wrote it.
struct Sample {
    plan: Arc<CapturePlan>,
    exit: bool,
    /// Argument registers (enter) or `[rax]` (exit).
    regs: Vec<u64>,
    payload: Vec<u8>,
}

/// A session's kept records, up to `max`.
pub(crate) struct Kept {
    max: usize,
    samples: Vec<Sample>,
}

impl Kept {
    pub fn push(&mut self, plan: &Arc<CapturePlan>, exit: bool, regs: &[u64], payload: &[u8]) {
        if self.samples.len() < self.max {
            self.samples.push(Sample { plan: plan.clone(), exit, regs: regs.to_vec(), payload: payload.to_vec() });
        }
    }
}

/// Records kept from a session (see [`Engine::keep_typed_samples`]).
pub struct TypedSamples {
    samples: Vec<Sample>,
}

impl TypedSamples {
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// Payload bytes (the copied blocks) of record `i`.
    pub fn payload(&self, i: usize) -> &[u8] {
        &self.samples[i].payload
    }

    /// The JSON the daemon stores for record `i` (arguments of an enter, return of an exit).
    pub fn json(&self, i: usize) -> String {
        self.json_from(i, &self.samples[i].payload)
    }

    /// The JSON of record `i` with `payload` in place of its own (the same bytes, read back
    /// from elsewhere: a decode at query time).
    pub fn json_from(&self, i: usize, payload: &[u8]) -> String {
        let s = &self.samples[i];
        super::capture_decode::record_json(&s.plan, None, s.exit, &s.regs, payload)
    }

    /// Whether record `i` is an exit.
    pub fn is_exit(&self, i: usize) -> bool {
        self.samples[i].exit
    }
}

impl Engine {
    /// Keep up to `max` typed records of the session as they arrive (benchmarks only).
    #[doc(hidden)]
    pub fn keep_typed_samples(&self, session_id: &str, max: usize) -> Result<()> {
        let s = self.session(session_id)?;
        s.state.lock().unwrap().typed_samples = Some(Kept { max, samples: Vec::new() });
        Ok(())
    }

    /// The records kept so far (taken: keeping goes on with an empty list).
    #[doc(hidden)]
    pub fn typed_samples(&self, session_id: &str) -> Result<TypedSamples> {
        let s = self.session(session_id)?;
        let mut st = s.state.lock().unwrap();
        let samples = st.typed_samples.as_mut().map(|k| std::mem::take(&mut k.samples)).unwrap_or_default();
        Ok(TypedSamples { samples })
    }
}
