//! The tracing fast path's insert: a batch of plain-integer records instead of one `Event`
//! (five or six heap strings) per row. The strings a row shares with its neighbours — the
//! session, the code site, the thread — come once per batch; the writer interns each site
//! and thread once per batch, formats argument and return-value text into reused buffers and
//! binds integers otherwise, so neither the decoder nor the writer allocates per event.
//!
//! What gets stored is exactly what `RawTraceBatch::to_events` + `Store::insert` would store
//! (tests/raw_trace_batch.rs compares the query output of both paths).

use std::sync::Arc;

use super::event::{Event, EventType};
use super::word_shape::WordShape;

/// Argument words a record carries at most (the agent's `rec-v2` layout).
pub const MAX_TRACE_ARGS: usize = 6;

/// A code site of the batch: what the symbol index says about a traced function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceSite {
    pub function_name: String,
    pub function_name_raw: String,
    pub source_file: Option<String>,
    pub line_number: Option<i64>,
    /// The function's typed parameters and result, when all travel in integer registers:
    /// its words are stored as typed JSON (`word_shape.rs`) instead of hex.
    pub shape: Option<Arc<WordShape>>,
}

/// A thread of the batch (its pid is the batch's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceThread {
    pub thread_id: i64,
    pub thread_name: Option<String>,
}

/// One `function_enter` or `function_exit` row, as integers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawTraceRecord {
    /// Event id (`Store::next_event_id`); 0: assigned by `insert_trace_batch`.
    pub id: i64,
    pub exit: bool,
    /// Recorded while the function was sampled (stored as `sampled: true`).
    pub sampled: bool,
    /// Exit of a call left without returning (an exception unwound it, a longjmp skipped it):
    /// no return value, stored as `unwound: true`.
    pub unwound: bool,
    /// Enter: how many of `words` are arguments (capped at `MAX_TRACE_ARGS`).
    pub nargs: u8,
    /// Index into `RawTraceBatch::sites` / `threads`.
    pub site: u32,
    pub thread: u32,
    pub timestamp_ns: i64,
    /// 0: none.
    pub parent_event_id: i64,
    /// Exit only.
    pub duration_ns: i64,
    /// Enter: argument words; exit: `words[0]` is the return value.
    pub words: [u64; MAX_TRACE_ARGS],
}

/// Records of one session and pid, with the sites and threads they refer to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawTraceBatch {
    pub session_id: String,
    pub pid: i64,
    pub sites: Vec<TraceSite>,
    pub threads: Vec<TraceThread>,
    pub records: Vec<RawTraceRecord>,
    /// Typed enters stored as captured: (index in `records`, the raw capture that goes into
    /// `arguments` instead of text), in record order.
    pub captures: Vec<(u32, Vec<u8>)>,
    /// The spans and plans those captures refer to (`captures.rs`).
    pub capture_rows: super::captures::CaptureRows,
    /// Records whose text the decoder wrote instead of their words (a typed exit's return
    /// value, a typed record without a plan): (index in `records`, the text), in record order.
    pub texts: Vec<(u32, String)>,
}

/// `extra` of a sampled row, as `encode_extra` writes it for `sampled: Some(true)`.
pub(crate) const SAMPLED_EXTRA: &str = r#"{"sampled":true}"#;
/// `extra` of an unwound exit (`unwound: Some(true)`), and of a sampled one.
pub(crate) const UNWOUND_EXTRA: &str = r#"{"unwound":true}"#;
pub(crate) const SAMPLED_UNWOUND_EXTRA: &str = r#"{"sampled":true,"unwound":true}"#;

impl RawTraceRecord {
    /// An exit without a return value (`unwound` on an enter means nothing).
    pub(crate) fn unwound_exit(&self) -> bool {
        self.exit && self.unwound
    }

    /// Its `extra` column, as `encode_extra` writes it.
    pub(crate) fn extra(&self) -> Option<&'static str> {
        match (self.sampled, self.unwound_exit()) {
            (false, false) => None,
            (true, false) => Some(SAMPLED_EXTRA),
            (false, true) => Some(UNWOUND_EXTRA),
            (true, true) => Some(SAMPLED_UNWOUND_EXTRA),
        }
    }
}

/// The `arguments` (enter) or `return_value` (exit) text of a record: typed by the site's
/// shape, or else a JSON array of hex strings, or one hex string — how the JS path prints
/// NativePointers.
pub(crate) fn format_words(r: &RawTraceRecord, shape: Option<&WordShape>) -> String {
    let mut bytes = Vec::new();
    push_words(r, shape, &mut bytes);
    // Only valid UTF-8 was written.
    String::from_utf8(bytes).unwrap_or_default()
}

