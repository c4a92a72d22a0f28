//! `debug_query` over the store.
//!
//! Semantics (the parts the spec leaves open):
//! - Events come back in chronological order: `timestamp_ns`, then `id`.
//! - `TextFilter`: `equals` is exact; `contains` is a case-insensitive substring test;
//!   `matches` is a `regex`-crate pattern (use `(?i)` for case-insensitive). Given together,
//!   all must hold. They are evaluated once per distinct interned string, not per row.
//! - `time_from_ns` / `time_to_ns` are inclusive.
//! - `return_value_equals` / `return_value_is_null` select `function_exit` events only.
//!   Equality compares parsed JSON values: numbers numerically (`5 == 5.0`), and a number
//!   equals a string holding the same number in decimal or `0x` hex (`5 == "5"`,
//!   `255 == "0xff"`) since pointers arrive as hex strings and callers often quote numbers.
//!   Arrays and objects compare element-wise with the same rule; a stored value that is
//!   not JSON equals only the identical string. `is_null: true` means the return value is
//!   JSON `null`, absent, or the null pointer `"0x0"` (untyped returns are raw registers).
//! - Cursor (`after_event_id`): only events with id > cursor. The page is then the next
//!   `limit` events *by id* (arrival order), returned sorted chronologically; following
//!   `last_event_id` therefore never skips an event that arrived out of timestamp order.
//!   `total_count` is the number of matching events after the cursor.
//! - `events_dropped`: with a cursor, FIFO eviction removed an event with id > cursor
//!   (eviction goes by id); without one, the session has lost any event to eviction.
//! - `pids`: distinct non-null pids ever seen in the session's events, ascending.

use std::sync::RwLock;

use regex::Regex;
use rusqlite::functions::FunctionFlags;
use rusqlite::types::{Value as SqlValue, ValueRef};
use rusqlite::{Connection, OptionalExtension};
use serde_json::Value;

use super::count;
use super::dict::Dict;
use super::event::{Event, EventType};
use super::json_eq::{json_text_equals, values_equal};
use super::scan::{self, Scan};
use super::schema::{self, sql_err};
use crate::error::{Result, StrobeError};

#[derive(Default, Clone, Debug)]
pub struct TextFilter {
    pub equals: Option<String>,
    pub contains: Option<String>,
    /// Regex (`regex` crate syntax).
    pub matches: Option<String>,
}

#[derive(Default, Clone, Debug)]
pub struct EventQuery {
    pub session_id: String,
    pub event_type: Option<EventType>,
    /// On `function_name`.
    pub function: TextFilter,
    pub source_file: TextFilter,
    pub return_value_equals: Option<Value>,
    pub return_value_is_null: Option<bool>,
    pub thread_name_contains: Option<String>,
    /// Absolute ns since session start, inclusive.
    pub time_from_ns: Option<i64>,
    pub time_to_ns: Option<i64>,
    pub min_duration_ns: Option<i64>,
    pub pid: Option<i64>,
    pub after_event_id: Option<i64>,
    /// The caller validates (default 50, max 500).
    pub limit: usize,
    pub offset: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct QueryResult {
    pub events: Vec<Event>,
    pub total_count: i64,
    pub has_more: bool,
    /// Distinct pids in the session.
    pub pids: Vec<i64>,
    /// Highest id in `events`.
    pub last_event_id: Option<i64>,
    pub events_dropped: bool,
}

/// A cursor this close to the end always walks the table from the cursor.
const CURSOR_SCAN_MIN: i64 = 10_000;

struct TextPred {
    equals: Option<String>,
    contains_lower: Option<String>,
    regex: Option<Regex>,
}

impl TextPred {
    /// `None` when the filter constrains nothing.
    fn new(f: &TextFilter, field: &str) -> Result<Option<TextPred>> {
        if f.equals.is_none() && f.contains.is_none() && f.matches.is_none() {
            return Ok(None);
        }
        let regex = match &f.matches {
            Some(re) => Some(Regex::new(re).map_err(|e| {
                StrobeError::validation(format!(
                    "Invalid regex in {field}.matches '{re}': {e}. Fix the pattern (escape special \
                     characters such as '(' '[' '*' '+' '?' '.' with a backslash), or use {field}.contains \
                     for a plain substring or {field}.equals for an exact name."
                ))
            })?),
            None => None,
        };
        Ok(Some(TextPred { equals: f.equals.clone(), contains_lower: f.contains.as_deref().map(str::to_lowercase), regex }))
    }

