//! The exact counters behind `totalCount` (src/store/counters.rs, count.rs) against a naive
//! model, on real SQLite files: cursors across id buckets with eviction in between and ids
//! arriving out of order, thread / pid / null-return filters, both ingest paths, duplicate
//! ids, and the upgrade of a layout-1 file.

use rusqlite::Connection;
use strobe::store::{Event, EventQuery, EventType, RawTraceBatch, RawTraceRecord, Store, TextFilter, TraceSite, TraceThread};
use tempfile::TempDir;

const THREADS: [&str; 3] = ["main", "audio-rt", "net-io"];
const RETURNS: [&str; 5] = ["5", "null", "\"0x0\"", "\"0x10\"", "0"];

fn open() -> (TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("strobe.db")).unwrap();
    (dir, store)
}

fn q(session: &str) -> EventQuery {
    EventQuery { session_id: session.to_string(), limit: 40, ..Default::default() }
}

/// Event `i` of a mixed trace: enters, exits (with null-ish and other returns), output.
fn event(store: &Store, session: &str, i: i64) -> Event {
    let kind = match i % 7 {
        0..=2 => EventType::FunctionEnter,
        3..=5 => EventType::FunctionExit,
        _ => EventType::Stdout,
    };
    let mut e = Event::new(session, kind, (i * 7919) % 50_000);
    e.id = store.next_event_id();
    e.thread_name = (i % 5 != 0).then(|| THREADS[(i % 3) as usize].to_string());
    e.thread_id = Some(i % 3);
    e.pid = Some(if i % 4 == 0 { 11 } else { 10 });
    if kind == EventType::Stdout {
        e.text = Some(format!("line {i}"));
    } else {
        e.function_name = Some(format!("f{}", i % 6));
    }
    if kind == EventType::FunctionExit && i % 9 != 0 {
        e.return_value = Some(RETURNS[(i % 5) as usize].to_string());
    }
    e
}

fn is_null_return(e: &Event) -> bool {
    matches!(e.return_value.as_deref(), None | Some("null") | Some("\"0x0\""))
}

/// The matching events of `all`, by the spec's rules, in the order a page lists them
/// (by id after a cursor, chronologically otherwise).
fn model(all: &[Event], q: &EventQuery) -> Vec<i64> {
    let mut hits: Vec<&Event> = all
        .iter()
        .filter(|e| e.session_id == q.session_id)
        .filter(|e| q.event_type.is_none_or(|t| e.event_type == t))
        .filter(|e| q.function.equals.as_ref().is_none_or(|f| e.function_name.as_ref() == Some(f)))
        .filter(|e| {
            q.thread_name_contains.as_ref().is_none_or(|c| e.thread_name.as_ref().is_some_and(|t| t.contains(c.as_str())))
        })
        .filter(|e| q.pid.is_none_or(|p| e.pid == Some(p)))
        .filter(|e| q.after_event_id.is_none_or(|a| e.id > a))
        .filter(|e| q.time_from_ns.is_none_or(|t| e.timestamp_ns >= t))
        .filter(|e| {
            q.return_value_is_null.is_none_or(|want| e.event_type == EventType::FunctionExit && is_null_return(e) == want)
        })
        .collect();
    if q.after_event_id.is_some() {
        hits.sort_by_key(|e| e.id);
    } else {
        hits.sort_by_key(|e| (e.timestamp_ns, e.id));
    }
    hits.iter().map(|e| e.id).collect()
}

fn check(store: &Store, all: &[Event], query: &EventQuery) {
    let expected = model(all, query);
    let r = store.query(query).unwrap_or_else(|e| panic!("{query:?}: {e}"));
    assert_eq!(r.total_count, expected.len() as i64, "totalCount of {query:?}");
    let page: Vec<i64> = expected.iter().skip(query.offset).take(query.limit).copied().collect();
    let mut got: Vec<i64> = r.events.iter().map(|e| e.id).collect();
    if query.after_event_id.is_some() {
        got.sort();
    }
    assert_eq!(got, page, "page of {query:?}");
    assert_eq!(r.has_more, expected.len() > query.offset + r.events.len(), "hasMore of {query:?}");
}

/// The filters the counters serve, each alone and a few together.
fn filter_variants(base: &EventQuery) -> Vec<EventQuery> {
    let f = |name: &str| TextFilter { equals: Some(name.into()), ..Default::default() };
    vec![
        base.clone(),
        EventQuery { event_type: Some(EventType::FunctionExit), ..base.clone() },
        EventQuery { event_type: Some(EventType::Stdout), ..base.clone() },
        EventQuery { function: f("f2"), ..base.clone() },
        EventQuery { event_type: Some(EventType::FunctionEnter), function: f("f4"), ..base.clone() },
        EventQuery { thread_name_contains: Some("audio".into()), ..base.clone() },
        EventQuery { thread_name_contains: Some("o".into()), event_type: Some(EventType::FunctionExit), ..base.clone() },
        EventQuery { pid: Some(11), ..base.clone() },
        EventQuery { pid: Some(10), function: f("f1"), ..base.clone() },
        EventQuery { return_value_is_null: Some(true), ..base.clone() },
        EventQuery { return_value_is_null: Some(false), ..base.clone() },
        EventQuery { return_value_is_null: Some(true), function: f("f3"), ..base.clone() },
        EventQuery { return_value_is_null: Some(true), event_type: Some(EventType::FunctionEnter), ..base.clone() },
        EventQuery { return_value_is_null: Some(true), thread_name_contains: Some("main".into()), ..base.clone() },
    ]
}

