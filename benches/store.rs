//! Event store benchmark: ingestion rate and `debug_query` latency.
//!
//! `cargo bench --bench store`. Knobs: `STORE_BENCH_EVENTS` (default 1 000 000);
//! `STORE_BENCH_INGEST_ONLY=1` / `STORE_BENCH_PRE_ONLY=1` stop after ingestion;
//! `STORE_BENCH_FAST_ONLY=1` measures only the tracing fast-path rows (`=raw`: only through
//! `insert_trace_batch`);
//! `STORE_BENCH_ONLY=<substring>` runs only the query rows whose name contains it.
//! "events per writer-CPU-second" divides by the writer thread's CPU time (Linux `/proc`),
//! which other processes' load does not inflate the way it inflates wall-clock time.
//! Events are realistic trace events: enter/exit pairs from a random call tree over a pool
//! of 200 function names in 30 files and 4 threads, JSON arguments on enters, JSON return
//! values and durations on exits, parent ids, plus a little stdout.

use std::time::{Duration, Instant};

use strobe::store::{Event, EventQuery, EventType, Store, TextFilter};

#[path = "support/trace_batches.rs"]
mod trace_batches;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const MODULES: [&str; 8] = ["audio::dsp", "audio::mixer", "net::http", "net::tls", "core::alloc", "ui::layout", "db::query", "io::file"];
const VERBS: [&str; 25] = [
    "process", "parse", "encode", "decode", "flush", "read", "write", "update", "render", "compute", "handle", "apply",
    "resolve", "load", "store", "push", "pop", "merge", "split", "scan", "filter", "sort", "hash", "open", "close",
];

struct Generator {
    rng: Rng,
    functions: Vec<String>,
    files: Vec<String>,
    threads: Vec<String>,
    now: i64,
    /// Per thread: stack of (function index, enter id, enter ts).
    stacks: Vec<Vec<(usize, i64, i64)>>,
}

impl Generator {
    fn new(seed: u64) -> Generator {
        let functions = (0..200).map(|i| format!("{}::{}_{}", MODULES[i % 8], VERBS[i % 25], i / 25)).collect();
        let files = (0..30).map(|i| format!("src/{}/file_{i}.rs", MODULES[i % 8].replace("::", "/"))).collect();
        let threads = vec!["main".into(), "audio-render".into(), "net-worker-1".into(), "net-worker-2".into()];
        Generator { rng: Rng(seed), functions, files, threads, now: 0, stacks: vec![Vec::new(); 4] }
    }

    /// Zipf-ish popularity: a few hot functions, a long tail.
    fn pick_function(&mut self) -> usize {
        let r = self.rng.below(1000) as f64 / 1000.0;
        ((r * r * r) * 200.0) as usize
    }

    fn batch(&mut self, store: &Store, session: &str, n: usize) -> Vec<Event> {
        let mut out = Vec::with_capacity(n);
        let thread = self.rng.below(4) as usize;
        while out.len() < n {
            self.now += 20 + self.rng.below(200) as i64;
            let depth = self.stacks[thread].len();
            let enter = depth == 0 || (depth < 12 && self.rng.below(100) < 50);
            if self.rng.below(200) == 0 {
                let mut e = Event::new(session, EventType::Stdout, self.now);
                e.id = store.next_event_id();
                e.text = Some(format!("frame {} rendered in {} us", self.now / 1000, self.rng.below(5000)));
                e.thread_id = Some(1000 + thread as i64);
                e.pid = Some(4242);
                out.push(e);
                continue;
            }
            let id = store.next_event_id();
            if enter {
                let f = self.pick_function();
                let parent = self.stacks[thread].last().map(|x| x.1);
                let mut e = Event::new(session, EventType::FunctionEnter, self.now);
                e.id = id;
                e.function_name = Some(self.functions[f].clone());
                e.source_file = Some(self.files[f % 30].clone());
                e.line_number = Some(10 + (f as i64 * 7) % 900);
                e.thread_id = Some(1000 + thread as i64);
                e.thread_name = Some(self.threads[thread].clone());
                e.pid = Some(4242);
                e.parent_event_id = parent;
                e.arguments = Some(format!(
                    r#"["0x7ffd{:08x}",{},{{"len":{},"name":"buf{}"}}]"#,
                    self.rng.next() as u32,
                    self.rng.below(10_000),
                    self.rng.below(4096),
                    self.rng.below(64)
                ));
                self.stacks[thread].push((f, id, self.now));
                out.push(e);
            } else {
                let (f, enter_id, enter_ts) = self.stacks[thread].pop().unwrap();
                // Mostly fast calls; one in a thousand takes milliseconds.
                let extra = if self.rng.below(1000) == 0 { 1_000_000 + self.rng.below(20_000_000) as i64 } else { 0 };
                self.now += extra;
                let mut e = Event::new(session, EventType::FunctionExit, self.now);
                e.id = id;
                e.function_name = Some(self.functions[f].clone());
                e.source_file = Some(self.files[f % 30].clone());
                e.line_number = Some(10 + (f as i64 * 7) % 900);
                e.thread_id = Some(1000 + thread as i64);
                e.thread_name = Some(self.threads[thread].clone());
                e.pid = Some(4242);
                e.parent_event_id = Some(enter_id);
                e.duration_ns = Some(self.now - enter_ts);
                e.return_value = Some(match self.rng.below(4) {
                    0 => "0".into(),
                    1 => format!("{}", self.rng.below(100)),
                    2 => "null".into(),
                    _ => format!("\"0x{:x}\"", self.rng.next() >> 20),
                });
                out.push(e);
            }
        }
        out
    }
}