/// `format_words`' text appended to `out`.
fn push_words(r: &RawTraceRecord, shape: Option<&WordShape>, out: &mut Vec<u8>) {
    if let Some(shape) = shape {
        if r.exit {
            shape.push_ret(out, r.words[0]);
        } else {
            shape.push_args(out, &r.words[..(r.nargs as usize).min(MAX_TRACE_ARGS)]);
        }
        return;
    }
    if r.exit {
        push_hex_json(out, r.words[0]);
        return;
    }
    out.push(b'[');
    for (i, v) in r.words[..(r.nargs as usize).min(MAX_TRACE_ARGS)].iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        push_hex_json(out, *v);
    }
    out.push(b']');
}

/// `"0x1f"`: lowercase hex without leading zeros, quoted (what `format!("{v:x}")` gives).
/// By hand: `core::fmt` machinery was a tenth of the writer's per-row cost.
fn push_hex_json(out: &mut Vec<u8>, v: u64) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let digits = (64 - v.leading_zeros() as usize).div_ceil(4).max(1);
    out.extend_from_slice(b"\"0x");
    for i in (0..digits).rev() {
        out.push(DIGITS[((v >> (4 * i)) & 0xf) as usize]);
    }
    out.push(b'"');
}

/// The texts of a batch's records, formatted by the producer's thread before the batch is
/// queued, so that the one writer thread only binds them: record `i`'s text is
/// `text[ends[i - 1]..ends[i]]` (from 0 for the first).
#[derive(Debug, Default)]
pub(crate) struct TraceTexts {
    text: String,
    ends: Vec<u32>,
}

impl TraceTexts {
    /// Each record's words as `format_words` prints them, or the text the decoder wrote
    /// (`texts`), or nothing for a record stored as captured (its text is never bound).
    pub(crate) fn format(batch: &RawTraceBatch) -> TraceTexts {
        let (records, sites) = (&batch.records, &batch.sites);
        // About 16 bytes per enter argument, 20 per return value.
        let mut bytes = Vec::with_capacity(records.len() * 24 + batch.texts.iter().map(|g| g.1.len()).sum::<usize>());
        let mut ends = Vec::with_capacity(records.len());
        let mut given = batch.texts.iter().peekable();
        let mut captured = batch.captures.iter().peekable();
        for (i, r) in records.iter().enumerate() {
            if let Some((_, text)) = given.next_if(|g| g.0 as usize == i) {
                if !r.unwound_exit() {
                    bytes.extend_from_slice(text.as_bytes());
                }
            } else if r.unwound_exit() {
                // No return value: bound as NULL (trace_writer.rs).
            } else if captured.next_if(|c| c.0 as usize == i).is_some() {
                // Bound as its blob (trace_writer.rs).
            } else {
                let shape = sites.get(r.site as usize).and_then(|s| s.shape.as_deref());
                push_words(r, shape, &mut bytes);
            }
            ends.push(bytes.len() as u32);
        }
        // One validation of the whole buffer; only valid UTF-8 was written.
        TraceTexts { text: String::from_utf8(bytes).unwrap_or_default(), ends }
    }

    /// Record `i`'s text ("" if out of range: a batch the writer refuses anyway).
    pub(crate) fn get(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends.get(i - 1).copied().unwrap_or(0) as usize };
        let end = self.ends.get(i).copied().unwrap_or(0) as usize;
        self.text.get(start..end).unwrap_or("")
    }
}

impl RawTraceBatch {
    /// Whether every record's site and thread index is in range (the writer skips a batch
    /// that is not: a decoder bug must not crash the writer).
    pub(crate) fn is_consistent(&self) -> bool {
        self.records.iter().all(|r| (r.site as usize) < self.sites.len() && (r.thread as usize) < self.threads.len())
    }

