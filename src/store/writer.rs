//! The writer thread: the only connection that writes events. Each round drains the channel
//! into one transaction (group commit: whatever is queued, up to `MAX_BATCH` events, so a
//! quiet stream commits at once and a busy one in large batches), 32 rows per INSERT
//! statement. FIFO eviction and session deletes run between rounds (`evict.rs`); WAL
//! checkpoints run on another thread (`checkpoint.rs`).

use std::collections::HashSet;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TryRecvError};
use std::sync::Arc;

use rusqlite::{params, Connection};

use super::checkpoint::Checkpointer;
use super::counters::{self, is_null_return, TxnCounters};
use super::event::{Event, EventType};
use super::raw_batch::{RawTraceBatch, TraceTexts};
use super::intern::{bind_row, encode_extra, FxMap, FxSet, Interner, RowRefs};
use super::rawstmt::RawInsert;
use super::schema::{self, sql_err};
use super::Shared;
use crate::error::{Result, StrobeError};

/// Most events committed in one transaction.
pub(crate) const MAX_BATCH: usize = 20_000;
/// Rows per INSERT statement: SQLite keeps its cursors (and its append fast path) across
/// the rows of one statement, not across statements; this halved the per-row cost.
pub(crate) const ROWS_PER_STATEMENT: usize = 32;

pub(crate) enum Msg {
    Events(Vec<Event>),
    /// Fast-path trace rows as integers (`raw_batch.rs`, written by `trace_writer.rs`).
    TraceBatch(RawTraceBatch, TraceTexts),
    /// Reply once everything queued before it is committed and FIFO eviction caught up.
    Flush(SyncSender<()>),
    DeleteSession(String, SyncSender<Result<()>>),
    /// A limit changed: re-check eviction.
    Wake,
    Shutdown,
}

/// What the writer knows about one session key.
pub(super) struct KeyState {
    pub name: String,
    /// Committed events; `None` until first needed (counted from the file).
    pub count: Option<i64>,
    /// Lowest live event id, once known (eviction scans forward from it).
    pub min_alive: Option<i64>,
    pub dropped: i64,
    pub evicted_upto: i64,
    pub pids: FxSet<i64>,
}

impl KeyState {
    /// Rows were added down to `id`. Producers take ids before they queue their batches, so
    /// a batch can arrive after eviction passed its ids: eviction must start from it, or it
    /// would skip it and evict newer rows instead.
    pub(super) fn note_alive(&mut self, id: i64) {
        if let Some(m) = self.min_alive.as_mut() {
            *m = (*m).min(id);
        }
    }
}

pub(crate) struct Writer {
    // Declared before `conn`: statements are finalized before their connection closes.
    pub(super) insert_many: RawInsert,
    pub(super) insert_one: RawInsert,
    pub(super) conn: Connection,
    pub(super) st: State,
    ckpt: Checkpointer,
}

pub(super) struct State {
    pub shared: Arc<Shared>,
    pub keys: FxMap<String, i64>,
    pub sessions: FxMap<i64, KeyState>,
    pub interner: Interner,
    pub last_key: Option<(String, i64)>,
    in_txn: bool,
    pub(super) txn_events: usize,
    pub(super) txn_max_id: i64,
    pub(super) txn_touched: HashSet<i64>,
    /// Rows added per (session key, event kind, site id or 0) in the open transaction.
    pub(super) txn_counts: FxMap<(i64, i64, i64), i64>,
    /// Lowest and highest id written per session key in the open transaction.
    pub(super) txn_ids: FxMap<i64, (i64, i64)>,
    /// Rows added per id bucket, thread and null return in the open transaction.
    pub(super) txn_more: TxnCounters,
    pub(super) row_errors: u64,
}