/// Ids of a session's rows, read straight from the file (independent of the query code).
fn stored_ids(dir: &TempDir, session: &str) -> Vec<i64> {
    let conn = Connection::open(dir.path().join("strobe.db")).unwrap();
    let mut st = conn
        .prepare("SELECT e.id FROM events e JOIN session_keys k ON k.key = e.session_key WHERE k.name = ?1 ORDER BY e.id")
        .unwrap();
    st.query_map([session], |r| r.get(0)).unwrap().collect::<rusqlite::Result<_>>().unwrap()
}

#[test]
fn cursor_counts_stay_exact_across_buckets_eviction_and_out_of_order_arrival() {
    let (dir, store) = open();
    store.set_max_events_per_session("s", 4_000);
    // Two sessions interleaved in id space (buckets hold both), batches sent out of id order.
    let mut made = Vec::new();
    for i in 0..15_000i64 {
        made.push(event(&store, if i % 3 == 2 { "other" } else { "s" }, i));
    }
    let mut batches: Vec<Vec<Event>> = made.chunks(700).map(<[Event]>::to_vec).collect();
    batches.swap(1, 4);
    batches.swap(9, 12);
    let mut sent: Vec<Event> = Vec::new();
    for round in 0..2 {
        let half = batches.len() / 2;
        let part = if round == 0 { &batches[..half] } else { &batches[half..] };
        for b in part {
            store.insert(b.clone());
            sent.extend(b.iter().cloned());
        }
        store.flush();
        let kept: std::collections::HashSet<i64> = stored_ids(&dir, "s").into_iter().collect();
        assert!(store.events_dropped("s") > 0, "round {round}: the limit evicted");
        assert_eq!(kept.len() as i64, store.count_events("s").unwrap());
        let all: Vec<Event> =
            sent.iter().filter(|e| e.session_id == "other" || kept.contains(&e.id)).cloned().collect();
        let (lo, hi) = (*kept.iter().min().unwrap(), *kept.iter().max().unwrap());
        let cursors = [-1, 0, lo - 1, lo, 4_095, 4_096, 8_191, 8_192, (lo + hi) / 2, hi - 30, hi, hi + 5_000, i64::MAX];
        for cursor in cursors {
            for query in filter_variants(&EventQuery { after_event_id: Some(cursor), ..q("s") }) {
                check(&store, &all, &query);
            }
        }
        for query in filter_variants(&q("s")).into_iter().chain(filter_variants(&EventQuery { offset: 37, ..q("s") })) {
            check(&store, &all, &query);
        }
        check(&store, &all, &EventQuery { after_event_id: Some(lo + 100), ..q("other") });
    }
}

#[test]
fn duplicate_ids_rebuild_every_counter() {
    let (dir, store) = open();
    let mut all: Vec<Event> = (0..3_000).map(|i| event(&store, "s", i)).collect();
    store.insert(all.clone());
    store.flush();
    // A batch repeating stored ids among new ones: the repeats are refused, counters rebuilt.
    let mut again: Vec<Event> = all[100..140].to_vec();
    let fresh: Vec<Event> = (3_000..3_100).map(|i| event(&store, "s", i)).collect();
    again.extend(fresh.clone());
    store.insert(again);
    store.flush();
    all.extend(fresh);
    assert_eq!(stored_ids(&dir, "s").len(), all.len());
    for cursor in [None, Some(0), Some(all[1_500].id)] {
        for query in filter_variants(&EventQuery { after_event_id: cursor, ..q("s") }) {
            check(&store, &all, &query);
        }
    }
}

