//! The on-disk layout of the event store and the connection settings.
//!
//! The spec's `events` columns are the *wire format* of `debug_query`; underneath, rows are
//! compact (DESIGN §1b): the wire id is the INTEGER PRIMARY KEY, the session is an integer key
//! (`session_keys`), the event type is a small integer, and the four repetitive text columns
//! (function name, raw name, source file, thread name) are interned in `strings`.
//! `events_wire` is a view with the spec's literal columns, for people poking at the file
//! with the `sqlite3` shell.
//!
//! One secondary index, `events_timeline (session_key, timestamp_ns, id, event_kind,
//! function_name_id, source_file_id, duration_ns, pid, thread_name_id)`: it is append-mostly
//! (timestamps grow), gives chronological order without a sort, serves time ranges as a
//! seek, and covers every cheap filter so that counting and paging never touch the wide
//! table rows. The cursor (`id > n`) is served by the primary key itself.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use super::event::EventType;
use crate::error::{Result, StrobeError};

/// Bumped when the layout changes; a file with another version is refused with a message.
pub(crate) const SCHEMA_VERSION: i64 = 1;

/// Name of the one secondary index on `events` (queries name it in `INDEXED BY`).
pub(crate) const TIMELINE_INDEX: &str = "events_timeline";

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
    evicted_upto  INTEGER NOT NULL DEFAULT 0    -- highest event id evicted (eviction goes by id)
);

-- Distinct non-null pids seen in each session's events.
CREATE TABLE IF NOT EXISTS session_pids (
    session_key   INTEGER NOT NULL,
    pid           INTEGER NOT NULL,
    PRIMARY KEY (session_key, pid)
) WITHOUT ROWID;

-- Interned text: function names, raw names, source files, thread names. Append-only.
CREATE TABLE IF NOT EXISTS strings (
    id            INTEGER PRIMARY KEY,
    s             TEXT NOT NULL UNIQUE
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
    id                   INTEGER PRIMARY KEY,   -- the wire id (Store::next_event_id)
    session_key          INTEGER NOT NULL,      -- session_keys.key
    timestamp_ns         INTEGER NOT NULL,
    event_kind           INTEGER NOT NULL,      -- schema::kind_code(EventType)
    function_name_id     INTEGER,               -- strings.id
    source_file_id       INTEGER,               -- strings.id
    duration_ns          INTEGER,
    pid                  INTEGER,
    thread_name_id       INTEGER,               -- strings.id
    thread_id            INTEGER,
    parent_event_id      INTEGER,
    function_name_raw_id INTEGER,               -- strings.id
    line_number          INTEGER,
    sampled              INTEGER,
    return_value         TEXT,
    arguments            TEXT,
    text                 TEXT,
    watch_values         TEXT,
    signal               TEXT,
    fault_address        TEXT,
    registers            TEXT,
    backtrace            TEXT,
    locals               TEXT,
    breakpoint_id        TEXT,
    logpoint_message     TEXT
);

CREATE INDEX IF NOT EXISTS events_timeline ON events (
    session_key, timestamp_ns, id, event_kind, function_name_id, source_file_id,
    duration_ns, pid, thread_name_id
);

CREATE VIEW IF NOT EXISTS events_wire AS
SELECT e.id, k.name AS session_id, e.timestamp_ns, e.thread_id, tn.s AS thread_name, e.pid,
       e.parent_event_id,
       CASE e.event_kind WHEN 0 THEN 'function_enter' WHEN 1 THEN 'function_exit'
            WHEN 2 THEN 'stdout' WHEN 3 THEN 'stderr' WHEN 4 THEN 'crash'
            WHEN 5 THEN 'variable_snapshot' WHEN 6 THEN 'pause' WHEN 7 THEN 'logpoint'
            WHEN 8 THEN 'condition_error' END AS event_type,
       fn.s AS function_name, fr.s AS function_name_raw, sf.s AS source_file, e.line_number,
       e.arguments, e.return_value, e.duration_ns, e.text, e.watch_values, e.sampled,
       e.signal, e.fault_address, e.registers, e.backtrace, e.locals, e.breakpoint_id,
       e.logpoint_message