    fn contains(needle: &str) -> TextPred {
        TextPred { equals: None, contains_lower: Some(needle.to_lowercase()), regex: None }
    }

    fn matches(&self, s: &str) -> bool {
        if self.equals.as_deref().is_some_and(|e| e != s) {
            return false;
        }
        if let Some(c) = &self.contains_lower {
            let hit = if s.is_ascii() && c.is_ascii() {
                s.as_bytes().windows(c.len().max(1)).any(|w| w.eq_ignore_ascii_case(c.as_bytes())) || c.is_empty()
            } else {
                s.to_lowercase().contains(c.as_str())
            };
            if !hit {
                return false;
            }
        }
        self.regex.as_ref().is_none_or(|r| r.is_match(s))
    }
}

/// Validate a query without touching the database (bad regex → `VALIDATION_ERROR`).
pub(crate) fn check(q: &EventQuery) -> Result<()> {
    TextPred::new(&q.function, "function")?;
    TextPred::new(&q.source_file, "sourceFile")?;
    Ok(())
}

/// A reader connection: `query_only`, with the JSON-equality SQL function registered.
pub(crate) fn open_reader(path: &std::path::Path) -> Result<Connection> {
    let conn = schema::open_reader(path, true)?;
    conn.create_scalar_function(
        "strobe_json_eq",
        2,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |ctx| {
            let target = ctx.get_or_create_aux(1, |v| -> std::result::Result<Value, String> {
                let text = v.as_str().map_err(|e| e.to_string())?;
                serde_json::from_str(text).map_err(|e| e.to_string())
            })?;
            Ok(match ctx.get_raw(0) {
                ValueRef::Text(t) => std::str::from_utf8(t).is_ok_and(|s| json_text_equals(s, &target)),
                ValueRef::Integer(i) => values_equal(&Value::from(i), &target),
                ValueRef::Real(f) => values_equal(&Value::from(f), &target),
                _ => false,
            })
        },
    )
    .map_err(|e| sql_err("register strobe_json_eq", e))?;
    Ok(conn)
}

pub(crate) fn run(conn: &Connection, dict: &RwLock<Dict>, q: &EventQuery) -> Result<QueryResult> {
    let func_pred = TextPred::new(&q.function, "function")?;
    let file_pred = TextPred::new(&q.source_file, "sourceFile")?;
    let thread_pred = q.thread_name_contains.as_deref().map(TextPred::contains);

    let tx = conn.unchecked_transaction().map_err(|e| sql_err("query: begin", e))?;
    type SessionKeyRow = (i64, i64, i64, Option<i64>, Option<i64>);
    let sess: Option<SessionKeyRow> = tx
        .prepare_cached("SELECT key, dropped, evicted_upto, min_id, max_id FROM session_keys WHERE name = ?1")
        .and_then(|mut st| {
            st.query_row([&q.session_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))).optional()
        })
        .map_err(|e| sql_err("query: session", e))?;
    let mut result =
        QueryResult { events: Vec::new(), total_count: 0, has_more: false, pids: Vec::new(), last_event_id: None, events_dropped: false };
    let Some((key, dropped, evicted_upto, min_id, max_id)) = sess else {
        let exists: bool = tx
            .query_row("SELECT EXISTS (SELECT 1 FROM sessions WHERE id = ?1)", [&q.session_id], |r| r.get(0))
            .map_err(|e| sql_err("query: session", e))?;
        return if exists { Ok(result) } else { Err(StrobeError::session_not_found(&q.session_id)) };
    };
    result.events_dropped = match q.after_event_id {
        Some(after) => evicted_upto > after,
        None => dropped > 0,
    };
    result.pids = {
        let mut st = tx
            .prepare_cached("SELECT pid FROM session_pids WHERE session_key = ?1 ORDER BY pid")
            .map_err(|e| sql_err("query: pids", e))?;
        let rows = st.query_map([key], |r| r.get(0)).map_err(|e| sql_err("query: pids", e))?;
        rows.collect::<rusqlite::Result<Vec<i64>>>().map_err(|e| sql_err("query: pids", e))?
    };