/// Exits returning 0 are stored as `"0x0"`: null returns, counted on the integer path too.
#[test]
fn raw_trace_batches_count_threads_and_null_returns() {
    let (_a, by_raw) = open();
    let (_b, by_events) = open();
    let sites = vec![
        TraceSite { function_name: "hot".into(), function_name_raw: "_Z3hotv".into(), source_file: Some("a.c".into()), line_number: Some(3), shape: None },
        TraceSite { function_name: "cold".into(), function_name_raw: "_Z4coldv".into(), source_file: None, line_number: None, shape: None },
    ];
    let threads = vec![
        TraceThread { thread_id: 1, thread_name: Some("main".into()) },
        TraceThread { thread_id: 2, thread_name: Some("audio-rt".into()) },
        TraceThread { thread_id: 3, thread_name: None },
    ];
    let mut id = 5_000;
    for b in 0..6u64 {
        let mut batch =
            RawTraceBatch { session_id: "s".into(), pid: 77, sites: sites.clone(), threads: threads.clone(), records: Vec::new(), ..Default::default() };
        for i in 0..1_111u64 {
            id += 1;
            let exit = i % 2 == 1;
            batch.records.push(RawTraceRecord {
                id,
                exit,
                sampled: false,
                unwound: false,
                nargs: 1,
                site: (i % 2) as u32 ^ (b % 2) as u32,
                thread: (i % 3) as u32,
                timestamp_ns: id * 10,
                parent_event_id: 0,
                duration_ns: if exit { 5 } else { 0 },
                words: [if i % 7 < 3 { 0 } else { i }, 0, 0, 0, 0, 0],
            });
        }
        by_events.insert(batch.to_events());
        by_raw.insert_trace_batch(batch);
    }
    by_raw.flush();
    by_events.flush();
    let queries = filter_variants(&q("s")).into_iter().chain(filter_variants(&EventQuery { after_event_id: Some(7_000), ..q("s") }));
    for query in queries {
        let raw = by_raw.query(&query).unwrap();
        assert_eq!(raw, by_events.query(&query).unwrap(), "{query:?}");
        // The same filters plus an all-inclusive time bound are counted by walking the rows.
        let walked = by_raw.query(&EventQuery { time_from_ns: Some(i64::MIN), ..query.clone() }).unwrap();
        assert_eq!(raw.total_count, walked.total_count, "counters agree with a walk: {query:?}");
    }
    let nulls = by_raw.query(&EventQuery { return_value_is_null: Some(true), ..q("s") }).unwrap();
    assert!(nulls.total_count > 0 && nulls.events.iter().all(|e| e.return_value.as_deref() == Some("\"0x0\"")));
}

/// Null returns rare (session "r") or plentiful but all late in time (session "late"): the
/// ordered walk gives up — before starting, or after reading its budget — and the scan
/// serves the page.
#[test]
fn null_returns_far_into_the_timeline_are_paged_by_the_scan() {
    let (_d, store) = open();
    let mut all = Vec::new();
    for (session, null_at) in [("r", (|i: i64| i % 1_000 == 1 || i % 10_000 == 3) as fn(i64) -> bool), ("late", |i| i >= 32_000)] {
        for i in 0..40_000i64 {
            let kind = if i % 2 == 0 { EventType::FunctionEnter } else { EventType::FunctionExit };
            let late = session == "r" && i % 1_000 == 1;
            let mut e = Event::new(session, kind, if late { 1_000_000 + i } else { i });
            e.id = store.next_event_id();
            e.function_name = Some("f".into());
            if kind == EventType::FunctionExit {
                e.return_value = Some(if null_at(i) { "null" } else { "1" }.into());
            }
            all.push(e);
        }
    }
    store.insert(all.clone());
    store.flush();
    for session in ["r", "late"] {
        for query in [
            EventQuery { return_value_is_null: Some(true), ..q(session) },
            EventQuery { return_value_is_null: Some(true), offset: 20, ..q(session) },
            EventQuery { return_value_is_null: Some(false), offset: 15_000, ..q(session) },
        ] {
            check(&store, &all, &query);
        }
    }
}

#[test]
fn a_layout_1_file_is_upgraded_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("strobe.db");
    let all: Vec<Event> = {
        let store = Store::open(&path).unwrap();
        let all: Vec<Event> = (0..9_000).map(|i| event(&store, "s", i)).collect();
        store.insert(all.clone());
        store.flush();
        all
    };
    {
        // What layout 1 was: the same tables without the newer counters.
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "DROP TABLE id_buckets; DROP TABLE thread_counts; DROP TABLE null_return_counts; PRAGMA user_version = 1;",
        )
        .unwrap();
    }
    let store = Store::open(&path).unwrap();
    let version: i64 = Connection::open(&path).unwrap().query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, 4);
    for cursor in [None, Some(0), Some(all[4_444].id)] {
        for query in filter_variants(&EventQuery { after_event_id: cursor, ..q("s") }) {
            check(&store, &all, &query);
        }
    }
    // New events after the upgrade add to the rebuilt counters.
    let mut all = all;
    let more: Vec<Event> = (9_000..9_500).map(|i| event(&store, "s", i)).collect();
    store.insert(more.clone());
    store.flush();
    all.extend(more);
    check(&store, &all, &EventQuery { after_event_id: Some(all[100].id), ..q("s") });
    check(&store, &all, &EventQuery { return_value_is_null: Some(true), ..q("s") });
}

#[test]
fn an_unknown_layout_version_is_refused_with_advice() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("strobe.db");
    drop(Store::open(&path).unwrap());
    Connection::open(&path).unwrap().execute_batch("PRAGMA user_version = 99;").unwrap();
    let err = Store::open(&path).err().expect("a newer layout is refused");
    assert!(err.message.contains("layout version 99") && err.message.contains("delete"), "{}", err.message);
    // The file is left as it was.
    let version: i64 = Connection::open(&path).unwrap().query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, 99);
}
