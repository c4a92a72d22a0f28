//! Pages (and counts) of predicates that need the table rows — `returnValue.equals` /
//! `isNull` read each candidate's return value: either a full scan of the session's id
//! range, or, once the counters (`count.rs`) know the total, an ordered walk of the
//! timeline that stops at the page's end.

use rusqlite::types::Value as SqlValue;
use rusqlite::Connection;

use super::schema::{self, sql_err};
use crate::error::Result;

/// A predicate that needs the table rows, over the session's whole id range: reading the
/// rows in id order (no per-row seek from an index entry) and sorting the matches beats
/// walking the timeline index when many rows must be read.
pub(crate) struct Scan<'a> {
    pub sql: &'a str,
    pub params: &'a [SqlValue],
    /// Inclusive bounds of the ids to read.
    pub ids: (i64, i64),
    /// Order the matches by id (a cursor's page) rather than chronologically.
    pub by_id: bool,
}

impl Scan<'_> {
    /// (number of matches, the page's ids).
    pub(crate) fn run(&self, conn: &Connection, offset: usize, limit: usize) -> Result<(i64, Vec<i64>)> {
        let mut st = conn
            .prepare_cached(&format!("SELECT timestamp_ns, id FROM events NOT INDEXED WHERE {} AND id BETWEEN ? AND ?", self.sql))
            .map_err(|e| sql_err("query: scan", e))?;
        let bounds = [SqlValue::Integer(self.ids.0), SqlValue::Integer(self.ids.1)];
        let mut hits: Vec<(i64, i64)> = st
            .query_map(rusqlite::params_from_iter(self.params.iter().chain(bounds.iter())), |r| Ok((r.get(0)?, r.get(1)?)))
            .and_then(|rows| rows.collect())
            .map_err(|e| sql_err("query: scan", e))?;
        if self.by_id {
            hits.sort_unstable_by_key(|h| h.1);
        } else {
            hits.sort_unstable();
        }
        Ok((hits.len() as i64, hits.iter().skip(offset).take(limit).map(|h| h.1).collect()))
    }
}

/// What a bounded walk found.
pub(crate) enum Walk {
    /// The page's ids, in chronological order.
    Page(Vec<i64>),
    /// The walk would read too many rows: use the full scan instead.
    TooFar,
}

/// The page (`offset`, `limit`) of a query whose predicate needs the table rows
/// (`expensive`, an SQL boolean expression) but whose count is known (`total` of the
/// `candidates` events that `cheap` selects): walk the timeline index in order, reading
/// table rows only for candidates, and stop at the page's end. A random table read costs
/// several times a sequential one, so the walk is tried only when the expected number of
/// candidates read is below a fraction of the session; otherwise, or if it reads more than
/// that budget, the caller scans.
#[allow(clippy::too_many_arguments)]
pub(crate) fn walk_page(
    conn: &Connection,
    cheap: &str,
    params: &[SqlValue],
    expensive: &str,
    total: i64,
    candidates: i64,
    session_rows: i64,
    (offset, limit): (usize, usize),
) -> rusqlite::Result<Walk> {
    let want = offset.saturating_add(limit) as i64;
    let budget = (session_rows / WALK_FRACTION).max(WALK_MIN);
    let expected = (want.min(total) as f64) * candidates as f64 / total.max(1) as f64;
    if expected > budget as f64 {
        return Ok(Walk::TooFar);
    }
    let mut st = conn.prepare_cached(&format!(
        "SELECT id, {expensive} FROM events INDEXED BY {} WHERE {cheap} ORDER BY timestamp_ns, id",
        schema::TIMELINE_INDEX
    ))?;
    let mut rows = st.query(rusqlite::params_from_iter(params))?;
    let (mut read, mut hits, mut page) = (0i64, 0i64, Vec::new());
    while hits < want {
        let Some(r) = rows.next()? else { break };
        read += 1;
        if read > budget {
            return Ok(Walk::TooFar);
        }
        if r.get::<_, bool>(1)? {
            if hits >= offset as i64 {
                page.push(r.get(0)?);
            }
            hits += 1;
        }
    }
    Ok(Walk::Page(page))
}

/// The walk may read up to 1/WALK_FRACTION of the session's rows (at least WALK_MIN).
const WALK_FRACTION: i64 = 8;
const WALK_MIN: i64 = 2_000;
