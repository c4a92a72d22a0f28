//! Decoded container entries → JSON. A map is an object keyed by each key's text when every
//! key is a string or number and no key repeats (multimap), else an array of `[key, value]`
//! pairs; a set is an array. Either ends with `"<N more>"` when `total` exceeds what is shown.

use std::collections::HashSet;

use serde_json::{Map, Value};

use crate::eval::render::more;

pub(super) fn map(entries: Vec<(Value, Value)>, total: u64) -> Value {
    let shown = entries.len() as u64;
    let mut seen = HashSet::new();
    let keyable = entries.iter().all(|(k, _)| key_text(k).is_some_and(|t| seen.insert(t)));
    if keyable {
        let mut out = Map::new();
        for (k, v) in entries {
            out.insert(key_text(&k).unwrap_or_default(), v);
        }
        if total > shown {
            out.insert(format!("<{} more>", total - shown), Value::String("…".into()));
        }
        return Value::Object(out);
    }
    let mut out: Vec<Value> = entries.into_iter().map(|(k, v)| Value::Array(vec![k, v])).collect();
    more(&mut out, total, shown);
    Value::Array(out)
}

pub(super) fn set(mut items: Vec<Value>, total: u64) -> Value {
    let shown = items.len() as u64;
    more(&mut items, total, shown);
    Value::Array(items)
}

fn key_text(k: &Value) -> Option<String> {
    match k {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}
