//! Exact counters kept beside `events`, in the same transactions as the rows, so that
//! `totalCount` of the common queries is a sum over a few counter rows instead of a walk
//! over the matching events (`count.rs` reads them):
//! - `id_buckets`: events per (session, id >> `BUCKET_SHIFT`, type) — a cursor's count is
//!   the buckets after the cursor's own plus a walk of at most one bucket. Ids are global
//!   and a session's rows may arrive out of id order, so counting by id ranges (rather
//!   than a per-session sequence number) stays exact whatever the arrival order.
//! - `thread_counts`: events per (session, type, thread) — threadName and pid filters.
//! - `null_return_counts`: `function_exit` events with a null return per (session, site) —
//!   `returnValue.isNull`.
//!
//! `event_counts` (per session, type, site) is older and kept by `writer.rs` itself.

use rusqlite::{params, Connection};

use super::event::EventType;
use super::intern::FxMap;
use super::schema;

/// Ids per bucket: the walk inside the cursor's bucket reads at most this many rows.
pub(crate) const BUCKET_SHIFT: u32 = 12;
const KINDS: usize = EventType::ALL.len();

/// A stored return value that `returnValue.isNull` selects; the same test as `NULL_RETURN_SQL`.
pub(crate) fn is_null_return(v: Option<&str>) -> bool {
    matches!(v, None | Some("null") | Some("\"0x0\""))
}

/// Rows added in the open transaction, folded into the tables at commit.
#[derive(Default)]
pub(crate) struct TxnCounters {
    /// The bucket the last rows went to: consecutive rows nearly always share it, so a
    /// row costs an array increment, not a hash-map update.
    run: Option<(i64, i64, [i64; KINDS])>,
    buckets: FxMap<(i64, i64, i64), i64>,
    threads: FxMap<(i64, i64, i64), i64>,
    nulls: FxMap<(i64, i64), i64>,
}

impl TxnCounters {
    /// One row of session `key`: its id and type.
    #[inline]
    pub(crate) fn row(&mut self, key: i64, id: i64, kind: i64) {
        let bucket = id >> BUCKET_SHIFT;
        match &mut self.run {
            Some((k, b, kinds)) if *k == key && *b == bucket => kinds[kind as usize] += 1,
            _ => {
                self.end_run();
                let mut kinds = [0; KINDS];
                kinds[kind as usize] = 1;
                self.run = Some((key, bucket, kinds));
            }
        }
    }

    /// `n` rows of `kind` on thread `thread` (0 = no thread).
    #[inline]
    pub(crate) fn thread(&mut self, key: i64, kind: i64, thread: i64, n: i64) {
        *self.threads.entry((key, kind, thread)).or_default() += n;
    }

    /// `n` exits with a null return at site `site` (0 = no site).
    pub(crate) fn null_returns(&mut self, key: i64, site: i64, n: i64) {
        *self.nulls.entry((key, site)).or_default() += n;
    }

    fn end_run(&mut self) {
        if let Some((key, bucket, kinds)) = self.run.take() {
            for (kind, n) in kinds.into_iter().enumerate().filter(|(_, n)| *n > 0) {
                *self.buckets.entry((key, bucket, kind as i64)).or_default() += n;
            }
        }
    }

    /// Drop what was noted for these sessions (their counters are being rebuilt from rows).
    pub(crate) fn forget(&mut self, keys: &std::collections::HashSet<i64>) {
        self.end_run();
        self.buckets.retain(|(k, _, _), _| !keys.contains(k));
        self.threads.retain(|(k, _, _), _| !keys.contains(k));
        self.nulls.retain(|(k, _), _| !keys.contains(k));
    }

    pub(crate) fn clear(&mut self) {
        *self = TxnCounters::default();
    }

    /// Add the transaction's counts to the tables (inside the transaction).
    pub(crate) fn flush(&mut self, conn: &Connection) -> rusqlite::Result<()> {
        self.end_run();
        if !self.buckets.is_empty() {
            let mut st = conn.prepare_cached(
                "INSERT INTO id_buckets (session_key, bucket, event_kind, n) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT DO UPDATE SET n = n + excluded.n",
            )?;
            for ((key, bucket, kind), n) in self.buckets.drain() {
                st.execute(params![key, bucket, kind, n])?;
            }
        }
        if !self.threads.is_empty() {
            let mut st = conn.prepare_cached(
                "INSERT INTO thread_counts (session_key, event_kind, thread_ref, n) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT DO UPDATE SET n = n + excluded.n",
            )?;
            for ((key, kind, thread), n) in self.threads.drain() {
                st.execute(params![key, kind, thread, n])?;
            }
        }
        if !self.nulls.is_empty() {
            let mut st = conn.prepare_cached(
                "INSERT INTO null_return_counts (session_key, site_id, n) VALUES (?1, ?2, ?3) \
                 ON CONFLICT DO UPDATE SET n = n + excluded.n",
            )?;
            for ((key, site), n) in self.nulls.drain() {
                st.execute(params![key, site, n])?;
            }
        }
        Ok(())
    }
}

