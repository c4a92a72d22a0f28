//! `Store::insert_trace_batch` (the tracing fast path's integer rows) must store exactly what
//! `Store::insert` stores for the same rows as `Event`s: two stores, one fed each way with
//! identical ids, must answer every query identically.

use std::sync::Arc;

use strobe::store::word_shape::{WordKind, WordShape};
use strobe::store::{EventQuery, EventType, RawTraceBatch, RawTraceRecord, Store, TextFilter, TraceSite, TraceThread};
use tempfile::TempDir;

const SESSION: &str = "raw-vs-events";

fn open() -> (TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("strobe.db")).unwrap();
    store.set_max_events_per_session(SESSION, 1_000_000);
    (dir, store)
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn sites() -> Vec<TraceSite> {
    vec![
        TraceSite { function_name: "hot_leaf".into(), function_name_raw: "hot_leaf".into(), source_file: Some("/src/hot.c".into()), line_number: Some(12), shape: None },
        // Typed words: an `int` result prints `0`, which is no null return.
        TraceSite {
            function_name: "ns::Widget::draw".into(),
            function_name_raw: "_ZN2ns6Widget4drawEv".into(),
            source_file: None,
            line_number: None,
            shape: Some(Arc::new(WordShape { hidden: 0, params: vec![("n".into(), WordKind::Int { size: 4, signed: true })], ret: Some(WordKind::Int { size: 4, signed: true }) })),
        },
        // A `void` result prints `null` whatever the register holds.
        TraceSite {
            function_name: "quote\"and\\back".into(),
            function_name_raw: "q".into(),
            source_file: Some("/src/ü.rs".into()),
            line_number: Some(1),
            shape: Some(Arc::new(WordShape { hidden: 0, params: vec![], ret: None })),
        },
    ]
}

/// `batches` batches of enter/exit records over nested calls on two threads (one unnamed),
/// with every field varied: sampled or not, 0..=6 arguments (and an out-of-range count),
/// extreme words, parents present and absent. Ids are fixed, so both stores hold the same ones.
fn batches(n_batches: usize, per_batch: usize) -> Vec<RawTraceBatch> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut next_id = 1_000;
    let mut stacks: [Vec<(u32, i64, i64)>; 2] = Default::default();
    let mut now = 0i64;
    let mut out = Vec::new();
    for b in 0..n_batches {
        let mut batch = RawTraceBatch {
            session_id: SESSION.into(),
            pid: 4242,
            // Same sites in another order in odd batches: indices are per batch.
            sites: if b.is_multiple_of(2) { sites() } else { sites().into_iter().rev().collect() },
            threads: vec![
                TraceThread { thread_id: 7, thread_name: Some("main".into()) },
                TraceThread { thread_id: 8, thread_name: None },
            ],
            records: Vec::new(),
            ..Default::default()
        };
        for _ in 0..per_batch {
            now += 1 + (rng.next() % 500) as i64;
            let t = (rng.next() % 2) as usize;
            let enter = stacks[t].is_empty() || (stacks[t].len() < 5 && rng.next().is_multiple_of(2));
            let first = match rng.next() % 5 {
                0 => u64::MAX,
                1 => 0,
                _ => rng.next(),
            };
            let words = [first, u64::MAX, 0, rng.next() >> 40, 1, rng.next()];
            let id = next_id;
            next_id += 1;
            let rec = if enter {
                let site = (rng.next() % 3) as u32;
                let parent = stacks[t].last().map_or(0, |p| p.1);
                stacks[t].push((site, id, now));
                RawTraceRecord {
                    id,
                    exit: false,
                    sampled: rng.next().is_multiple_of(3),
                    unwound: false,
                    nargs: (rng.next() % 9) as u8, // 7 and 8: more than the record holds
                    site,
                    thread: t as u32,
                    timestamp_ns: now,
                    parent_event_id: parent,
                    duration_ns: 0,
                    words,
                }
            } else {
                let (site, enter_id, enter_ts) = stacks[t].pop().unwrap();
                RawTraceRecord {
                    id,
                    exit: true,
                    sampled: rng.next().is_multiple_of(3),
                    unwound: rng.next().is_multiple_of(5), // left by an exception: no return value
                    nargs: 0,
                    site,
                    thread: t as u32,
                    timestamp_ns: now,
                    parent_event_id: if rng.next().is_multiple_of(4) { 0 } else { enter_id },
                    duration_ns: now - enter_ts,
                    words,
                }
            };
            let mut rec = rec;
            if b % 2 == 1 {
                rec.site = 2 - rec.site; // the reversed site list
            }
            // Text a decoder wrote (a typed capture's JSON), in place of the words.
            if rng.next().is_multiple_of(6) {
                let text = ["{\"rc\":0}", "null", "\"0x0\"", "[1,2]"][(rng.next() % 4) as usize];
                batch.texts.push((batch.records.len() as u32, text.to_string()));
            }
            batch.records.push(rec);
        }
        out.push(batch);
    }
    out
}

