//! The writer thread: the only connection that writes events. It drains the channel into
//! one transaction per round (group commit: whatever is queued, up to `MAX_BATCH` events, so
//! a quiet stream commits at once and a busy one in large batches), interns repeated text,
//! and enforces the per-session FIFO limit in chunks between rounds.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError};
use std::sync::Arc;

use rusqlite::{params, Connection, OptionalExtension};

use super::event::Event;
use super::schema::{self, sql_err};
use super::Shared;
use crate::error::{Result, StrobeError};

/// Most events committed in one transaction (measured: see `benches/store.rs`).
pub(crate) const MAX_BATCH: usize = 20_000;
/// Rows per INSERT statement: SQLite keeps its cursors (and the append fast path) across
/// the rows of one statement, not across statements.
pub(crate) const ROWS_PER_STATEMENT: usize = 32;
/// Most events evicted (or deleted for `delete_session`) in one transaction.
pub(crate) const DELETE_CHUNK: i64 = 20_000;

pub(crate) enum Msg {
    Events(Vec<Event>),
    /// Reply once everything queued before it is committed and FIFO eviction caught up.
    Flush(SyncSender<()>),
    DeleteSession(String, SyncSender<Result<()>>),
    /// A limit changed: re-check eviction.
    Wake,
    Shutdown,
}

/// FxHash: the interning maps hash short strings on the hot path.
#[derive(Default, Clone, Copy)]
pub(crate) struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let w = u64::from_le_bytes(c.try_into().unwrap());
            self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(K);
        }
        for &b in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ b as u64).wrapping_mul(K);
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.0 = (self.0.rotate_left(5) ^ i as u64).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// What the writer knows about one session key.
struct KeyState {
    name: String,
    /// Committed events; `None` until first needed (counted from the file).
    count: Option<i64>,
    /// Lowest live event id, once known (eviction scans forward from it).
    min_alive: Option<i64>,
    dropped: i64,
    evicted_upto: i64,
    pids: HashSet<i64>,
}

pub(crate) struct Writer {
    conn: Connection,
    st: State,
}

struct State {
    shared: Arc<Shared>,
    keys: FxMap<String, i64>,
    sessions: HashMap<i64, KeyState>,
    strings: FxMap<Box<str>, i64>,
    next_string_id: i64,
    last_key: Option<(String, i64)>,
    in_txn: bool,
    txn_events: usize,
    txn_max_id: i64,
    txn_touched: HashSet<i64>,
    row_errors: u64,
}

impl Writer {
    /// Load what the writer keeps in memory; runs on the opening thread so errors reach `open`.
    pub(crate) fn new(conn: Connection, shared: Arc<Shared>) -> Result<Writer> {
        let mut st = State {
            shared,
            keys: FxMap::default(),
            sessions: HashMap::new(),
            strings: FxMap::default(),
            next_string_id: 1,
            last_key: None,
            in_txn: false,
            txn_events: 0,
            txn_max_id: 0,
            txn_touched: HashSet::new(),
            row_errors: 0,
        };
        st.load(&conn)?;
        Ok(Writer { conn, st })
    }

