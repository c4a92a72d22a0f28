//! Typed enters stored as captured, decoded when read (`engine/capture_lazy.rs`): a row's
//! `arguments` column holds the raw record as a blob, its pointees' spans are rows of
//! `capture_spans` (by process, thread and the agent's span key), and the function's capture
//! plan (with the DWARF types its decode reads) is a row of `capture_plans`. Storing a typed
//! enter then costs about what an integer one does; a read decodes only the rows it returns,
//! and still can after the session ended or the daemon restarted.

use rusqlite::{Connection, OptionalExtension};

use super::schema::sql_err;
use crate::error::Result;

/// One span a stored capture may refer to: `base == 0`: `data` is the span's blocks; else
/// `data` is the delta entries to apply to the span stored under `base` (the daemon stores
/// whole spans only, its records carrying the windows changed since; the reader follows both).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureSpan {
    pub pid: u32,
    pub tid: u32,
    pub key: u64,
    pub base: u64,
    pub data: Vec<u8>,
    /// Id of the event whose record brought it (0: a record not stored).
    pub event_id: i64,
}

/// What a trace batch's captures need stored with them, in the same transaction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CaptureRows {
    pub spans: Vec<CaptureSpan>,
    /// (plan id, the plan as JSON), once per session and plan.
    pub plans: Vec<(u32, String)>,
    /// The session's code modules as JSON, when they changed: what names function pointers
    /// in a decode after the session (engine/code_names.rs).
    pub modules: Option<String>,
}

impl CaptureRows {
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty() && self.plans.is_empty() && self.modules.is_none()
    }
}

/// Write `rows` of session `key` (inside the writer's transaction).
pub(crate) fn write(conn: &Connection, key: i64, rows: &CaptureRows) -> Result<()> {
    let err = |e| sql_err("storing typed captures", e);
    if !rows.plans.is_empty() {
        let mut st = conn.prepare_cached("INSERT OR IGNORE INTO capture_plans (session_key, plan_id, plan) VALUES (?1, ?2, ?3)").map_err(err)?;
        for (id, plan) in &rows.plans {
            st.execute(rusqlite::params![key, id, plan]).map_err(err)?;
        }
    }
    if let Some(modules) = &rows.modules {
        conn.prepare_cached("INSERT OR REPLACE INTO capture_modules (session_key, modules) VALUES (?1, ?2)")
            .and_then(|mut st| st.execute(rusqlite::params![key, modules]))
            .map_err(err)?;
    }
    // Whole spans only (a few per remembered walk and thread): one statement each.
    if !rows.spans.is_empty() {
        let mut st = conn
            .prepare_cached(
                "INSERT OR REPLACE INTO capture_spans (session_key, pid, tid, key, base, data, slot, event_id) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )
            .map_err(err)?;
        for s in &rows.spans {
            st.execute(rusqlite::params![key, s.pid, s.tid, s.key as i64, s.base as i64, s.data, (s.key >> 48) as i64, s.event_id]).map_err(err)?;
        }
    }
    Ok(())
}

/// After the events of session `key` up to id `upto` were evicted: delete the spans no live
/// event can need. A record refers only to its slot's last whole span (base 0), or to a delta
/// chain back to one; so once a whole span came with an evicted event, every older span of
/// that slot is unreachable from the events that remain.
pub(crate) fn evict(conn: &Connection, key: i64, upto: i64) -> rusqlite::Result<usize> {
    conn.prepare_cached(
        "DELETE FROM capture_spans AS s INDEXED BY capture_spans_age WHERE s.session_key = ?1 AND s.event_id <= ?2 \
         AND s.event_id < (SELECT max(c.event_id) FROM capture_spans c INDEXED BY capture_spans_whole \
             WHERE c.session_key = ?1 AND c.pid = s.pid AND c.tid = s.tid AND c.slot = s.slot AND c.base = 0 AND c.event_id <= ?2)",
    )?
    .execute(rusqlite::params![key, upto])
}

/// Delete a session's spans and plans.
pub(crate) fn delete_session(conn: &Connection, key: i64) -> rusqlite::Result<()> {
    conn.execute("DELETE FROM capture_spans WHERE session_key = ?1", [key])?;
    conn.execute("DELETE FROM capture_plans WHERE session_key = ?1", [key])?;
    conn.execute("DELETE FROM capture_modules WHERE session_key = ?1", [key])?;
    Ok(())
}

/// Reads of one session's spans and plans (a reader connection).
pub struct CaptureReader<'c> {
    conn: &'c Connection,
    key: Option<i64>,
}

impl<'c> CaptureReader<'c> {
    pub(crate) fn new(conn: &'c Connection, session_id: &str) -> Result<CaptureReader<'c>> {
        let key = conn
            .prepare_cached("SELECT key FROM session_keys WHERE name = ?1")
            .and_then(|mut st| st.query_row([session_id], |r| r.get(0)).optional())
            .map_err(|e| sql_err("capture reader", e))?;
        Ok(CaptureReader { conn, key })
    }

    /// The span stored under `key` for (pid, tid): (base, data) as in [`CaptureSpan`].
    pub fn span(&self, pid: u32, tid: u32, key: u64) -> Result<Option<(u64, Vec<u8>)>> {
        let Some(session) = self.key else { return Ok(None) };
        self.conn
            .prepare_cached("SELECT base, data FROM capture_spans WHERE session_key = ?1 AND pid = ?2 AND tid = ?3 AND key = ?4")
            .and_then(|mut st| {
                st.query_row(rusqlite::params![session, pid, tid, key as i64], |r| Ok((r.get::<_, i64>(0)? as u64, r.get(1)?))).optional()
            })
            .map_err(|e| sql_err("capture span", e))
    }

    /// The session's code modules last stored, as JSON.
    pub fn modules(&self) -> Result<Option<String>> {
        let Some(session) = self.key else { return Ok(None) };
        self.conn
            .prepare_cached("SELECT modules FROM capture_modules WHERE session_key = ?1")
            .and_then(|mut st| st.query_row([session], |r| r.get(0)).optional())
            .map_err(|e| sql_err("capture modules", e))
    }

    /// The plan stored as `id`, as JSON.
    pub fn plan(&self, id: u32) -> Result<Option<String>> {
        let Some(session) = self.key else { return Ok(None) };
        self.conn
            .prepare_cached("SELECT plan FROM capture_plans WHERE session_key = ?1 AND plan_id = ?2")
            .and_then(|mut st| st.query_row(rusqlite::params![session, id], |r| r.get(0)).optional())
            .map_err(|e| sql_err("capture plan", e))
    }
}
