//! The on-disk layout of the event store and the connection settings.
//!
//! The spec's `events` columns are the *wire format* of `debug_query`; underneath, rows are
//! compact (DESIGN §1b), because each column costs the writer a bind, a register copy and
//! record encoding for every event:
//! - the wire id is the INTEGER PRIMARY KEY; the session is an integer (`session_keys`);
//!   the event type is a small integer (`kind_code`);
//! - the code site — function name, raw name, source file, line — is fixed per hook, so the
//!   tuple is interned once in `sites` and events carry `site_id`;
//! - likewise (pid, thread id, thread name) is interned in `threads` (`thread_ref`);
//! - the columns only crash / pause / logpoint / watch / sampling events fill (`watch_values`,
//!   `sampled`, `signal`, `fault_address`, `registers`, `backtrace`, `locals`,
//!   `breakpoint_id`, `logpoint_message`) share one JSON object column, `extra`.
//!
//! `events_wire` is a view with the spec's literal columns, for the `sqlite3` shell.
//!
//! One full secondary index, `events_timeline (session_key, timestamp_ns, id, event_kind,
//! site_id, thread_ref, duration_ns)`: it is append-mostly (timestamps grow), gives
//! chronological order without a sort, serves time ranges as a seek, and covers every
//! cheap filter (type, function, file, thread name, pid, duration), so that counting and
//! paging never touch the wide table rows. The cursor (`id > n`) is served by the primary
//! key. A partial index holds only calls of 100 us or more (`minDurationNs`), and
//! `event_counts` keeps exact per-(session, type, site) counts for `totalCount`; more exact
//! counters (per id bucket, per thread, null returns) are described in `counters.rs`.
//!
//! Typed enters may be stored as captured (`captures.rs`): `arguments` then holds a blob,
//! with `capture_spans` and `capture_plans` beside it.
//!
//! Versions: 1 had no `id_buckets` / `thread_counts` / `null_return_counts`; opening such
//! a file creates them and fills them from its rows once (`migrate_from`). 2 had no capture
//! tables (created on open; its rows have no blobs). 3 had no `capture_modules` (created on
//! open; its captures decode with bare function pointers).

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use super::event::EventType;
use crate::error::{Result, StrobeError};

/// Bumped when the layout changes; a file with another version is refused with a message.
pub(crate) const SCHEMA_VERSION: i64 = 4;
/// The oldest layout `open_writer` upgrades in place.
const OLDEST_UPGRADABLE: i64 = 1;

/// The return values `returnValue.isNull` selects (the same test as `counters::is_null_return`);
/// a null pointer arrives as "0x0" when the agent records the raw return register.
pub(crate) const NULL_RETURN_SQL: &str = "(return_value IS NULL OR return_value IN ('null', '\"0x0\"'))";

/// The main secondary index on `events` (queries name it in `INDEXED BY`).
pub(crate) const TIMELINE_INDEX: &str = "events_timeline";
/// The partial index of slow calls, and the duration it starts at.
pub(crate) const SLOW_INDEX: &str = "events_slow";
pub(crate) const SLOW_NS: i64 = 100_000;

pub(crate) const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS sessions (
    id            TEXT PRIMARY KEY NOT NULL,
    binary_path   TEXT NOT NULL,
    project_root  TEXT NOT NULL,
    pid           INTEGER NOT NULL,
    started_at    INTEGER NOT NULL,
    ended_at      INTEGER,
    status        TEXT NOT NULL,
    exit_code     INTEGER
);

-- Integer key of every session name that has (or had) events. A key is never reused, so
-- rows left behind by an interrupted delete can never resurface under a new session.
CREATE TABLE IF NOT EXISTS session_keys (
    key           INTEGER PRIMARY KEY AUTOINCREMENT,
    name          TEXT NOT NULL UNIQUE,
    dropped       INTEGER NOT NULL DEFAULT 0,   -- events evicted by the FIFO limit
    evicted_upto  INTEGER NOT NULL DEFAULT 0,   -- highest event id evicted (eviction goes by id)
    min_id        INTEGER,                      -- bounds of the session's live event ids
    max_id        INTEGER
);

-- Distinct non-null pids seen in each session's events.
CREATE TABLE IF NOT EXISTS session_pids (
    session_key   INTEGER NOT NULL,
    pid           INTEGER NOT NULL,
    PRIMARY KEY (session_key, pid)
) WITHOUT ROWID;