    // Text filters are evaluated once per interned site / thread, then become `IN` lists.
    Dict::refresh(dict, &tx)?;
    let (site_ids, thread_ids) = {
        let d = dict.read().unwrap();
        let sites = (func_pred.is_some() || file_pred.is_some()).then(|| {
            d.site_ids(|s| {
                let ok = |p: &Option<TextPred>, v: &Option<String>| {
                    p.as_ref().is_none_or(|p| v.as_deref().is_some_and(|v| p.matches(v)))
                };
                ok(&func_pred, &s.function_name) && ok(&file_pred, &s.source_file)
            })
        });
        let threads = (thread_pred.is_some() || q.pid.is_some()).then(|| {
            d.thread_ids(|t| {
                thread_pred.as_ref().is_none_or(|p| t.thread_name.as_deref().is_some_and(|n| p.matches(n)))
                    && q.pid.is_none_or(|pid| t.pid == Some(pid))
            })
        });
        (sites, threads)
    };
    if [&site_ids, &thread_ids].iter().any(|s| s.as_ref().is_some_and(Vec::is_empty)) {
        return Ok(result);
    }

    let mut clauses: Vec<String> = vec!["session_key = ?".into()];
    let mut params: Vec<SqlValue> = vec![SqlValue::Integer(key)];
    let mut push = |clause: &str, v: SqlValue| {
        clauses.push(clause.to_string());
        params.push(v);
    };
    if let Some(t) = q.event_type {
        push("event_kind = ?", SqlValue::Integer(schema::kind_code(t)));
    }
    if let Some(from) = q.time_from_ns {
        push("timestamp_ns >= ?", SqlValue::Integer(from));
    }
    if let Some(to) = q.time_to_ns {
        push("timestamp_ns <= ?", SqlValue::Integer(to));
    }
    if let Some(d) = q.min_duration_ns {
        push("duration_ns >= ?", SqlValue::Integer(d));
    }
    if let Some(after) = q.after_event_id {
        push("id > ?", SqlValue::Integer(after));
    }
    let exit = schema::kind_code(EventType::FunctionExit);
    if let Some(v) = &q.return_value_equals {
        push(&format!("event_kind = {exit} AND strobe_json_eq(return_value, ?)"), SqlValue::Text(v.to_string()));
    }
    for (col, ids) in [("site_id", &site_ids), ("thread_ref", &thread_ids)] {
        if let Some(ids) = ids {
            let list: Vec<String> = ids.iter().map(i64::to_string).collect();
            clauses.push(format!("{col} IN ({})", list.join(",")));
        }
    }
    // Everything so far is readable from the timeline index (and `params` binds exactly
    // these clauses); the return-value tests below need the table rows.
    let cheap_sql = clauses.join(" AND ");
    let null_expr = q.return_value_is_null.map(|want| {
        if want { schema::NULL_RETURN_SQL.to_string() } else { format!("NOT {}", schema::NULL_RETURN_SQL) }
    });
    if let Some(e) = &null_expr {
        clauses.push(format!("event_kind = {exit} AND {e}"));
    }