    pub(crate) fn run(mut self, rx: Receiver<Msg>) {
        if let Err(e) = self.resume_pending_deletes() {
            tracing::error!("event store: resuming an interrupted session delete failed: {e}");
        }
        let mut shutdown = false;
        while !shutdown {
            let backlog = self.has_backlog();
            let first = if backlog {
                match rx.try_recv() {
                    Ok(m) => Some(m),
                    Err(TryRecvError::Empty) => None,
                    Err(TryRecvError::Disconnected) => {
                        shutdown = true;
                        None
                    }
                }
            } else {
                match rx.recv() {
                    Ok(m) => Some(m),
                    Err(_) => break,
                }
            };
            let mut waiters = Vec::new();
            let mut next = first;
            while let Some(m) = next.take() {
                match m {
                    Msg::Events(evs) => self.write_events(evs),
                    Msg::Flush(w) => waiters.push(w),
                    Msg::Wake => {
                        self.commit();
                        self.load_limited_counts();
                    }
                    Msg::Shutdown => shutdown = true,
                    Msg::DeleteSession(name, reply) => {
                        self.commit();
                        let _ = reply.send(self.delete_session(&name));
                    }
                }
                if shutdown || self.st.txn_events >= std::env::var("STROBE_BATCH").ok().and_then(|v| v.parse().ok()).unwrap_or(MAX_BATCH) {
                    break;
                }
                next = rx.try_recv().ok();
            }
            self.commit();
            if !waiters.is_empty() || shutdown {
                while self.has_backlog() {
                    if !self.evict_step() {
                        break;
                    }
                }
                for w in waiters {
                    let _ = w.send(());
                }
            } else if self.has_backlog() {
                self.evict_step();
            }
        }
        self.commit();
    }

    fn write_events(&mut self, events: Vec<Event>) {
        if events.is_empty() {
            return;
        }
        if let Err(e) = self.begin() {
            tracing::error!("event store: cannot begin a transaction, {} events lost: {e}", events.len());
            return;
        }
        let conn = &self.conn;
        let st = &mut self.st;
        let rows = std::env::var("STROBE_ROWS").ok().and_then(|v| v.parse().ok()).unwrap_or(ROWS_PER_STATEMENT);
        let mut rest: &[Event] = &events;
        while !rest.is_empty() {
            let n = if rest.len() >= rows { rows } else { 1 };
            let (chunk, tail) = rest.split_at(n);
            rest = tail;
            if n > 1 {
                match st.insert_many(conn, chunk) {
                    Ok(()) => continue,
                    // One bad row fails the statement (and only it): retry row by row.
                    Err(e) => tracing::debug!("event store: multi-row insert failed, retrying singly: {e}"),
                }
            }
            for ev in chunk {
                if let Err(e) = st.insert_many(conn, std::slice::from_ref(ev)) {
                    st.row_errors += 1;
                    if st.row_errors <= 10 || st.row_errors.is_power_of_two() {
                        tracing::warn!("event store: event {} not stored ({} so far): {e}", ev.id, st.row_errors);
                    }
                }
            }
        }
    }

    fn begin(&mut self) -> Result<()> {
        if !self.st.in_txn {
            self.conn
                .prepare_cached("BEGIN IMMEDIATE")
                .and_then(|mut s| s.raw_execute())
                .map_err(|e| sql_err("BEGIN", e))?;
            self.st.in_txn = true;
        }
        Ok(())
    }

    fn commit(&mut self) {
        if !self.st.in_txn {
            return;
        }
        let r = (|| -> rusqlite::Result<()> {
            if self.st.txn_max_id > 0 {
                self.conn
                    .prepare_cached(
                        "INSERT INTO meta (key, value) VALUES ('max_event_id', ?1) \
                         ON CONFLICT (key) DO UPDATE SET value = max(value, excluded.value)",
                    )?
                    .execute([self.st.txn_max_id])?;
            }
            self.conn.prepare_cached("COMMIT")?.raw_execute()?;
            Ok(())
        })();
        self.st.in_txn = false;
        self.st.txn_events = 0;
        self.st.txn_max_id = 0;
        match r {
            Ok(()) => {
                let touched: Vec<i64> = self.st.txn_touched.drain().collect();
                self.st.publish(&touched);
            }
            Err(e) => {
                tracing::error!("event store: commit failed, the last batch is lost: {e}");
                let _ = self.conn.execute_batch("ROLLBACK");
                self.st.txn_touched.clear();
                if let Err(e) = self.st.load(&self.conn) {
                    tracing::error!("event store: reloading writer state failed: {e}");
                }
            }
        }
    }

