//! Typed enters stored as captured (src/store/captures.rs) on a real SQLite file: the blob is
//! the row's `arguments`, and FIFO eviction deletes the spans no remaining event can reach —
//! everything of a slot older than its last whole span among the evicted events — and keeps
//! the rest, so a long hot session's spans stay bounded with its events.

use strobe::store::{CaptureRows, CaptureSpan, RawTraceBatch, RawTraceRecord, Store, TraceSite, TraceThread};

const SESSION: &str = "caps";

/// 30 enters; slot 1 sends a whole span at records 0, 10 and 20 and deltas between; slot 2 a
/// whole span at record 0 and deltas after. Returns the records' ids.
fn store_run(store: &Store) -> Vec<i64> {
    let mut b = RawTraceBatch {
        session_id: SESSION.into(),
        pid: 77,
        sites: vec![TraceSite { function_name: "f".into(), function_name_raw: "f".into(), source_file: None, line_number: None, shape: None }],
        threads: vec![TraceThread { thread_id: 78, thread_name: None }],
        ..Default::default()
    };
    let mut rows = CaptureRows::default();
    let mut ids = Vec::new();
    for i in 0..30u64 {
        let id = store.next_event_id();
        ids.push(id);
        b.records.push(RawTraceRecord { id, exit: false, sampled: false, unwound: false, nargs: 1, site: 0, thread: 0, timestamp_ns: 100 + i as i64, parent_event_id: 0, duration_ns: 0, words: [i, 0, 0, 0, 0, 0] });
        b.captures.push((i as u32, vec![1, 0, 0, 0, i as u8]));
        for slot in [1u64, 2] {
            let key = slot << 48 | (i + 1);
            let whole = if slot == 1 { i % 10 == 0 } else { i == 0 };
            let base = if whole { 0 } else { slot << 48 | i };
            rows.spans.push(CaptureSpan { pid: 77, tid: 78, key, base, data: vec![i as u8; 4], event_id: id });
        }
    }
    b.capture_rows = rows;
    store.insert_trace_batch(b);
    store.flush();
    ids
}

fn span_events(db: &std::path::Path, slot: i64) -> Vec<i64> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut st = conn.prepare("SELECT event_id FROM capture_spans WHERE slot = ?1 ORDER BY event_id").unwrap();
    st.query_map([slot], |r| r.get(0)).unwrap().map(Result::unwrap).collect()
}

#[test]
fn eviction_keeps_exactly_the_spans_remaining_events_can_reach() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("events.db");
    let store = Store::open(&db).unwrap();
    store.set_max_events_per_session(SESSION, 1_000);
    let ids = store_run(&store);
    let conn = rusqlite::Connection::open(&db).unwrap();
    let blobs: i64 = conn.query_row("SELECT count(*) FROM events WHERE typeof(arguments) = 'blob'", [], |r| r.get(0)).unwrap();
    assert_eq!(blobs, 30, "captures stored as blobs in arguments");
    assert_eq!(span_events(&db, 1).len(), 30);

    // Keep 15 events (ids[16..] and one more row): slot 1's whole span at record 10 was
    // evicted, so its spans before record 10 go; record 10's whole span and the deltas after
    // it stay (records 16.. refer to them, through the chain). Slot 2 has no whole span after record 0: all stay.
    store.set_max_events_per_session(SESSION, 15);
    store_run_more(&store);
    assert_eq!(span_events(&db, 1), ids[10..].to_vec());
    assert_eq!(span_events(&db, 2), ids.to_vec());
}

/// One more row, so the writer commits and evicts down to the new limit.
fn store_run_more(store: &Store) {
    let mut e = strobe::store::Event::new(SESSION, strobe::store::EventType::Stdout, 1_000);
    e.text = Some("x".into());
    store.insert(vec![e]);
    store.flush();
}