    // Exact totalCount from the counters when they see every filter (count.rs).
    let counted = if q.time_from_ns.is_none()
        && q.time_to_ns.is_none()
        && q.min_duration_ns.is_none()
        && q.return_value_equals.is_none()
    {
        let filters = count::Filters {
            kind: q.event_type.map(schema::kind_code),
            sites: site_ids.as_deref(),
            threads: thread_ids.as_deref(),
            after: q.after_event_id,
            null_return: q.return_value_is_null,
            id_range: (min_id.unwrap_or(0), max_id.unwrap_or(0)),
        };
        count::from_counters(&tx, key, &filters).map_err(|e| sql_err("query: count", e))?
    } else {
        None
    };
    let session_rows = || count::site_counts(&tx, key, None, None).map_err(|e| sql_err("query: count", e));

    // Access path: with a cursor, the primary key from the cursor on when that walk is
    // bounded by fewer rows than the session holds (ids are unique integers, so at most
    // max(id) - cursor rows lie after it); for slow calls, the partial index; otherwise the
    // timeline index (chronological, covers the cheap filters).
    let walk_from_cursor = match q.after_event_id {
        Some(after) => {
            let max_id: i64 = tx
                .query_row("SELECT coalesce((SELECT max(id) FROM events), 0)", [], |r| r.get(0))
                .map_err(|e| sql_err("query: max id", e))?;
            max_id.saturating_sub(after) <= session_rows()?.max(CURSOR_SCAN_MIN)
        }
        None => false,
    };
    let slow = !walk_from_cursor && q.min_duration_ns.is_some_and(|d| d >= schema::SLOW_NS);
    let source = if walk_from_cursor {
        "events NOT INDEXED".to_string()
    } else if slow {
        // The literal bound lets SQLite see that the partial index applies.
        clauses.push(format!("duration_ns >= {}", schema::SLOW_NS));
        format!("events INDEXED BY {}", schema::SLOW_INDEX)
    } else {
        format!("events INDEXED BY {}", schema::TIMELINE_INDEX)
    };
    let where_sql = clauses.join(" AND ");
    let order = if q.after_event_id.is_some() { "id" } else { "timestamp_ns, id" };
    let page_sql = format!("SELECT id FROM {source} WHERE {where_sql} ORDER BY {order}");

