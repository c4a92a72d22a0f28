//! Typed values on a real program nobody here wrote, against gdb: SQLite (the amalgamation of
//! the `libsqlite3-sys` crate driven by benches/real/sqlite_drv.c, built `-g -O0`, about a
//! minute the first time) with `sqlite3BtreeNext(BtCursor *, int)` traced natively at the
//! default depth, every call recorded. After the first calls the cursor's pointees (its tree,
//! the shared tree, the page, the connection) travel as references to what an earlier record
//! sent or as the few words that changed (agent/native/capture_walk.c `cap_delta`); the values
//! stored must still be gdb's for the same calls.
//!
//! The expected values are gdb's: `gdb -batch` on the same driver with `break
//! *sqlite3BtreeNext` and the fields below of `(BtCursor *) $rdi`, `run 200 2 wait`, counting
//! the hits after "ready" (gdb's `break sqlite3BtreeNext`, without `*`, stops before the -O0
//! prologue has stored `pCur` and prints garbage there).
//!
//! The enters are stored as captured (src/engine/capture_lazy.rs): the SQLite file holds each
//! record's blob and the spans it refers to, and the values are decoded when read. The test
//! checks the file, then reads the same values again after a daemon restart (a new engine on
//! the same home), from the stored plan and spans alone.
//!
//! Run: `cargo test --test sqlite_values`.

mod common;
#[path = "../benches/support/session.rs"]
mod session;
#[path = "../benches/support/sqlite_driver.rs"]
mod sqlite_driver;

use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Value};
use strobe::engine::{Engine, EngineConfig};
use strobe::store::EventType;

fn engine() -> (tempfile::TempDir, Arc<Engine>) {
    let home = tempfile::tempdir().unwrap();
    let cache_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target").join("strobe-cache");
    let engine = Engine::new(EngineConfig { home: home.path().to_path_buf(), cache_dir }).unwrap();
    (home, engine)
}

/// (call index after "ready", ix, info.nKey, info.nPayload) as gdb printed them; every call
/// also has pBtree.db.nDb 2, pBt.pageSize 4096, pBt.nPage 2, pPage.nCell 200, pPage.pgno 2,
/// pBtree.inTrans 1, db.flags 3758391520 and db.nChange 1.
const GDB: [(usize, i64, i64, i64); 9] =
    [(0, 0, 1, 10), (1, 1, 2, 12), (150, 150, 151, 14), (199, 199, 200, 14), (200, 0, 1, 10), (201, 1, 2, 12), (299, 99, 100, 13), (300, 100, 101, 14), (399, 199, 200, 14)];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_cursor_values_equal_gdbs_after_their_pointees_travel_as_references() {
    let exe = sqlite_driver::build_driver();
    let (_home, engine) = engine();
    let id = sqlite_driver::launch_waiting(&engine, &exe, &["200".into(), "2".into()]).await;
    let run = sqlite_driver::run_traced(&engine, &id, &["sqlite3BtreeNext"], json!({ "hotCallsPerSec": 0, "costShare": 0 })).await;
    let capture = &run.after["capture"];
    assert_eq!(run.lost, 0, "{capture}");
    assert!(capture["walksUnchanged"].as_u64().unwrap() > 0 && capture["walksDelta"].as_u64().unwrap() > 0, "references and deltas in play: {capture}");
    check_gdb_values(&engine, &id);
    engine.stop(&id, true).await.expect("stop, retained");
    engine.store().flush();
    let db = engine.store().path().to_path_buf();
    stored_as_captured(&db);
    drop(engine);
    // A restarted daemon: the session is retained, its capture plan and spans are in the file.
    let cache_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target").join("strobe-cache");
    let again = Engine::new(EngineConfig { home: _home.path().to_path_buf(), cache_dir }).unwrap();
    check_gdb_values(&again, &id);
}

/// The typed enters in the file are blobs, with spans (whole and deltas) and a plan beside.
fn stored_as_captured(db: &Path) {
    let conn = rusqlite::Connection::open(db).unwrap();
    let count = |sql: &str| conn.query_row(sql, [], |r| r.get::<_, i64>(0)).unwrap();
    assert_eq!(count("SELECT count(*) FROM events WHERE event_kind = 0 AND typeof(arguments) = 'blob'"), 400, "enters stored as captured");
    // Only whole spans are rows; the records carry the windows changed since.
    assert!(count("SELECT count(*) FROM capture_spans") > 0, "whole spans stored");
    assert_eq!(count("SELECT count(*) FROM capture_spans WHERE base <> 0"), 0, "deltas travel in the records");
    assert_eq!(count("SELECT count(*) FROM capture_plans"), 1, "one plan");
    let bytes = count("SELECT sum(length(arguments)) FROM events WHERE event_kind = 0");
    eprintln!("stored captures: {bytes} bytes for 400 enters; spans {} rows", count("SELECT count(*) FROM capture_spans"));
}

/// The typed values of the nine calls gdb printed.
fn check_gdb_values(engine: &Engine, id: &str) {
    let enters: Vec<Value> = common::events::trace_events(engine, id)
        .into_iter()
        .filter(|e| e.event_type == EventType::FunctionEnter)
        .map(|e| serde_json::from_str::<Value>(e.arguments.as_deref().unwrap()).unwrap()["pCur"].clone())
        .collect();
    assert_eq!(enters.len(), 400, "2 queries over 200 rows");
    for (i, ix, key, payload) in GDB {
        let c = &enters[i];
        let got = json!([c["ix"], c["info"]["nKey"], c["info"]["nPayload"]]);
        assert_eq!(got, json!([ix, key, payload]), "call {i}: ix, info.nKey, info.nPayload: {c}");
        let same = json!([
            c["pBtree"]["db"]["nDb"],
            c["pBt"]["pageSize"],
            c["pBt"]["nPage"],
            c["pPage"]["nCell"],
            c["pPage"]["pgno"],
            c["pBtree"]["inTrans"],
            c["pBtree"]["db"]["flags"],
            c["pBtree"]["db"]["nChange"]
        ]);
        assert_eq!(same, json!([2, 4096, 2, 200, 2, 1, 3758391520u64, 1]), "call {i}: {c}");
    }
}
