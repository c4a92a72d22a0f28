//! FIFO eviction and session deletion, run by the writer thread.
//!
//! Eviction goes by id (arrival order): the oldest events of a session over its limit are
//! deleted inside the writer's own transaction, just before it commits (`Writer::commit`),
//! so a committed count never exceeds the limit and eviction never waits for a lock (the
//! writer already holds it: a separate deferred transaction that read first and then wrote
//! failed with "database is locked" whenever another connection wrote in between). At most
//! `DELETE_CHUNK` per session per transaction: a limit lowered far below the count is caught
//! up in chunks between rounds, so ingestion keeps going. `session_keys.dropped` /
//! `evicted_upto` record what went.

use std::collections::HashSet;

use rusqlite::{params, OptionalExtension};

use super::counters;
use super::schema::{self, sql_err};
use super::writer::{count_rows, Writer};
use crate::error::{Result, StrobeError};

/// Most events evicted (or deleted for `delete_session`) in one transaction.
pub(crate) const DELETE_CHUNK: i64 = 20_000;

impl Writer {
    /// Count the sessions from an earlier run that were given a limit, so eviction sees them.
    pub(super) fn load_limited_counts(&mut self) {
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

    pub(super) fn has_backlog(&self) -> bool {
        !self.over_limit().is_empty()
    }

    /// Evict one chunk from every session over its limit, in a transaction of its own.
    /// False if nothing could be done.
    pub(super) fn evict_step(&mut self) -> bool {
        let before: i64 = self.st.sessions.values().map(|s| s.dropped).sum();
        if let Err(e) = self.begin() {
            tracing::error!("event store: FIFO eviction cannot begin: {e}");
            return false;
        }
        self.commit(); // evicts (evict_in_txn)
        let after: i64 = self.st.sessions.values().map(|s| s.dropped).sum();
        after > before
    }

    /// Inside the open transaction: cut every session over its limit back to it (at most
    /// `DELETE_CHUNK` events each, or as many as the transaction added).
    pub(super) fn evict_in_txn(&mut self) -> Result<()> {
        let most = DELETE_CHUNK.max(self.st.txn_events as i64);
        for (key, excess) in self.over_limit() {
            self.evict_chunk(key, excess.min(most))?;
        }
        Ok(())
    }

    /// Delete the `n` oldest (lowest id) events of a session, inside the open transaction.
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
            self.st.txn_touched.insert(key);
            return Ok(0);
        };
        // Take the chunk out of the counters before its rows go.
        counters::subtract_range(conn, key, min, cut).map_err(|e| sql_err("eviction: counts", e))?;
        let deleted = conn
            .prepare_cached("DELETE FROM events NOT INDEXED WHERE id >= ?1 AND id <= ?2 AND session_key = ?3")
            .and_then(|mut s| s.execute(params![min, cut, key]))
            .map_err(|e| sql_err("eviction: delete", e))? as i64;
        super::captures::evict(conn, key, cut).map_err(|e| sql_err("eviction: capture spans", e))?;
        conn.prepare_cached(
            "UPDATE session_keys SET dropped = dropped + ?1, evicted_upto = max(evicted_upto, ?2), \
             min_id = max(coalesce(min_id, ?2 + 1), ?2 + 1) WHERE key = ?3",
        )
        .and_then(|mut s| s.execute(params![deleted, cut, key]))
        .map_err(|e| sql_err("eviction: bookkeeping", e))?;
        // Published by the commit; a failed commit reloads all of this from the file.
        ks.min_alive = Some(cut + 1);
        ks.count = ks.count.map(|c| c - deleted);
        ks.dropped += deleted;
        ks.evicted_upto = ks.evicted_upto.max(cut);
        self.st.txn_touched.insert(key);
        Ok(deleted)
    }

    pub(super) fn delete_session(&mut self, name: &str) -> Result<()> {
        let key: Option<i64> = self
            .conn
            .query_row("SELECT key FROM session_keys WHERE name = ?1", [name], |r| r.get(0))
            .optional()
            .map_err(|e| sql_err("delete_session", e))?;
        // IMMEDIATE: take the write lock first (a deferred transaction that must upgrade
        // from a read cannot wait for it and fails with "database is locked").
        let tx = rusqlite::Transaction::new_unchecked(&self.conn, rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| sql_err("delete_session: begin", e))?;
        let rows = tx.execute("DELETE FROM sessions WHERE id = ?1", [name]).map_err(|e| sql_err("delete_session", e))?;
        if key.is_none() && rows == 0 {
            return Err(StrobeError::session_not_found(name));
        }
        if let Some(key) = key {
            tx.execute("DELETE FROM session_keys WHERE key = ?1", [key]).map_err(|e| sql_err("delete_session", e))?;
            tx.execute("DELETE FROM session_pids WHERE session_key = ?1", [key]).map_err(|e| sql_err("delete_session", e))?;
            tx.execute("DELETE FROM event_counts WHERE session_key = ?1", [key]).map_err(|e| sql_err("delete_session", e))?;
            counters::delete_session(&tx, key).map_err(|e| sql_err("delete_session", e))?;
            super::captures::delete_session(&tx, key).map_err(|e| sql_err("delete_session", e))?;
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

    pub(super) fn resume_pending_deletes(&mut self) -> Result<()> {
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
            // Session-row writes waiting meanwhile go between two chunks (gate.rs).
            self.st.shared.gate.writer_exit();
            self.st.shared.gate.writer_enter();
        }
        self.conn
            .execute("DELETE FROM pending_deletes WHERE session_key = ?1", [key])
            .map_err(|e| sql_err("delete_session", e))?;
        Ok(())
    }
}
