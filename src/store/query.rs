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
//!   JSON `null` or absent.
//! - Cursor (`after_event_id`): only events with id > cursor. The page is then the next
//!   `limit` events *by id* (arrival order), returned sorted chronologically; following
//!   `last_event_id` therefore never skips an event that arrived out of timestamp order.
//!   `total_count` is the number of matching events after the cursor.
//! - `events_dropped`: with a cursor, FIFO eviction removed an event with id > cursor
//!   (eviction goes by id); without one, the session has lost any event to eviction.
//! - `pids`: distinct non-null pids ever seen in the session's events, ascending.

use std::sync::{Arc, RwLock};

use regex::Regex;
use rusqlite::functions::FunctionFlags;
use rusqlite::types::{Value as SqlValue, ValueRef};
use rusqlite::{Connection, OptionalExtension};
use serde_json::Value;

use super::event::{Event, EventType};
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

/// Above this many ids after a cursor, count through the timeline index instead of
/// walking the table from the cursor.
const CURSOR_SCAN_LIMIT: i64 = 100_000;

/// Reader-side copy of the `strings` table (index = id). Append-only, like the table.
#[derive(Default)]
pub(crate) struct Dict {
    by_id: Vec<Option<Arc<str>>>,
}

impl Dict {
    fn get(&self, id: Option<i64>) -> Option<String> {
        let id = usize::try_from(id?).ok()?;
        self.by_id.get(id)?.as_deref().map(str::to_string)
    }

    /// Ids of the interned strings satisfying `pred`.
    fn matching(&self, pred: &TextPred) -> Vec<i64> {
        self.by_id
            .iter()
            .enumerate()
            .filter_map(|(id, s)| s.as_deref().filter(|s| pred.matches(s)).map(|_| id as i64))
            .collect()
    }

