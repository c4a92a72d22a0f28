//! Decoding natively captured typed records (issue 18 item 1) on real target memory: SQLite
//! (the driver of benches/sqlite_real.rs) runs its query workload under Strobe with native
//! capture on `sqlite3VdbeMemRelease(Mem *)` and `sqlite3VdbeIntValue(const Mem *)` (depth 3:
//! the `Mem`, its `sqlite3` connection, that one's VFS and more — ~2 KB copied per call). The
//! session keeps every typed record as the hook wrote it (`Engine::keep_typed_samples`); then,
//! offline, the bench
//! 1. decodes them in a loop: ns per record of the decoder the daemon runs at ingest;
//! 2. stores the rows both ways the issue asks to compare — decoded JSON (what ingest does
//!    today) and the raw payload decoded at query time (plain and deflated) — and reports rows/s
//!    stored, database bytes per row and the latency of reading 1,000 rows as a verbose query
//!    would (lazy: read + decode).
//!
//! The live run's own numbers (rows stored end to end per second, events lost) come first;
//! that run stores typed enters as the daemon ships them — as captured, decoded when read
//! (src/engine/capture_lazy.rs). The offline tables compare the earlier choices on the
//! expanded payloads.
//!
//! `cargo bench --bench capture_decode` (env `SQLITE_BENCH_ROWS`, default 1000;
//! `SQLITE_BENCH_QUERIES`, default 10; `DECODE_BENCH_SECS`, length of each decode loop, default 2).

use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::{params, Connection};
use serde_json::{json, Value};
use strobe::engine::capture_samples::TypedSamples;
use strobe::engine::{Engine, EngineConfig};
use strobe::store::{Event, EventQuery, EventType, Store};

#[path = "support/session.rs"]
mod session;
#[path = "support/sqlite_driver.rs"]
mod sqlite_driver;
use sqlite_driver::{build_driver, env_u64, launch_waiting, repo, run_traced};

const FUNCTIONS: [&str; 2] = ["sqlite3VdbeMemRelease", "sqlite3VdbeIntValue"];
/// Rows a verbose query page reads in the comparison.
const PAGE: usize = 1000;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The workload traced with native capture; every typed record kept.
async fn capture(exe: &Path, args: &[String]) -> TypedSamples {
    let home = tempfile::tempdir().unwrap();
    let cache_dir = repo().join("target").join("strobe-cache");
    let engine = Engine::new(EngineConfig { home: home.path().to_path_buf(), cache_dir }).unwrap();
    engine.warm_up().await.expect("Frida host");
    let id = launch_waiting(&engine, exe, args).await;
    engine.keep_typed_samples(&id, usize::MAX).expect("keep samples");
    // Every call recorded (no rate or cost sampling), a ring big enough not to lose any.
    let run = run_traced(&engine, &id, &FUNCTIONS, json!({ "hotCallsPerSec": 0, "costShare": 0, "ringRecords": 1 << 20 })).await;
    let samples = engine.typed_samples(&id).expect("samples");
    engine.stop(&id, false).await.expect("stop");
    println!("live run: {}", run.line);
    println!(
        "  distinct native plans {} (the functions share one), {} rows stored + {} lost, {:.0} rows/s end to end (go → last row committed, {:.2} s)",
        run.settings["capture"]["plans"],
        run.stored,
        run.lost,
        run.stored as f64 / run.elapsed.as_secs_f64(),
        run.elapsed.as_secs_f64()
    );
    samples
}

/// ns per record of the decoder, each loop over every sample (median and best of the loops).
fn decode_loop(samples: &TypedSamples, secs: f64) -> (f64, f64, usize) {
    let mut per_record = Vec::new();
    let mut json_bytes = 0;
    let t_end = Instant::now() + Duration::from_secs_f64(secs);
    while Instant::now() < t_end || per_record.len() < 3 {
        let t = Instant::now();
        json_bytes = (0..samples.len()).map(|i| samples.json(i).len()).sum();
        per_record.push(t.elapsed().as_nanos() as f64 / samples.len() as f64);
    }
    let best = per_record.iter().copied().fold(f64::INFINITY, f64::min);
    (median(per_record), best, json_bytes)
}

/// Bytes of a database and its WAL.
fn db_bytes(path: &Path) -> u64 {
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    size(path) + size(&path.with_extension("db-wal"))
}

/// p50 ms of `f` over `n` runs.
fn latency_ms(n: usize, mut f: impl FnMut(usize)) -> f64 {
    median((0..n).map(|k| {
        let t = Instant::now();
        f(k);
        t.elapsed().as_secs_f64() * 1e3
    }).collect())
}

/// Ingest-time decode through Strobe's own store: the rows as the daemon writes them.
fn strobe_store(samples: &TypedSamples, jsons: &[String]) -> (f64, u64, f64) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.db");
    let store = Store::open(&path).expect("store");
    let mut events: Vec<Event> = jsons
        .iter()
        .enumerate()
        .map(|(i, j)| {
            let exit = samples.is_exit(i);
            let mut e = Event::new("bench", if exit { EventType::FunctionExit } else { EventType::FunctionEnter }, i as i64 * 1000);
            e.function_name = Some(FUNCTIONS[i % 2].into());
            if exit {
                e.return_value = Some(j.clone());
            } else {
                e.arguments = Some(j.clone());
            }
            e
        })
        .collect();
    let n = events.len();
    let t = Instant::now();
    while !events.is_empty() {
        let rest = events.split_off(events.len().min(PAGE));
        store.insert(std::mem::replace(&mut events, rest));
    }
    store.flush();
    let rate = n as f64 / t.elapsed().as_secs_f64();
    let pages = (n / PAGE).max(1);
    let query = latency_ms(20, |k| {
        let q = EventQuery { session_id: "bench".into(), limit: PAGE, offset: (k % pages) * PAGE, ..Default::default() };
        assert!(!store.query(&q).unwrap().events.is_empty());
    });
    drop(store); // closed: the WAL folded into the file, as for the tables below
    (rate, db_bytes(&path), query)
}

