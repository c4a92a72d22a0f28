//! Binary event batches of the tracing fast path (`{type: "events_bin", format: "rec-v2",
//! count, lost, sampledOut}` + records, see `agent/src/fastpath_c.ts`) turned into timeline
//! rows exactly as `ingest.rs` does for the JSON path: names, files and lines from the symbol
//! index, `parent_event_id` through the session's open-call map, arguments and return values
//! as JSON arrays/strings of hex text. Durations are computed in the agent (exit ts − enter
//! ts, both CLOCK_MONOTONIC), so a lost enter record does not lose its exit's duration.

use std::borrow::Cow;
use std::sync::Arc;

use rustc_hash::FxHashMap;
use serde_json::Value;

use super::capture_spans::Out;
use super::sampling::SamplingChange;
use super::{Engine, Session};
use crate::store::raw_batch::MAX_TRACE_ARGS as MAX_ARGS;
use crate::store::{RawTraceBatch, RawTraceRecord, TraceSite, TraceThread};
use crate::symbols::SymbolIndex;

pub const FORMAT: &str = "rec-v2";
/// Bytes of a record before its words; each record carries `words_of` 8-byte words after it.
pub const HEADER_SIZE: usize = 40;

const KIND_ENTER: u8 = 0;
const KIND_EXIT: u8 = 1;
const KIND_SAMPLING: u8 = 2;
/// Typed capture (capture_plan.rs): an enter or exit followed by `u32 length` and the
/// plan's copied blocks.
const KIND_TYPED_ENTER: u8 = 3;
const KIND_TYPED_EXIT: u8 = 4;
/// A typed exit whose plan reads nothing at exit (a scalar or void return): laid out like
/// a plain exit, no payload; its return value printed with the plan's type.
const KIND_TYPED_EXIT_BARE: u8 = 5;
/// A call left without returning (an exception unwound it, or a longjmp skipped it): an exit
/// without a return value, stored with `unwound: true` (fast_hook.c hook_unwound).
const KIND_UNWOUND: u8 = 6;
const FLAG_SAMPLED: u8 = 1;

/// One record, as laid out by the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    pub kind: u8,
    pub flags: u8,
    pub nargs: u8,
    pub func: u32,
    pub tid: u32,
    pub call: u64,
    pub parent: u64,
    pub ts: u64,
    pub v: [u64; MAX_ARGS],
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// Words a record carries on the wire: an enter's arguments, two for the others (exit:
/// return value and duration; sampling: on/off and rate), three for a typed exit (then rdx).
fn words_of(kind: u8, nargs: u8) -> usize {
    match kind {
        KIND_ENTER | KIND_TYPED_ENTER => (nargs as usize).min(MAX_ARGS),
        KIND_TYPED_EXIT => 3, // and rdx, a result's second eightbyte
        _ => 2,
    }
}

/// The copied blocks of a typed record (`b` starts at the record; empty for the others).
fn payload_of<'a>(b: &'a [u8], r: &Record, len: usize) -> &'a [u8] {
    if r.kind != KIND_TYPED_ENTER && r.kind != KIND_TYPED_EXIT {
        return &[];
    }
    b.get(HEADER_SIZE + 8 * words_of(r.kind, r.nargs) + 4..len).unwrap_or(&[])
}

impl Record {
    /// Decode the record at the start of `b` and its length, or `None` if `b` is too short
    /// for it (a truncated batch).
    pub fn parse(b: &[u8]) -> Option<(Record, usize)> {
        if b.len() < HEADER_SIZE {
            return None;
        }
        let words = words_of(b[4], b[6]);
        let mut len = HEADER_SIZE + 8 * words;
        if b[4] == KIND_TYPED_ENTER || b[4] == KIND_TYPED_EXIT {
            let payload = b.get(len..len + 4).map(|l| u32::from_le_bytes(l.try_into().unwrap()))?;
            len += 4 + payload as usize;
        }
        if b.len() < len {
            return None;
        }
        let mut v = [0u64; MAX_ARGS];
        for (i, slot) in v.iter_mut().enumerate().take(words) {
            *slot = u64_at(b, HEADER_SIZE + 8 * i);
        }
        let r = Record {
            kind: b[4],
            flags: b[5],
            nargs: b[6],
            func: u32_at(b, 8),
            tid: u32_at(b, 12),
            call: u64_at(b, 16),
            parent: u64_at(b, 24),
            ts: u64_at(b, 32),
            v,
        };
        Some((r, len))
    }
}