    /// Count the sessions from an earlier run that were given a limit, so eviction sees them.
    fn load_limited_counts(&mut self) {
        let limited: HashSet<String> = self.st.shared.stats.lock().unwrap().keys().cloned().collect();
        let mut loaded = Vec::new();
        for (key, ks) in self.st.sessions.iter_mut() {
            if ks.count.is_none() && limited.contains(&ks.name) {
                match count_rows(&self.conn, *key) {
                    Ok(c) => {
                        ks.count = Some(c);
                        loaded.push(*key);
                    }
                    Err(e) => tracing::error!("event store: {e}"),
                }
            }
        }
        self.st.publish(&loaded);
    }

    /// Sessions over their limit (committed count above max).
    fn over_limit(&self) -> Vec<(i64, i64)> {
        let stats = self.st.shared.stats.lock().unwrap();
        self.st
            .sessions
            .iter()
            .filter_map(|(key, s)| {
                let max = stats.get(&s.name).map_or(super::DEFAULT_MAX_EVENTS, |x| x.max_events);
                let count = s.count?;
                (count > max).then_some((*key, count - max))
            })
            .collect()
    }

    fn has_backlog(&self) -> bool {
        !self.over_limit().is_empty()
    }

    /// Evict one chunk from every session over its limit. False if nothing could be done.
    fn evict_step(&mut self) -> bool {
        let mut progressed = false;
        for (key, excess) in self.over_limit() {
            match self.evict_chunk(key, excess.min(DELETE_CHUNK)) {
                Ok(n) => progressed |= n > 0,
                Err(e) => tracing::error!("event store: FIFO eviction failed: {e}"),
            }
        }
        progressed
    }

    /// Delete the `n` oldest (lowest id) events of a session in one transaction.
    fn evict_chunk(&mut self, key: i64, n: i64) -> Result<i64> {
        let conn = &self.conn;
        let ks = self.st.sessions.get_mut(&key).expect("over_limit only lists known keys");
        let min = match ks.min_alive {
            Some(m) => m,
            None => conn
                .query_row(
                    &format!("SELECT min(id) FROM events INDEXED BY {} WHERE session_key = ?1", schema::TIMELINE_INDEX),
                    [key],
                    |r| r.get::<_, Option<i64>>(0),
                )
                .map_err(|e| sql_err("eviction: oldest event", e))?
                .unwrap_or(0),
        };
        let cut: Option<i64> = conn
            .prepare_cached(
                "SELECT id FROM events NOT INDEXED WHERE id >= ?1 AND session_key = ?2 ORDER BY id LIMIT 1 OFFSET ?3",
            )
            .and_then(|mut s| s.query_row(params![min, key, n - 1], |r| r.get(0)).optional())
            .map_err(|e| sql_err("eviction: cut point", e))?;
        let Some(cut) = cut else {
            // Fewer rows than the count says: recount.
            ks.count = Some(count_rows(conn, key)?);
            ks.min_alive = None;
            return Ok(0);
        };
        let tx = conn.unchecked_transaction().map_err(|e| sql_err("eviction: begin", e))?;
        let deleted = tx
            .prepare_cached("DELETE FROM events NOT INDEXED WHERE id >= ?1 AND id <= ?2 AND session_key = ?3")
            .and_then(|mut s| s.execute(params![min, cut, key]))
            .map_err(|e| sql_err("eviction: delete", e))? as i64;
        tx.prepare_cached(
            "UPDATE session_keys SET dropped = dropped + ?1, evicted_upto = max(evicted_upto, ?2) WHERE key = ?3",
        )
        .and_then(|mut s| s.execute(params![deleted, cut, key]))
        .map_err(|e| sql_err("eviction: bookkeeping", e))?;
        tx.commit().map_err(|e| sql_err("eviction: commit", e))?;
        ks.min_alive = Some(cut + 1);
        ks.count = ks.count.map(|c| c - deleted);
        ks.dropped += deleted;
        ks.evicted_upto = ks.evicted_upto.max(cut);
        self.st.publish(&[key]);
        Ok(deleted)
    }