    /// The same rows as `Event`s: the reference the raw path must match, and a way to use
    /// the ordinary `Store::insert` where a batch needs no speed.
    pub fn to_events(&self) -> Vec<Event> {
        let mut out = Vec::with_capacity(self.records.len());
        let mut captures = self.captures.iter().peekable();
        let mut given = self.texts.iter().peekable();
        for (i, r) in self.records.iter().enumerate() {
            let capture = captures.next_if(|(at, _)| *at as usize == i).map(|(_, raw)| raw.clone());
            let given = given.next_if(|(at, _)| *at as usize == i).map(|(_, text)| text.clone());
            let (Some(site), Some(thread)) = (self.sites.get(r.site as usize), self.threads.get(r.thread as usize)) else {
                continue;
            };
            let kind = if r.exit { EventType::FunctionExit } else { EventType::FunctionEnter };
            let mut e = Event::new(&self.session_id, kind, r.timestamp_ns);
            e.id = r.id;
            e.pid = Some(self.pid);
            e.thread_id = Some(thread.thread_id);
            e.thread_name = thread.thread_name.clone();
            e.function_name = Some(site.function_name.clone());
            e.function_name_raw = Some(site.function_name_raw.clone());
            e.source_file = site.source_file.clone();
            e.line_number = site.line_number;
            e.sampled = r.sampled.then_some(true);
            e.unwound = r.unwound_exit().then_some(true);
            e.parent_event_id = (r.parent_event_id != 0).then_some(r.parent_event_id);
            let text = given.unwrap_or_else(|| format_words(r, site.shape.as_deref()));
            if r.exit {
                e.return_value = (!r.unwound).then_some(text);
                e.duration_ns = Some(r.duration_ns);
            } else if capture.is_some() {
                e.capture = capture;
            } else {
                e.arguments = Some(text);
            }
            out.push(e);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(exit: bool, nargs: u8, words: [u64; 6]) -> RawTraceRecord {
        RawTraceRecord {
            id: 1,
            exit,
            sampled: false,
            unwound: false,
            nargs,
            site: 0,
            thread: 0,
            timestamp_ns: 0,
            parent_event_id: 0,
            duration_ns: 0,
            words,
        }
    }

    fn format_words_hex(r: &RawTraceRecord) -> String {
        format_words(r, None)
    }

    #[test]
    fn words_format_like_native_pointers() {
        assert_eq!(format_words_hex(&rec(false, 2, [0, u64::MAX, 7, 0, 0, 0])), r#"["0x0","0xffffffffffffffff"]"#);
        assert_eq!(format_words_hex(&rec(false, 0, [1; 6])), "[]");
        assert_eq!(format_words_hex(&rec(false, 200, [0xdead_beef; 6])).matches("0xdeadbeef").count(), MAX_TRACE_ARGS);
        assert_eq!(format_words_hex(&rec(true, 3, [0x1f, 9, 9, 9, 9, 9])), "\"0x1f\"");
    }

    #[test]
    fn hex_matches_std_formatting() {
        for v in [0u64, 1, 0xf, 0x10, 0xdead_beef, 0x7ffd_0000_1000, u64::MAX, u64::MAX >> 4, 1 << 63] {
            let mut s = Vec::new();
            push_hex_json(&mut s, v);
            assert_eq!(String::from_utf8(s).unwrap(), format!("\"0x{v:x}\""));
        }
    }

    #[test]
    fn batch_texts_are_each_records_format_words() {
        let records = [rec(false, 2, [0, 0xab, 0, 0, 0, 0]), rec(true, 0, [0x1f; 6]), rec(false, 0, [1; 6]), rec(true, 0, [0; 6])];
        let mut batch = RawTraceBatch { records: records.to_vec(), ..Default::default() };
        let texts = TraceTexts::format(&batch);
        for (i, r) in records.iter().enumerate() {
            assert_eq!(texts.get(i), format_words(r, None), "record {i}");
        }
        assert_eq!(texts.get(4), "");
        // A decoder's text takes the place of its record's words; a captured record has none.
        batch.texts = vec![(1, "{\"rc\":0}".to_string()), (3, "null".to_string())];
        batch.captures = vec![(2, vec![1, 0, 0, 0])];
        let texts = TraceTexts::format(&batch);
        assert_eq!((texts.get(0), texts.get(1), texts.get(2), texts.get(3)), (r#"["0x0","0xab"]"#, r#"{"rc":0}"#, "", "null"));
    }

    #[test]
    fn extras_match_encode_extra() {
        for (sampled, unwound) in [(false, false), (true, false), (false, true), (true, true)] {
            let mut e = Event::new("s", EventType::FunctionExit, 0);
            e.sampled = sampled.then_some(true);
            e.unwound = unwound.then_some(true);
            let r = RawTraceRecord { exit: true, sampled, unwound, ..rec(true, 0, [0; 6]) };
            assert_eq!(super::super::intern::encode_extra(&e).as_deref(), r.extra(), "sampled {sampled} unwound {unwound}");
        }
    }
}