/// Ingest `n` events produced on another thread in agent-sized batches of 1000; events/s
/// from the first insert to the end of `flush`.
fn ingest(store: &Store, session: &str, n: usize, seed: u64) -> (f64, f64, i64) {
    store.set_max_events_per_session(session, 10_000_000);
    let mut gen = Generator::new(seed);
    let split0 = writer_cpu_split();
    let cpu0 = split0.0 + split0.1;
    let start = Instant::now();
    let mut sent = 0;
    while sent < n {
        let b = gen.batch(store, session, 1000.min(n - sent));
        sent += b.len();
        store.insert(b);
    }
    let produced = start.elapsed();
    store.flush();
    let total = start.elapsed();
    let cpu = writer_cpu_secs() - cpu0;
    let split = writer_cpu_split();
    eprintln!(
        "  produced {n} events in {produced:.2?}, committed after {total:.2?}, writer CPU {cpu:.2} s (user {:.2}, sys {:.2})",
        split.0 - split0.0,
        split.1 - split0.1
    );
    (n as f64 / total.as_secs_f64(), n as f64 / cpu, gen.now)
}

/// Same, but with the events generated beforehand: the store's own cost.
fn ingest_pregenerated(store: &Store, session: &str, n: usize, seed: u64) -> (f64, f64) {
    store.set_max_events_per_session(session, 10_000_000);
    let mut gen = Generator::new(seed);
    let batches: Vec<Vec<Event>> = (0..n.div_ceil(1000)).map(|i| gen.batch(store, session, 1000.min(n - i * 1000))).collect();
    let cpu0 = writer_cpu_secs();
    let start = Instant::now();
    for b in batches {
        store.insert(b);
    }
    store.flush();
    let wall = start.elapsed().as_secs_f64();
    (n as f64 / wall, n as f64 / (writer_cpu_secs() - cpu0))
}

/// CPU seconds used so far by the store's writer threads (Linux `/proc`; 0 elsewhere).
fn writer_cpu_secs() -> f64 {
    let (u, s) = writer_cpu_split();
    u + s
}

/// (user, system) CPU seconds of the writer threads.
fn writer_cpu_split() -> (f64, f64) {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else { return (0.0, 0.0) };
    let tick = 100.0; // USER_HZ
    let (mut user, mut sys) = (0.0, 0.0);
    for t in dir.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.trim() != "strobe-store-wr" {
            continue;
        }
        let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
        // Fields after the parenthesised command: state is field 3, utime 14, stime 15.
        let rest = stat.rsplit_once(')').map_or("", |x| x.1);
        let f: Vec<&str> = rest.split_whitespace().collect();
        if f.len() > 12 {
            user += f[11].parse::<f64>().unwrap_or(0.0) / tick;
            sys += f[12].parse::<f64>().unwrap_or(0.0) / tick;
        }
    }
    (user, sys)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn time_queries(store: &Store, queries: &[EventQuery]) -> (Duration, Duration, i64) {
    let mut times = Vec::new();
    let mut total = 0;
    for round in 0..3 {
        for q in queries {
            let t = Instant::now();
            let r = store.query(q).expect("query");
            let el = t.elapsed();
            if round > 0 {
                times.push(el);
            } // round 0 warms caches
            total = r.total_count;
        }
    }
    times.sort();
    (percentile(&times, 0.5), percentile(&times, 0.95), total)
}