    fn delete_session(&mut self, name: &str) -> Result<()> {
        let key: Option<i64> = self
            .conn
            .query_row("SELECT key FROM session_keys WHERE name = ?1", [name], |r| r.get(0))
            .optional()
            .map_err(|e| sql_err("delete_session", e))?;
        let tx = self.conn.unchecked_transaction().map_err(|e| sql_err("delete_session: begin", e))?;
        let rows = tx.execute("DELETE FROM sessions WHERE id = ?1", [name]).map_err(|e| sql_err("delete_session", e))?;
        if key.is_none() && rows == 0 {
            return Err(StrobeError::session_not_found(name));
        }
        if let Some(key) = key {
            tx.execute("DELETE FROM session_keys WHERE key = ?1", [key]).map_err(|e| sql_err("delete_session", e))?;
            tx.execute("DELETE FROM session_pids WHERE session_key = ?1", [key]).map_err(|e| sql_err("delete_session", e))?;
            tx.execute("INSERT OR IGNORE INTO pending_deletes (session_key) VALUES (?1)", [key])
                .map_err(|e| sql_err("delete_session", e))?;
        }
        tx.commit().map_err(|e| sql_err("delete_session: commit", e))?;
        self.st.last_key = None;
        self.st.keys.remove(name);
        if let Some(key) = key {
            self.st.sessions.remove(&key);
            self.st.shared.stats.lock().unwrap().entry(name.to_string()).and_modify(|s| {
                s.count = Some(0);
                s.dropped = 0;
                s.evicted_upto = 0;
            });
            self.delete_key_rows(key)?;
        }
        Ok(())
    }

    fn resume_pending_deletes(&mut self) -> Result<()> {
        let keys: Vec<i64> = {
            let mut s = self.conn.prepare("SELECT session_key FROM pending_deletes").map_err(|e| sql_err("pending deletes", e))?;
            let rows = s.query_map([], |r| r.get(0)).map_err(|e| sql_err("pending deletes", e))?;
            rows.collect::<rusqlite::Result<_>>().map_err(|e| sql_err("pending deletes", e))?
        };
        for key in keys {
            self.delete_key_rows(key)?;
        }
        Ok(())
    }

    /// Delete a forgotten key's events in chunks, then its pending_deletes row.
    fn delete_key_rows(&mut self, key: i64) -> Result<()> {
        let sql = format!(
            "DELETE FROM events WHERE id IN (SELECT id FROM events INDEXED BY {} WHERE session_key = ?1 LIMIT ?2)",
            schema::TIMELINE_INDEX
        );
        loop {
            let n = self.conn.execute(&sql, params![key, DELETE_CHUNK]).map_err(|e| sql_err("delete_session: events", e))?;
            if n == 0 {
                break;
            }
        }
        self.conn
            .execute("DELETE FROM pending_deletes WHERE session_key = ?1", [key])
            .map_err(|e| sql_err("delete_session", e))?;
        Ok(())
    }
}

/// Integer references of one row, resolved before binding.
#[derive(Default, Clone, Copy)]
struct RowRefs {
    key: i64,
    func: Option<i64>,
    file: Option<i64>,
    thread: Option<i64>,
    raw: Option<i64>,
}