/// Rows (and session-state updates) for one `events_bin` message.
pub(super) fn ingest(engine: &Arc<Engine>, s: &Arc<Session>, pid: u32, header: &Value, data: Option<&[u8]>) {
    let lost = header.get("lost").and_then(Value::as_u64);
    let sampled_out = header.get("sampledOut").and_then(Value::as_u64);
    if lost.is_some() || sampled_out.is_some() {
        let mut st = s.state.lock().unwrap();
        // Running totals: keep the highest seen, whatever order batches come in.
        st.tracing.events_lost = st.tracing.events_lost.max(lost.unwrap_or(0));
        st.tracing.sampled_out = st.tracing.sampled_out.max(sampled_out.unwrap_or(0));
    }
    let Some(data) = data else { return };
    if header.get("format").and_then(Value::as_str) != Some(FORMAT) {
        tracing::warn!(pid, "events_bin with unknown format {:?}; batch ignored", header.get("format"));
        return;
    }
    let Ok(symbols) = engine.session_symbols(s) else { return };
    engine.store.insert_trace_batch(decode(engine, s, &symbols, pid, data));
    if let Some(seq) = header.get("seq").and_then(Value::as_u64) {
        acknowledge(engine, s, pid, seq);
    }
}

/// Flow control (see agent/src/fastpath.ts): tell each agent which of its batches are
/// stored, once the store has committed them, so a target that outruns SQLite fills (and
/// counts losses in) its ring instead of piling batches up in memory. One ack task per
/// session at a time; each round it acknowledges the newest batch of every agent that sent
/// one (the root and each followed child number their batches separately).
fn acknowledge(engine: &Arc<Engine>, s: &Arc<Session>, pid: u32, seq: u64) {
    if !s.state.lock().unwrap().tracing.acks.received(pid, seq) {
        return;
    }
    let engine = engine.clone();
    let s = s.clone();
    tokio::spawn(async move {
        loop {
            let due = s.state.lock().unwrap().tracing.acks.take();
            if due.is_empty() {
                return;
            }
            let store = engine.store.clone();
            let _ = tokio::task::spawn_blocking(move || store.flush()).await;
            let host = engine.frida.lock().unwrap().get().cloned();
            for (pid, seq) in due {
                if let Some(rt) = host.as_ref().filter(|_| s.is_running()) {
                    // A failed post: that agent is gone, or going; nothing waits for it.
                    let _ = rt.host().post(pid, serde_json::json!({ "type": "events-ack", "seq": seq })).await;
                }
            }
        }
    });
}

