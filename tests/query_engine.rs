//! The query engine on generated data, against real SQLite files: every event type,
//! null-pointer returns, FIFO eviction while several threads ingest and a reader polls
//! with a cursor, and retention (age and size caps with fabricated timestamps).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use strobe::store::{Event, EventQuery, EventType, RetentionPolicy, SessionRow, Store};
use tempfile::TempDir;

fn open() -> (TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("strobe.db")).unwrap();
    (dir, store)
}

fn q(session: &str) -> EventQuery {
    EventQuery { session_id: session.to_string(), limit: 500, ..Default::default() }
}

fn row(id: &str, status: &str, started_at: i64, ended_at: Option<i64>) -> SessionRow {
    SessionRow {
        id: id.into(),
        binary_path: "/bin/app".into(),
        project_root: "/src/app".into(),
        pid: 1,
        started_at,
        ended_at,
        status: status.into(),
        exit_code: None,
    }
}

#[test]
fn every_event_type_filters_exactly() {
    let (_d, store) = open();
    let types = EventType::ALL;
    assert_eq!(types.len(), 9, "the spec has nine event types");
    let events: Vec<Event> = (0..9 * 300)
        .map(|i| {
            let mut e = Event::new("s", types[i as usize % 9], i);
            e.function_name = Some(format!("f{}", i % 5));
            e
        })
        .collect();
    store.insert(events);
    store.flush();
    for t in types {
        let mut seen = 0;
        let mut offset = 0;
        loop {
            let r = store.query(&EventQuery { event_type: Some(*t), offset, ..q("s") }).unwrap();
            assert_eq!(r.total_count, 300, "{t:?}");
            assert!(r.events.iter().all(|e| e.event_type == *t), "{t:?}");
            seen += r.events.len();
            offset += r.events.len();
            if !r.has_more {
                break;
            }
        }
        assert_eq!(seen, 300, "{t:?}");
    }
}

#[test]
fn a_null_pointer_return_is_null() {
    let (_d, store) = open();
    let rets = [Some("\"0x0\""), Some("\"0x10\""), Some("null"), None, Some("0"), Some("\"abc\"")];
    let events: Vec<Event> = rets
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut e = Event::new("s", EventType::FunctionExit, i as i64);
            e.return_value = r.map(str::to_string);
            e
        })
        .collect();
    store.insert(events);
    // An enter event never matches a return-value filter.
    store.insert(vec![Event::new("s", EventType::FunctionEnter, 99)]);
    store.flush();
    let ts = |r: strobe::store::QueryResult| r.events.iter().map(|e| e.timestamp_ns).collect::<Vec<_>>();
    let null = store.query(&EventQuery { return_value_is_null: Some(true), ..q("s") }).unwrap();
    assert_eq!(ts(null), vec![0, 2, 3]);
    let not_null = store.query(&EventQuery { return_value_is_null: Some(false), ..q("s") }).unwrap();
    assert_eq!(ts(not_null), vec![1, 4, 5]);
    let zero = store.query(&EventQuery { return_value_equals: Some(serde_json::json!(0)), ..q("s") }).unwrap();
    assert_eq!(ts(zero), vec![0, 4], "0 equals the hex 0x0 and the number 0");
}

