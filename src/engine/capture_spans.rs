//! Spans and references in a typed record's payload (agent/native/capture_walk.c
//! `cap_subtree`): the walk from a pointee that did not change since this thread last sent
//! it travels as a 12-byte reference instead of its blocks. Before a record is decoded, its
//! spans are unwrapped and its references replaced by the blocks they stand for, so the
//! decoder (`capture_decode.rs`) sees the plain run of blocks it always did.
//!
//! A span is `u64 key | u32 META_SPAN | len | u64 0` and `len` bytes of blocks; a delta is
//! `u64 key | u32 META_DELTA | n | u64 base` and n × `(u32 offset, u64 bytes)`: the span
//! kept under `base` with the 8 bytes at each offset replaced, in order (fewer at its end);
//! a reference
//! is `u64 key | u32 META_REF`. The key's top 16 bits name the agent's trace slot, the rest
//! is a version unique per thread: a slot's span replaces the one before. The agent refers
//! only to a span whose record was not lost (a lost record makes it send them all again), and
//! records arrive in order, so a reference or delta finds its span; one that does not (a
//! bug) leaves its blocks out, which the decoder prints as `<unreadable …>`, never as another
//! value.

use std::borrow::Cow;

use rustc_hash::FxHashMap;

use super::capture_plan::BLOCK_HEADER;
use super::capture_view::{block_header, block_len, META_CSTRING, META_TERMINATED};
use crate::store::CaptureSpan;

const META_LEN: u32 = (1 << 28) - 1;
const META_KIND: u32 = META_CSTRING | META_TERMINATED | (1 << 29) | (1 << 28);
const META_SPAN: u32 = 1 << 31;
const META_REF: u32 = (1 << 31) | (1 << 29);
const META_DELTA: u32 = (1 << 31) | (1 << 28);
const HEADER: usize = BLOCK_HEADER as usize;
/// A span's or delta's header: key, meta and the base key.
const SPAN_HEADER: usize = HEADER + 8;
/// A delta's entry: word index and word.
const ENTRY: usize = 12;

/// Windows a stored record carries at most on top of its slot's last stored whole span;
/// beyond, the whole span is stored again (a `capture_spans` row) and the windows start over.
const MAX_WINDOWS: usize = 16;

/// The spans kept per session: by (process, thread, slot), the key and bytes last sent, the
/// key of the last whole span stored for the slot, and the 8-byte windows changed since.
#[derive(Default)]
pub(crate) struct Spans {
    kept: FxHashMap<(u32, u32, u16), Kept>,
    /// References that named no kept span (their blocks left out).
    pub unresolved: u64,
}

#[derive(Default)]
struct Kept {
    key: u64,
    blocks: Vec<u8>,
    whole: u64,
    /// (offset, bytes) by offset: what the deltas since `whole` changed.
    windows: Vec<(u32, [u8; 8])>,
    /// compose's other buffer, kept to reuse its allocation.
    spare: Vec<(u32, [u8; 8])>,
}

impl Kept {
    /// What a stored record carries for this slot now: a reference to the whole span, or a
    /// delta on it with the windows changed since.
    fn push_stored(&self, o: &mut Vec<u8>) {
        if self.windows.is_empty() {
            return push_reference(o, self.whole);
        }
        o.extend_from_slice(&self.key.to_le_bytes());
        o.extend_from_slice(&(META_DELTA | self.windows.len() as u32).to_le_bytes());
        o.extend_from_slice(&self.whole.to_le_bytes());
        for (at, bytes) in &self.windows {
            o.extend_from_slice(&at.to_le_bytes());
            o.extend_from_slice(bytes);
        }
    }

