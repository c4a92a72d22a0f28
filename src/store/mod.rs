//! The event store: SQLite in WAL mode, one writer thread fed by an unbounded channel
//! (so `insert` never waits on I/O), reader connections of its own for queries, and a
//! per-session FIFO limit enforced by the writer in chunks.
//!
//! Layout and index choice: see `schema.rs`; query semantics: see `query.rs`.

pub mod captures;
mod checkpoint;
mod count;
mod counters;
mod dict;
mod evict;
mod gate;
mod hold; // stdout/stderr ids follow time
/// The timeline event type.
pub mod event;
mod intern;
mod memory;
/// `returnValue.equals`: JSON value equality as `debug_query` means it.
pub mod json_eq;
/// `debug_query`: filters, pagination, cursor.
pub mod query;
mod rawstmt;
mod scan;
/// Fast-path trace rows as plain integers (`Store::insert_trace_batch`).
pub mod raw_batch;
pub mod word_shape;
/// Age and size limits on retained sessions.
pub mod retention;
pub(crate) mod schema;
mod trace_writer;
pub(crate) mod writer;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;

use rusqlite::{params, Connection, OptionalExtension};

pub use captures::{CaptureReader, CaptureRows, CaptureSpan};
pub use event::{Event, EventType};
pub use query::{EventQuery, QueryResult, TextFilter};
pub use raw_batch::{RawTraceBatch, RawTraceRecord, TraceSite, TraceThread};
pub use retention::{PurgeReport, RetentionPolicy};

use crate::error::{ErrorCode, Result, StrobeError};
use schema::sql_err;
use writer::{Msg, Writer};

/// FIFO limit of a session that was given none (`events.maxPerSession`).
pub const DEFAULT_MAX_EVENTS: i64 = 200_000;

/// One row of the `sessions` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRow {
    pub id: String,
    pub binary_path: String,
    pub project_root: String,
    pub pid: i64,
    /// Unix seconds.
    pub started_at: i64,
    pub ended_at: Option<i64>,
    /// "running", "exited" or "stopped".
    pub status: String,
    pub exit_code: Option<i64>,
}

/// Per-session counters the writer publishes after each commit.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SessionStats {
    pub max_events: i64,
    /// Committed events, when the writer has counted them.
    pub count: Option<i64>,
    pub dropped: i64,
    pub evicted_upto: i64,
    /// Trace events refused because the writer was `MAX_PENDING_EVENTS` behind.
    pub shed: i64,
}

impl Default for SessionStats {
    fn default() -> Self {
        SessionStats { max_events: DEFAULT_MAX_EVENTS, count: None, dropped: 0, evicted_upto: 0, shed: 0 }
    }
}

pub(crate) struct Shared {
    pub next_id: AtomicI64,
    /// Events queued for the writer and not yet committed (`Store::catch_up`).
    pub pending: AtomicI64,
    pub stats: Mutex<HashMap<String, SessionStats>>,
    /// Held by whoever checkpoints the WAL (`checkpoint.rs`, retention): SQLite runs one
    /// checkpoint at a time and answers a second one with SQLITE_BUSY instead of waiting.
    pub checkpoint_lock: Mutex<()>,
    /// Taken around every write transaction (gate.rs).
    pub gate: gate::WriteGate,
    /// Reader connections not in use (memory.rs shrinks them when ingestion goes quiet).
    pub readers: Mutex<Vec<Connection>>,
}

/// The event store. `Send + Sync`; share it in an `Arc`. Dropping it drains the queue,
/// commits and stops the writer thread.
pub struct Store {
    path: PathBuf,
    shared: Arc<Shared>,
    tx: Sender<Msg>,
    writer: Mutex<Option<JoinHandle<()>>>,
    control: Mutex<Connection>,
    dict: RwLock<dict::Dict>,
    /// stdout/stderr lines waiting for their ids (hold.rs).
    held: hold::HeldOutput,
}

const VALID_STATUSES: &[&str] = &["running", "exited", "stopped"];
/// Most events queued for the writer: beyond, fast-path trace batches are dropped and counted
/// (`events_shed`), as the agent's ring drops records when the daemon falls behind. Bounds the
/// daemon's memory (~130 bytes per queued event) and how long a flush (stop, exit) can take:
/// two agents' flow-control windows, so one or two hot sessions never lose events here.
pub const MAX_PENDING_EVENTS: i64 = 262_144;
/// Backlog up to which a query waits for the writer (`catch_up`): about one writer round,
/// tens of milliseconds.
pub const FRESH_BACKLOG: i64 = 20_000;
const MAX_POOLED_READERS: usize = 8;

