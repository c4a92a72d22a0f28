//! Event store against real SQLite files in a temp dir.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde_json::json;
use strobe::error::ErrorCode;
use strobe::store::json_eq::json_text_equals;
use strobe::store::{Event, EventQuery, EventType, SessionRow, Store, TextFilter};
use tempfile::TempDir;

fn open() -> (TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("nested/dir/strobe.db")).unwrap();
    (dir, store)
}

fn q(session: &str) -> EventQuery {
    EventQuery { session_id: session.to_string(), limit: 500, ..Default::default() }
}

fn session_row(id: &str) -> SessionRow {
    SessionRow {
        id: id.to_string(),
        binary_path: "/bin/app".into(),
        project_root: "/src/app".into(),
        pid: 42,
        started_at: 1_700_000_000,
        ended_at: None,
        status: "running".into(),
        exit_code: None,
    }
}

fn full_event(store: &Store, session: &str) -> Event {
    Event {
        id: store.next_event_id(),
        session_id: session.to_string(),
        timestamp_ns: 123_456_789,
        thread_id: Some(7),
        thread_name: Some("worker-1".into()),
        pid: Some(4242),
        parent_event_id: Some(3),
        event_type: EventType::Crash,
        function_name: Some("app::main".into()),
        function_name_raw: Some("_ZN3app4mainE".into()),
        source_file: Some("src/main.rs".into()),
        line_number: Some(17),
        arguments: Some(r#"[1,"two",{"three":3}]"#.into()),
        return_value: Some(r#""0x10""#.into()),
        duration_ns: Some(999),
        text: Some("hello\nworld".into()),
        watch_values: Some(r#"{"g_count":5}"#.into()),
        sampled: Some(true),
        unwound: Some(true),
        signal: Some("SIGSEGV".into()),
        fault_address: Some("0xdeadbeef".into()),
        registers: Some(r#"{"rip":"0x1"}"#.into()),
        backtrace: Some(r#"[{"address":"0x1"}]"#.into()),
        locals: Some(r#"[{"name":"x","value":1}]"#.into()),
        breakpoint_id: Some("bp-1".into()),
        logpoint_message: Some("x = 1".into()),
        capture: None,
    }
}

fn ids(events: &[Event]) -> Vec<i64> {
    events.iter().map(|e| e.id).collect()
}

#[test]
fn every_column_round_trips() {
    let (_d, store) = open();
    let full = full_event(&store, "s1");
    let mut bare = Event::new("s1", EventType::Stdout, 5);
    bare.sampled = Some(false);
    store.insert(vec![full.clone(), bare.clone()]);
    store.flush();
    let r = store.query(&q("s1")).unwrap();
    assert_eq!(r.events.len(), 2);
    // bare got an id on insert, after full's.
    let got_bare = &r.events[0];
    assert!(got_bare.id > full.id);
    assert_eq!(Event { id: got_bare.id, ..bare }, *got_bare);
    assert_eq!(r.events[1], full);
    assert_eq!(r.total_count, 2);
    assert!(!r.has_more);
    assert_eq!(r.pids, vec![4242]);
    assert_eq!(r.last_event_id, Some(got_bare.id));
    assert!(!r.events_dropped);
    assert_eq!(store.count_events("s1").unwrap(), 2);
}

/// A varied session plus a second session that must never leak into the first's results.
fn dataset(store: &Store) -> Vec<Event> {
    let funcs = ["app::parse_header", "app::parse_body", "net::send", "Parser::Parse", "café::ÉCRIRE"];
    let files = ["src/parse.rs", "src/net.rs", "lib/Parser.cpp"];
    let threads = ["main", "worker-1", "Worker-2"];
    let rets = ["5", "\"5\"", "\"0x5\"", "null", "\"abc\"", "5.0", "{\"a\":1}"];
    let mut all = Vec::new();
    for i in 0..400i64 {
        let kind = match i % 9 {
            0..=2 => EventType::FunctionEnter,
            3..=5 => EventType::FunctionExit,
            6 => EventType::Stdout,
            7 => EventType::Stderr,
            _ => EventType::Logpoint,
        };
        // Timestamps not in id order: ids are arrival order, time interleaves.
        let ts = 1_000 + (i * 7919) % 400 * 10 + (i % 3);
        let mut e = Event::new("s1", kind, ts);
        e.id = store.next_event_id();
        if matches!(kind, EventType::FunctionEnter | EventType::FunctionExit) {
            e.function_name = Some(funcs[(i % 5) as usize].into());
            e.source_file = Some(files[(i % 3) as usize].into());
            e.line_number = Some(i);
        }
        if i % 4 != 0 {
            e.thread_name = Some(threads[(i % 3) as usize].into());
        }
        e.thread_id = Some(i % 3);
        e.pid = if i % 10 == 0 { None } else { Some(100 + (i % 2) * 100) };
        if kind == EventType::FunctionExit {
            // Mostly fast; every 7th call slow enough for the slow-call index (>= 100 us).
            e.duration_ns = Some((i * 37) % 1000 * if i % 7 == 0 { 1_000 } else { 1 });
            if i % 8 != 0 {
                e.return_value = Some(rets[(i % 7) as usize].into());
            }
        }
        if matches!(kind, EventType::Stdout | EventType::Stderr) {
            e.text = Some(format!("line {i}"));
        }
        all.push(e);
    }
    let mut other = Vec::new();
    for i in 0..50 {
        let mut e = Event::new("s2", EventType::FunctionEnter, 1_000 + i);
        e.id = store.next_event_id();
        e.function_name = Some("app::parse_header".into());
        e.pid = Some(999);
        other.push(e);
    }
    for chunk in all.chunks(37) {
        store.insert(chunk.to_vec());
    }
    store.insert(other.clone());
    store.flush();
    all.extend(other);
    all
}

fn text_ok(v: Option<&String>, f: &TextFilter) -> bool {
    if f.equals.is_none() && f.contains.is_none() && f.matches.is_none() {
        return true;
    }
    let Some(v) = v else { return false };
    f.equals.as_ref().is_none_or(|e| e == v)
        && f.contains.as_ref().is_none_or(|c| v.to_lowercase().contains(&c.to_lowercase()))
        && f.matches.as_ref().is_none_or(|m| regex::Regex::new(m).unwrap().is_match(v))
}

/// The expected result of a query, computed naively.
fn reference(all: &[Event], q: &EventQuery) -> Vec<i64> {
    let mut hits: Vec<&Event> = all
        .iter()
        .filter(|e| e.session_id == q.session_id)
        .filter(|e| q.event_type.is_none_or(|t| e.event_type == t))
        .filter(|e| text_ok(e.function_name.as_ref(), &q.function))
        .filter(|e| text_ok(e.source_file.as_ref(), &q.source_file))
        .filter(|e| {
            q.thread_name_contains.as_ref().is_none_or(|c| {
                e.thread_name.as_ref().is_some_and(|t| t.to_lowercase().contains(&c.to_lowercase()))
            })
        })
        .filter(|e| q.time_from_ns.is_none_or(|t| e.timestamp_ns >= t))
        .filter(|e| q.time_to_ns.is_none_or(|t| e.timestamp_ns <= t))
        .filter(|e| q.min_duration_ns.is_none_or(|d| e.duration_ns.is_some_and(|x| x >= d)))
        .filter(|e| q.pid.is_none_or(|p| e.pid == Some(p)))
        .filter(|e| q.after_event_id.is_none_or(|a| e.id > a))
        .filter(|e| {
            q.return_value_equals.as_ref().is_none_or(|v| {
                e.event_type == EventType::FunctionExit
                    && e.return_value.as_ref().is_some_and(|r| json_text_equals(r, v))
            })
        })
        .filter(|e| {
            q.return_value_is_null.is_none_or(|want| {
                let null = e.return_value.as_deref().is_none_or(|r| r == "null");
                e.event_type == EventType::FunctionExit && null == want
            })
        })
        .collect();
    hits.sort_by_key(|e| (e.timestamp_ns, e.id));
    hits.iter().map(|e| e.id).collect()
}

fn check(store: &Store, all: &[Event], query: EventQuery, label: &str) -> usize {
    let expected = reference(all, &query);
    let r = store.query(&query).unwrap_or_else(|e| panic!("{label}: {e}"));
    assert_eq!(r.total_count, expected.len() as i64, "{label}: total_count");
    assert_eq!(ids(&r.events), expected, "{label}: events");
    expected.len()
}

fn tf(equals: Option<&str>, contains: Option<&str>, matches: Option<&str>) -> TextFilter {
    TextFilter { equals: equals.map(Into::into), contains: contains.map(Into::into), matches: matches.map(Into::into) }
}

#[test]
fn each_filter_alone_and_combined_matches_a_naive_model() {
    let (_d, store) = open();
    let all = dataset(&store);
    let base = q("s1");
    let cases: Vec<(&str, EventQuery)> = vec![
        ("no filter", base.clone()),
        ("eventType", EventQuery { event_type: Some(EventType::FunctionExit), ..base.clone() }),
        ("eventType stdout", EventQuery { event_type: Some(EventType::Stdout), ..base.clone() }),
        ("eventType none present", EventQuery { event_type: Some(EventType::Pause), ..base.clone() }),
        ("function equals", EventQuery { function: tf(Some("app::parse_body"), None, None), ..base.clone() }),
        ("function equals miss", EventQuery { function: tf(Some("app::parse"), None, None), ..base.clone() }),
        ("function contains (case-insensitive)", EventQuery { function: tf(None, Some("PARSE"), None), ..base.clone() }),
        ("function contains unicode", EventQuery { function: tf(None, Some("écrire"), None), ..base.clone() }),
        ("function matches", EventQuery { function: tf(None, None, Some(r"^app::parse_(header|body)$")), ..base.clone() }),
        ("function matches case-sensitive", EventQuery { function: tf(None, None, Some("Parse")), ..base.clone() }),
        ("function contains+matches", EventQuery { function: tf(None, Some("parse"), Some("body")), ..base.clone() }),
        ("sourceFile equals", EventQuery { source_file: tf(Some("src/net.rs"), None, None), ..base.clone() }),
        ("sourceFile contains", EventQuery { source_file: tf(None, Some("parser"), None), ..base.clone() }),
        ("returnValue equals 5", EventQuery { return_value_equals: Some(json!(5)), ..base.clone() }),
        ("returnValue equals \"abc\"", EventQuery { return_value_equals: Some(json!("abc")), ..base.clone() }),
        ("returnValue equals object", EventQuery { return_value_equals: Some(json!({"a": 1.0})), ..base.clone() }),
        ("returnValue isNull", EventQuery { return_value_is_null: Some(true), ..base.clone() }),
        ("returnValue not null", EventQuery { return_value_is_null: Some(false), ..base.clone() }),
        ("threadName contains", EventQuery { thread_name_contains: Some("worker".into()), ..base.clone() }),
        ("timeFrom", EventQuery { time_from_ns: Some(3_000), ..base.clone() }),
        ("timeTo", EventQuery { time_to_ns: Some(1_500), ..base.clone() }),
        ("time range", EventQuery { time_from_ns: Some(2_000), time_to_ns: Some(2_500), ..base.clone() }),
        ("minDuration", EventQuery { min_duration_ns: Some(900), ..base.clone() }),
        ("minDuration slow", EventQuery { min_duration_ns: Some(100_000), ..base.clone() }),
        (
            "minDuration slow + function + time",
            EventQuery {
                min_duration_ns: Some(300_000),
                function: tf(None, Some("parse"), None),
                time_to_ns: Some(4_000),
                ..base.clone()
            },
        ),
        ("minDuration slow + returnValue", EventQuery { min_duration_ns: Some(200_000), return_value_is_null: Some(false), ..base.clone() }),
        ("pid", EventQuery { pid: Some(200), ..base.clone() }),
        ("pid of other session", EventQuery { pid: Some(999), ..base.clone() }),
        (
            "type+function+time",
            EventQuery {
                event_type: Some(EventType::FunctionEnter),
                function: tf(None, Some("parse"), None),
                time_from_ns: Some(1_500),
                time_to_ns: Some(3_500),
                ..base.clone()
            },
        ),
        (
            "exit+minDuration+pid+file",
            EventQuery {
                event_type: Some(EventType::FunctionExit),
                min_duration_ns: Some(300),
                pid: Some(100),
                source_file: tf(None, Some(".rs"), None),
                ..base.clone()
            },
        ),
        (
            "returnValue+thread+function",
            EventQuery {
                return_value_equals: Some(json!("5")),
                thread_name_contains: Some("MAIN".into()),
                function: tf(None, None, Some("^(app|net)::")),
                ..base.clone()
            },
        ),
        ("after cursor + type", EventQuery { after_event_id: Some(all[200].id), event_type: Some(EventType::FunctionExit), ..base.clone() }),
        ("other session", EventQuery { function: tf(Some("app::parse_header"), None, None), ..q("s2") }),
    ];
    let mut nonempty = 0;
    for (label, query) in cases {
        if query.after_event_id.is_some() {
            // Cursor pages are the next events by id, sorted by time: compare as sets here.
            let r = store.query(&query).unwrap();
            let mut expected = reference(&all, &query);
            assert_eq!(r.total_count, expected.len() as i64, "{label}");
            let mut got = ids(&r.events);
            got.sort();
            expected.sort();
            assert_eq!(got, expected, "{label}");
            continue;
        }
        if check(&store, &all, query, label) > 0 {
            nonempty += 1;
        }
    }
    assert!(nonempty >= 28, "the dataset should exercise most filters, {nonempty} non-empty");
}

#[test]
fn pagination_limit_offset_has_more_total() {
    let (_d, store) = open();
    let all = dataset(&store);
    let expected = reference(&all, &q("s1"));
    assert_eq!(expected.len(), 400);
    let mut seen = Vec::new();
    for (page, offset) in [0usize, 150, 300].into_iter().enumerate() {
        let r = store.query(&EventQuery { limit: 150, offset, ..q("s1") }).unwrap();
        assert_eq!(r.total_count, 400);
        assert_eq!(r.events.len(), if page < 2 { 150 } else { 100 });
        assert_eq!(r.has_more, page < 2, "page {page}");
        assert_eq!(r.last_event_id, r.events.iter().map(|e| e.id).max());
        seen.extend(ids(&r.events));
    }
    assert_eq!(seen, expected);
    let past = store.query(&EventQuery { limit: 50, offset: 400, ..q("s1") }).unwrap();
    assert!(past.events.is_empty() && !past.has_more && past.total_count == 400 && past.last_event_id.is_none());
    let zero = store.query(&EventQuery { limit: 0, ..q("s1") }).unwrap();
    assert!(zero.events.is_empty() && zero.has_more && zero.total_count == 400);
    // Pages of the single-pass path (return value filter) and the slow-call index.
    for query in [
        EventQuery { return_value_equals: Some(json!(5)), limit: 7, offset: 5, ..q("s1") },
        EventQuery { min_duration_ns: Some(100_000), limit: 3, offset: 2, ..q("s1") },
    ] {
        let r = store.query(&query).unwrap();
        let exp = reference(&all, &query);
        assert_eq!(r.total_count, exp.len() as i64);
        assert_eq!(ids(&r.events), exp[query.offset.min(exp.len())..(query.offset + query.limit).min(exp.len())].to_vec());
        assert_eq!(r.has_more, exp.len() > query.offset + query.limit);
    }
    // Filtered pagination.
    let filt = EventQuery { event_type: Some(EventType::FunctionEnter), limit: 40, offset: 120, ..q("s1") };
    let r = store.query(&filt).unwrap();
    let exp = reference(&all, &filt);
    assert_eq!(ids(&r.events), exp[120..exp.len().min(160)].to_vec());
    assert_eq!(r.has_more, exp.len() > 160);
}

#[test]
fn chronological_order_by_timestamp_then_id() {
    let (_d, store) = open();
    let stamps = [50, 10, 30, 10, 40, 20, 10, 60, 0, 30];
    let evs: Vec<Event> = stamps.iter().map(|t| Event::new("s", EventType::Stdout, *t)).collect();
    store.insert(evs);
    store.flush();
    let r = store.query(&q("s")).unwrap();
    let got: Vec<(i64, i64)> = r.events.iter().map(|e| (e.timestamp_ns, e.id)).collect();
    let mut sorted = got.clone();
    sorted.sort();
    assert_eq!(got, sorted);
    assert_eq!(got.iter().map(|x| x.0).collect::<Vec<_>>(), vec![0, 10, 10, 10, 20, 30, 30, 40, 50, 60]);
}

#[test]
fn cursor_polling_never_skips_or_repeats() {
    let (_d, store) = open();
    // Arrival order (ids) disagrees with timestamps: two "threads" flushed in turn.
    let mut all = Vec::new();
    let mut cursor = 0i64;
    let mut seen: Vec<i64> = Vec::new();
    for round in 0..5i64 {
        let mut batch = Vec::new();
        for i in 0..40i64 {
            let ts = round * 1_000 + if i < 20 { i * 10 } else { (i - 20) * 10 + 5 };
            let mut e = Event::new("s", EventType::FunctionEnter, ts);
            e.id = store.next_event_id();
            batch.push(e);
        }
        all.extend(batch.clone());
        store.insert(batch);
        store.flush();
        loop {
            let r = store.query(&EventQuery { after_event_id: Some(cursor), limit: 7, ..q("s") }).unwrap();
            let remaining = all.iter().filter(|e| e.id > cursor).count() as i64;
            assert_eq!(r.total_count, remaining);
            assert!(!r.events_dropped);
            if r.events.is_empty() {
                assert!(r.last_event_id.is_none());
                break;
            }
            let page: Vec<(i64, i64)> = r.events.iter().map(|e| (e.timestamp_ns, e.id)).collect();
            let mut sorted = page.clone();
            sorted.sort();
            assert_eq!(page, sorted, "a page is chronological");
            assert_eq!(r.has_more, remaining > r.events.len() as i64);
            seen.extend(ids(&r.events));
            cursor = r.last_event_id.unwrap();
        }
    }
    let mut expected = ids(&all);
    let mut got = seen.clone();
    got.sort();
    expected.sort();
    assert_eq!(got, expected, "every event exactly once");
}

#[test]
fn cursor_walk_and_index_paths_agree() {
    let (_d, store) = open();
    // "s" first, then many rows of another session: from cursor 0, walking the table would
    // cross more rows than "s" has, so the index serves it; near the end, the walk does.
    let mk = |s: &str, n: i64| -> Vec<Event> { (0..n).map(|i| Event::new(s, EventType::FunctionEnter, i * 3 % 1_000_003)).collect() };
    store.insert(mk("s", 20_000));
    store.insert(mk("other", 30_000));
    let tail: Vec<Event> = mk("s", 5).into_iter().map(|e| Event { id: store.next_event_id(), ..e }).collect();
    store.insert(tail.clone());
    store.flush();
    let first = store.query(&EventQuery { after_event_id: Some(0), limit: 50, ..q("s") }).unwrap();
    assert_eq!(first.total_count, 20_005);
    let mut got = ids(&first.events);
    got.sort();
    assert_eq!(got, (1..=50).collect::<Vec<_>>(), "the next 50 by id");
    let mid = store.query(&EventQuery { after_event_id: Some(19_990), limit: 50, ..q("s") }).unwrap();
    assert_eq!(mid.total_count, 15);
    let mut got = ids(&mid.events);
    got.sort();
    let mut expected: Vec<i64> = (19_991..=20_000).collect();
    expected.extend(ids(&tail));
    assert_eq!(got, expected, "skips the other session's rows");
    let near = store.query(&EventQuery { after_event_id: Some(tail[1].id), limit: 50, ..q("s") }).unwrap();
    assert_eq!(near.total_count, 3);
    assert_eq!(near.last_event_id, Some(tail[4].id));
}

#[test]
fn fifo_eviction_and_events_dropped() {
    let (_d, store) = open();
    store.set_max_events_per_session("s", 100);
    let mut all_ids = Vec::new();
    let mut all = Vec::new();
    for _ in 0..10 {
        let batch: Vec<Event> = (0..25)
            .map(|i| {
                let kind = if i % 3 == 0 { EventType::Stdout } else { EventType::FunctionEnter };
                let mut e = Event::new("s", kind, i);
                e.id = store.next_event_id();
                e.function_name = (kind == EventType::FunctionEnter).then(|| format!("f{}", i % 4));
                e
            })
            .collect();
        all_ids.extend(ids(&batch));
        all.extend(batch.clone());
        store.insert(batch);
    }
    // An unlimited neighbour is untouched.
    store.insert((0..300).map(|i| Event::new("other", EventType::Stdout, i)).collect());
    store.flush();
    assert_eq!(store.count_events("s").unwrap(), 100);
    assert_eq!(store.events_dropped("s"), 150);
    assert_eq!(store.count_events("other").unwrap(), 300);
    assert_eq!(store.events_dropped("other"), 0);

    let r = store.query(&q("s")).unwrap();
    let mut kept = ids(&r.events);
    kept.sort();
    assert_eq!(kept, all_ids[150..].to_vec(), "the oldest (lowest ids) went first");
    assert_eq!(r.total_count, 100);
    assert!(r.events_dropped, "no cursor: the session lost events");
    // Counters follow eviction.
    let kept_events: Vec<Event> = all.iter().filter(|e| e.id > all_ids[149]).cloned().collect();
    for query in [
        EventQuery { event_type: Some(EventType::Stdout), ..q("s") },
        EventQuery { function: tf(Some("f1"), None, None), ..q("s") },
        EventQuery { event_type: Some(EventType::FunctionEnter), function: tf(None, Some("f"), None), ..q("s") },
    ] {
        assert_eq!(store.query(&query).unwrap().total_count, reference(&kept_events, &query).len() as i64, "{query:?}");
    }

    let behind = store.query(&EventQuery { after_event_id: Some(all_ids[10]), ..q("s") }).unwrap();
    assert!(behind.events_dropped, "cursor fell behind the eviction");
    let at_edge = store.query(&EventQuery { after_event_id: Some(all_ids[149]), ..q("s") }).unwrap();
    assert!(!at_edge.events_dropped, "nothing after this cursor was evicted");
    assert_eq!(at_edge.total_count, 100);
    assert!(!store.query(&q("other")).unwrap().events_dropped);

    // Lowering the limit evicts without new inserts.
    store.set_max_events_per_session("s", 30);
    store.flush();
    assert_eq!(store.count_events("s").unwrap(), 30);
    assert_eq!(store.events_dropped("s"), 220);
    let r = store.query(&q("s")).unwrap();
    let mut kept = ids(&r.events);
    kept.sort();
    assert_eq!(kept, all_ids[220..].to_vec());
}

#[test]
fn fifo_eviction_larger_than_one_chunk() {
    let (_d, store) = open();
    store.set_max_events_per_session("s", 1_000);
    store.insert((0..50_000).map(|i| Event::new("s", EventType::FunctionEnter, i)).collect());
    store.flush();
    assert_eq!(store.count_events("s").unwrap(), 1_000);
    assert_eq!(store.events_dropped("s"), 49_000);
    let r = store.query(&EventQuery { limit: 1, ..q("s") }).unwrap();
    assert_eq!(r.total_count, 1_000);
    assert_eq!(r.events[0].timestamp_ns, 49_000);
}

#[test]
fn delete_session_removes_row_and_events_including_queued_ones() {
    let (_d, store) = open();
    store.create_session(&session_row("a")).unwrap();
    store.create_session(&session_row("b")).unwrap();
    store.insert((0..100).map(|i| Event::new("a", EventType::Stdout, i)).collect());
    store.insert((0..10).map(|i| Event::new("b", EventType::Stdout, i)).collect());
    // No flush: the delete must still see these.
    store.delete_session("a").unwrap();
    assert!(store.get_session("a").unwrap().is_none());
    assert!(!store.session_id_exists("a").unwrap());
    assert_eq!(store.count_events("a").unwrap(), 0);
    assert_eq!(store.query(&q("a")).unwrap_err().code, ErrorCode::SessionNotFound);
    assert_eq!(store.query(&q("b")).unwrap().total_count, 10);
    assert_eq!(store.delete_session("nope").unwrap_err().code, ErrorCode::SessionNotFound);
    // Re-creating the id starts empty.
    store.create_session(&session_row("a")).unwrap();
    assert_eq!(store.query(&q("a")).unwrap().total_count, 0);
    store.insert(vec![Event::new("a", EventType::Stdout, 1)]);
    store.flush();
    assert_eq!(store.query(&q("a")).unwrap().total_count, 1);
    assert_eq!(store.count_events("a").unwrap(), 1);
}

#[test]
fn bad_regex_is_a_validation_error() {
    let (_d, store) = open();
    store.insert(vec![Event::new("s", EventType::Stdout, 1)]);
    store.flush();
    let e = store
        .query(&EventQuery { function: tf(None, None, Some("parse(")), ..q("s") })
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::ValidationError);
    assert!(e.message.contains("parse("), "{}", e.message);
    assert!(e.message.contains("regex"), "{}", e.message);
    assert!(e.message.contains("backslash"), "says how to fix it: {}", e.message);
}

#[test]
fn unknown_session_and_empty_session() {
    let (_d, store) = open();
    assert_eq!(store.query(&q("ghost")).unwrap_err().code, ErrorCode::SessionNotFound);
    store.create_session(&session_row("empty")).unwrap();
    let r = store.query(&q("empty")).unwrap();
    assert!(r.events.is_empty() && r.total_count == 0 && r.pids.is_empty() && !r.has_more);
}

#[test]
fn session_rows() {
    let (_d, store) = open();
    let mut a = session_row("a");
    store.create_session(&a).unwrap();
    assert_eq!(store.create_session(&a).unwrap_err().code, ErrorCode::SessionExists);
    let mut b = session_row("b");
    b.started_at += 10;
    store.create_session(&b).unwrap();
    assert!(store.session_id_exists("a").unwrap());
    assert!(!store.session_id_exists("c").unwrap());
    assert_eq!(store.get_session("a").unwrap(), Some(a.clone()));
    store.update_session_status("a", "exited", Some(1_700_000_100), Some(3)).unwrap();
    a.status = "exited".into();
    a.ended_at = Some(1_700_000_100);
    a.exit_code = Some(3);
    assert_eq!(store.get_session("a").unwrap(), Some(a.clone()));
    assert_eq!(store.list_sessions().unwrap(), vec![b, a]);
    assert_eq!(store.update_session_status("zz", "stopped", None, None).unwrap_err().code, ErrorCode::SessionNotFound);
    assert_eq!(store.update_session_status("a", "paused", None, None).unwrap_err().code, ErrorCode::ValidationError);
}

#[test]
fn concurrent_readers_while_the_writer_ingests() {
    let (_d, store) = open();
    let store = Arc::new(store);
    let done = Arc::new(AtomicBool::new(false));
    let total = 60_000i64;
    let producer = {
        let store = store.clone();
        std::thread::spawn(move || {
            for b in 0..(total / 500) {
                let batch: Vec<Event> = (0..500)
                    .map(|i| {
                        let mut e = Event::new("s", if i % 2 == 0 { EventType::FunctionEnter } else { EventType::FunctionExit }, b * 500 + i);
                        e.function_name = Some(format!("f{}", i % 20));
                        e.duration_ns = (i % 2 == 1).then_some(i);
                        e
                    })
                    .collect();
                store.insert(batch);
            }
        })
    };
    let readers: Vec<_> = (0..3)
        .map(|n| {
            let store = store.clone();
            let done = done.clone();
            std::thread::spawn(move || {
                let mut last_total = 0;
                let mut polls = 0;
                while !done.load(Ordering::Relaxed) || polls < 3 {
                    let query = match n {
                        0 => q("s"),
                        1 => EventQuery { function: tf(Some("f3"), None, None), ..q("s") },
                        _ => EventQuery { event_type: Some(EventType::FunctionExit), min_duration_ns: Some(10), ..q("s") },
                    };
                    match store.query(&query) {
                        Ok(r) => {
                            assert!(r.total_count >= last_total, "counts only grow");
                            last_total = r.total_count;
                            assert!(r.events.len() <= 500);
                            assert!(r.events.windows(2).all(|w| (w[0].timestamp_ns, w[0].id) <= (w[1].timestamp_ns, w[1].id)));
                            if n == 1 {
                                assert!(r.events.iter().all(|e| e.function_name.as_deref() == Some("f3")));
                            }
                        }
                        Err(e) if e.code == ErrorCode::SessionNotFound && last_total == 0 => {}
                        Err(e) => panic!("reader {n}: {e}"),
                    }
                    polls += 1;
                }
                polls
            })
        })
        .collect();
    producer.join().unwrap();
    store.flush();
    done.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() >= 3);
    }
    assert_eq!(store.query(&q("s")).unwrap().total_count, total);
    assert_eq!(store.count_events("s").unwrap(), total);
}

#[test]
fn reopen_keeps_data_and_the_id_counter_continues() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("strobe.db");
    let (max_id, full) = {
        let store = Store::open(&path).unwrap();
        store.create_session(&session_row("s")).unwrap();
        let full = full_event(&store, "s");
        store.insert(vec![full.clone()]);
        store.insert((0..99).map(|i| Event::new("s", EventType::Stdout, 1_000 + i)).collect());
        let max_id = store.next_event_id();
        store.set_max_events_per_session("t", 10);
        store.insert((0..15).map(|i| Event::new("t", EventType::Stdout, i)).collect());
        (max_id, full)
        // dropped without flush: drop drains the queue.
    };
    let store = Store::open(&path).unwrap();
    assert!(store.next_event_id() > max_id, "ids continue past every id handed out");
    assert_eq!(store.get_session("s").unwrap(), Some(session_row("s")));
    let r = store.query(&q("s")).unwrap();
    assert_eq!(r.total_count, 100);
    assert_eq!(r.events.last(), Some(&full));
    assert_eq!(store.count_events("s").unwrap(), 100);
    assert_eq!(store.events_dropped("t"), 5, "dropped counts persist");
    assert_eq!(store.count_events("t").unwrap(), 10);

    // Same session keeps growing after reopen, interned strings are reused.
    let mut e = Event::new("s", EventType::FunctionEnter, 5_000);
    e.function_name = full.function_name.clone();
    store.insert(vec![e]);
    store.flush();
    let r = store.query(&EventQuery { function: tf(Some("app::main"), None, None), ..q("s") }).unwrap();
    assert_eq!(r.total_count, 2);
    assert_eq!(store.count_events("s").unwrap(), 101);

    // A limit set after reopen on an untouched session applies.
    store.set_max_events_per_session("s", 60);
    store.flush();
    assert_eq!(store.count_events("s").unwrap(), 60);
    assert_eq!(store.query(&q("s")).unwrap().total_count, 60);
}

#[test]
fn ids_are_unique_across_threads() {
    let (_d, store) = open();
    let store = Arc::new(store);
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let s = store.clone();
            std::thread::spawn(move || (0..1000).map(|_| s.next_event_id()).collect::<Vec<_>>())
        })
        .collect();
    let mut all = HashSet::new();
    for h in handles {
        let v = h.join().unwrap();
        assert!(v.windows(2).all(|w| w[0] < w[1]));
        for id in v {
            assert!(all.insert(id));
        }
    }
}