/// Turn the records in `data` into one batch of integer rows (sampling switches go to the
/// session state). Strings — names, files, thread names — are looked up once per distinct
/// function and thread of the batch, not per record. Typed captures come back as events of
/// their own (their JSON built here by capture_decode.rs), numbered in stream order.
pub(super) fn decode(engine: &Engine, s: &Arc<Session>, symbols: &SymbolIndex, pid: u32, data: &[u8]) -> RawTraceBatch {
    let mut batch = RawTraceBatch {
        session_id: s.id.clone(),
        pid: pid as i64,
        records: Vec::with_capacity(data.len() / (HEADER_SIZE + 16)),
        ..Default::default()
    };
    // func id -> index in batch.sites, tid -> index in batch.threads; the last hit first,
    // since consecutive records mostly share both.
    let mut site_of: FxHashMap<u32, u32> = FxHashMap::default();
    let mut thread_of: FxHashMap<u32, u32> = FxHashMap::default();
    let mut last_site = (u32::MAX, 0u32);
    let mut last_thread = (u32::MAX, 0u32);
    let mut st = s.state.lock().unwrap();
    let mut rest = data;
    // Typed captures, decoded once the session lock is released (decoding takes µs each).
    let mut typed: Vec<Typed> = Vec::new();
    // Each plan's argument words, worked out once a batch (a walk of the plan's parameters).
    let mut arg_words: FxHashMap<usize, usize> = FxHashMap::default();
    while !rest.is_empty() {
        let Some((r, len)) = Record::parse(rest) else {
            tracing::warn!("session {}: a fast-path batch ends inside a record; its last {} bytes are ignored", s.id, rest.len());
            break;
        };
        // A typed enter is stored as captured (capture_lazy.rs), its spans as rows; an exit is
        // decoded now (its return value is filtered on).
        let typed_kind = matches!(r.kind, KIND_TYPED_ENTER | KIND_TYPED_EXIT | KIND_TYPED_EXIT_BARE);
        let plan = if typed_kind { st.capture.plans.get(&r.func).cloned() } else { None };
        let out = if r.kind == KIND_TYPED_ENTER && plan.is_some() { Out::Referenced } else { Out::Expanded };
        // Before anything may skip the record: its spans are kept for later references.
        let spans_before = batch.capture_rows.spans.len();
        let payload = match payload_of(rest, &r, len) {
            [] => Cow::Borrowed(&[][..]),
            raw => st.capture.spans.take(pid, r.tid, raw, out, &mut batch.capture_rows.spans),
        };
        rest = &rest[len..];
        let Some(f) = symbols.functions.get(r.func as usize) else { continue };
        let ts = r.ts as i64 - s.start_mono_ns;
        let exit = match r.kind {
            KIND_ENTER | KIND_TYPED_ENTER => false,
            KIND_EXIT | KIND_TYPED_EXIT | KIND_TYPED_EXIT_BARE | KIND_UNWOUND => true,
            KIND_SAMPLING => {
                let enabled = r.v[0] != 0;
                if enabled && st.tracing.never_sample.contains(&r.func) {
                    continue; // raced a user's disable: the agent has already switched it off
                }
                st.tracing.record_change(SamplingChange {
                    kind: "sampling_state_change",
                    func_id: r.func,
                    func_name: f.name.clone(),
                    enabled,
                    sample_rate: if enabled { 1.0 / r.v[1].max(1) as f64 } else { 1.0 },
                    timestamp_ns: ts,
                    // fast_hook.c hook_check_rate: 0 the call rate, 1 the hooks' cost.
                    reason: if r.flags == 1 { "cost" } else { "hot" },
                });
                continue;
            }
            _ => continue,
        };
        if last_site.0 != r.func {
            let next = batch.sites.len() as u32;
            let i = *site_of.entry(r.func).or_insert_with(|| {
                batch.sites.push(TraceSite {
                    function_name: f.name.clone(),
                    function_name_raw: f.raw_name.clone(),
                    source_file: f.file.clone(),
                    line_number: f.line.map(|l| l as i64),
                    // Shapes name the session image's functions (an exec'd child has others).
                    shape: if st.life.has_own_image(pid) { None } else { st.tracing.word_shapes.get(&r.func).cloned() },
                });
                next
            });
            last_site = (r.func, i);
        }
        if last_thread.0 != r.tid {
            let next = batch.threads.len() as u32;
            let i = *thread_of.entry(r.tid).or_insert_with(|| {
                let thread_name = st.life.thread_name(pid, Some(r.tid as i64));
                batch.threads.push(TraceThread { thread_id: r.tid as i64, thread_name });
                next
            });
            last_thread = (r.tid, i);
        }
        let id = engine.store.next_event_id();
        for span in &mut batch.capture_rows.spans[spans_before..] {
            span.event_id = id;
        }
        let parent = if r.parent == 0 { None } else { st.open_calls.get(&r.parent).copied() };
        if exit {
            st.open_calls.remove(&r.call);
        } else {
            st.open_calls.insert(r.call, id);
        }
        let mut words = r.v;
        if exit {
            words[1] = 0; // v[1] of an exit is its duration, not a word to store
        }
        if typed_kind {
            // At exit: rax and rdx (a result in two eightbytes; typed exits with a payload carry it).
            let exit_regs = [r.v[0], if r.kind == KIND_TYPED_EXIT { r.v[2] } else { 0 }];
            let regs = if exit { &exit_regs[..] } else { &r.v[..(r.nargs as usize).min(MAX_ARGS)] };
            let state = &mut *st;
            match (&plan, out) {
                (Some(plan), Out::Referenced) => {
                    if let Some(kept) = state.typed_samples.as_mut() {
                        kept.push(plan, exit, regs, &state.capture.spans.expand_kept(pid, r.tid, &payload));
                    }
                    let (plan_id, new) = state.capture.stored_id(plan);
                    if let Some(json) = new {
                        batch.capture_rows.plans.push((plan_id, json));
                    }
                    if !state.modules.code_stored {
                        batch.capture_rows.modules = Some(state.modules.code.to_json());
                        state.modules.code_stored = true;
                    }
                    // Stored: the argument registers a decode reads, not all six the hook copied.
                    let words = *arg_words.entry(Arc::as_ptr(plan) as usize).or_insert_with(|| plan.arg_words());
                    let regs = if exit { regs } else { &regs[..regs.len().min(words)] };
                    batch.captures.push((batch.records.len() as u32, super::capture_lazy::encode(plan_id, pid, r.tid, regs, &payload)));
                }
                _ => {
                    if let (Some(plan), Some(kept)) = (&plan, state.typed_samples.as_mut()) {
                        kept.push(plan, exit, regs, &payload);
                    }
                    let mut words = [0u64; MAX_ARGS];
                    words[..regs.len()].copy_from_slice(regs);
                    typed.push(Typed { record: batch.records.len(), plan, words, nregs: regs.len(), payload });
                }
            }
        }
        batch.records.push(RawTraceRecord {
            id,
            exit,
            sampled: r.flags & FLAG_SAMPLED != 0,
            unwound: r.kind == KIND_UNWOUND,
            nargs: r.nargs.min(MAX_ARGS as u8),
            site: last_site.1,
            thread: last_thread.1,
            timestamp_ns: ts,
            parent_event_id: parent.unwrap_or(0),
            duration_ns: if exit { r.v[1] as i64 } else { 0 },
            words,
        });
    }
    let code = st.modules.code.clone();
    drop(st);
    // Rows of the same batch as the integer records around them: the writer binds the text.
    // A typed exit without payload (a scalar or void return) prints as a function of its
    // plan and rax (and rdx) alone: a batch's repeats (SQLite's `rc` 0, a `void`) are decoded once.
    let mut bare: FxHashMap<(usize, u64, u64), usize> = FxHashMap::default();
    let mut texts: Vec<(u32, String)> = Vec::with_capacity(typed.len());
    for t in &typed {
        let exit = batch.records[t.record].exit;
        let memo = match &t.plan {
            Some(plan) if exit && t.payload.is_empty() => Some((Arc::as_ptr(plan) as usize, t.words[0], t.words[1])),
            _ => None,
        };
        let text = match memo.and_then(|k| bare.get(&k)) {
            Some(&at) => texts[at].1.clone(),
            None => {
                if let Some(k) = memo {
                    bare.insert(k, texts.len());
                }
                t.json(exit, &code)
            }
        };
        texts.push((t.record as u32, text));
    }
    batch.texts = texts;
    batch
}