    let expensive = q.return_value_equals.is_some() || q.return_value_is_null.is_some();
    // The session's id range, read in order by the full scan of expensive predicates.
    let lo = min_id.unwrap_or(1).max(q.after_event_id.map_or(i64::MIN, |a| a.saturating_add(1)));
    let full_scan = Scan { sql: &where_sql, params: &params, ids: (lo, max_id.unwrap_or(0)), by_id: q.after_event_id.is_some() };
    let ids: Vec<i64> = if let (Some(total), Some(null_expr)) = (counted, &null_expr) {
        // isNull with a known count (so no cursor, no duration bound: the timeline index is
        // the source): walk the timeline only as far as the page goes.
        result.total_count = total;
        if q.limit == 0 || q.offset as i64 >= total {
            Vec::new()
        } else {
            let candidates = count::site_counts(&tx, key, Some(exit), site_ids.as_deref()).map_err(|e| sql_err("query: count", e))?;
            let cheap = format!("{cheap_sql} AND event_kind = {exit}");
            let walk = scan::walk_page(&tx, &cheap, &params, null_expr, total, candidates, session_rows()?, (q.offset, q.limit))
                .map_err(|e| sql_err("query: page", e))?;
            match walk {
                scan::Walk::Page(ids) => ids,
                scan::Walk::TooFar => full_scan.run(&tx, q.offset, q.limit)?.1,
            }
        }
    } else if expensive && !slow && !walk_from_cursor {
        let (total, ids) = full_scan.run(&tx, q.offset, q.limit)?;
        result.total_count = total;
        ids
    } else if expensive {
        // Few rows (slow calls, or close to the cursor): one ordered pass counts and pages.
        let mut st = tx.prepare_cached(&page_sql).map_err(|e| sql_err("query: scan", e))?;
        let mut rows = st.query(rusqlite::params_from_iter(params.iter())).map_err(|e| sql_err("query: scan", e))?;
        let (mut n, mut ids) = (0usize, Vec::new());
        while let Some(r) = rows.next().map_err(|e| sql_err("query: scan", e))? {
            if n >= q.offset && ids.len() < q.limit {
                ids.push(r.get(0).map_err(|e| sql_err("query: scan", e))?);
            }
            n += 1;
        }
        result.total_count = n as i64;
        ids
    } else {
        result.total_count = match counted {
            Some(n) => n,
            None => tx
                .prepare_cached(&format!("SELECT count(*) FROM {source} WHERE {where_sql}"))
                .and_then(|mut st| st.query_row(rusqlite::params_from_iter(params.iter()), |r| r.get(0)))
                .map_err(|e| sql_err("query: count", e))?,
        };
        if q.limit > 0 && (q.offset as i64) < result.total_count {
            params.push(SqlValue::Integer(q.limit as i64));
            params.push(SqlValue::Integer(q.offset as i64));
            let mut st = tx.prepare_cached(&format!("{page_sql} LIMIT ? OFFSET ?")).map_err(|e| sql_err("query: page", e))?;
            let rows = st
                .query_map(rusqlite::params_from_iter(params.iter()), |r| r.get(0))
                .map_err(|e| sql_err("query: page", e))?;
            rows.collect::<rusqlite::Result<_>>().map_err(|e| sql_err("query: page", e))?
        } else {
            Vec::new()
        }
    };
    result.events = fetch_events(&tx, dict, &q.session_id, &ids)?;
    tx.finish().map_err(|e| sql_err("query: end", e))?;

    result.has_more = (q.offset as i64).saturating_add(result.events.len() as i64) < result.total_count;
    result.last_event_id = result.events.iter().map(|e| e.id).max();
    Ok(result)
}

/// Whole rows for these ids, in chronological order.
fn fetch_events(conn: &Connection, dict: &RwLock<Dict>, session_id: &str, ids: &[i64]) -> Result<Vec<Event>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let list: Vec<String> = ids.iter().map(i64::to_string).collect();
    let mut st = conn
        .prepare(&format!("SELECT {} FROM events WHERE id IN ({})", schema::EVENT_COLUMNS, list.join(",")))
        .map_err(|e| sql_err("query: fetch", e))?;
    let d = dict.read().unwrap();
    let rows = st.query_map([], |r| d.row_to_event(r, session_id)).map_err(|e| sql_err("query: fetch", e))?;
    let mut events = rows.collect::<rusqlite::Result<Vec<Event>>>().map_err(|e| sql_err("query: fetch", e))?;
    events.sort_by_key(|e| (e.timestamp_ns, e.id));
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_predicates() {
        let p = TextPred::new(&TextFilter { contains: Some("PARSE".into()), ..Default::default() }, "function").unwrap().unwrap();
        assert!(p.matches("json::parse_value"));
        assert!(!p.matches("json::emit"));
        let p = TextPred::new(&TextFilter { contains: Some("é".into()), ..Default::default() }, "function").unwrap().unwrap();
        assert!(p.matches("cafÉ"));
        let p = TextPred::new(
            &TextFilter { equals: Some("a::b".into()), matches: Some("^a::".into()), ..Default::default() },
            "function",
        )
        .unwrap()
        .unwrap();
        assert!(p.matches("a::b"));
        assert!(!p.matches("a::c"));
        assert!(TextPred::new(&TextFilter::default(), "function").unwrap().is_none());
        let e = TextPred::new(&TextFilter { matches: Some("foo(".into()), ..Default::default() }, "function").err().unwrap();
        assert_eq!(e.code, crate::error::ErrorCode::ValidationError);
        assert!(e.message.contains("foo("), "{}", e.message);
    }
}
