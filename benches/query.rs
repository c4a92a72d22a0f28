//! Query latency per `debug_query` filter kind at 200 k and 1 M events, and ingestion
//! while the FIFO limit evicts. Complements `benches/store.rs` (ingestion rates and the
//! store's own query table): this one covers every filter of the spec, paging and
//! combinations, and whether eviction ever makes `insert` wait.
//!
//! Run: `cargo bench --bench query` (`QUERY_BENCH_SIZES=200000` to pick sizes).

use std::time::{Duration, Instant};

use serde_json::json;
use strobe::store::{Event, EventQuery, EventType, Store, TextFilter};

const MODULES: [&str; 8] = ["audio", "net", "db", "ui", "parser", "cache", "auth", "render"];
const VERBS: [&str; 10] = ["read", "write", "process", "update", "check", "load", "parse", "send", "draw", "mix"];
const THREADS: [&str; 4] = ["main", "audio-rt", "net-io", "worker-3"];

/// A realistic trace: 200 functions in 40 files, enter/exit pairs with arguments and
/// return values, 4 named threads, 2 pids, a line of output every 50 events.
fn batch(session: &str, start: usize, n: usize) -> Vec<Event> {
    (start..start + n)
        .map(|i| {
            let f = (i * 7919) % 200;
            let kind = if i % 50 == 0 {
                EventType::Stdout
            } else if i % 2 == 0 {
                EventType::FunctionEnter
            } else {
                EventType::FunctionExit
            };
            let mut e = Event::new(session, kind, (i as i64) * 1_000);
            e.thread_id = Some((i % 4) as i64 + 100);
            e.thread_name = Some(THREADS[i % 4].into());
            e.pid = Some(if i % 10 == 0 { 4001 } else { 4000 });
            match kind {
                EventType::Stdout => e.text = Some(format!("frame {i} ok\n")),
                _ => {
                    e.function_name = Some(format!("{}::{}_{}", MODULES[f % 8], VERBS[f % 10], f));
                    e.source_file = Some(format!("src/{}/file{}.cpp", MODULES[f % 8], f % 5));
                    e.line_number = Some((f * 13 % 900) as i64);
                    if kind == EventType::FunctionEnter {
                        e.arguments = Some(format!("[{}, \"0x7ffd{:04x}\"]", i % 100, i % 65536));
                    } else {
                        e.duration_ns = Some(if i % 97 == 0 { 2_000_000 } else { (i % 900) as i64 * 10 });
                        e.return_value = Some(if i % 13 == 0 { "\"0x0\"".into() } else { format!("{}", i % 17) });
                    }
                }
            }
            e
        })
        .collect()
}

fn fill(store: &Store, session: &str, n: usize) {
    let mut i = 0;
    while i < n {
        let k = 10_000.min(n - i);
        store.insert(batch(session, i, k));
        i += k;
    }
    store.flush();
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize].as_secs_f64() * 1e3
}

fn measure(store: &Store, qs: &[EventQuery]) -> (f64, f64, i64) {
    let mut times = Vec::new();
    let mut total = 0;
    for round in 0..3 {
        for q in qs {
            let t = Instant::now();
            let r = store.query(q).expect("query");
            if round > 0 {
                times.push(t.elapsed());
            }
            total = r.total_count;
        }
    }
    times.sort();
    (pct(&times, 0.5), pct(&times, 0.95), total)
}

fn tf(equals: Option<String>, contains: Option<&str>, matches: Option<String>) -> TextFilter {
    TextFilter { equals, contains: contains.map(str::to_string), matches }
}