/// A typed capture of a batch: its record, plan, registers and copied blocks.
struct Typed<'a> {
    record: usize,
    plan: Option<Arc<super::capture_plan::CapturePlan>>,
    words: [u64; MAX_ARGS],
    nregs: usize,
    payload: Cow<'a, [u8]>,
}

impl Typed<'_> {
    /// The stored JSON: the arguments of an enter, the return value of an exit.
    fn json(&self, exit: bool, code: &super::code_names::CodeNames) -> String {
        match &self.plan {
            Some(plan) => super::capture_decode::record_json(plan, Some(code), exit, &self.words[..self.nregs], &self.payload),
            None => "\"<no capture plan>\"".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record as the agent's drain writes it: header, then the words it uses.
    fn record(kind: u8, nargs: u8, func: u32, call: u64, v: [u64; 6]) -> Vec<u8> {
        let mut b = vec![0u8; HEADER_SIZE];
        b[0..4].copy_from_slice(&7u32.to_le_bytes());
        b[4] = kind;
        b[5] = FLAG_SAMPLED;
        b[6] = nargs;
        b[8..12].copy_from_slice(&func.to_le_bytes());
        b[12..16].copy_from_slice(&4242u32.to_le_bytes());
        b[16..24].copy_from_slice(&call.to_le_bytes());
        b[24..32].copy_from_slice(&9u64.to_le_bytes());
        b[32..40].copy_from_slice(&123_456u64.to_le_bytes());
        for x in &v[..words_of(kind, nargs)] {
            b.extend_from_slice(&x.to_le_bytes());
        }
        b
    }

    #[test]
    fn parses_the_agent_layout() {
        let (r, len) = Record::parse(&record(KIND_ENTER, 2, 3, 1 << 32 | 5, [1, u64::MAX, 0, 0, 0, 0])).unwrap();
        assert_eq!(len, HEADER_SIZE + 16);
        assert_eq!(
            r,
            Record { kind: 0, flags: 1, nargs: 2, func: 3, tid: 4242, call: 1 << 32 | 5, parent: 9, ts: 123_456, v: [1, u64::MAX, 0, 0, 0, 0] }
        );
    }

    #[test]
    fn records_of_a_batch_have_their_own_lengths() {
        let mut data = record(KIND_ENTER, 5, 1, 10, [1, 2, 3, 4, 5, 6]);
        data.extend(record(KIND_EXIT, 5, 1, 10, [0x77, 300, 9, 9, 9, 9]));
        data.extend(record(KIND_ENTER, 0, 2, 11, [9; 6]));
        data.extend(record(KIND_ENTER, 200, 2, 12, [8; 6])); // nargs beyond what a record holds
        data.extend(record(KIND_TYPED_EXIT_BARE, 0, 2, 12, [5, 40, 9, 9, 9, 9])); // no payload length
        let mut rest = &data[..];
        let mut seen = Vec::new();
        while let Some((r, len)) = Record::parse(rest) {
            seen.push((r.kind, r.v));
            rest = &rest[len..];
        }
        assert!(rest.is_empty());
        assert_eq!(
            seen,
            vec![(0, [1, 2, 3, 4, 5, 0]), (1, [0x77, 300, 0, 0, 0, 0]), (0, [0; 6]), (0, [8; 6]), (5, [5, 40, 0, 0, 0, 0])]
        );
        // A batch cut inside a record: that record is not decoded.
        assert!(Record::parse(&data[..HEADER_SIZE + 8]).is_none());
        assert!(Record::parse(&data[..10]).is_none());
    }
}
