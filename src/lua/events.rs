//! The event-query primitive behind `session:query{}`: Lua/MCP arguments to an
//! `EventQuery`, and results back to Lua in the spec's verbose wire shape.

use mlua::{Lua, Value};
use serde::Deserialize;
use serde_json::{json, Map};

use super::lua_err;
use super::session::args;
use crate::error::StrobeError;
use crate::store::event::{Event, EventType};
use crate::store::{EventQuery, QueryResult, TextFilter};

pub const DEFAULT_LIMIT: usize = 50;
pub const MAX_LIMIT: usize = 500;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct TextArgs {
    equals: Option<String>,
    contains: Option<String>,
    matches: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ReturnValueArgs {
    equals: Option<serde_json::Value>,
    is_null: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ContainsArgs {
    contains: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct QueryArgs {
    session_id: Option<String>,
    event_type: Option<String>,
    function: Option<TextArgs>,
    source_file: Option<TextArgs>,
    return_value: Option<ReturnValueArgs>,
    thread_name: Option<ContainsArgs>,
    time_from: Option<serde_json::Value>,
    time_to: Option<serde_json::Value>,
    min_duration_ns: Option<i64>,
    pid: Option<i64>,
    limit: Option<i64>,
    offset: Option<i64>,
    #[allow(dead_code)] // accepted here; the tool script shapes the output
    verbose: Option<bool>,
    after_event_id: Option<serde_json::Value>,
}

fn bad(msg: String) -> mlua::Error {
    lua_err(StrobeError::validation(msg))
}

/// `-5s`, `-1m`, `-500ms`, `-2us`, `-10ns` → ns before `now`; a number is absolute ns.
pub fn parse_time(v: &serde_json::Value, now_ns: i64, field: &str) -> Result<i64, StrobeError> {
    if let Some(n) = v.as_i64() {
        return Ok(n);
    }
    // 1.5e9 from a JSON client is still absolute ns; so is "1500000000".
    if let Some(f) = v.as_f64().filter(|f| f.is_finite()) {
        return Ok(f as i64);
    }
    if let Some(n) = v.as_str().and_then(|s| s.trim().parse::<i64>().ok()) {
        return Ok(n);
    }
    let Some(s) = v.as_str() else {
        return Err(StrobeError::validation(format!("{field} must be a number of ns or a relative time like \"-5s\"")));
    };
    let re = regex::Regex::new(r"^-(\d+(?:\.\d+)?)(ns|us|ms|s|m|h)$").unwrap();
    let caps = re.captures(s.trim()).ok_or_else(|| {
        StrobeError::validation(format!(
            "{field} '{s}' is not a time. Use absolute ns (a number) or a relative time such as \"-5s\", \"-1m\", \"-500ms\"."
        ))
    })?;
    let n: f64 = caps[1].parse().unwrap_or(0.0);
    let unit = match &caps[2] {
        "ns" => 1.0,
        "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" => 60e9,
        _ => 3600e9,
    };
    Ok(now_ns - (n * unit) as i64)
}

fn text_filter(t: Option<TextArgs>) -> TextFilter {
    let t = t.unwrap_or_default();
    TextFilter { equals: t.equals, contains: t.contains, matches: t.matches }
}

/// Parse query arguments (the same names as the MCP tool) for session `id`.
pub fn query_from_lua(lua: &Lua, engine: &crate::engine::Engine, id: &str, v: Value) -> mlua::Result<EventQuery> {
    let a: QueryArgs = args(lua, v, "query")?;
    let _ = a.session_id;
    let event_type = match a.event_type.as_deref() {
        None => None,
        Some(t) => Some(EventType::parse(t).ok_or_else(|| {
            let all: Vec<&str> = EventType::ALL.iter().map(|t| t.as_str()).collect();
            bad(format!("eventType '{t}' is not one of: {}", all.join(", ")))
        })?),
    };
    let limit = a.limit.unwrap_or(DEFAULT_LIMIT as i64);
    if limit < 1 || limit as usize > MAX_LIMIT {
        return Err(bad(format!("limit must be between 1 and {MAX_LIMIT} (got {limit}). Page with offset or afterEventId.")));
    }
    let offset = a.offset.unwrap_or(0);
    if offset < 0 {
        return Err(bad(format!("offset must be 0 or more (got {offset})")));
    }
    let now = engine.session_now_ns(id);
    let time_from_ns = a.time_from.as_ref().map(|t| parse_time(t, now, "timeFrom")).transpose().map_err(lua_err)?;
    let time_to_ns = a.time_to.as_ref().map(|t| parse_time(t, now, "timeTo")).transpose().map_err(lua_err)?;
    let after_event_id = match &a.after_event_id {
        None => None,
        Some(v) => Some(parse_event_id(v).ok_or_else(|| {
            bad(format!("afterEventId must be an event id number (lastEventId of a previous query), got {v}"))
        })?),
    };
    let rv = a.return_value.unwrap_or_default();
    Ok(EventQuery {
        session_id: id.to_string(),
        event_type,
        function: text_filter(a.function),
        source_file: text_filter(a.source_file),
        return_value_equals: rv.equals,
        return_value_is_null: rv.is_null,
        thread_name_contains: a.thread_name.and_then(|t| t.contains),
        time_from_ns,
        time_to_ns,
        min_duration_ns: a.min_duration_ns,
        pid: a.pid,
        after_event_id,
        limit: limit as usize,
        offset: offset as usize,
    })
}

/// Accept `42` or `"session-id-42"` (the string form events carry).
fn parse_event_id(v: &serde_json::Value) -> Option<i64> {
    if let Some(n) = v.as_i64() {
        return Some(n);
    }
    let s = v.as_str()?;
    s.rsplit('-').next()?.parse().ok()
}

fn parse_json_text(t: &Option<String>) -> Option<serde_json::Value> {
    t.as_ref().map(|s| serde_json::from_str(s).unwrap_or_else(|_| serde_json::Value::String(s.clone())))
}

/// The verbose wire shape of one event; `debug_query.lua` narrows it for summaries.
pub fn event_json(session_id: &str, e: &Event) -> serde_json::Value {
    let mut m = Map::new();
    let mut put = |k: &str, v: serde_json::Value| {
        if !v.is_null() {
            m.insert(k.to_string(), v);
        }
    };
    put("id", json!(format!("{session_id}-{}", e.id)));
    put("eventId", json!(e.id));
    put("timestampNs", json!(e.timestamp_ns));
    put("eventType", json!(e.event_type.as_str()));
    put("function", json!(e.function_name));
    put("functionRaw", json!(e.function_name_raw));
    put("sourceFile", json!(e.source_file));
    put("line", json!(e.line_number));
    put("durationNs", json!(e.duration_ns));
    put("threadId", json!(e.thread_id));
    put("threadName", json!(e.thread_name));
    put("pid", json!(e.pid));
    put("parentEventId", json!(e.parent_event_id.map(|p| format!("{session_id}-{p}"))));
    put("arguments", parse_json_text(&e.arguments).unwrap_or(serde_json::Value::Null));
    put("returnValue", parse_json_text(&e.return_value).unwrap_or(serde_json::Value::Null));
    put("text", json!(e.text));
    put("watchValues", parse_json_text(&e.watch_values).unwrap_or(serde_json::Value::Null));
    put("sampled", json!(e.sampled));
    put("unwound", json!(e.unwound));
    put("signal", json!(e.signal));
    put("faultAddress", json!(e.fault_address));
    put("registers", parse_json_text(&e.registers).unwrap_or(serde_json::Value::Null));
    put("backtrace", parse_json_text(&e.backtrace).unwrap_or(serde_json::Value::Null));
    put("locals", parse_json_text(&e.locals).unwrap_or(serde_json::Value::Null));
    put("breakpointId", json!(e.breakpoint_id));
    put("logpointMessage", json!(e.logpoint_message));
    serde_json::Value::Object(m)
}

pub fn query_result_to_lua(lua: &Lua, session_id: &str, r: &QueryResult) -> mlua::Result<Value> {
    let events: Vec<serde_json::Value> = r.events.iter().map(|e| event_json(session_id, e)).collect();
    let mut out = json!({
        "events": events,
        "totalCount": r.total_count,
        "hasMore": r.has_more,
        "eventsDropped": r.events_dropped,
    });
    if let Some(id) = r.last_event_id {
        out["lastEventId"] = json!(id);
    }
    if r.pids.len() > 1 {
        out["pids"] = json!(r.pids);
    }
    super::convert::to_lua_keep_null(lua, &out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_times() {
        let now = 10_000_000_000;
        assert_eq!(parse_time(&json!("-5s"), now, "t").unwrap(), 5_000_000_000);
        assert_eq!(parse_time(&json!("-500ms"), now, "t").unwrap(), 9_500_000_000);
        assert_eq!(parse_time(&json!("-1m"), now, "t").unwrap(), now - 60_000_000_000);
        assert_eq!(parse_time(&json!(123), now, "t").unwrap(), 123);
        assert!(parse_time(&json!("5s"), now, "t").is_err());
        assert!(parse_time(&json!("-5 parsecs"), now, "t").is_err());
    }

    #[test]
    fn event_ids_in_both_forms() {
        assert_eq!(parse_event_id(&json!(42)), Some(42));
        assert_eq!(parse_event_id(&json!("app-2026-01-01-10h00-42")), Some(42));
        assert_eq!(parse_event_id(&json!("x")), None);
    }
}