/// Take the rows with ids in `lo..=hi` of session `key` out of every counter table, before
/// they are deleted (FIFO eviction; inside its transaction).
pub(crate) fn subtract_range(conn: &Connection, key: i64, lo: i64, hi: i64) -> rusqlite::Result<()> {
    let mut sites: FxMap<(i64, i64), i64> = FxMap::default();
    let mut c = TxnCounters::default();
    {
        let mut st = conn.prepare_cached(&format!(
            "SELECT id, event_kind, coalesce(site_id, 0), coalesce(thread_ref, 0), \
                    event_kind = {} AND {} FROM events NOT INDEXED \
             WHERE id >= ?1 AND id <= ?2 AND session_key = ?3",
            schema::kind_code(EventType::FunctionExit),
            schema::NULL_RETURN_SQL
        ))?;
        let mut rows = st.query(params![lo, hi, key])?;
        while let Some(r) = rows.next()? {
            let (id, kind, site, thread, null): (i64, i64, i64, i64, bool) =
                (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?);
            *sites.entry((kind, site)).or_default() += 1;
            if (0..KINDS as i64).contains(&kind) {
                c.row(key, id, kind);
            }
            c.thread(key, kind, thread, 1);
            if null {
                c.null_returns(key, site, 1);
            }
        }
    }
    c.end_run();
    let mut st = conn.prepare_cached(
        "UPDATE event_counts SET n = n - ?4 WHERE session_key = ?1 AND event_kind = ?2 AND site_id = ?3",
    )?;
    for ((kind, site), n) in sites {
        st.execute(params![key, kind, site, n])?;
    }
    let mut st = conn
        .prepare_cached("UPDATE id_buckets SET n = n - ?4 WHERE session_key = ?1 AND bucket = ?2 AND event_kind = ?3")?;
    for ((_, bucket, kind), n) in c.buckets.drain() {
        st.execute(params![key, bucket, kind, n])?;
    }
    let mut st = conn.prepare_cached(
        "UPDATE thread_counts SET n = n - ?4 WHERE session_key = ?1 AND event_kind = ?2 AND thread_ref = ?3",
    )?;
    for ((_, kind, thread), n) in c.threads.drain() {
        st.execute(params![key, kind, thread, n])?;
    }
    let mut st =
        conn.prepare_cached("UPDATE null_return_counts SET n = n - ?3 WHERE session_key = ?1 AND site_id = ?2")?;
    for ((_, site), n) in c.nulls.drain() {
        st.execute(params![key, site, n])?;
    }
    for table in ["event_counts", "id_buckets", "thread_counts", "null_return_counts"] {
        conn.prepare_cached(&format!("DELETE FROM {table} WHERE session_key = ?1 AND n <= 0"))?.execute([key])?;
    }
    Ok(())
}

/// Recompute every counter table (and `event_counts`) from the rows: of one session (after
/// rows were refused for an existing id), or of all (`None`: upgrading a layout-1 file).
pub(crate) fn rebuild(conn: &Connection, key: Option<i64>) -> rusqlite::Result<()> {
    let (only, all_or_one) = match key {
        Some(_) => ("WHERE session_key = ?1", "session_key = ?1 AND"),
        None => ("", ""),
    };
    let exit = schema::kind_code(EventType::FunctionExit);
    let statements = [
        format!("DELETE FROM event_counts {only}"),
        format!("DELETE FROM id_buckets {only}"),
        format!("DELETE FROM thread_counts {only}"),
        format!("DELETE FROM null_return_counts {only}"),
        format!(
            "INSERT INTO event_counts (session_key, event_kind, site_id, n) \
             SELECT session_key, event_kind, coalesce(site_id, 0), count(*) FROM events {only} GROUP BY 1, 2, 3"
        ),
        format!(
            "INSERT INTO id_buckets (session_key, bucket, event_kind, n) \
             SELECT session_key, id >> {BUCKET_SHIFT}, event_kind, count(*) FROM events {only} GROUP BY 1, 2, 3"
        ),
        format!(
            "INSERT INTO thread_counts (session_key, event_kind, thread_ref, n) \
             SELECT session_key, event_kind, coalesce(thread_ref, 0), count(*) FROM events {only} GROUP BY 1, 2, 3"
        ),
        format!(
            "INSERT INTO null_return_counts (session_key, site_id, n) \
             SELECT session_key, coalesce(site_id, 0), count(*) FROM events \
             WHERE {all_or_one} event_kind = {exit} AND {} GROUP BY 1, 2",
            schema::NULL_RETURN_SQL
        ),
    ];
    for sql in statements {
        match key {
            Some(k) => conn.execute(&sql, [k])?,
            None => conn.execute(&sql, [])?,
        };
    }
    Ok(())
}

/// Forget a deleted session's counters (inside the delete's transaction).
pub(crate) fn delete_session(conn: &Connection, key: i64) -> rusqlite::Result<()> {
    for table in ["id_buckets", "thread_counts", "null_return_counts"] {
        conn.prepare_cached(&format!("DELETE FROM {table} WHERE session_key = ?1"))?.execute([key])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_fold_into_buckets_by_session_and_kind() {
        let mut c = TxnCounters::default();
        for id in [1, 2, 3, 4096, 4097] {
            c.row(7, id, id % 2);
        }
        c.row(8, 5, 2);
        c.row(7, 6, 0);
        c.end_run();
        assert_eq!(c.buckets.get(&(7, 0, 1)), Some(&2)); // ids 1, 3
        assert_eq!(c.buckets.get(&(7, 0, 0)), Some(&2)); // ids 2, 6
        assert_eq!(c.buckets.get(&(7, 1, 0)), Some(&1)); // 4096
        assert_eq!(c.buckets.get(&(7, 1, 1)), Some(&1)); // 4097
        assert_eq!(c.buckets.get(&(8, 0, 2)), Some(&1));
        c.forget(&[7].into());
        assert_eq!(c.buckets.len(), 1);
    }

    #[test]
    fn null_returns_match_the_query_semantics() {
        assert!(is_null_return(None));
        assert!(is_null_return(Some("null")));
        assert!(is_null_return(Some("\"0x0\"")));
        assert!(!is_null_return(Some("0")));
        assert!(!is_null_return(Some("\"0x10\"")));
    }
}