-- Interned code sites and threads. Append-only; ids are assigned by the writer.
CREATE TABLE IF NOT EXISTS sites (
    id                 INTEGER PRIMARY KEY,
    function_name      TEXT,
    function_name_raw  TEXT,
    source_file        TEXT,
    line_number        INTEGER
);
CREATE TABLE IF NOT EXISTS threads (
    id                 INTEGER PRIMARY KEY,
    pid                INTEGER,
    thread_id          INTEGER,
    thread_name        TEXT
);

CREATE TABLE IF NOT EXISTS meta (
    key           TEXT PRIMARY KEY NOT NULL,
    value         INTEGER NOT NULL
) WITHOUT ROWID;

-- Session keys whose events are still being deleted in chunks (resumed at open).
CREATE TABLE IF NOT EXISTS pending_deletes (
    session_key   INTEGER PRIMARY KEY
);

CREATE TABLE IF NOT EXISTS events (
    id               INTEGER PRIMARY KEY,   -- the wire id (Store::next_event_id)
    session_key      INTEGER NOT NULL,      -- session_keys.key
    timestamp_ns     INTEGER NOT NULL,
    event_kind       INTEGER NOT NULL,      -- schema::kind_code(EventType)
    site_id          INTEGER,               -- sites.id
    thread_ref       INTEGER,               -- threads.id
    duration_ns      INTEGER,
    parent_event_id  INTEGER,
    return_value     TEXT,
    arguments        TEXT,
    text             TEXT,
    extra            TEXT                   -- JSON object of the rarely set columns
);

CREATE INDEX IF NOT EXISTS events_timeline ON events (
    session_key, timestamp_ns, id, event_kind, site_id, thread_ref, duration_ns
);

-- Slow calls only (rare, so nearly free to maintain): serves minDurationNs >= 100 us.
CREATE INDEX IF NOT EXISTS events_slow ON events (
    session_key, duration_ns, timestamp_ns, event_kind, site_id, thread_ref
) WHERE duration_ns >= 100000;

-- Events per (session, type, site), kept exact by the writer in the same transactions as
-- the rows: totalCount of the common queries without scanning. site_id 0 = no site.
CREATE TABLE IF NOT EXISTS event_counts (
    session_key   INTEGER NOT NULL,
    event_kind    INTEGER NOT NULL,
    site_id       INTEGER NOT NULL,
    n             INTEGER NOT NULL,
    PRIMARY KEY (session_key, event_kind, site_id)
) WITHOUT ROWID;

-- Exact counters beside event_counts (counters.rs). bucket = id >> counters::BUCKET_SHIFT.
CREATE TABLE IF NOT EXISTS id_buckets (
    session_key   INTEGER NOT NULL,
    bucket        INTEGER NOT NULL,
    event_kind    INTEGER NOT NULL,
    n             INTEGER NOT NULL,
    PRIMARY KEY (session_key, bucket, event_kind)
) WITHOUT ROWID;
-- thread_ref 0 = no thread.
CREATE TABLE IF NOT EXISTS thread_counts (
    session_key   INTEGER NOT NULL,
    event_kind    INTEGER NOT NULL,
    thread_ref    INTEGER NOT NULL,
    n             INTEGER NOT NULL,
    PRIMARY KEY (session_key, event_kind, thread_ref)
) WITHOUT ROWID;
-- function_exit events with a null return (schema::NULL_RETURN_SQL); site_id 0 = no site.
CREATE TABLE IF NOT EXISTS null_return_counts (
    session_key   INTEGER NOT NULL,
    site_id       INTEGER NOT NULL,
    n             INTEGER NOT NULL,
    PRIMARY KEY (session_key, site_id)
) WITHOUT ROWID;