impl Writer {
    /// Load what the writer keeps in memory; runs on the opening thread so errors reach `open`.
    pub(crate) fn new(conn: Connection, shared: Arc<Shared>) -> Result<Writer> {
        let mut st = State {
            shared,
            keys: FxMap::default(),
            sessions: FxMap::default(),
            interner: Interner::default(),
            last_key: None,
            in_txn: false,
            txn_events: 0,
            txn_max_id: 0,
            txn_touched: HashSet::new(),
            txn_counts: FxMap::default(),
            txn_ids: FxMap::default(),
            txn_more: TxnCounters::default(),
            row_errors: 0,
        };
        st.load(&conn)?;
        let insert_many = RawInsert::prepare(&conn, &schema::insert_events_sql(ROWS_PER_STATEMENT))?;
        let insert_one = RawInsert::prepare(&conn, &schema::insert_events_sql(1))?;
        let ckpt = Checkpointer::start(&conn, st.shared.clone())?;
        Ok(Writer { insert_many, insert_one, conn, st, ckpt })
    }

    pub(crate) fn run(mut self, rx: Receiver<Msg>) {
        let shared = self.st.shared.clone();
        shared.gate.writer_enter();
        if let Err(e) = self.resume_pending_deletes() {
            tracing::error!("event store: resuming an interrupted session delete failed: {e}");
        }
        shared.gate.writer_exit();
        let mut shutdown = false;
        // Something was written since memory was last given back (memory.rs).
        let mut dirty = false;
        while !shutdown {
            let first = if self.has_backlog() {
                match rx.try_recv() {
                    Ok(m) => Some(m),
                    Err(TryRecvError::Empty) => None,
                    Err(TryRecvError::Disconnected) => {
                        shutdown = true;
                        None
                    }
                }
            } else if dirty {
                match rx.recv_timeout(super::memory::IDLE_BEFORE_RELEASE) {
                    Ok(m) => Some(m),
                    Err(RecvTimeoutError::Timeout) => {
                        super::memory::release(&self.conn, &shared);
                        dirty = false;
                        continue;
                    }
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            } else {
                match rx.recv() {
                    Ok(m) => Some(m),
                    Err(_) => break,
                }
            };
            dirty = true;
            shared.gate.writer_enter();
            let mut waiters = Vec::new();
            let mut next = first;
            let mut consumed = 0;
            while let Some(m) = next.take() {
                match m {
                    Msg::Events(evs) => {
                        consumed += evs.len();
                        self.write_events(evs)
                    }
                    Msg::TraceBatch(b, t) => {
                        consumed += b.records.len();
                        self.write_trace_batch(b, t)
                    }
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
                if shutdown || self.st.txn_events >= MAX_BATCH {
                    break;
                }
                next = rx.try_recv().ok();
            }
            self.commit();
            shared.pending.fetch_sub(consumed as i64, std::sync::atomic::Ordering::Relaxed);
            if !waiters.is_empty() || shutdown {
                while self.has_backlog() {
                    if !self.evict_step() {
                        break;
                    }
                }
            } else if self.has_backlog() {
                self.evict_step();
            }
            shared.gate.writer_exit();
            for w in waiters {
                let _ = w.send(());
            }
        }
        shared.gate.writer_enter();
        self.commit();
        shared.gate.writer_exit();
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
        let mut rest: &[Event] = &events;
        while !rest.is_empty() {
            let n = if rest.len() >= ROWS_PER_STATEMENT { ROWS_PER_STATEMENT } else { 1 };
            let (chunk, tail) = rest.split_at(n);
            rest = tail;
            let stmt = if n > 1 { &mut self.insert_many } else { &mut self.insert_one };
            if let Err(e) = st.insert_rows(conn, stmt, chunk) {
                st.row_errors += 1;
                if st.row_errors <= 10 || st.row_errors.is_power_of_two() {
                    tracing::warn!("event store: {e} ({} failed inserts so far)", st.row_errors);
                }
            }
        }
    }

    pub(super) fn begin(&mut self) -> Result<()> {
        if !self.st.in_txn {
            self.conn
                .prepare_cached("BEGIN IMMEDIATE")
                .and_then(|mut s| s.raw_execute())
                .map_err(|e| sql_err("BEGIN", e))?;
            self.st.in_txn = true;
        }
        Ok(())
    }

    /// Commit the open transaction, if any, and publish the counters it changed. The sessions
    /// it took over their limit are cut back inside it (`evict.rs`), so a committed count never
    /// exceeds a session's limit (until the limit is lowered: then the rest goes in chunks).
    pub(super) fn commit(&mut self) {
        if !self.st.in_txn {
            return;
        }
        let r = self.flush_txn_counters().and_then(|()| self.evict_in_txn()).and_then(|()| {
            self.conn.prepare_cached("COMMIT").and_then(|mut s| s.raw_execute()).map(|_| ()).map_err(|e| sql_err("COMMIT", e))
        });
        let committed = self.st.txn_events;
        self.st.in_txn = false;
        self.st.txn_events = 0;
        self.st.txn_max_id = 0;
        match r {
            Ok(()) => {
                let touched: Vec<i64> = self.st.txn_touched.drain().collect();
                self.st.publish(&touched);
                self.ckpt.committed(committed);
            }
            Err(e) => {
                tracing::error!("event store: commit failed, the last batch is lost: {e}");
                let _ = self.conn.execute_batch("ROLLBACK");
                self.st.txn_touched.clear();
                self.st.txn_counts.clear();
                self.st.txn_ids.clear();
                self.st.txn_more.clear();
                if let Err(e) = self.st.load(&self.conn) {
                    tracing::error!("event store: reloading writer state failed: {e}");
                }
            }
        }
    }

    /// Write the open transaction's counters (event_counts, id ranges, `counters.rs`, the
    /// highest id) into its tables, so that eviction in the same transaction subtracts from
    /// complete counts.
    fn flush_txn_counters(&mut self) -> Result<()> {
        (|| -> rusqlite::Result<()> {
            let mut up = self.conn.prepare_cached(
                "INSERT INTO event_counts (session_key, event_kind, site_id, n) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT DO UPDATE SET n = n + excluded.n",
            )?;
            for ((key, kind, site), n) in self.st.txn_counts.drain() {
                up.execute(params![key, kind, site, n])?;
            }
            let mut range = self.conn.prepare_cached(
                "UPDATE session_keys SET min_id = min(coalesce(min_id, ?2), ?2), \
                 max_id = max(coalesce(max_id, ?3), ?3) WHERE key = ?1",
            )?;
            for (key, (lo, hi)) in self.st.txn_ids.drain() {
                range.execute(params![key, lo, hi])?;
            }
            self.st.txn_more.flush(&self.conn)?;
            if self.st.txn_max_id > 0 {
                self.conn
                    .prepare_cached(
                        "INSERT INTO meta (key, value) VALUES ('max_event_id', ?1) \
                         ON CONFLICT (key) DO UPDATE SET value = max(value, excluded.value)",
                    )?
                    .execute([self.st.txn_max_id])?;
            }
            Ok(())
        })()
        .map_err(|e| sql_err("commit: counters", e))
    }
}

pub(super) fn count_rows(conn: &Connection, key: i64) -> Result<i64> {
    conn.query_row(
        &format!("SELECT count(*) FROM events INDEXED BY {} WHERE session_key = ?1", schema::TIMELINE_INDEX),
        [key],
        |r| r.get(0),
    )
    .map_err(|e| sql_err("count events", e))
}

impl State {
    /// (Re)load session keys and interned sites/threads from the file.
    fn load(&mut self, conn: &Connection) -> Result<()> {
        self.keys.clear();
        self.sessions.clear();
        self.last_key = None;
        self.interner = Interner::load(conn)?;
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
                KeyState { name, count: None, min_alive: None, dropped, evicted_upto, pids: FxSet::default() },
            );
        }
        let keys: Vec<i64> = self.sessions.keys().copied().collect();
        self.publish(&keys);
        Ok(())
    }