    /// Load strings committed since the last refresh (within the caller's read snapshot).
    fn refresh(lock: &RwLock<Dict>, conn: &Connection) -> Result<()> {
        let known = lock.read().unwrap().by_id.len().max(1) as i64;
        let mut st = conn
            .prepare_cached("SELECT id, s FROM strings WHERE id >= ?1 ORDER BY id")
            .map_err(|e| sql_err("query: strings", e))?;
        let rows = st
            .query_map([known], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))
            .map_err(|e| sql_err("query: strings", e))?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| sql_err("query: strings", e))?;
        if rows.is_empty() {
            return Ok(());
        }
        let mut d = lock.write().unwrap();
        for (id, s) in rows {
            let i = id as usize;
            if d.by_id.len() <= i {
                d.by_id.resize(i + 1, None);
            }
            d.by_id[i] = Some(s.into());
        }
        Ok(())
    }
}

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
    let sess: Option<(i64, i64, i64)> = tx
        .prepare_cached("SELECT key, dropped, evicted_upto FROM session_keys WHERE name = ?1")
        .and_then(|mut st| st.query_row([&q.session_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).optional())
        .map_err(|e| sql_err("query: session", e))?;
    let mut result =
        QueryResult { events: Vec::new(), total_count: 0, has_more: false, pids: Vec::new(), last_event_id: None, events_dropped: false };
    let Some((key, dropped, evicted_upto)) = sess else {
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

    Dict::refresh(dict, &tx)?;
    let (func_ids, file_ids, thread_ids) = {
        let d = dict.read().unwrap();
        (
            func_pred.map(|p| d.matching(&p)),
            file_pred.map(|p| d.matching(&p)),
            thread_pred.map(|p| d.matching(&p)),
        )
    };
    if [&func_ids, &file_ids, &thread_ids].iter().any(|s| s.as_ref().is_some_and(Vec::is_empty)) {
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
    if let Some(pid) = q.pid {
        push("pid = ?", SqlValue::Integer(pid));
    }
    if let Some(after) = q.after_event_id {
        push("id > ?", SqlValue::Integer(after));
    }
    let exit = schema::kind_code(EventType::FunctionExit);
    if let Some(v) = &q.return_value_equals {
        push(
            &format!("event_kind = {exit} AND strobe_json_eq(return_value, ?)"),
            SqlValue::Text(v.to_string()),
        );
    }
    for (col, ids) in [("function_name_id", &func_ids), ("source_file_id", &file_ids), ("thread_name_id", &thread_ids)] {
        if let Some(ids) = ids {
            let list: Vec<String> = ids.iter().map(i64::to_string).collect();
            clauses.push(format!("{col} IN ({})", list.join(",")));
        }
    }
    match q.return_value_is_null {
        Some(true) => clauses.push(format!("event_kind = {exit} AND (return_value IS NULL OR return_value = 'null')")),
        Some(false) => clauses.push(format!("event_kind = {exit} AND return_value IS NOT NULL AND return_value <> 'null'")),
        None => {}
    }
    let where_sql = clauses.join(" AND ");

    // Access path: the timeline index (chronological, covers the cheap filters), or for a
    // cursor close to the end, the primary key from the cursor on.
    let walk_from_cursor = match q.after_event_id {
        Some(after) => {
            let max_id: i64 = tx
                .query_row("SELECT coalesce(max(id), 0) FROM events", [], |r| r.get(0))
                .map_err(|e| sql_err("query: max id", e))?;
            max_id.saturating_sub(after) <= CURSOR_SCAN_LIMIT
        }
        None => false,
    };
    let source = if walk_from_cursor {
        "events NOT INDEXED".to_string()
    } else {
        format!("events INDEXED BY {}", schema::TIMELINE_INDEX)
    };
    let order = if q.after_event_id.is_some() { "id" } else { "timestamp_ns, id" };

    result.total_count = tx
        .prepare_cached(&format!("SELECT count(*) FROM {source} WHERE {where_sql}"))
        .and_then(|mut st| st.query_row(rusqlite::params_from_iter(params.iter()), |r| r.get(0)))
        .map_err(|e| sql_err("query: count", e))?;

    if q.limit > 0 && (q.offset as i64) < result.total_count {
        let mut page_params = params.clone();
        page_params.push(SqlValue::Integer(q.limit as i64));
        page_params.push(SqlValue::Integer(q.offset as i64));
        let ids: Vec<i64> = {
            let mut st = tx
                .prepare_cached(&format!("SELECT id FROM {source} WHERE {where_sql} ORDER BY {order} LIMIT ? OFFSET ?"))
                .map_err(|e| sql_err("query: page", e))?;
            let rows = st
                .query_map(rusqlite::params_from_iter(page_params.iter()), |r| r.get(0))
                .map_err(|e| sql_err("query: page", e))?;
            rows.collect::<rusqlite::Result<_>>().map_err(|e| sql_err("query: page", e))?
        };
        result.events = fetch_events(&tx, dict, &q.session_id, &ids)?;
    }
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
    let rows = st.query_map([], |r| row_to_event(r, session_id, &d)).map_err(|e| sql_err("query: fetch", e))?;
    let mut events = rows.collect::<rusqlite::Result<Vec<Event>>>().map_err(|e| sql_err("query: fetch", e))?;
    events.sort_by_key(|e| (e.timestamp_ns, e.id));
    Ok(events)
}

/// Decode a row selected with `schema::EVENT_COLUMNS`.
fn row_to_event(r: &rusqlite::Row<'_>, session_id: &str, d: &Dict) -> rusqlite::Result<Event> {
    let kind: i64 = r.get(3)?;
    let event_type = schema::kind_from_code(kind).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(3, rusqlite::types::Type::Integer, format!("unknown event kind {kind}").into())
    })?;
    Ok(Event {
        id: r.get(0)?,
        session_id: session_id.to_string(),
        timestamp_ns: r.get(2)?,
        event_type,
        function_name: d.get(r.get(4)?),
        source_file: d.get(r.get(5)?),
        duration_ns: r.get(6)?,
        pid: r.get(7)?,
        thread_name: d.get(r.get(8)?),
        thread_id: r.get(9)?,
        parent_event_id: r.get(10)?,
        function_name_raw: d.get(r.get(11)?),
        line_number: r.get(12)?,
        sampled: r.get(13)?,
        return_value: r.get(14)?,
        arguments: r.get(15)?,
        text: r.get(16)?,
        watch_values: r.get(17)?,
        signal: r.get(18)?,
        fault_address: r.get(19)?,
        registers: r.get(20)?,
        backtrace: r.get(21)?,
        locals: r.get(22)?,
        breakpoint_id: r.get(23)?,
        logpoint_message: r.get(24)?,
    })
}