fn query_table(store: &Store, session: &str, span_ns: i64, max_id: i64) {
    let base = EventQuery { session_id: session.into(), limit: 50, ..Default::default() };
    let gen = Generator::new(1);
    let vary = |f: &dyn Fn(usize) -> EventQuery| -> Vec<EventQuery> { (0..20).map(f).collect() };
    let cases: Vec<(&str, Vec<EventQuery>)> = vec![
        ("no filter (first page)", vary(&|_| base.clone())),
        (
            "eventType=function_exit",
            vary(&|i| EventQuery {
                event_type: Some(EventType::FunctionExit),
                offset: i * 50,
                ..base.clone()
            }),
        ),
        ("eventType=stdout", vary(&|_| EventQuery { event_type: Some(EventType::Stdout), ..base.clone() })),
        (
            "function equals",
            vary(&|i| EventQuery {
                function: TextFilter { equals: Some(gen.functions[i * 7 % 200].clone()), ..Default::default() },
                ..base.clone()
            }),
        ),
        (
            "function contains",
            vary(&|i| EventQuery {
                function: TextFilter { contains: Some(VERBS[i % 25].into()), ..Default::default() },
                ..base.clone()
            }),
        ),
        (
            "function matches (regex)",
            vary(&|i| EventQuery {
                function: TextFilter { matches: Some(format!("^{}::(read|write)_", MODULES[i % 8])), ..Default::default() },
                ..base.clone()
            }),
        ),
        (
            "time range (1% window)",
            vary(&|i| EventQuery {
                time_from_ns: Some(span_ns / 25 * i as i64),
                time_to_ns: Some(span_ns / 25 * i as i64 + span_ns / 100),
                ..base.clone()
            }),
        ),
        (
            "cursor (last ~100 events)",
            vary(&|i| EventQuery { after_event_id: Some(max_id - 100 - i as i64), ..base.clone() }),
        ),
        (
            "cursor (from the middle)",
            vary(&|i| EventQuery { after_event_id: Some(max_id / 2 + i as i64 * 1000), ..base.clone() }),
        ),
        ("minDuration (1 ms)", vary(&|_| EventQuery { min_duration_ns: Some(1_000_000), ..base.clone() })),
        (
            "minDuration + function contains",
            vary(&|i| EventQuery {
                min_duration_ns: Some(1_000_000),
                function: TextFilter { contains: Some(VERBS[i % 25].into()), ..Default::default() },
                ..base.clone()
            }),
        ),
        (
            "returnValue equals 0",
            vary(&|_| EventQuery { return_value_equals: Some(serde_json::json!(0)), ..base.clone() }),
        ),
    ];
    println!("| query | p50 | p95 | totalCount (last) |");
    println!("|---|---|---|---|");
    let only = std::env::var("STORE_BENCH_ONLY").unwrap_or_default();
    for (name, qs) in cases {
        if !name.contains(only.as_str()) {
            continue;
        }
        let qs = if name.starts_with("returnValue") { qs[..3].to_vec() } else { qs };
        let (p50, p95, total) = time_queries(store, &qs);
        println!("| {name} | {:.2} ms | {:.2} ms | {total} |", p50.as_secs_f64() * 1e3, p95.as_secs_f64() * 1e3);
    }
}