/// Four writers push 100 k events into a session limited to 5 k while a reader polls it
/// with a cursor. Eviction keeps up, goes oldest first, and the reader is told when its
/// cursor fell behind.
#[test]
fn eviction_during_concurrent_ingestion() {
    const LIMIT: i64 = 5_000;
    const THREADS: i64 = 4;
    const BATCHES: i64 = 50;
    const BATCH: i64 = 500;
    let (_d, store) = open();
    let store = Arc::new(store);
    store.set_max_events_per_session("s", LIMIT);
    store.insert(vec![Event::new("s", EventType::Stdout, 0)]);
    store.flush();
    let first_id = store.query(&q("s")).unwrap().last_event_id.unwrap();

    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (store, done) = (store.clone(), done.clone());
        std::thread::spawn(move || {
            let (mut cursor, mut polls) = (0i64, 0);
            loop {
                let finished = done.load(Ordering::SeqCst);
                let r = store.query(&EventQuery { after_event_id: Some(cursor), limit: 100, ..q("s") }).unwrap();
                assert!(r.events.iter().all(|e| e.id > cursor), "a cursor never goes back");
                if let Some(last) = r.last_event_id {
                    cursor = last;
                }
                polls += 1;
                if finished {
                    break;
                }
            }
            polls
        })
    };
    let writers: Vec<_> = (0..THREADS)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || {
                for b in 0..BATCHES {
                    let events = (0..BATCH)
                        .map(|i| {
                            let mut e = Event::new("s", EventType::FunctionEnter, 1 + (b * BATCH + i) * THREADS + t);
                            e.function_name = Some(format!("w{t}"));
                            e
                        })
                        .collect();
                    store.insert(events); // never waits for the writer
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    store.flush();
    done.store(true, Ordering::SeqCst);
    assert!(reader.join().unwrap() > 0, "the reader polled while writers ingested");
    let total = THREADS * BATCHES * BATCH + 1;

    assert_eq!(store.count_events("s").unwrap(), LIMIT);
    assert_eq!(store.events_dropped("s"), total - LIMIT);
    let all_ids: Vec<i64> = {
        let mut ids = Vec::new();
        let mut cursor = 0;
        loop {
            let r = store.query(&EventQuery { after_event_id: Some(cursor), ..q("s") }).unwrap();
            if r.events.is_empty() {
                break;
            }
            ids.extend(r.events.iter().map(|e| e.id));
            cursor = r.last_event_id.unwrap();
        }
        ids.sort();
        ids
    };
    assert_eq!(all_ids.len() as i64, LIMIT);
    assert!(all_ids[0] > first_id, "the oldest event went first");
    // The kept events are the newest by id: no gaps at the top.
    assert_eq!(all_ids[all_ids.len() - 1] - all_ids[0] + 1, LIMIT);
    let behind = store.query(&EventQuery { after_event_id: Some(first_id), ..q("s") }).unwrap();
    assert!(behind.events_dropped, "a cursor from before the eviction is told");
    let fresh = store.query(&EventQuery { after_event_id: Some(*all_ids.last().unwrap()), ..q("s") }).unwrap();
    assert!(!fresh.events_dropped && fresh.events.is_empty());
    // Counters per function follow eviction.
    let per_fn: i64 = (0..THREADS)
        .map(|t| {
            let f = strobe::store::TextFilter { equals: Some(format!("w{t}")), ..Default::default() };
            store.query(&EventQuery { function: f, limit: 1, ..q("s") }).unwrap().total_count
        })
        .sum();
    assert_eq!(per_fn, LIMIT);
}

const DAY: i64 = 86_400;
const NOW: i64 = 1_800_000_000;

#[test]
fn retention_purges_by_age_but_never_live_sessions() {
    let (_d, store) = open();
    store.create_session(&row("old-stopped", "stopped", NOW - 10 * DAY, Some(NOW - 8 * DAY))).unwrap();
    store.create_session(&row("old-exited", "exited", NOW - 9 * DAY, Some(NOW - 7 * DAY - 1))).unwrap();
    store.create_session(&row("recent", "stopped", NOW - 10 * DAY, Some(NOW - 6 * DAY))).unwrap();
    store.create_session(&row("old-running", "running", NOW - 30 * DAY, None)).unwrap();
    store.create_session(&row("old-live", "exited", NOW - 30 * DAY, Some(NOW - 29 * DAY))).unwrap();
    for id in ["old-stopped", "old-exited", "recent", "old-running", "old-live"] {
        store.insert((0..100).map(|i| Event::new(id, EventType::Stdout, i)).collect());
    }
    store.flush();
    let live: HashSet<String> = ["old-live".to_string()].into();
    let policy = RetentionPolicy { max_age_secs: 7 * DAY, max_total_bytes: i64::MAX };
    let r = store.enforce_retention(policy, NOW, &live).unwrap();
    assert_eq!(r.expired, vec!["old-stopped".to_string(), "old-exited".to_string()]);
    assert!(r.for_space.is_empty());
    let left: Vec<String> = store.list_sessions().unwrap().into_iter().map(|s| s.id).collect();
    assert_eq!(left.len(), 3, "{left:?}");
    for id in ["recent", "old-running", "old-live"] {
        assert!(left.contains(&id.to_string()), "{id} kept");
        assert_eq!(store.count_events(id).unwrap(), 100);
    }
    for id in ["old-stopped", "old-exited"] {
        assert_eq!(store.count_events(id).unwrap(), 0, "{id}'s events went too");
    }
    // A second pass has nothing to do.
    assert!(store.enforce_retention(policy, NOW, &live).unwrap().expired.is_empty());
}

#[test]
fn retention_caps_total_size_oldest_first() {
    let (_d, store) = open();
    let text = "x".repeat(400);
    let fill = |id: &str| {
        store.insert(
            (0..5_000)
                .map(|i| {
                    let mut e = Event::new(id, EventType::Stdout, i);
                    e.text = Some(format!("{id} {i} {text}"));
                    e
                })
                .collect(),
        );
    };
    // Ended 3, 2 and 1 days ago; "live" is the oldest of all but must survive.
    store.create_session(&row("live", "exited", NOW - 9 * DAY, Some(NOW - 5 * DAY))).unwrap();
    store.create_session(&row("oldest", "stopped", NOW - 4 * DAY, Some(NOW - 3 * DAY))).unwrap();
    store.create_session(&row("middle", "exited", NOW - 4 * DAY, Some(NOW - 2 * DAY))).unwrap();
    store.create_session(&row("newest", "stopped", NOW - 4 * DAY, Some(NOW - DAY))).unwrap();
    for id in ["live", "oldest", "middle", "newest"] {
        fill(id);
    }
    store.flush();
    let measure = RetentionPolicy { max_age_secs: 30 * DAY, max_total_bytes: i64::MAX };
    let full = store.enforce_retention(measure, NOW, &HashSet::new()).unwrap().bytes_before;
    let per_session = full / 4;
    assert!(per_session > 1_000_000, "each session holds about 2 MB ({full} in all)");
    let live: HashSet<String> = ["live".to_string()].into();

    // A budget for about 2.5 sessions: the two oldest retained ones go, oldest first.
    let policy = RetentionPolicy { max_age_secs: 30 * DAY, max_total_bytes: full * 5 / 8 };
    let r = store.enforce_retention(policy, NOW, &live).unwrap();
    assert!(r.expired.is_empty());
    assert_eq!(r.for_space, vec!["oldest".to_string(), "middle".to_string()], "{r:?}");
    assert!(r.bytes_after <= policy.max_total_bytes, "{r:?}");
    let left: HashSet<String> = store.list_sessions().unwrap().into_iter().map(|s| s.id).collect();
    assert_eq!(left, ["live".to_string(), "newest".to_string()].into());

    // A budget below what the live session alone holds: everything else goes, it stays.
    let tiny = RetentionPolicy { max_age_secs: 30 * DAY, max_total_bytes: 1024 };
    let r = store.enforce_retention(tiny, NOW, &live).unwrap();
    assert_eq!(r.for_space, vec!["newest".to_string()]);
    assert_eq!(store.count_events("live").unwrap(), 5_000);
    assert_eq!(store.list_sessions().unwrap().len(), 1);
}