#[test]
fn a_duplicate_id_is_not_stored_and_counts_stay_exact() {
    let (_d, store) = open();
    let mut a = Event::new("s", EventType::Stdout, 1);
    a.id = store.next_event_id();
    a.text = Some("first".into());
    store.insert(vec![a.clone()]);
    store.flush();
    // A batch large enough for the multi-row statement, with one id reused.
    let mut batch: Vec<Event> = (0..40).map(|i| Event { id: store.next_event_id(), ..Event::new("s", EventType::Stderr, 10 + i) }).collect();
    batch[5] = Event { text: Some("second".into()), ..a.clone() };
    store.insert(batch);
    store.flush();
    let r = store.query(&q("s")).unwrap();
    assert_eq!(r.total_count, r.events.len() as i64);
    assert_eq!(store.count_events("s").unwrap(), r.total_count);
    assert_eq!(store.query(&EventQuery { event_type: Some(EventType::Stdout), ..q("s") }).unwrap().total_count, 1);
    assert_eq!(r.events.iter().find(|e| e.id == a.id).unwrap().text.as_deref(), Some("first"));
    // The other 39 of the batch made it.
    assert_eq!(store.query(&EventQuery { event_type: Some(EventType::Stderr), ..q("s") }).unwrap().total_count, 39);
}