-- Typed enters stored as captured (captures.rs): the whole spans their blobs refer to, by the
-- agent's key (base 0: data is the span's blocks; else delta entries on the span `base`), and
-- the capture plan of each function, as JSON.
-- slot (key >> 48) and event_id (the event that brought the span) serve FIFO eviction
-- (captures::evict).
CREATE TABLE IF NOT EXISTS capture_spans (
    session_key   INTEGER NOT NULL,
    pid           INTEGER NOT NULL,
    tid           INTEGER NOT NULL,
    key           INTEGER NOT NULL,
    base          INTEGER NOT NULL,
    data          BLOB NOT NULL,
    slot          INTEGER NOT NULL,
    event_id      INTEGER NOT NULL,
    PRIMARY KEY (session_key, pid, tid, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS capture_spans_age ON capture_spans (session_key, event_id);
CREATE INDEX IF NOT EXISTS capture_spans_whole ON capture_spans (session_key, pid, tid, slot, event_id) WHERE base = 0;
CREATE TABLE IF NOT EXISTS capture_plans (
    session_key   INTEGER NOT NULL,
    plan_id       INTEGER NOT NULL,
    plan          TEXT NOT NULL,
    PRIMARY KEY (session_key, plan_id)
) WITHOUT ROWID;
-- The session's code modules (JSON [[base, size, path], ...]), which name function pointers
-- when its captures are decoded after it ended.
CREATE TABLE IF NOT EXISTS capture_modules (
    session_key   INTEGER PRIMARY KEY NOT NULL,
    modules       TEXT NOT NULL
);

CREATE VIEW IF NOT EXISTS events_wire AS
SELECT e.id, k.name AS session_id, e.timestamp_ns, t.thread_id, t.thread_name, t.pid,
       e.parent_event_id,
       CASE e.event_kind WHEN 0 THEN 'function_enter' WHEN 1 THEN 'function_exit'
            WHEN 2 THEN 'stdout' WHEN 3 THEN 'stderr' WHEN 4 THEN 'crash'
            WHEN 5 THEN 'variable_snapshot' WHEN 6 THEN 'pause' WHEN 7 THEN 'logpoint'
            WHEN 8 THEN 'condition_error' END AS event_type,
       s.function_name, s.function_name_raw, s.source_file, s.line_number,
       e.arguments, e.return_value, e.duration_ns, e.text,
       e.extra ->> '$.watch_values' AS watch_values, e.extra ->> '$.sampled' AS sampled,
       e.extra ->> '$.unwound' AS unwound,
       e.extra ->> '$.signal' AS signal, e.extra ->> '$.fault_address' AS fault_address,
       e.extra ->> '$.registers' AS registers, e.extra ->> '$.backtrace' AS backtrace,
       e.extra ->> '$.locals' AS locals, e.extra ->> '$.breakpoint_id' AS breakpoint_id,
       e.extra ->> '$.logpoint_message' AS logpoint_message
FROM events e
JOIN session_keys k ON k.key = e.session_key
LEFT JOIN sites s ON s.id = e.site_id
LEFT JOIN threads t ON t.id = e.thread_ref;
"#;

/// Columns of `events` in the order the writer binds and readers decode them.
pub(crate) const EVENT_COLUMNS: &str =
    "id, session_key, timestamp_ns, event_kind, site_id, thread_ref, duration_ns, \
     parent_event_id, return_value, arguments, text, extra";
pub(crate) const EVENT_COLUMN_COUNT: usize = 12;

/// `INSERT OR IGNORE INTO events (EVENT_COLUMNS) VALUES (?, ...), ...` for `rows` rows.
/// `OR IGNORE`: a multi-row statement that could abort needs a statement journal (a copy of
/// every page it touches); ignoring conflicts avoids that. The writer compares the rows
/// inserted with the rows bound, so a duplicate id is still noticed and reported.
pub(crate) fn insert_events_sql(rows: usize) -> String {
    let one = format!("({})", ["?"; EVENT_COLUMN_COUNT].join(","));
    format!("INSERT OR IGNORE INTO events ({EVENT_COLUMNS}) VALUES {}", vec![one; rows].join(","))
}

/// Stable integer code of an event type (the order of `EventType::ALL`; `events_wire` spells
/// the same table out).
pub(crate) fn kind_code(t: EventType) -> i64 {
    EventType::ALL.iter().position(|k| *k == t).expect("every EventType is in ALL") as i64
}

pub(crate) fn kind_from_code(code: i64) -> Option<EventType> {
    usize::try_from(code).ok().and_then(|i| EventType::ALL.get(i).copied())
}

pub(crate) fn sql_err(context: &str, e: rusqlite::Error) -> StrobeError {
    StrobeError::internal(format!("{context}: {e}"))
}

/// Process-wide SQLite settings, applied once before SQLite initializes (afterwards
/// `sqlite3_config` refuses, harmlessly): no memory statistics, which would otherwise take a
/// global mutex on every allocation.
fn configure_sqlite() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: sqlite3_config is called before any connection of this module exists; if
        // SQLite is already initialized it returns SQLITE_MISUSE and changes nothing.
        unsafe {
            rusqlite::ffi::sqlite3_config(rusqlite::ffi::SQLITE_CONFIG_MEMSTATUS, 0 as std::os::raw::c_int);
        }
    });
}