    /// Note a delta's entries in `windows` (a later entry at an offset replaces the earlier).
    /// A window starts at the first changed byte, so two deltas' windows may overlap without
    /// sharing an offset; a read applies them by offset, not by age, so the newer bytes are
    /// also written into every older window they overlap: each byte reads the same, newest,
    /// whichever window is applied last (else a stale pointer word could come back).
    /// A delta's entries come in offset order (the agent compares a span's blocks in order),
    /// so both steps are one pass each, merged through `spare`; out of order, one entry at a time.
    fn compose(&mut self, entries: &[u8]) {
        let entry = |e: &[u8]| (u32::from_le_bytes(e[..4].try_into().unwrap()), <[u8; 8]>::try_from(&e[4..]).unwrap());
        let sorted = entries.chunks_exact(ENTRY).zip(entries.chunks_exact(ENTRY).skip(1)).all(|(a, b)| entry(a).0 < entry(b).0);
        if !sorted {
            return entries.chunks_exact(ENTRY).for_each(|e| self.compose_one(entry(e)));
        }
        // The newer bytes into the older windows they overlap.
        let mut from = 0;
        for (at, bytes) in entries.chunks_exact(ENTRY).map(entry) {
            while from < self.windows.len() && self.windows[from].0 + 8 <= at {
                from += 1;
            }
            for (o, old) in self.windows[from..].iter_mut().take_while(|w| w.0 < at + 8) {
                overwrite(*o, old, at, &bytes);
            }
        }
        // Merged by offset; at the same offset the newer window replaces the older.
        let mut merged = std::mem::take(&mut self.spare);
        merged.clear();
        let mut old = self.windows.iter().peekable();
        for (at, bytes) in entries.chunks_exact(ENTRY).map(entry) {
            while let Some(w) = old.next_if(|w| w.0 <= at) {
                if w.0 < at {
                    merged.push(*w);
                }
            }
            merged.push((at, bytes));
        }
        merged.extend(old);
        self.spare = std::mem::replace(&mut self.windows, merged);
    }

    fn compose_one(&mut self, (at, bytes): (u32, [u8; 8])) {
        let from = self.windows.partition_point(|w| w.0 + 8 <= at);
        for (o, old) in self.windows[from..].iter_mut().take_while(|w| w.0 < at + 8) {
            overwrite(*o, old, at, &bytes);
        }
        match self.windows.binary_search_by_key(&at, |w| w.0) {
            Ok(i) => self.windows[i].1 = bytes,
            Err(i) => self.windows.insert(i, (at, bytes)),
        }
    }
}

/// The bytes of window `old` (at offset `o`) that the newer window `bytes` (at `at`) covers,
/// replaced by its.
fn overwrite(o: u32, old: &mut [u8; 8], at: u32, bytes: &[u8; 8]) {
    for (i, b) in old.iter_mut().enumerate() {
        if let Some(k) = (o + i as u32).checked_sub(at).filter(|k| *k < 8) {
            *b = bytes[k as usize];
        }
    }
}

/// One step of a payload: a plain block (`at..end`), a span (its key, its blocks `at..end`),
/// a delta (its key, its base's key, its entries `at..end`) or a reference.
pub(super) enum Piece {
    Block(usize, usize),
    Span(u64, usize, usize),
    Delta(u64, u64, usize, usize),
    Ref(u64),
}

/// The payload's pieces, up to the first truncated one.
pub(super) fn pieces(payload: &[u8]) -> impl Iterator<Item = Piece> + '_ {
    let mut at = 0usize;
    std::iter::from_fn(move || {
        let (key, meta) = block_header(payload, at)?;
        let start = at;
        let data = at + HEADER;
        let base = || payload.get(data..data + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap()));
        let (piece, end) = match meta & META_KIND {
            META_REF => (Piece::Ref(key), data),
            META_SPAN => {
                let end = at + SPAN_HEADER + (meta & META_LEN) as usize;
                (Piece::Span(key, at + SPAN_HEADER, end), end)
            }
            META_DELTA => {
                let end = at + SPAN_HEADER + ENTRY * (meta & META_LEN) as usize;
                (Piece::Delta(key, base()?, at + SPAN_HEADER, end), end)
            }
            _ => {
                let end = data + block_len(meta).1;
                (Piece::Block(start, end), end)
            }
        };
        if end > payload.len() {
            return None;
        }
        at = end;
        Some(piece)
    })
}

/// `blocks` with a delta's entries applied: the 8 bytes at each offset replaced, in order
/// (fewer at the end; an offset past the end changes nothing).
pub(super) fn apply_delta(blocks: &mut [u8], entries: &[u8]) {
    for entry in entries.chunks_exact(ENTRY) {
        let from = u32::from_le_bytes(entry[..4].try_into().unwrap()) as usize;
        let n = blocks.len().saturating_sub(from).min(8);
        if n > 0 {
            blocks[from..from + n].copy_from_slice(&entry[4..4 + n]);
        }
    }
}