    /// Insert these events with one statement prepared for exactly `events.len()` rows.
    fn insert_rows(&mut self, conn: &Connection, stmt: &mut RawInsert, events: &[Event]) -> Result<()> {
        let mut refs: [RowRefs; ROWS_PER_STATEMENT] = Default::default();
        for (ev, r) in events.iter().zip(refs.iter_mut()) {
            r.key = self.session_key(conn, &ev.session_id)?;
            r.site = self.interner.site(conn, ev)?;
            r.thread = self.interner.thread(conn, ev)?;
            r.extra = encode_extra(ev);
        }
        let inserted = stmt.execute_with(|b| {
            for (i, (ev, r)) in events.iter().zip(refs.iter()).enumerate() {
                bind_row(b, i * schema::EVENT_COLUMN_COUNT, ev, r);
            }
        })?;
        let refs = &refs[..events.len()];
        let mut last_key = None;
        for (ev, r) in events.iter().zip(refs) {
            self.txn_events += 1;
            self.txn_max_id = self.txn_max_id.max(ev.id);
            if last_key != Some(r.key) {
                self.txn_touched.insert(r.key);
                last_key = Some(r.key);
            }
            let range = self.txn_ids.entry(r.key).or_insert((ev.id, ev.id));
            *range = (range.0.min(ev.id), range.1.max(ev.id));
            let kind = schema::kind_code(ev.event_type);
            *self.txn_counts.entry((r.key, kind, r.site.unwrap_or(0))).or_default() += 1;
            self.txn_more.row(r.key, ev.id, kind);
            self.txn_more.thread(r.key, kind, r.thread.unwrap_or(0), 1);
            if ev.event_type == EventType::FunctionExit && is_null_return(ev.return_value.as_deref()) {
                self.txn_more.null_returns(r.key, r.site.unwrap_or(0), 1);
            }
            let ks = self.sessions.get_mut(&r.key).expect("session_key registers the key");
            if let Some(c) = ks.count.as_mut() {
                *c += 1;
            }
            ks.note_alive(ev.id);
            if let Some(pid) = ev.pid {
                self.note_pid(conn, r.key, pid)?;
            }
        }
        if inserted < events.len() {
            // Rows ignored (an id that already exists). Which ones is unknown: rebuild the
            // counters of the sessions involved from the rows themselves (the pids and max
            // id noted above are harmless over-approximations).
            self.recount(conn, refs.iter().map(|r| r.key).collect())?;
            return Err(StrobeError::internal(format!(
                "{} of {} events not stored: their id already exists (ids come from Store::next_event_id)",
                events.len() - inserted,
                events.len()
            )));
        }
        Ok(())
    }