impl Store {
    /// Open (or create) the database at `path`: parent directories, schema, WAL,
    /// `synchronous=NORMAL`; starts the writer thread with its own connection.
    pub fn open(path: &Path) -> Result<Store> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| {
                StrobeError::internal(format!("Cannot create the directory {} for the event database: {e}", dir.display()))
            })?;
        }
        let conn = schema::open_writer(path)?;
        let max_id: i64 = conn
            .query_row(
                "SELECT max(coalesce((SELECT max(id) FROM events), 0), \
                            coalesce((SELECT value FROM meta WHERE key = 'max_event_id'), 0))",
                [],
                |r| r.get(0),
            )
            .map_err(|e| sql_err("Cannot read the highest event id", e))?;
        let shared = Arc::new(Shared {
            next_id: AtomicI64::new(max_id + 1),
            pending: AtomicI64::new(0),
            stats: Mutex::new(HashMap::new()),
            checkpoint_lock: Mutex::new(()),
            gate: Default::default(),
            readers: Mutex::new(Vec::new()),
        });
        let writer = Writer::new(conn, shared.clone())?;
        let control = schema::open_reader(path, false)?;
        let (tx, rx) = mpsc::channel();
        let handle = std::thread::Builder::new()
            .name("strobe-store-writer".into())
            .spawn(move || writer.run(rx))
            .map_err(|e| StrobeError::internal(format!("Cannot start the event writer thread: {e}")))?;
        Ok(Store {
            path: path.to_path_buf(),
            shared,
            tx,
            writer: Mutex::new(Some(handle)),
            control: Mutex::new(control),
            dict: RwLock::new(dict::Dict::default()),
            held: Default::default(),
        })
    }

    /// A fresh event id: unique, increasing in assignment order, continuing after reopen.
    pub fn next_event_id(&self) -> i64 {
        self.shared.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Queue stdout/stderr lines: they get their ids once the trace events stamped before
    /// them (still in the agent's buffers) are in, so that ids follow time (hold.rs).
    pub fn insert_output(&self, events: Vec<Event>) {
        self.held.hold(events);
        self.release_held(None, false);
    }

    fn release_held(&self, before: Option<(&str, i64)>, everything: bool) {
        let due = self.held.take(before, everything);
        if !due.is_empty() {
            self.insert_now(due);
        }
    }

    /// Queue events for the writer; never blocks on I/O. Events with `id == 0` get one here.
    pub fn insert(&self, events: Vec<Event>) {
        if let Some(first) = events.iter().map(|e| e.timestamp_ns).min() {
            self.release_held(Some((&events[0].session_id, first)), false);
        }
        self.insert_now(events);
    }

    fn insert_now(&self, mut events: Vec<Event>) {
        if events.is_empty() {
            return;
        }
        let missing = events.iter().filter(|e| e.id == 0).count() as i64;
        if missing > 0 {
            let first = self.shared.next_id.fetch_add(missing, Ordering::Relaxed);
            for (id, e) in (first..).zip(events.iter_mut().filter(|e| e.id == 0)) {
                e.id = id;
            }
        }
        self.shared.pending.fetch_add(events.len() as i64, Ordering::Relaxed);
        if self.tx.send(Msg::Events(events)).is_err() {
            tracing::error!("event store: the writer thread has stopped; events dropped");
        }
    }

    /// Queue fast-path trace rows (see `raw_batch.rs`); stores what `insert(batch.to_events())`
    /// would, without an allocation per event. Records with `id == 0` get one here.
    pub fn insert_trace_batch(&self, mut batch: RawTraceBatch) {
        if batch.records.is_empty() && batch.capture_rows.is_empty() {
            return;
        }
        if let Some(first) = batch.records.iter().map(|r| r.timestamp_ns).min() {
            self.release_held(Some((&batch.session_id, first)), false);
        }
        let missing = batch.records.iter().filter(|r| r.id == 0).count() as i64;
        if missing > 0 {
            let first = self.shared.next_id.fetch_add(missing, Ordering::Relaxed);
            for (id, r) in (first..).zip(batch.records.iter_mut().filter(|r| r.id == 0)) {
                r.id = id;
            }
        }
        let n = batch.records.len() as i64;
        if n > 0 && self.shared.pending.load(Ordering::Relaxed) + n > MAX_PENDING_EVENTS {
            self.shed(&batch.session_id, n);
            // Its spans stay: later records' captures refer to them.
            batch.records.clear();
            batch.captures.clear();
            batch.texts.clear();
            if batch.capture_rows.is_empty() {
                return;
            }
        }
        // Formatted here, on the producer's thread: the writer is the pipeline's one serial stage.
        let texts = raw_batch::TraceTexts::format(&batch);
        self.shared.pending.fetch_add(batch.records.len() as i64, Ordering::Relaxed);
        if self.tx.send(Msg::TraceBatch(batch, texts)).is_err() {
            tracing::error!("event store: the writer thread has stopped; trace events dropped");
        }
    }

    /// Drop a trace batch the writer has no room for; counted (`events_shed`).
    fn shed(&self, session_id: &str, n: i64) {
        if self.count_lost(session_id, n) == n {
            tracing::warn!(
                "event store: more than {MAX_PENDING_EVENTS} events wait to be stored; trace events of session \
                 {session_id} are dropped (counted in eventsLost) until the writer catches up"
            );
        }
    }

    /// Count `n` trace events of a session as lost on the daemon's side (reported in
    /// `eventsLost` with the writer's sheddings): a batch that could not be read. Returns the
    /// session's count so far.
    pub(crate) fn count_lost(&self, session_id: &str, n: i64) -> i64 {
        let mut stats = self.shared.stats.lock().unwrap();
        let e = stats.entry(session_id.to_string()).or_default();
        e.shed += n;
        e.shed
    }

    /// Trace events of a session dropped because the writer was too far behind (reported
    /// with the agent's own losses as `eventsLost`).
    pub fn events_shed(&self, session_id: &str) -> i64 {
        self.shared.stats.lock().unwrap().get(session_id).map_or(0, |s| s.shed)
    }

    /// Block until everything inserted before this call is committed (and the FIFO limit
    /// enforced on it).
    pub fn flush(&self) {
        self.release_held(None, true);
        let (tx, rx) = mpsc::sync_channel(1);
        if self.tx.send(Msg::Flush(tx)).is_ok() {
            let _ = rx.recv();
        }
    }

    /// Make what has arrived visible before a query: `flush`, unless the writer is more than
    /// `FRESH_BACKLOG` events behind (heavy tracing load). Then waiting would take as long as
    /// storing that backlog (seconds with ten hot sessions), so the query answers at once from
    /// what is committed: always a prefix of the arrival order, so a visible line of output
    /// comes with every event queued before it. Returns the events still waiting.
    pub fn catch_up(&self) -> i64 {
        self.release_held(None, true);
        let behind = self.events_pending();
        if behind <= FRESH_BACKLOG {
            self.flush();
            return 0;
        }
        behind
    }

    /// Events queued for the writer and not yet committed.
    pub fn events_pending(&self) -> i64 {
        self.shared.pending.load(Ordering::Relaxed).max(0)
    }

    /// Insert a session row. A duplicate id is `SESSION_EXISTS`.
    pub fn create_session(&self, s: &SessionRow) -> Result<()> {
        check_status(&s.status)?;
        self.shared.gate.control(|| self.create_session_row(s))
    }

    fn create_session_row(&self, s: &SessionRow) -> Result<()> {
        let conn = self.control.lock().unwrap();
        conn.prepare_cached(
            "INSERT INTO sessions (id, binary_path, project_root, pid, started_at, ended_at, status, exit_code) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )
        .and_then(|mut st| {
            st.execute(params![s.id, s.binary_path, s.project_root, s.pid, s.started_at, s.ended_at, s.status, s.exit_code])
        })
        .map_err(|e| match e {
            rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::ConstraintViolation => StrobeError::new(
                ErrorCode::SessionExists,
                format!("Session '{}' already exists. Stop or delete it first, or use another session id.", s.id),
            ),
            e => sql_err("create_session", e),
        })?;
        Ok(())
    }

    /// Set status, end time and exit code. Unknown id is `SESSION_NOT_FOUND`.
    pub fn update_session_status(&self, id: &str, status: &str, ended_at: Option<i64>, exit_code: Option<i64>) -> Result<()> {
        check_status(status)?;
        let n = self.shared.gate.control(|| {
            let conn = self.control.lock().unwrap();
            conn.prepare_cached("UPDATE sessions SET status = ?2, ended_at = ?3, exit_code = ?4 WHERE id = ?1")
                .and_then(|mut st| st.execute(params![id, status, ended_at, exit_code]))
                .map_err(|e| sql_err("update_session_status", e))
        })?;
        if n == 0 {
            return Err(StrobeError::session_not_found(id));
        }
        Ok(())
    }

    pub fn get_session(&self, id: &str) -> Result<Option<SessionRow>> {
        self.with_reader(|conn| {
            conn.prepare_cached(&format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?1"))
                .and_then(|mut st| st.query_row([id], session_from_row).optional())
                .map_err(|e| sql_err("get_session", e))
        })
    }

    /// All sessions, most recently started first.
    pub fn list_sessions(&self) -> Result<Vec<SessionRow>> {
        self.with_reader(|conn| {
            let mut st = conn
                .prepare_cached(&format!("SELECT {SESSION_COLUMNS} FROM sessions ORDER BY started_at DESC, id"))
                .map_err(|e| sql_err("list_sessions", e))?;
            let rows = st.query_map([], session_from_row).map_err(|e| sql_err("list_sessions", e))?;
            rows.collect::<rusqlite::Result<Vec<_>>>().map_err(|e| sql_err("list_sessions", e))
        })
    }

    pub fn session_id_exists(&self, id: &str) -> Result<bool> {
        self.with_reader(|conn| {
            conn.prepare_cached("SELECT EXISTS (SELECT 1 FROM sessions WHERE id = ?1)")
                .and_then(|mut st| st.query_row([id], |r| r.get(0)))
                .map_err(|e| sql_err("session_id_exists", e))
        })
    }

    /// Delete the session row and all its events (after the events queued before this call).
    /// `SESSION_NOT_FOUND` if there is neither a row nor events under that id.
    pub fn delete_session(&self, id: &str) -> Result<()> {
        self.release_held(None, true); // none of its lines may arrive after the delete
        let (tx, rx) = mpsc::sync_channel(1);
        self.tx
            .send(Msg::DeleteSession(id.to_string(), tx))
            .map_err(|_| StrobeError::internal("The event writer thread has stopped"))?;
        rx.recv().map_err(|_| StrobeError::internal("The event writer thread has stopped"))?
    }

    /// Committed events of a session (0 for an unknown one).
    pub fn count_events(&self, session_id: &str) -> Result<i64> {
        if let Some(c) = self.shared.stats.lock().unwrap().get(session_id).and_then(|s| s.count) {
            return Ok(c);
        }
        self.with_reader(|conn| {
            conn.prepare_cached(&format!(
                "SELECT count(*) FROM events INDEXED BY {} \
                 WHERE session_key = (SELECT key FROM session_keys WHERE name = ?1)",
                schema::TIMELINE_INDEX
            ))
            .and_then(|mut st| st.query_row([session_id], |r| r.get(0)))
            .map_err(|e| sql_err("count_events", e))
        })
    }

    /// Query the timeline; see `query.rs` for the semantics of each filter.
    pub fn query(&self, q: &EventQuery) -> Result<QueryResult> {
        query::check(q)?;
        self.with_reader(|conn| query::run(conn, &self.dict, q))
    }

    /// Events evicted from this session by the FIFO limit so far.
    pub fn events_dropped(&self, session_id: &str) -> i64 {
        self.shared.stats.lock().unwrap().get(session_id).map_or(0, |s| s.dropped)
    }

    /// FIFO limit of a session (default `DEFAULT_MAX_EVENTS`; at least 1). Eviction happens
    /// in the writer thread, in chunks, soon after.
    pub fn set_max_events_per_session(&self, session_id: &str, max: i64) {
        self.shared.stats.lock().unwrap().entry(session_id.to_string()).or_default().max_events = max.max(1);
        let _ = self.tx.send(Msg::Wake);
    }

    /// Path of the database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Run `f` with a reader of `session_id`'s capture spans and plans (`captures.rs`).
    pub fn with_capture_reader<T>(&self, session_id: &str, f: impl FnOnce(&CaptureReader<'_>) -> T) -> Result<T> {
        self.with_reader(|conn| Ok(f(&CaptureReader::new(conn, session_id)?)))
    }

    fn with_reader<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let pooled = self.shared.readers.lock().unwrap().pop();
        let conn = match pooled {
            Some(c) => c,
            None => query::open_reader(&self.path)?,
        };
        let r = f(&conn);
        let mut pool = self.shared.readers.lock().unwrap();
        if pool.len() < MAX_POOLED_READERS {
            pool.push(conn);
        }
        r
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        self.release_held(None, true);
        let _ = self.tx.send(Msg::Shutdown);
        if let Some(h) = self.writer.lock().unwrap().take() {
            let _ = h.join();
        }
    }
}

const SESSION_COLUMNS: &str = "id, binary_path, project_root, pid, started_at, ended_at, status, exit_code";

fn session_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SessionRow> {
    Ok(SessionRow {
        id: r.get(0)?,
        binary_path: r.get(1)?,
        project_root: r.get(2)?,
        pid: r.get(3)?,
        started_at: r.get(4)?,
        ended_at: r.get(5)?,
        status: r.get(6)?,
        exit_code: r.get(7)?,
    })
}

fn check_status(status: &str) -> Result<()> {
    if VALID_STATUSES.contains(&status) {
        Ok(())
    } else {
        Err(StrobeError::validation(format!(
            "Invalid session status '{status}'. Use one of: running, exited, stopped."
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn store_is_send_and_sync() {
        assert_send_sync::<Store>();
    }

    #[test]
    fn status_is_checked() {
        assert!(check_status("running").is_ok());
        assert_eq!(check_status("paused").unwrap_err().code, ErrorCode::ValidationError);
    }
}