/// Bind one event's columns (order of `schema::EVENT_COLUMNS`) after parameter `base`.
fn bind_row(stmt: &mut rusqlite::Statement<'_>, base: usize, ev: &Event, r: &RowRefs) -> rusqlite::Result<()> {
    stmt.raw_bind_parameter(base + 1, ev.id)?;
    stmt.raw_bind_parameter(base + 2, r.key)?;
    stmt.raw_bind_parameter(base + 3, ev.timestamp_ns)?;
    stmt.raw_bind_parameter(base + 4, schema::kind_code(ev.event_type))?;
    stmt.raw_bind_parameter(base + 5, r.func)?;
    stmt.raw_bind_parameter(base + 6, r.file)?;
    stmt.raw_bind_parameter(base + 7, ev.duration_ns)?;
    stmt.raw_bind_parameter(base + 8, ev.pid)?;
    stmt.raw_bind_parameter(base + 9, r.thread)?;
    stmt.raw_bind_parameter(base + 10, ev.thread_id)?;
    stmt.raw_bind_parameter(base + 11, ev.parent_event_id)?;
    stmt.raw_bind_parameter(base + 12, r.raw)?;
    stmt.raw_bind_parameter(base + 13, ev.line_number)?;
    stmt.raw_bind_parameter(base + 14, ev.sampled)?;
    stmt.raw_bind_parameter(base + 15, ev.return_value.as_deref())?;
    stmt.raw_bind_parameter(base + 16, ev.arguments.as_deref())?;
    stmt.raw_bind_parameter(base + 17, ev.text.as_deref())?;
    stmt.raw_bind_parameter(base + 18, ev.watch_values.as_deref())?;
    stmt.raw_bind_parameter(base + 19, ev.signal.as_deref())?;
    stmt.raw_bind_parameter(base + 20, ev.fault_address.as_deref())?;
    stmt.raw_bind_parameter(base + 21, ev.registers.as_deref())?;
    stmt.raw_bind_parameter(base + 22, ev.backtrace.as_deref())?;
    stmt.raw_bind_parameter(base + 23, ev.locals.as_deref())?;
    stmt.raw_bind_parameter(base + 24, ev.breakpoint_id.as_deref())?;
    stmt.raw_bind_parameter(base + 25, ev.logpoint_message.as_deref())?;
    Ok(())
}

fn count_rows(conn: &Connection, key: i64) -> Result<i64> {
    conn.query_row(
        &format!("SELECT count(*) FROM events INDEXED BY {} WHERE session_key = ?1", schema::TIMELINE_INDEX),
        [key],
        |r| r.get(0),
    )
    .map_err(|e| sql_err("count events", e))
}