    /// Record that `pid` has events in session `key` (once per pid).
    pub(super) fn note_pid(&mut self, conn: &Connection, key: i64, pid: i64) -> Result<()> {
        let ks = self.sessions.get_mut(&key).expect("session_key registers the key");
        if !ks.pids.contains(&pid) {
            ks.pids.insert(pid);
            conn.prepare_cached("INSERT OR IGNORE INTO session_pids (session_key, pid) VALUES (?1, ?2)")
                .and_then(|mut s| s.execute(params![key, pid]))
                .map_err(|e| sql_err("insert pid", e))?;
        }
        Ok(())
    }

    /// After rows were ignored for an existing id: recount these sessions from their rows.
    pub(super) fn recount(&mut self, conn: &Connection, keys: HashSet<i64>) -> Result<()> {
        self.txn_counts.retain(|(k, _, _), _| !keys.contains(k));
        self.txn_more.forget(&keys);
        for key in keys {
            let c = count_rows(conn, key)?;
            self.sessions.get_mut(&key).expect("registered").count = Some(c);
            counters::rebuild(conn, Some(key)).map_err(|e| sql_err("rebuild counts", e))?;
            self.txn_touched.insert(key);
        }
        Ok(())
    }

    pub(super) fn session_key(&mut self, conn: &Connection, name: &str) -> Result<i64> {
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
                        pids: FxSet::default(),
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

    /// Copy committed counters of these keys to the shared map.
    pub(super) fn publish(&self, keys: &[i64]) {
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