/// Open the writer's connection: creates the file and schema, switches to WAL.
pub(crate) fn open_writer(path: &Path) -> Result<Connection> {
    configure_sqlite();
    let conn = Connection::open(path)
        .map_err(|e| sql_err(&format!("Cannot open event database {}", path.display()), e))?;
    conn.busy_timeout(Duration::from_secs(10)).map_err(|e| sql_err("busy_timeout", e))?;
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(|e| sql_err("Cannot read the event database's version", e))?;
    let has_tables: bool = conn
        .query_row("SELECT count(*) > 0 FROM sqlite_schema WHERE type = 'table'", [], |r| r.get(0))
        .map_err(|e| sql_err("Cannot read the event database's schema", e))?;
    if has_tables && !(OLDEST_UPGRADABLE..=SCHEMA_VERSION).contains(&version) {
        return Err(StrobeError::internal(format!(
            "The event database {} has layout version {version}, this Strobe expects {SCHEMA_VERSION}. \
             Stop the daemon and move or delete that file (it only holds recorded events); a new one is created on start.",
            path.display()
        )));
    }
    if !has_tables {
        // Must precede WAL and the first table. 8 KiB: fewer splits than 4 KiB (measured
        // ~4% fewer writer instructions per event); 16 KiB was no better.
        conn.execute_batch("PRAGMA page_size = 8192;").map_err(|e| sql_err("page_size", e))?;
    }
    conn.execute_batch(
        "PRAGMA journal_mode = WAL;
         PRAGMA synchronous = NORMAL;
         PRAGMA temp_store = MEMORY;
         PRAGMA cache_size = -65536;
         PRAGMA journal_size_limit = 67108864;
         PRAGMA wal_autocheckpoint = 4096;",
    )
    .map_err(|e| sql_err("Cannot configure the event database", e))?;
    conn.execute_batch(&format!("BEGIN; {SCHEMA}")).map_err(|e| sql_err("Cannot create the event database schema", e))?;
    let upgraded = if has_tables && version < SCHEMA_VERSION { migrate_from(&conn, version) } else { Ok(()) };
    let done = upgraded.and_then(|()| {
        conn.execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"))
            .map_err(|e| sql_err("Cannot create the event database schema", e))
    });
    if let Err(e) = done {
        let _ = conn.execute_batch("ROLLBACK");
        return Err(e);
    }
    conn.set_prepared_statement_cache_capacity(64);
    Ok(conn)
}

/// Bring a file of an older layout up to this one (inside the schema transaction, after
/// `SCHEMA` created the new tables). One pass over the events; a file that cannot be
/// upgraded is left as it was (the transaction rolls back) and the error says what to do.
fn migrate_from(conn: &Connection, version: i64) -> Result<()> {
    if version < 2 {
        tracing::info!("event store: upgrading the database layout from version {version} to {SCHEMA_VERSION} (counting existing events once)");
        super::counters::rebuild(conn, None).map_err(|e| {
            StrobeError::internal(format!(
                "Cannot upgrade the event database from layout version {version}: {e}. Stop the daemon and move or \
                 delete the file (it only holds recorded events); a new one is created on start."
            ))
        })?;
    }
    Ok(())
}

/// A connection for reads (`query_only`), or for the rare session-row writes of the
/// control connection.
pub(crate) fn open_reader(path: &Path, query_only: bool) -> Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI;
    let conn = Connection::open_with_flags(path, flags)
        .map_err(|e| sql_err(&format!("Cannot open event database {}", path.display()), e))?;
    conn.busy_timeout(Duration::from_secs(10)).map_err(|e| sql_err("busy_timeout", e))?;
    conn.execute_batch(&format!(
        "PRAGMA temp_store = MEMORY;
         PRAGMA cache_size = -32768;
         PRAGMA mmap_size = 268435456;
         PRAGMA query_only = {};",
        query_only as i32
    ))
    .map_err(|e| sql_err("Cannot configure an event database reader", e))?;
    conn.set_prepared_statement_cache_capacity(64);
    Ok(conn)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_codes_round_trip_and_match_the_view() {
        for (i, t) in EventType::ALL.iter().enumerate() {
            assert_eq!(kind_code(*t), i as i64);
            assert_eq!(kind_from_code(i as i64), Some(*t));
            assert!(SCHEMA.contains(&format!("WHEN {i} THEN '{}'", t.as_str())), "{t:?}");
        }
        assert!(SCHEMA.contains(&format!("WHERE duration_ns >= {SLOW_NS};")), "partial index bound = SLOW_NS");
        assert_eq!(kind_from_code(99), None);
        assert_eq!(kind_from_code(-1), None);
    }
}