/// A reference to `key`, as the agent writes one.
pub(super) fn push_reference(out: &mut Vec<u8>, key: u64) {
    out.extend_from_slice(&key.to_le_bytes());
    out.extend_from_slice(&META_REF.to_le_bytes());
}

/// How `Spans::take` writes a payload out.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Out {
    /// Plain blocks, references replaced by what they name (decoded now).
    Expanded,
    /// Plain blocks, and per slot a reference to its last whole span or a delta on it
    /// (stored as captured; whole spans go to `rows`).
    Referenced,
}

impl Spans {
    /// A reference or delta without its span: counted, and said once per session (it means a
    /// lost span went unnoticed: the record prints `<unreadable …>` where its blocks were).
    fn miss(&mut self, pid: u32, tid: u32) {
        if self.unresolved == 0 {
            tracing::warn!(pid, tid, "typed capture: a record refers to a span the daemon never got; its pointees print as <unreadable …>");
        }
        self.unresolved += 1;
    }

    /// `payload` of a record of (pid, tid) as plain blocks: spans kept and unwrapped,
    /// references replaced by what they name. Borrowed when it has neither.
    #[cfg(test)]
    pub fn expand<'a>(&mut self, pid: u32, tid: u32, payload: &'a [u8]) -> Cow<'a, [u8]> {
        self.take(pid, tid, payload, Out::Expanded, &mut Vec::new())
    }

    /// `payload` of a record of (pid, tid), its spans and deltas kept, written out as `out`
    /// says. Every whole span it brings is also pushed to `rows`, for the store (a later record
    /// stored as captured may refer to it; the caller sets their `event_id`); a delta is not a
    /// row: a stored record carries the windows changed since its slot's last whole span
    /// (`Kept::push_stored`), and past `MAX_WINDOWS` the whole span is stored again.
    /// Borrowed when it has no spans.
    pub fn take<'a>(&mut self, pid: u32, tid: u32, payload: &'a [u8], out: Out, rows: &mut Vec<CaptureSpan>) -> Cow<'a, [u8]> {
        let mut end = 0;
        if pieces(payload).all(|p| matches!(p, Piece::Block(_, e) if { end = e; true })) && end == payload.len() {
            return Cow::Borrowed(payload);
        }
        let expanded = out == Out::Expanded;
        let mut o = Vec::with_capacity(if expanded { payload.len() * 4 } else { payload.len() });
        for piece in pieces(payload) {
            match piece {
                Piece::Block(at, end) => o.extend_from_slice(&payload[at..end]),
                Piece::Span(0, at, end) => o.extend_from_slice(&payload[at..end]),
                Piece::Span(key, at, end) => {
                    let blocks = &payload[at..end];
                    let slot = self.kept.entry((pid, tid, (key >> 48) as u16)).or_default();
                    slot.key = key;
                    slot.whole = key;
                    slot.windows.clear();
                    slot.blocks.clear();
                    slot.blocks.extend_from_slice(blocks);
                    rows.push(CaptureSpan { pid, tid, key, base: 0, data: blocks.to_vec(), event_id: 0 });
                    if expanded {
                        o.extend_from_slice(blocks);
                    } else {
                        push_reference(&mut o, key);
                    }
                }
                Piece::Delta(key, base, at, end) => match self.kept.get_mut(&(pid, tid, (key >> 48) as u16)) {
                    Some(slot) if slot.key == base => {
                        let entries = &payload[at..end];
                        apply_delta(&mut slot.blocks, entries);
                        slot.key = key;
                        slot.compose(entries);
                        if slot.windows.len() > MAX_WINDOWS {
                            slot.whole = key;
                            slot.windows.clear();
                            rows.push(CaptureSpan { pid, tid, key, base: 0, data: slot.blocks.clone(), event_id: 0 });
                        }
                        if expanded {
                            o.extend_from_slice(&slot.blocks);
                        } else {
                            slot.push_stored(&mut o);
                        }
                    }
                    _ => self.miss(pid, tid),
                },
                Piece::Ref(key) => match self.kept.get(&(pid, tid, (key >> 48) as u16)) {
                    Some(slot) if slot.key == key => {
                        if expanded {
                            o.extend_from_slice(&slot.blocks);
                        } else {
                            slot.push_stored(&mut o);
                        }
                    }
                    _ => self.miss(pid, tid),
                },
            }
        }
        Cow::Owned(o)
    }

    /// A payload `take` wrote `Referenced` for (pid, tid), expanded with the spans kept now
    /// (right after that `take`: for the benchmark's kept samples).
    pub fn expand_kept(&self, pid: u32, tid: u32, payload: &[u8]) -> Vec<u8> {
        let mut o = Vec::with_capacity(payload.len() * 4);
        for piece in pieces(payload) {
            match piece {
                Piece::Block(at, end) | Piece::Span(_, at, end) => o.extend_from_slice(&payload[at..end]),
                // Right after `take`, each reference or delta stands for its slot's bytes now.
                Piece::Ref(key) | Piece::Delta(key, ..) => {
                    if let Some(slot) = self.kept.get(&(pid, tid, (key >> 48) as u16)) {
                        o.extend_from_slice(&slot.blocks);
                    }
                }
            }
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::super::capture_plan::MAX_STRING;
    use super::*;

    fn block(addr: u64, bytes: &[u8]) -> Vec<u8> {
        let mut b = addr.to_le_bytes().to_vec();
        b.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        b.extend_from_slice(bytes);
        b
    }

    fn string(addr: u64, text: &[u8]) -> Vec<u8> {
        let mut b = addr.to_le_bytes().to_vec();
        b.extend_from_slice(&(text.len() as u32 | META_CSTRING | META_TERMINATED).to_le_bytes());
        b.extend_from_slice(text);
        b
    }

    fn span(key: u64, blocks: &[u8]) -> Vec<u8> {
        let mut b = key.to_le_bytes().to_vec();
        b.extend_from_slice(&(META_SPAN | blocks.len() as u32).to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes());
        b.extend_from_slice(blocks);
        b
    }

    fn delta(key: u64, base: u64, windows: &[(u32, u64)]) -> Vec<u8> {
        let mut b = key.to_le_bytes().to_vec();
        b.extend_from_slice(&(META_DELTA | windows.len() as u32).to_le_bytes());
        b.extend_from_slice(&base.to_le_bytes());
        for (i, w) in windows {
            b.extend_from_slice(&i.to_le_bytes());
            b.extend_from_slice(&w.to_le_bytes());
        }
        b
    }

    fn reference(key: u64) -> Vec<u8> {
        let mut b = key.to_le_bytes().to_vec();
        b.extend_from_slice(&META_REF.to_le_bytes());
        b
    }

    #[test]
    fn plain_payloads_are_borrowed() {
        let p = [block(0x1000, &[1, 2, 3]), string(0x2000, b"hi")].concat();
        assert!(matches!(Spans::default().expand(1, 2, &p), Cow::Borrowed(_)));
    }

    #[test]
    fn a_reference_stands_for_the_span_last_kept_under_its_key() {
        let mut spans = Spans::default();
        let key = (3u64 << 48) | 77;
        let inner = [block(0x5000, &[9; 16]), string(0x6000, b"main")].concat();
        let root = block(0x1000, &[1; 8]);
        let first = [root.clone(), span(key, &inner)].concat();
        assert_eq!(&*spans.expand(1, 2, &first), &[root.clone(), inner.clone()].concat()[..]);
        let second = [root.clone(), reference(key)].concat();
        assert_eq!(&*spans.expand(1, 2, &second), &[root.clone(), inner.clone()].concat()[..]);
        // Another thread, process or version does not see it.
        assert_eq!(&*spans.expand(1, 3, &second), &root[..]);
        assert_eq!(&*spans.expand(4, 2, &second), &root[..]);
        assert_eq!(&*spans.expand(1, 2, &[root.clone(), reference(key + 1)].concat()), &root[..]);
        assert_eq!(spans.unresolved, 3);
        // A new span of the slot replaces the old one; an unkept span (key 0) is unwrapped only.
        let newer = [block(0x5000, &[8; 16])].concat();
        spans.expand(1, 2, &span(key + 5, &newer));
        spans.expand(1, 2, &span(0, &inner));
        assert_eq!(&*spans.expand(1, 2, &reference(key + 5)), &newer[..]);
        assert_eq!(&*spans.expand(1, 2, &reference(key)), &[][..] as &[u8]);
    }

    #[test]
    fn a_delta_changes_the_words_it_names_and_becomes_the_kept_span() {
        let mut spans = Spans::default();
        let (k1, k2, k3) = ((7u64 << 48) | 1, (7u64 << 48) | 2, (7u64 << 48) | 3);
        // 12 + 13 bytes: the last word is short.
        let inner = block(0x5000, &[1; 13]);
        spans.expand(1, 2, &span(k1, &inner));
        let mut changed = inner.clone();
        changed[8..16].copy_from_slice(&0x1122_3344_5566_7788u64.to_le_bytes());
        changed[24] = 0xab;
        let d = delta(k2, k1, &[(8, 0x1122_3344_5566_7788), (24, 0xab)]);
        assert_eq!(&*spans.expand(1, 2, &d), &changed[..]);
        assert_eq!(&*spans.expand(1, 2, &reference(k2)), &changed[..], "the delta's result is kept under its key");
        assert_eq!(&*spans.expand(1, 2, &reference(k1)), &[][..] as &[u8]);
        // A delta on a base the decoder does not hold leaves its blocks out.
        assert_eq!(&*spans.expand(1, 2, &delta(k3, k1, &[(0, 5)])), &[][..] as &[u8]);
        // An offset past the span's end changes nothing (a malformed delta).
        assert_eq!(&*spans.expand(1, 2, &delta(k3, k2, &[(400, 5)])), &changed[..]);
        assert_eq!(spans.unresolved, 2);
    }

    #[test]
    fn a_truncated_payload_keeps_what_is_whole() {
        let mut spans = Spans::default();
        let root = block(0x1000, &[1; 8]);
        let mut p = [root.clone(), span(5 << 48, &block(0x5000, &[9; 16]))].concat();
        p.truncate(p.len() - 3);
        assert_eq!(&*spans.expand(1, 2, &p), &root[..]);
        // Long strings store MAX_STRING bytes, whatever length they say they scanned.
        let mut long = 0x7000u64.to_le_bytes().to_vec();
        long.extend_from_slice(&((MAX_STRING as u32 + 500) | META_CSTRING).to_le_bytes());
        long.extend_from_slice(&vec![b'a'; MAX_STRING]);
        let p = [long.clone(), span(0, &root)].concat();
        assert_eq!(&*spans.expand(1, 2, &p), &[long, root].concat()[..]);
    }

    #[test]
    fn stored_as_captured_a_payload_refers_to_whole_spans_and_carries_the_windows_changed_since() {
        let mut spans = Spans::default();
        let key = |v: u64| (9u64 << 48) | v;
        let root = block(0x1000, &[1; 8]);
        let mut inner = block(0x5000, &[0; 200]);
        let mut rows = Vec::new();
        let first = [root.clone(), span(key(1), &inner)].concat();
        let out = spans.take(1, 2, &first, Out::Referenced, &mut rows);
        assert_eq!(&*out, &[root.clone(), reference(key(1))].concat()[..]);
        assert_eq!(rows, vec![CaptureSpan { pid: 1, tid: 2, key: key(1), base: 0, data: inner.clone(), event_id: 0 }]);
        // Each delta changes another window: a stored record carries every window changed
        // since the whole span, until there are more than MAX_WINDOWS; then the whole span is
        // stored again and the record refers to it.
        let mut changed = Vec::new();
        for v in 2..=MAX_WINDOWS as u64 + 2 {
            rows.clear();
            let at = 12 + 8 * (v as u32 - 2);
            let d = delta(key(v), key(v - 1), &[(at, v)]);
            let out = spans.take(1, 2, &d, Out::Referenced, &mut rows);
            inner[at as usize..at as usize + 8].copy_from_slice(&v.to_le_bytes());
            changed.push((at, v));
            if changed.len() <= MAX_WINDOWS {
                assert!(rows.is_empty(), "delta {v}");
                assert_eq!(&*out, &delta(key(v), key(1), &changed)[..], "delta {v}");
            } else {
                assert_eq!(rows, vec![CaptureSpan { pid: 1, tid: 2, key: key(v), base: 0, data: inner.clone(), event_id: 0 }]);
                assert_eq!(&*out, &reference(key(v))[..]);
            }
            assert_eq!(spans.expand_kept(1, 2, &out), inner, "delta {v}");
        }
        // The same window again replaces its bytes, it is not carried twice.
        let last = MAX_WINDOWS as u64 + 2;
        spans.take(1, 2, &delta(key(last + 1), key(last), &[(12, 7)]), Out::Referenced, &mut rows);
        let d = delta(key(last + 2), key(last + 1), &[(12, 8)]);
        let out = spans.take(1, 2, &d, Out::Referenced, &mut rows);
        assert_eq!(&*out, &delta(key(last + 2), key(last), &[(12, 8)])[..]);
        // An unchanged slot's reference carries the same; a miss leaves nothing.
        rows.clear();
        assert_eq!(&*spans.take(1, 2, &reference(key(last + 2)), Out::Referenced, &mut rows), &out[..]);
        assert_eq!(&*spans.take(1, 2, &reference(key(1)), Out::Referenced, &mut rows), &[][..] as &[u8]);
        assert!(rows.is_empty());
        assert_eq!(spans.unresolved, 1);
    }

    /// A delta of several entries composed in one merge reads the same as its entries
    /// composed one by one (random deltas with overlapping windows, in offset order as the
    /// agent sends them, and one out of order).
    #[test]
    fn composing_a_delta_in_one_pass_equals_one_entry_at_a_time() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        let (mut merged, mut single) = (Kept::default(), Kept::default());
        for round in 0..400 {
            let mut at = next(12) as u32;
            let mut entries = Vec::new();
            for _ in 0..1 + next(5) {
                entries.extend_from_slice(&at.to_le_bytes());
                entries.extend_from_slice(&next(u64::MAX).to_le_bytes());
                at += 8 + next(20) as u32; // windows of one delta do not overlap
            }
            if round % 50 == 49 && entries.len() > ENTRY {
                entries.rotate_left(ENTRY); // out of order: the one-by-one path
            }
            merged.compose(&entries);
            for e in entries.chunks_exact(ENTRY) {
                single.compose_one((u32::from_le_bytes(e[..4].try_into().unwrap()), e[4..].try_into().unwrap()));
            }
            assert_eq!(merged.windows, single.windows, "round {round}");
            if merged.windows.len() > 40 {
                merged.windows.clear();
                single.windows.clear();
            }
        }
    }

    /// Windows of two deltas that overlap at different offsets (a window starts at the first
    /// changed byte): the record stored after them, read the way a query reads it (the whole
    /// span, then its windows in the order stored), holds the newest bytes. With windows kept
    /// as they came, the older window at the higher offset was applied last and brought a
    /// stale pointer word back (tests/capture_native.rs saw `down` non-null in a round where
    /// the fixture had set it to NULL).
    #[test]
    fn overlapping_windows_of_two_deltas_read_back_the_newest_bytes() {
        let mut spans = Spans::default();
        let key = |v: u64| (3u64 << 48) | v;
        let mut blocks = block(0x7000, &[0xaa; 32]);
        let mut rows = Vec::new();
        spans.take(1, 2, &span(key(1), &blocks), Out::Referenced, &mut rows);
        // Older: bytes 13..21 (a pointer's high bytes and the next field's first byte).
        let older = 0x1111_1111_1111_1111u64;
        spans.take(1, 2, &delta(key(2), key(1), &[(13, older)]), Out::Referenced, &mut rows);
        blocks[13..21].copy_from_slice(&older.to_le_bytes());
        // Newer, at a lower offset: bytes 12..20 (the whole pointer word).
        let newer = 0u64;
        let d = delta(key(3), key(2), &[(12, newer)]);
        let stored = spans.take(1, 2, &d, Out::Referenced, &mut rows).into_owned();
        blocks[12..20].copy_from_slice(&newer.to_le_bytes());
        assert_eq!(spans.expand_kept(1, 2, &stored), blocks, "the daemon's own copy");
        let Some(Piece::Delta(_, base, at, end)) = pieces(&stored).next() else { panic!("a delta on the whole span") };
        assert_eq!(base, key(1));
        let mut read = rows[0].data.clone();
        apply_delta(&mut read, &stored[at..end]);
        assert_eq!(read, blocks, "a query's read of the stored record");
    }

}
