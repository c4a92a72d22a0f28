//! WAL checkpoints run on the store's checkpoint thread (`src/store/checkpoint.rs`), not in the
//! writer: after a few hundred thousand rows — far below the writer's own 128 MiB backstop —
//! the rows must have reached the main database file, and must all be there after reopen.

use std::time::{Duration, Instant};

use strobe::store::{RawTraceBatch, RawTraceRecord, Store, TraceSite, TraceThread};

const SESSION: &str = "ckpt";
const ROWS: usize = 200_000;

fn batch(store: &Store, len: usize, ts: &mut i64) -> RawTraceBatch {
    let mut b = RawTraceBatch {
        session_id: SESSION.into(),
        pid: 77,
        sites: vec![TraceSite {
            function_name: "leaf".into(),
            function_name_raw: "leaf".into(),
            source_file: Some("/src/leaf.c".into()),
            line_number: Some(3),
            shape: None,
        }],
        threads: vec![TraceThread { thread_id: 77, thread_name: Some("main".into()) }],
        records: Vec::with_capacity(len),
        ..Default::default()
    };
    for i in 0..len {
        *ts += 100;
        b.records.push(RawTraceRecord {
            id: store.next_event_id(),
            exit: i % 2 == 1,
            sampled: false,
            unwound: false,
            nargs: 2,
            site: 0,
            thread: 0,
            timestamp_ns: *ts,
            parent_event_id: 0,
            duration_ns: if i % 2 == 1 { 90 } else { 0 },
            words: [i as u64, 0x7ffd_0000_0000 + i as u64, 0, 0, 0, 0],
        });
    }
    b
}

#[test]
fn rows_reach_the_main_file_without_the_writer_checkpointing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("strobe.db");
    {
        let store = Store::open(&path).unwrap();
        store.set_max_events_per_session(SESSION, 10_000_000);
        let mut ts = 0;
        let mut sent = 0;
        while sent < ROWS {
            let b = batch(&store, 16_384.min(ROWS - sent), &mut ts);
            sent += b.records.len();
            store.insert_trace_batch(b);
        }
        store.flush();
        assert_eq!(store.count_events(SESSION).unwrap(), ROWS as i64);
        // The WAL (well under the writer's 128 MiB autocheckpoint) was copied into the main
        // file by the checkpoint thread; it runs asynchronously, so wait for it generously.
        let deadline = Instant::now() + Duration::from_secs(60);
        let main_len = || std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        while main_len() < 8 << 20 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(main_len() >= 8 << 20, "main file is {} bytes: no checkpoint ran off the writer", main_len());
    }
    let store = Store::open(&path).unwrap();
    assert_eq!(store.count_events(SESSION).unwrap(), ROWS as i64, "every row survives reopen");
}