fn query_table(store: &Store, s: &str, n: usize) {
    let base = EventQuery { session_id: s.into(), limit: 50, ..Default::default() };
    let span = n as i64 * 1_000;
    // The first page by id after cursor 0 holds the session's lowest id.
    let first = store.query(&EventQuery { after_event_id: Some(0), limit: 1, ..base.clone() }).unwrap();
    let first_id = first.last_event_id.unwrap_or(1);
    let last_id = first_id + n as i64 - 1;
    let vary = |f: &dyn Fn(usize) -> EventQuery| -> Vec<EventQuery> { (0..20).map(f).collect() };
    let fname = |i: usize| {
        let f = (i * 37) % 200;
        format!("{}::{}_{}", MODULES[f % 8], VERBS[f % 10], f)
    };
    let cases: Vec<(&str, bool, Vec<EventQuery>)> = vec![
        ("eventType=function_exit", true, vary(&|i| EventQuery { event_type: Some(EventType::FunctionExit), offset: i * 50, ..base.clone() })),
        ("function equals", true, vary(&|i| EventQuery { function: tf(Some(fname(i)), None, None), ..base.clone() })),
        ("time range (1% window)", true, vary(&|i| EventQuery { time_from_ns: Some(span / 25 * i as i64), time_to_ns: Some(span / 25 * i as i64 + span / 100), ..base.clone() })),
        ("cursor (tail poll)", true, vary(&|i| EventQuery { after_event_id: Some(last_id - 100 - i as i64), ..base.clone() })),
        ("cursor (from the middle)", true, vary(&|i| EventQuery { after_event_id: Some(first_id + n as i64 / 2 + i as i64 * 1000), ..base.clone() })),
        ("cursor (middle) + eventType", true, vary(&|i| EventQuery { after_event_id: Some(first_id + n as i64 / 2 + i as i64 * 1000), event_type: Some(EventType::FunctionExit), ..base.clone() })),
        ("cursor (middle) + function equals", false, vary(&|i| EventQuery { after_event_id: Some(first_id + n as i64 / 2 + i as i64 * 1000), function: tf(Some(fname(i)), None, None), ..base.clone() })),
        ("cursor (middle) + threadName", false, vary(&|i| EventQuery { after_event_id: Some(first_id + n as i64 / 2 + i as i64 * 1000), thread_name_contains: Some(THREADS[i % 4][..4].into()), ..base.clone() })),
        ("function contains", false, vary(&|i| EventQuery { function: tf(None, Some(VERBS[i % 10]), None), ..base.clone() })),
        ("function matches (regex)", false, vary(&|i| EventQuery { function: tf(None, None, Some(format!("^{}::(read|mix)_", MODULES[i % 8]))), ..base.clone() })),
        ("sourceFile equals", false, vary(&|i| EventQuery { source_file: tf(Some(format!("src/{}/file{}.cpp", MODULES[i % 8], i % 5)), None, None), ..base.clone() })),
        ("sourceFile contains", false, vary(&|i| EventQuery { source_file: tf(None, Some(MODULES[i % 8]), None), ..base.clone() })),
        ("threadName contains", false, vary(&|i| EventQuery { thread_name_contains: Some(THREADS[i % 4][..4].into()), ..base.clone() })),
        ("pid (the minority pid)", false, vary(&|_| EventQuery { pid: Some(4001), ..base.clone() })),
        ("minDurationNs (1 ms)", false, vary(&|_| EventQuery { min_duration_ns: Some(1_000_000), ..base.clone() })),
        ("returnValue equals 5", false, vary(&|_| EventQuery { return_value_equals: Some(json!(5)), ..base.clone() })[..3].to_vec()),
        ("returnValue isNull", false, vary(&|_| EventQuery { return_value_is_null: Some(true), ..base.clone() })[..3].to_vec()),
        ("returnValue isNull + function equals", false, vary(&|i| EventQuery { return_value_is_null: Some(true), function: tf(Some(fname(i)), None, None), ..base.clone() })),
        ("returnValue not null, offset 5 000", false, vary(&|i| EventQuery { return_value_is_null: Some(false), offset: 5_000 + i * 50, ..base.clone() })),
        ("deep offset (10 000)", false, vary(&|i| EventQuery { offset: 10_000 + i * 50, ..base.clone() })),
        ("eventType + function + threadName", false, vary(&|i| EventQuery { event_type: Some(EventType::FunctionExit), function: tf(Some(fname(i)), None, None), thread_name_contains: Some("audio".into()), ..base.clone() })),
        ("eventType + time range + minDuration", false, vary(&|i| EventQuery { event_type: Some(EventType::FunctionExit), time_from_ns: Some(span / 25 * i as i64), time_to_ns: Some(span / 25 * i as i64 + span / 10), min_duration_ns: Some(1_000_000), ..base.clone() })),
    ];
    println!("| filter | indexed | p50 | p95 | totalCount (last) |");
    println!("|---|---|---|---|---|");
    for (name, indexed, qs) in cases {
        let (p50, p95, total) = measure(store, &qs);
        println!("| {name} | {} | {p50:.2} ms | {p95:.2} ms | {total} |", if indexed { "yes" } else { "no" });
    }
}

/// A producer pushes `n` events into a session limited to `limit` while eviction runs;
/// reports how long `insert` calls took (they must not wait for the writer).
fn ingest_with_eviction(dir: &std::path::Path, n: usize, limit: i64) {
    let store = Store::open(&dir.join("evict.db")).unwrap();
    store.set_max_events_per_session("e", limit);
    let batches: Vec<Vec<Event>> = (0..n / 1000).map(|b| batch("e", b * 1000, 1000)).collect();
    let mut calls = Vec::with_capacity(batches.len());
    let t = Instant::now();
    for b in batches {
        let c = Instant::now();
        store.insert(b);
        calls.push(c.elapsed());
    }
    let queued = t.elapsed();
    store.flush();
    let total = t.elapsed();
    calls.sort();
    println!(
        "| {n} events, limit {limit} | {:.1} µs | {:.1} µs | {:.1} µs | {:.2} s | {:.2} s | {:.0} | {} | {} |",
        pct(&calls, 0.5) * 1e3,
        pct(&calls, 0.99) * 1e3,
        calls.last().unwrap().as_secs_f64() * 1e6,
        queued.as_secs_f64(),
        total.as_secs_f64(),
        n as f64 / total.as_secs_f64(),
        store.count_events("e").unwrap(),
        store.events_dropped("e"),
    );
}

fn main() {
    let sizes: Vec<usize> = std::env::var("QUERY_BENCH_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![200_000, 1_000_000]);
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    println!("## debug_query latency per filter ({} CPUs, limit 50, 40 queries each after a warm-up)\n",
        std::thread::available_parallelism().map_or(0, |n| n.get()));
    for &n in &sizes {
        let store = Store::open(&dir.path().join(format!("q{n}.db"))).unwrap();
        store.set_max_events_per_session("s", 10_000_000);
        let t = Instant::now();
        fill(&store, "s", n);
        println!("### {n} events (filled in {:.1} s)\n", t.elapsed().as_secs_f64());
        query_table(&store, "s", n);
        println!();
    }
    println!("### Ingestion while the FIFO limit evicts\n");
    println!("| run | insert() p50 | p99 | max | all queued after | all committed after | events/s | kept | evicted |");
    println!("|---|---|---|---|---|---|---|---|---|");
    let n = *sizes.iter().max().unwrap_or(&1_000_000);
    ingest_with_eviction(dir.path(), n, 200_000);
}