fn all_queries() -> Vec<EventQuery> {
    let base = EventQuery { session_id: SESSION.into(), limit: 500, ..Default::default() };
    vec![
        base.clone(),
        EventQuery { offset: 1_000, ..base.clone() },
        EventQuery { event_type: Some(EventType::FunctionExit), ..base.clone() },
        EventQuery { event_type: Some(EventType::FunctionEnter), offset: 700, ..base.clone() },
        EventQuery { function: TextFilter { equals: Some("hot_leaf".into()), ..Default::default() }, ..base.clone() },
        EventQuery { source_file: TextFilter { contains: Some("ü".into()), ..Default::default() }, ..base.clone() },
        EventQuery { thread_name_contains: Some("main".into()), ..base.clone() },
        EventQuery { min_duration_ns: Some(2_000), ..base.clone() },
        EventQuery { return_value_equals: Some(serde_json::json!("0xffffffffffffffff")), ..base.clone() },
        EventQuery { after_event_id: Some(1_500), ..base.clone() },
        EventQuery { return_value_is_null: Some(true), ..base.clone() },
        EventQuery { return_value_is_null: Some(false), offset: 300, ..base.clone() },
        EventQuery { return_value_equals: Some(serde_json::json!({"rc": 0})), ..base.clone() },
        EventQuery { pid: Some(4242), time_from_ns: Some(10_000), time_to_ns: Some(200_000), ..base },
    ]
}

#[test]
fn raw_batches_store_what_events_store() {
    let batches = batches(7, 433); // odd sizes: full 32-row statements and single-row tails
    let (_a, by_events) = open();
    let (_b, by_raw) = open();
    for b in &batches {
        by_events.insert(b.to_events());
        by_raw.insert_trace_batch(b.clone());
    }
    by_events.flush();
    by_raw.flush();
    let total = batches.iter().map(|b| b.records.len()).sum::<usize>() as i64;
    assert_eq!(by_raw.count_events(SESSION).unwrap(), total);
    assert_eq!(by_events.count_events(SESSION).unwrap(), total);
    let mut seen_sampled = false;
    let mut seen_args = false;
    for q in all_queries() {
        let want = by_events.query(&q).unwrap();
        let got = by_raw.query(&q).unwrap();
        assert!(!want.events.is_empty(), "query matches nothing, so it proves nothing: {q:?}");
        assert_eq!(got, want, "query {q:?}");
        seen_sampled |= got.events.iter().any(|e| e.sampled == Some(true));
        seen_args |= got.events.iter().any(|e| e.arguments.as_deref().is_some_and(|a| a.contains("\"0xffffffffffffffff\"")));
    }
    assert!(seen_sampled && seen_args, "the data set exercises sampled rows and hex arguments");
}

#[test]
fn raw_batches_survive_reopen_and_count_per_function() {
    let batches = batches(3, 200);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("strobe.db");
    {
        let store = Store::open(&path).unwrap();
        store.set_max_events_per_session(SESSION, 1_000_000);
        store.insert_trace_batch(batches[0].clone());
        store.flush();
    }
    // Reopened: interned sites, threads and the session key come back from the file.
    let store = Store::open(&path).unwrap();
    store.set_max_events_per_session(SESSION, 1_000_000);
    for b in &batches[1..] {
        store.insert_trace_batch(b.clone());
    }
    store.flush();
    let reference = tempfile::tempdir().unwrap();
    let events = Store::open(&reference.path().join("strobe.db")).unwrap();
    events.set_max_events_per_session(SESSION, 1_000_000);
    for b in &batches {
        events.insert(b.to_events());
    }
    events.flush();
    for q in all_queries() {
        assert_eq!(store.query(&q).unwrap(), events.query(&q).unwrap(), "query {q:?}");
    }
}

#[test]
fn a_batch_with_a_bad_index_is_refused_without_harm() {
    let (_d, store) = open();
    let mut bad = batches(1, 10).remove(0);
    bad.records[3].site = 99;
    store.insert_trace_batch(bad);
    let good = batches(1, 10).remove(0);
    store.insert_trace_batch(good.clone());
    store.flush();
    assert_eq!(store.count_events(SESSION).unwrap(), good.records.len() as i64);
}

#[test]
fn duplicate_ids_are_reported_and_counts_stay_exact() {
    let (_d, store) = open();
    let b = batches(1, 100).remove(0);
    store.insert_trace_batch(b.clone());
    store.insert_trace_batch(b.clone()); // same ids again: ignored rows, recounted
    store.flush();
    assert_eq!(store.count_events(SESSION).unwrap(), 100);
    let q = EventQuery { session_id: SESSION.into(), limit: 1, event_type: Some(EventType::FunctionEnter), ..Default::default() };
    let enters = b.records.iter().filter(|r| !r.exit).count() as i64;
    assert_eq!(store.query(&q).unwrap().total_count, enters);
}