#[test]
fn pids_lists_distinct_pids() {
    let (_d, store) = open();
    let evs: Vec<Event> = [Some(3), Some(1), None, Some(3), Some(2)]
        .into_iter()
        .map(|p| Event { pid: p, ..Event::new("s", EventType::Stdout, 1) })
        .collect();
    store.insert(evs);
    store.flush();
    assert_eq!(store.query(&q("s")).unwrap().pids, vec![1, 2, 3]);
    assert_eq!(store.query(&EventQuery { pid: Some(3), ..q("s") }).unwrap().total_count, 2);
}

#[test]
fn the_events_wire_view_shows_the_spec_columns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("strobe.db");
    let store = Store::open(&path).unwrap();
    let full = full_event(&store, "s1");
    store.insert(vec![full.clone()]);
    store.flush();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let row: (String, String, String, String, i64, String, String, i64) = conn
        .query_row(
            "SELECT session_id, event_type, function_name, thread_name, pid, signal, registers, sampled \
             FROM events_wire WHERE id = ?1",
            [full.id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?)),
        )
        .unwrap();
    assert_eq!(
        row,
        ("s1".into(), "crash".into(), "app::main".into(), "worker-1".into(), 4242, "SIGSEGV".into(), r#"{"rip":"0x1"}"#.into(), 1)
    );
}
