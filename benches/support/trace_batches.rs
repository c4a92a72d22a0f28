//! The tracing fast path's rows through the store both ways: `insert_trace_batch` (integer
//! records) and `insert` of the same rows as `Event`s. Rows look like the hot-loop
//! benchmark's: enter (two pointer-sized arguments) / exit (return value, duration) pairs of
//! one function on one thread, in agent-sized batches of 16,384 records.

use std::time::Instant;

use strobe::store::{Event, RawTraceBatch, RawTraceRecord, Store, TraceSite, TraceThread, MAX_PENDING_EVENTS};

const BATCH: usize = 16_384;

fn batches(store: &Store, session: &str, n: usize) -> Vec<RawTraceBatch> {
    let mut out = Vec::new();
    let mut ts = 0i64;
    let mut made = 0;
    while made < n {
        let len = BATCH.min(n - made);
        let mut b = RawTraceBatch {
            session_id: session.into(),
            pid: 4242,
            sites: vec![TraceSite {
                function_name: "hot_leaf".into(),
                function_name_raw: "hot_leaf".into(),
                source_file: Some("/work/tests/fixtures/c/hotloop.c".into()),
                line_number: Some(9),
                shape: None,
            }],
            threads: vec![TraceThread { thread_id: 4242, thread_name: Some("hotloop".into()) }],
            records: Vec::with_capacity(len),
            ..Default::default()
        };
        let mut enter_id = 0;
        for i in 0..len {
            ts += 150;
            let id = store.next_event_id();
            let exit = i % 2 == 1;
            if !exit {
                enter_id = id;
            }
            b.records.push(RawTraceRecord {
                id,
                exit,
                sampled: false,
                unwound: false,
                nargs: 2,
                site: 0,
                thread: 0,
                timestamp_ns: ts,
                parent_event_id: if exit { enter_id } else { 0 },
                duration_ns: if exit { 140 } else { 0 },
                words: [(i as u64) << 3, 0x7ffd_0000_1000 + i as u64, 0, 0, 0, 0],
            });
        }
        made += len;
        out.push(b);
    }
    out
}

/// (events/s wall, events per writer-CPU-second) of raw batches, then of the same as events.
/// With `raw_only`, the second pair is NaN (the `Event` path is not run).
pub fn measure(dir: &std::path::Path, n: usize, writer_cpu_secs: fn() -> f64, raw_only: bool) -> [(f64, f64); 2] {
    let run = |name: &str, raw: bool| {
        let store = Store::open(&dir.join(format!("{name}.db"))).unwrap();
        store.set_max_events_per_session(name, 100_000_000);
        let raw_batches = batches(&store, name, n);
        let event_batches: Vec<Vec<Event>> = if raw { Vec::new() } else { raw_batches.iter().map(|b| b.to_events()).collect() };
        let cpu0 = writer_cpu_secs();
        let start = Instant::now();
        // As the agents' flow control does: no more than the writer accepts waits for it
        // (beyond MAX_PENDING_EVENTS it sheds trace batches, counted).
        let room = |len: usize| {
            while store.events_pending() + len as i64 > MAX_PENDING_EVENTS {
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
        };
        if raw {
            for b in raw_batches {
                room(b.records.len());
                store.insert_trace_batch(b);
            }
        } else {
            for b in event_batches {
                room(b.len());
                store.insert(b);
            }
        }
        store.flush();
        let wall = start.elapsed().as_secs_f64();
        assert_eq!(store.count_events(name).unwrap(), n as i64);
        (n as f64 / wall, n as f64 / (writer_cpu_secs() - cpu0))
    };
    let raw = run("fast_raw", true);
    [raw, if raw_only { (f64::NAN, f64::NAN) } else { run("fast_events", false) }]
}
