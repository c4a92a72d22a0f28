//! The event store under load, on real SQLite: the FIFO limit holds at every commit while
//! other connections read and write, and eviction never fails on a lock.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use strobe::store::{Event, EventQuery, EventType, SessionRow, Store};

fn row(id: &str) -> SessionRow {
    SessionRow {
        id: id.into(),
        binary_path: "/bin/x".into(),
        project_root: "/src".into(),
        pid: 1,
        started_at: 1,
        ended_at: None,
        status: "running".into(),
        exit_code: None,
    }
}

/// Ten sessions ingest in large batches with a limit of 1,000 each, while a reader polls their
/// counts and the control connection rewrites session rows (what launches and stops do). No
/// reader may ever see a session above its limit, and every event is accounted for: kept or
/// counted as dropped (an eviction that failed on "database is locked" left sessions over
/// the limit and the counts short).
#[test]
fn the_limit_holds_at_every_commit_under_concurrent_reads_and_writes() {
    const LIMIT: i64 = 1_000;
    const SESSIONS: usize = 10;
    const BATCHES: usize = 12;
    const BATCH: usize = 5_000;
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(&dir.path().join("strobe.db")).unwrap());
    let names: Vec<String> = (0..SESSIONS).map(|i| format!("s{i}")).collect();
    for n in &names {
        store.create_session(&row(n)).unwrap();
        store.set_max_events_per_session(n, LIMIT);
    }
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (store, done, names) = (store.clone(), done.clone(), names.clone());
        std::thread::spawn(move || {
            let mut worst = 0;
            let mut reads = 0;
            while !done.load(Ordering::Relaxed) || reads == 0 {
                for n in &names {
                    let q = EventQuery { session_id: n.clone(), limit: 1, ..Default::default() };
                    worst = worst.max(store.query(&q).unwrap().total_count);
                    reads += 1;
                }
            }
            worst
        })
    };
    let control = {
        let (store, done, names) = (store.clone(), done.clone(), names.clone());
        std::thread::spawn(move || {
            let mut i = 0;
            while !done.load(Ordering::Relaxed) {
                store.update_session_status(&names[i % SESSIONS], "running", None, None).unwrap();
                i += 1;
            }
        })
    };
    for b in 0..BATCHES {
        for n in &names {
            let ts = (b * BATCH) as i64;
            store.insert((0..BATCH as i64).map(|i| Event::new(n, EventType::FunctionEnter, ts + i)).collect());
        }
    }
    store.flush();
    done.store(true, Ordering::Relaxed);
    let worst = reader.join().unwrap();
    control.join().unwrap();
    assert!(worst <= LIMIT, "a reader saw {worst} events in a session limited to {LIMIT}");
    for n in &names {
        assert_eq!(store.count_events(n).unwrap(), LIMIT, "{n}");
        assert_eq!(store.events_dropped(n), (BATCHES * BATCH) as i64 - LIMIT, "{n}: every event kept or counted");
    }
}