/// `returnValue.equals` on stored JSON text (see the module docs for the rule).
pub fn json_text_equals(stored: &str, target: &Value) -> bool {
    match serde_json::from_str::<Value>(stored) {
        Ok(v) => values_equal(&v, target),
        Err(_) => matches!(target, Value::String(s) if s == stored),
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Num {
    Int(i128),
    Float(f64),
}

fn num_of(n: &serde_json::Number) -> Option<Num> {
    if let Some(i) = n.as_i64() {
        Some(Num::Int(i as i128))
    } else if let Some(u) = n.as_u64() {
        Some(Num::Int(u as i128))
    } else {
        n.as_f64().map(Num::Float)
    }
}

fn num_of_text(s: &str) -> Option<Num> {
    let t = s.trim();
    let (neg, body) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t),
    };
    if let Some(hex) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        let v = u64::from_str_radix(hex, 16).ok()? as i128;
        return Some(Num::Int(if neg { -v } else { v }));
    }
    if let Ok(i) = t.parse::<i128>() {
        return Some(Num::Int(i));
    }
    t.parse::<f64>().ok().filter(|f| f.is_finite()).map(Num::Float)
}

fn nums_equal(a: Num, b: Num) -> bool {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => x == y,
        (Num::Float(x), Num::Float(y)) => x == y,
        (Num::Int(i), Num::Float(f)) | (Num::Float(f), Num::Int(i)) => f.fract() == 0.0 && (i as f64) == f,
    }
}

fn values_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (num_of(x), num_of(y)) {
            (Some(x), Some(y)) => nums_equal(x, y),
            _ => false,
        },
        (Value::Number(n), Value::String(s)) | (Value::String(s), Value::Number(n)) => {
            match (num_of(n), num_of_text(s)) {
                (Some(x), Some(y)) => nums_equal(x, y),
                _ => false,
            }
        }
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| values_equal(a, b)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| values_equal(v, w)))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_equality_rules() {
        assert!(json_text_equals("5", &json!(5)));
        assert!(json_text_equals("5.0", &json!(5)));
        assert!(json_text_equals("5", &json!("5")));
        assert!(json_text_equals("\"5\"", &json!(5)));
        assert!(json_text_equals("\"0xff\"", &json!(255)));
        assert!(json_text_equals("\"0xFF\"", &json!("0xFF")));
        assert!(!json_text_equals("\"0xff\"", &json!("0xFF")), "strings compare exactly");
        assert!(json_text_equals("-3", &json!(-3)));
        assert!(!json_text_equals("5.5", &json!(5)));
        assert!(!json_text_equals("6", &json!(5)));
        assert!(json_text_equals("null", &json!(null)));
        assert!(!json_text_equals("null", &json!(0)));
        assert!(json_text_equals("true", &json!(true)));
        assert!(!json_text_equals("true", &json!("true")));
        assert!(json_text_equals("{ \"a\": [1, 2.0] }", &json!({"a": [1, 2]})));
        assert!(!json_text_equals("{\"a\": 1, \"b\": 2}", &json!({"a": 1})));
        assert!(json_text_equals("not json", &json!("not json")));
        assert!(!json_text_equals("not json", &json!("other")));
        assert!(!json_text_equals("\"abc\"", &json!(5)));
        assert!(json_text_equals("18446744073709551615", &json!(u64::MAX)));
    }

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
