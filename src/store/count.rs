//! `totalCount` from the exact counters (`event_counts`, and those of `counters.rs`) where
//! the filters allow it, so that counting does not walk every matching event.

use rusqlite::Connection;

use super::counters::BUCKET_SHIFT;
use super::event::EventType;
use super::schema;

/// The filters the counters can see. Time bounds, durations and `returnValue.equals` are
/// not among them: the caller counts those queries by walking.
#[derive(Clone, Copy)]
pub(crate) struct Filters<'a> {
    pub kind: Option<i64>,
    pub sites: Option<&'a [i64]>,
    pub threads: Option<&'a [i64]>,
    pub after: Option<i64>,
    pub null_return: Option<bool>,
    /// Lowest and highest live id of the session (`session_keys.min_id` / `max_id`).
    pub id_range: (i64, i64),
}

fn in_list(col: &str, ids: Option<&[i64]>) -> String {
    match ids {
        Some(ids) => {
            let list: Vec<String> = ids.iter().map(i64::to_string).collect();
            format!(" AND {col} IN ({})", list.join(","))
        }
        None => String::new(),
    }
}

fn kind_clause(kind: Option<i64>) -> String {
    kind.map_or(String::new(), |k| format!(" AND event_kind = {k}"))
}

fn sum(conn: &Connection, sql: &str, params: &[i64]) -> rusqlite::Result<i64> {
    conn.prepare_cached(sql)?.query_row(rusqlite::params_from_iter(params), |r| r.get(0))
}

/// The exact number of events of session `key` matching `f`, or `None` when the counters
/// cannot tell (the caller then counts by walking).
pub(crate) fn from_counters(conn: &Connection, key: i64, f: &Filters<'_>) -> rusqlite::Result<Option<i64>> {
    let exit = schema::kind_code(EventType::FunctionExit);
    if let Some(after) = f.after {
        if f.null_return.is_some() {
            return Ok(None);
        }
        if f.sites.is_none() && f.threads.is_none() {
            return after_cursor(conn, key, after, f.kind).map(Some);
        }
        // Function / thread filters: when fewer ids lie up to the cursor than after it,
        // count those and subtract them from the total (the caller walks the rest).
        let (lo, hi) = f.id_range;
        if after.saturating_sub(lo) >= hi.saturating_sub(after) {
            return Ok(None);
        }
        let Some(all) = from_counters(conn, key, &Filters { after: None, ..*f })? else { return Ok(None) };
        let upto = sum(
            conn,
            &format!(
                "SELECT count(*) FROM events NOT INDEXED WHERE id >= ?1 AND id <= ?2 AND session_key = ?3{}{}{}",
                kind_clause(f.kind),
                in_list("site_id", f.sites),
                in_list("thread_ref", f.threads)
            ),
            &[lo, after, key],
        )?;
        return Ok(Some(all - upto));
    }
    if let Some(want_null) = f.null_return {
        if f.threads.is_some() {
            return Ok(None);
        }
        if f.kind.is_some_and(|k| k != exit) {
            return Ok(Some(0));
        }
        let nulls = sum(
            conn,
            &format!(
                "SELECT coalesce(sum(n), 0) FROM null_return_counts WHERE session_key = ?1{}",
                in_list("site_id", f.sites)
            ),
            &[key],
        )?;
        if want_null {
            return Ok(Some(nulls));
        }
        return Ok(Some(site_counts(conn, key, Some(exit), f.sites)? - nulls));
    }
    if let Some(threads) = f.threads {
        if f.sites.is_some() {
            return Ok(None);
        }
        let sql = format!(
            "SELECT coalesce(sum(n), 0) FROM thread_counts WHERE session_key = ?1{}{}",
            kind_clause(f.kind),
            in_list("thread_ref", Some(threads))
        );
        return sum(conn, &sql, &[key]).map(Some);
    }
    site_counts(conn, key, f.kind, f.sites).map(Some)
}

/// Events per type and site, from `event_counts`.
pub(crate) fn site_counts(conn: &Connection, key: i64, kind: Option<i64>, sites: Option<&[i64]>) -> rusqlite::Result<i64> {
    let sql = format!(
        "SELECT coalesce(sum(n), 0) FROM event_counts WHERE session_key = ?1{}{}",
        kind_clause(kind),
        in_list("site_id", sites)
    );
    sum(conn, &sql, &[key])
}

/// Events with id > `after` (and of `kind`): whole buckets after the cursor's bucket from
/// `id_buckets`, plus the rest of the cursor's own bucket by primary key (at most
/// 2^BUCKET_SHIFT ids, so the walk is bounded whatever the session's size).
fn after_cursor(conn: &Connection, key: i64, after: i64, kind: Option<i64>) -> rusqlite::Result<i64> {
    let bucket = after >> BUCKET_SHIFT;
    let bucket_end = after | ((1 << BUCKET_SHIFT) - 1);
    let later = sum(
        conn,
        &format!("SELECT coalesce(sum(n), 0) FROM id_buckets WHERE session_key = ?1 AND bucket > ?2{}", kind_clause(kind)),
        &[key, bucket],
    )?;
    let rest = sum(
        conn,
        &format!(
            "SELECT count(*) FROM events NOT INDEXED WHERE id > ?1 AND id <= ?2 AND session_key = ?3{}",
            kind_clause(kind)
        ),
        &[after, bucket_end, key],
    )?;
    Ok(later + rest)
}