/// How a comparison table stores each record's value.
#[derive(Clone, Copy, PartialEq)]
enum Stored {
    Json,
    Payload,
    Deflated,
}

/// One plain SQLite table (the store's pragmas, 1,000-row transactions) holding each record
/// as `Stored`; a page read returns the JSON, decoding lazily for the payload forms.
fn sqlite_table(samples: &TypedSamples, jsons: &[String], how: Stored) -> (f64, u64, f64) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rows.db");
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(
        "PRAGMA page_size = 8192; PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
         CREATE TABLE rows (id INTEGER PRIMARY KEY, ts INTEGER NOT NULL, site INTEGER NOT NULL, value BLOB);",
    )
    .unwrap();
    let n = samples.len();
    let t = Instant::now();
    for chunk in (0..n).collect::<Vec<_>>().chunks(PAGE) {
        let tx = conn.unchecked_transaction().unwrap();
        {
            let mut ins = tx.prepare_cached("INSERT INTO rows (id, ts, site, value) VALUES (?1, ?2, ?3, ?4)").unwrap();
            for &i in chunk {
                let (id, ts, site) = (i as i64 + 1, i as i64 * 1000, (i % 2) as i64);
                match how {
                    Stored::Json => ins.execute(params![id, ts, site, jsons[i]]),
                    Stored::Payload => ins.execute(params![id, ts, site, samples.payload(i)]),
                    Stored::Deflated => {
                        let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
                        z.write_all(samples.payload(i)).unwrap();
                        ins.execute(params![id, ts, site, z.finish().unwrap()])
                    }
                }
                .unwrap();
            }
        }
        tx.commit().unwrap();
    }
    let rate = n as f64 / t.elapsed().as_secs_f64();
    let pages = (n / PAGE).max(1);
    let mut raw = Vec::new();
    let query = latency_ms(20, |k| {
        let mut q = conn.prepare_cached("SELECT id, value FROM rows WHERE id > ?1 ORDER BY id LIMIT ?2").unwrap();
        let mut rows = q.query(params![((k % pages) * PAGE) as i64, PAGE as i64]).unwrap();
        let mut got = 0;
        while let Some(r) = rows.next().unwrap() {
            let i = r.get::<_, i64>(0).unwrap() as usize - 1;
            let text = match how {
                Stored::Json => r.get::<_, String>(1).unwrap(),
                Stored::Payload => samples.json_from(i, r.get_ref(1).unwrap().as_blob().unwrap()),
                Stored::Deflated => {
                    raw.clear();
                    flate2::read::DeflateDecoder::new(r.get_ref(1).unwrap().as_blob().unwrap()).read_to_end(&mut raw).unwrap();
                    samples.json_from(i, &raw)
                }
            };
            assert_eq!(text.len(), jsons[i].len());
            got += 1;
        }
        assert!(got > 0);
    });
    drop(conn);
    (rate, db_bytes(&path), query)
}

fn main() {
    let exe = build_driver();
    let args = vec![env_u64("SQLITE_BENCH_ROWS", 1000).to_string(), env_u64("SQLITE_BENCH_QUERIES", 10).to_string()];
    let secs = env_u64("DECODE_BENCH_SECS", 2) as f64;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    println!("SQLite {} rows, {} queries; native capture on {} (depth 3)", args[0], args[1], FUNCTIONS.join(", "));
    let samples = rt.block_on(capture(&exe, &args));
    drop(rt);
    let n = samples.len();
    assert!(n > 0, "no typed record kept: did the functions get native plans?");
    let payload: usize = (0..n).map(|i| samples.payload(i).len()).sum();
    let jsons: Vec<String> = (0..n).map(|i| samples.json(i)).collect();
    for j in jsons.iter().take(200) {
        serde_json::from_str::<Value>(j).unwrap_or_else(|e| panic!("decoded text is not JSON ({e}): {j}"));
    }
    let (p50, best, json_bytes) = decode_loop(&samples, secs);
    println!("\n{n} typed records kept: {:.0} payload bytes and {:.0} JSON bytes per record", payload as f64 / n as f64, json_bytes as f64 / n as f64);
    println!("decode (capture_decode.rs, one thread): {p50:.0} ns/record median, {best:.0} best → {:.2} M records/s", 1e3 / p50);
    if let Some(j) = jsons.iter().find(|j| j.len() > 100) {
        println!("an enter as stored: {}…", &j[..j.len().min(400)]);
    }

    println!("\nstoring the {n} records ({PAGE}-row batches), then reading {PAGE}-row pages (p50 of 20):");
    println!("{:<44} {:>12} {:>12} {:>16}", "", "rows/s", "bytes/row", "1,000-row read ms");
    let (rate, bytes, ms) = strobe_store(&samples, &jsons);
    println!("{:<44} {:>12.0} {:>12.0} {:>16.2}", "Strobe store, JSON rows (decoded at ingest)", rate, bytes as f64 / n as f64, ms);
    for (name, how) in [("SQLite table, JSON (decoded at ingest)", Stored::Json), ("SQLite table, raw payload (decoded at query)", Stored::Payload), ("SQLite table, deflated payload (at query)", Stored::Deflated)] {
        let (rate, bytes, ms) = sqlite_table(&samples, &jsons, how);
        println!("{name:<44} {rate:>12.0} {:>12.0} {ms:>16.2}", bytes as f64 / n as f64);
    }
    println!("(ingest-time decode adds {:.2} µs per row before the store; lazy adds it to every read instead)", p50 / 1e3);
}