FROM events e
JOIN session_keys k ON k.key = e.session_key
LEFT JOIN strings fn ON fn.id = e.function_name_id
LEFT JOIN strings fr ON fr.id = e.function_name_raw_id
LEFT JOIN strings sf ON sf.id = e.source_file_id
LEFT JOIN strings tn ON tn.id = e.thread_name_id;
"#;

/// Column list used by every statement that reads whole events (see `query::row_to_event`).
pub(crate) const EVENT_COLUMNS: &str = "id, session_key, timestamp_ns, event_kind, \
    function_name_id, source_file_id, duration_ns, pid, thread_name_id, thread_id, \
    parent_event_id, function_name_raw_id, line_number, sampled, return_value, arguments, \
    text, watch_values, signal, fault_address, registers, backtrace, locals, breakpoint_id, \
    logpoint_message";

pub(crate) const EVENT_COLUMN_COUNT: usize = 25;

/// `INSERT INTO events (EVENT_COLUMNS) VALUES (?, ...), ...` for `rows` rows.
pub(crate) fn insert_events_sql(rows: usize) -> String {
    let one = format!("({})", vec!["?"; EVENT_COLUMN_COUNT].join(","));
    format!("INSERT INTO events ({EVENT_COLUMNS}) VALUES {}", vec![one; rows].join(","))
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

/// Open the writer's connection: creates the file and schema, switches to WAL.
pub(crate) fn open_writer(path: &Path) -> Result<Connection> {
    let conn = Connection::open(path)
        .map_err(|e| sql_err(&format!("Cannot open event database {}", path.display()), e))?;
    conn.busy_timeout(Duration::from_secs(10)).map_err(|e| sql_err("busy_timeout", e))?;
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(|e| sql_err("Cannot read the event database's version", e))?;
    let has_tables: bool = conn
        .query_row("SELECT count(*) > 0 FROM sqlite_schema WHERE type = 'table'", [], |r| r.get(0))
        .map_err(|e| sql_err("Cannot read the event database's schema", e))?;
    if has_tables && version != SCHEMA_VERSION {
        return Err(StrobeError::internal(format!(
            "The event database {} has layout version {version}, this Strobe expects {SCHEMA_VERSION}. \
             Stop the daemon and move or delete that file (it only holds recorded events); a new one is created on start.",
            path.display()
        )));
    }
    let exp = std::env::var("STROBE_EXP").unwrap_or_default();
    if !has_tables {
        let ps = if exp.contains("page4k") { 4096 } else if exp.contains("page16k") { 16384 } else if exp.contains("page32k") { 32768 } else { 8192 };
        conn.execute_batch(&format!("PRAGMA page_size = {ps};")).map_err(|e| sql_err("page_size", e))?;
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
    if exp.contains("nockpt") { conn.execute_batch("PRAGMA wal_autocheckpoint = 0;").unwrap(); }
    if exp.contains("bigckpt") { conn.execute_batch("PRAGMA wal_autocheckpoint = 32768;").unwrap(); }
    let mut schema_sql = SCHEMA.to_string();
    if exp.contains("noindex") { schema_sql.push_str("DROP INDEX events_timeline;"); }
    if exp.contains("narrowidx") { schema_sql = schema_sql.replace("session_key, timestamp_ns, id, event_kind, function_name_id, source_file_id,\n    duration_ns, pid, thread_name_id", "session_key, timestamp_ns"); }
    conn.execute_batch(&format!("BEGIN; {schema_sql} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"))
        .map_err(|e| sql_err("Cannot create the event database schema", e))?;
    conn.set_prepared_statement_cache_capacity(64);
    Ok(conn)
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
        assert_eq!(kind_from_code(99), None);
        assert_eq!(kind_from_code(-1), None);
    }
}
