//! Typed enters stored as captured and decoded when read (store/captures.rs).
//!
//! At ingest (`decode.rs`) a typed enter's record is stored as a blob in place of its
//! arguments' JSON: `u8 version | u8 nregs | u16 0 | u32 plan | u32 pid | u32 tid`, the
//! argument registers (`nregs` u64), then the payload with every span and delta replaced by
//! a reference to its slot's last stored whole span, or a delta on it carrying the windows
//! changed since (`capture_spans.rs` `Out::Referenced`); the whole spans are rows of
//! `capture_spans`, the plan a row of `capture_plans`. Storing one costs little more than
//! an integer enter does (≈ 300 bytes for a SQLite cursor instead of ≈ 4 KB of JSON, and no
//! decode).
//!
//! When events are read (`Engine::query`), each such blob is expanded with the stored spans
//! and decoded by the same `capture_decode::record_json` the ingest path used, so a query
//! prints exactly what decoding at ingest printed. A reference whose span is not stored
//! leaves its blocks out: the decoder prints `<unreadable …>`, never another value.

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use super::capture_plan::CapturePlan;
use super::capture_spans::{apply_delta, pieces, Piece};
use super::code_names::CodeNames;
use super::Engine;
use crate::store::{CaptureReader, Event};

const VERSION: u8 = 1;
const HEADER: usize = 16;
/// Delta steps a read follows at most. The daemon now stores whole spans only (0 or 1 steps);
/// stores written before 7e12605 hold delta rows, chains of up to 16.
const MAX_CHAIN: u32 = 64;

/// The blob stored for a typed enter.
pub(super) fn encode(plan: u32, pid: u32, tid: u32, regs: &[u64], payload: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(HEADER + 8 * regs.len() + payload.len());
    b.extend_from_slice(&[VERSION, regs.len() as u8, 0, 0]);
    for v in [plan, pid, tid] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    for r in regs {
        b.extend_from_slice(&r.to_le_bytes());
    }
    b.extend_from_slice(payload);
    b
}

struct Stored<'a> {
    plan: u32,
    pid: u32,
    tid: u32,
    regs: Vec<u64>,
    payload: &'a [u8],
}

fn parse(b: &[u8]) -> Option<Stored<'_>> {
    if b.len() < HEADER || b[0] != VERSION {
        return None;
    }
    let u32_at = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    let nregs = b[1] as usize;
    let regs_end = HEADER + 8 * nregs;
    let regs = b.get(HEADER..regs_end)?.chunks_exact(8).map(|w| u64::from_le_bytes(w.try_into().unwrap())).collect();
    Some(Stored { plan: u32_at(4), pid: u32_at(8), tid: u32_at(12), regs, payload: &b[regs_end..] })
}

/// Fill in `arguments` of every event of `events` stored as captured (session `session_id`).
pub(super) fn decode_events(engine: &Engine, session_id: &str, events: &mut [Event]) {
    if events.iter().all(|e| e.capture.is_none()) {
        return;
    }
    let live = engine.sessions.lock().unwrap().get(session_id).cloned();
    // Function pointers are named from the session's modules (stored with its captures once
    // the daemon no longer holds it).
    let code = live.as_ref().map(|s| s.state.lock().unwrap().modules.code.clone());
    let decoded = engine.store.with_capture_reader(session_id, |reader| {
        let code = code.or_else(|| reader.modules().ok().flatten().map(|json| Arc::new(CodeNames::from_json(&json))));
        let mut plans: HashMap<u32, Option<Arc<CapturePlan>>> = HashMap::new();
        let mut spans = Resolver { reader, memo: HashMap::new() };
        for e in events.iter_mut() {
            let Some(raw) = e.capture.take() else { continue };
            let Some(stored) = parse(&raw) else {
                e.arguments = Some("\"<typed capture in an unknown layout>\"".into());
                continue;
            };
            let plan = plans
                .entry(stored.plan)
                .or_insert_with(|| {
                    let kept = live.as_ref().and_then(|s| s.state.lock().unwrap().capture.stored_plan(stored.plan));
                    kept.or_else(|| reader.plan(stored.plan).ok().flatten().and_then(|json| serde_json::from_str(&json).ok()).map(Arc::new))
                })
                .clone();
            e.arguments = Some(match plan {
                Some(plan) => {
                    let payload = spans.expand(stored.pid, stored.tid, stored.payload);
                    super::capture_decode::record_json(&plan, code.as_deref(), false, &stored.regs, &payload)
                }
                None => "\"<typed capture without its stored plan>\"".into(),
            });
        }
    });
    if let Err(e) = decoded {
        for ev in events.iter_mut().filter(|e| e.capture.is_some()) {
            ev.capture = None;
            ev.arguments = Some(serde_json::Value::String(format!("<typed capture not decoded: {e}>")).to_string());
        }
    }
}

/// A span's blocks by (pid, tid, key); `None`: not stored.
type SpanMemo = HashMap<(u32, u32, u64), Option<Rc<Vec<u8>>>>;

/// Stored spans by key, each read once per query.
struct Resolver<'r, 'c> {
    reader: &'r CaptureReader<'c>,
    memo: SpanMemo,
}

impl Resolver<'_, '_> {
    fn span(&mut self, pid: u32, tid: u32, key: u64, steps: u32) -> Option<Rc<Vec<u8>>> {
        if let Some(hit) = self.memo.get(&(pid, tid, key)) {
            return hit.clone();
        }
        let found = match self.reader.span(pid, tid, key).ok().flatten() {
            Some((0, blocks)) => Some(Rc::new(blocks)),
            Some((base, entries)) if steps < MAX_CHAIN => self.span(pid, tid, base, steps + 1).map(|b| {
                let mut blocks = (*b).clone();
                apply_delta(&mut blocks, &entries);
                Rc::new(blocks)
            }),
            _ => None,
        };
        self.memo.insert((pid, tid, key), found.clone());
        found
    }

    /// A stored payload as plain blocks.
    fn expand(&mut self, pid: u32, tid: u32, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(payload.len() * 8);
        for piece in pieces(payload) {
            match piece {
                Piece::Block(at, end) | Piece::Span(_, at, end) => out.extend_from_slice(&payload[at..end]),
                Piece::Ref(key) => {
                    if let Some(blocks) = self.span(pid, tid, key, 0) {
                        out.extend_from_slice(&blocks);
                    }
                }
                Piece::Delta(_, base, at, end) => {
                    if let Some(blocks) = self.span(pid, tid, base, 0) {
                        let from = out.len();
                        out.extend_from_slice(&blocks);
                        apply_delta(&mut out[from..], &payload[at..end]);
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_capture_reads_back_and_garbage_is_refused() {
        let payload = [7u8, 8, 9];
        let b = encode(3, 4242, 77, &[0x1000, 5], &payload);
        let s = parse(&b).expect("parses");
        assert_eq!((s.plan, s.pid, s.tid, s.regs.clone(), s.payload), (3, 4242, 77, vec![0x1000, 5], &payload[..]));
        // Another layout version, a header cut short, registers past the end: not decoded.
        let mut other = b.clone();
        other[0] = 9;
        assert!(parse(&other).is_none());
        assert!(parse(&b[..HEADER - 1]).is_none());
        let mut many = b.clone();
        many[1] = 200;
        assert!(parse(&many).is_none());
    }
}