impl State {
    /// (Re)load keys and strings from the file.
    fn load(&mut self, conn: &Connection) -> Result<()> {
        self.keys.clear();
        self.sessions.clear();
        self.strings.clear();
        self.last_key = None;
        let mut stmt = conn
            .prepare("SELECT key, name, dropped, evicted_upto FROM session_keys")
            .map_err(|e| sql_err("load sessions", e))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?, r.get::<_, i64>(3)?)))
            .map_err(|e| sql_err("load sessions", e))?;
        for row in rows {
            let (key, name, dropped, evicted_upto) = row.map_err(|e| sql_err("load sessions", e))?;
            self.keys.insert(name.clone(), key);
            self.sessions.insert(
                key,
                KeyState { name, count: None, min_alive: None, dropped, evicted_upto, pids: HashSet::new() },
            );
        }
        let mut stmt = conn.prepare("SELECT id, s FROM strings").map_err(|e| sql_err("load strings", e))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))
            .map_err(|e| sql_err("load strings", e))?;
        let mut max = 0;
        for row in rows {
            let (id, s) = row.map_err(|e| sql_err("load strings", e))?;
            max = max.max(id);
            self.strings.insert(s.into_boxed_str(), id);
        }
        self.next_string_id = max + 1;
        let keys: Vec<i64> = self.sessions.keys().copied().collect();
        self.publish(&keys);
        Ok(())
    }

    /// Insert these events with one statement (`schema::insert_events_sql(n)`).
    fn insert_many(&mut self, conn: &Connection, events: &[Event]) -> Result<()> {
        let mut refs = [RowRefs::default(); ROWS_PER_STATEMENT];
        for (ev, r) in events.iter().zip(refs.iter_mut()) {
            *r = RowRefs {
                key: self.session_key(conn, &ev.session_id)?,
                func: self.intern(conn, ev.function_name.as_deref())?,
                file: self.intern(conn, ev.source_file.as_deref())?,
                thread: self.intern(conn, ev.thread_name.as_deref())?,
                raw: self.intern(conn, ev.function_name_raw.as_deref())?,
            };
        }
        let mut stmt = conn
            .prepare_cached(&schema::insert_events_sql(events.len()))
            .map_err(|e| sql_err("prepare insert", e))?;
        for (i, (ev, r)) in events.iter().zip(refs.iter()).enumerate() {
            bind_row(&mut stmt, i * schema::EVENT_COLUMN_COUNT, ev, r).map_err(|e| sql_err("bind event", e))?;
        }
        stmt.raw_execute().map_err(|e| sql_err("insert events", e))?;
        drop(stmt);
        for (ev, r) in events.iter().zip(refs.iter()) {
            self.txn_events += 1;
            self.txn_max_id = self.txn_max_id.max(ev.id);
            self.txn_touched.insert(r.key);
            let ks = self.sessions.get_mut(&r.key).expect("session_key registers the key");
            if let Some(c) = ks.count.as_mut() {
                *c += 1;
            }
            if let Some(pid) = ev.pid {
                if ks.pids.insert(pid) {
                    conn.prepare_cached("INSERT OR IGNORE INTO session_pids (session_key, pid) VALUES (?1, ?2)")
                        .and_then(|mut s| s.execute(params![r.key, pid]))
                        .map_err(|e| sql_err("insert pid", e))?;
                }
            }
        }
        Ok(())
    }

    fn session_key(&mut self, conn: &Connection, name: &str) -> Result<i64> {
        if let Some((n, k)) = &self.last_key {
            if n == name {
                return Ok(*k);
            }
        }
        let key = match self.keys.get(name) {
            Some(k) => *k,
            None => {
                let key: i64 = conn
                    .prepare_cached("INSERT INTO session_keys (name) VALUES (?1) RETURNING key")
                    .and_then(|mut s| s.query_row([name], |r| r.get(0)))
                    .map_err(|e| sql_err("register session", e))?;
                self.keys.insert(name.to_string(), key);
                self.sessions.insert(
                    key,
                    KeyState {
                        name: name.to_string(),
                        count: Some(0),
                        min_alive: None,
                        dropped: 0,
                        evicted_upto: 0,
                        pids: HashSet::new(),
                    },
                );
                key
            }
        };
        let ks = self.sessions.get_mut(&key).expect("keys and sessions agree");
        if ks.count.is_none() {
            // First events for a session from an earlier run: learn its size and pids.
            // (Nothing of this key is in the open transaction yet: this is its first touch.)
            ks.count = Some(count_rows(conn, key)?);
            let mut s = conn
                .prepare_cached("SELECT pid FROM session_pids WHERE session_key = ?1")
                .map_err(|e| sql_err("load pids", e))?;
            let pids = s.query_map([key], |r| r.get(0)).map_err(|e| sql_err("load pids", e))?;
            for p in pids {
                ks.pids.insert(p.map_err(|e| sql_err("load pids", e))?);
            }
        }
        self.last_key = Some((name.to_string(), key));
        Ok(key)
    }

    fn intern(&mut self, conn: &Connection, s: Option<&str>) -> Result<Option<i64>> {
        let Some(s) = s else { return Ok(None) };
        if let Some(id) = self.strings.get(s) {
            return Ok(Some(*id));
        }
        let id = self.next_string_id;
        conn.prepare_cached("INSERT INTO strings (id, s) VALUES (?1, ?2)")
            .and_then(|mut st| st.execute(params![id, s]))
            .map_err(|e| sql_err("intern string", e))?;
        self.next_string_id += 1;
        self.strings.insert(s.into(), id);
        Ok(Some(id))
    }

    /// Copy committed counters of these keys to the shared map.
    fn publish(&self, keys: &[i64]) {
        if keys.is_empty() {
            return;
        }
        let mut stats = self.shared.stats.lock().unwrap();
        for key in keys {
            if let Some(ks) = self.sessions.get(key) {
                let e = stats.entry(ks.name.clone()).or_default();
                e.count = ks.count;
                e.dropped = ks.dropped;
                e.evicted_upto = ks.evicted_upto;
            }
        }
    }
}