fn main() {
    let n: usize = std::env::var("STORE_BENCH_EVENTS").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000);
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    println!("## strobe event store ({} CPUs)\n", std::thread::available_parallelism().map_or(0, |n| n.get()));

    let raw_only = std::env::var("STORE_BENCH_FAST_ONLY").as_deref() == Ok("raw");
    if std::env::var_os("STORE_BENCH_FAST_ONLY").is_some() {
        let [raw, events] = trace_batches::measure(dir.path(), n, writer_cpu_secs, raw_only);
        println!("fast-path rows, insert_trace_batch: {:.0} events/s wall, {:.0} per writer-CPU-second", raw.0, raw.1);
        if !raw_only {
            println!("fast-path rows, insert(Event):      {:.0} events/s wall, {:.0} per writer-CPU-second", events.0, events.1);
        }
        return;
    }
    let big = Store::open(&dir.path().join("big.db")).unwrap();
    let (rate, rate_cpu, span_big) = ingest(&big, "big", n, 7);
    let max_big = big.next_event_id() - 1;
    if std::env::var_os("STORE_BENCH_PRE_ONLY").is_some() {
        drop(big);
        let store = Store::open(&dir.path().join("pre.db")).unwrap();
        let (w, c) = ingest_pregenerated(&store, "pre", n, 7);
        println!("pre: {w:.0} events/s wall, {c:.0} events per writer-CPU-second");
        return;
    }
    let [fast_raw, fast_events] = trace_batches::measure(dir.path(), n, writer_cpu_secs, false);
    if std::env::var_os("STORE_BENCH_INGEST_ONLY").is_some() {
        println!("ingest: {rate:.0} events/s wall, {rate_cpu:.0} events per writer-CPU-second");
        println!("fast-path rows, insert_trace_batch: {:.0} events/s wall, {:.0} per writer-CPU-second", fast_raw.0, fast_raw.1);
        println!("fast-path rows, insert(Event):      {:.0} events/s wall, {:.0} per writer-CPU-second", fast_events.0, fast_events.1);
        return;
    }
    if std::env::var_os("STORE_BENCH_ONLY").is_some() {
        query_table(&big, "big", span_big, max_big);
        return;
    }
    let pre = {
        let store = Store::open(&dir.path().join("pre.db")).unwrap();
        ingest_pregenerated(&store, "pre", n, 7)
    };
    let small_n = 200_000.min(n);
    let small = Store::open(&dir.path().join("small.db")).unwrap();
    let (_, _, span_small) = ingest(&small, "small", small_n, 11);
    let max_small = small.next_event_id() - 1;
    let size = |p: &str| std::fs::metadata(dir.path().join(p)).map_or(0, |m| m.len()) as f64 / 1e6;

    println!("### Ingestion ({n} events, batches of 1000 from a producer thread)\n");
    println!("| measure | events/s (wall clock) | events per writer-CPU-second |");
    println!("|---|---|---|");
    println!("| generate on a producer thread + insert + flush | {rate:.0} | {rate_cpu:.0} |");
    println!("| insert + flush of pre-generated events | {:.0} | {:.0} |", pre.0, pre.1);
    println!("| fast-path rows (hot loop), `insert_trace_batch` | {:.0} | {:.0} |", fast_raw.0, fast_raw.1);
    println!("| the same rows as `Event`s, `insert` | {:.0} | {:.0} |", fast_events.0, fast_events.1);
    println!("\nDatabase size: {:.0} MB for {n} events (WAL excluded)\n", size("big.db"));

    // Steady state under FIFO: the session sits at its limit, every insert evicts.
    let fifo = {
        let store = Store::open(&dir.path().join("fifo.db")).unwrap();
        let fill = 200_000.min(n);
        let mut gen = Generator::new(3);
        for _ in 0..fill / 1000 {
            let b = gen.batch(&store, "f", 1000);
            store.insert(b);
        }
        store.set_max_events_per_session("f", fill as i64);
        store.flush();
        let m = 500_000.min(n);
        let start = Instant::now();
        for _ in 0..m / 1000 {
            let b = gen.batch(&store, "f", 1000);
            store.insert(b);
        }
        store.flush();
        let r = m as f64 / start.elapsed().as_secs_f64();
        assert_eq!(store.count_events("f").unwrap(), fill as i64);
        r
    };
    println!("| at the FIFO limit (200 k), every insert evicts | {fifo:.0} events/s |\n");

    println!("### Query latency, {small_n} events in the session (limit 50, 40 runs per row)\n");
    query_table(&small, "small", span_small, max_small);
    println!("\n### Query latency, {n} events in the session\n");
    query_table(&big, "big", span_big, max_big);
}
