//! Checks tool arguments against the JSON Schema a tool script declares, before its
//! handler runs. A practical subset: type, required, properties,
//! additionalProperties, items, enum, minimum/maximum, minLength, minItems/maxItems.

use serde_json::Value;

/// Returns every problem found, each naming the path (`args.add[2]`) and what was expected.
pub fn validate(schema: &Value, value: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    check(schema, value, "args", &mut errors);
    errors
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_matches(expected: &str, v: &Value) -> bool {
    match expected {
        "number" => v.is_number(),
        // 5.0 is refused: the tools deserialize integers strictly, so say so here, by field.
        "integer" => v.is_i64() || v.is_u64(),
        other => type_name(v) == other,
    }
}

fn check(schema: &Value, v: &Value, path: &str, errors: &mut Vec<String>) {
    let Some(s) = schema.as_object() else { return };
    if let Some(t) = s.get("type") {
        let ok = match t {
            Value::String(t) => type_matches(t, v),
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).any(|t| type_matches(t, v)),
            _ => true,
        };
        if !ok {
            // A number is shown as written: "got number 5.0" says why 5.0 is not an integer.
            let got = if v.is_number() { format!("number {v}") } else { type_name(v).to_string() };
            errors.push(format!("{path} must be {}, got {got}", describe_type(t)));
            return;
        }
    }
    if let Some(options) = s.get("enum").and_then(Value::as_array) {
        if !options.contains(v) {
            let list: Vec<String> = options.iter().map(|o| o.to_string()).collect();
            errors.push(format!("{path} must be one of {}, got {v}", list.join(", ")));
        }
    }
    if let Some(n) = v.as_f64() {
        if let Some(min) = s.get("minimum").and_then(Value::as_f64) {
            if n < min {
                errors.push(format!("{path} must be >= {min}, got {n}"));
            }
        }
        if let Some(max) = s.get("maximum").and_then(Value::as_f64) {
            if n > max {
                errors.push(format!("{path} must be <= {max}, got {n}"));
            }
        }
    }
    if let (Some(text), Some(min)) = (v.as_str(), s.get("minLength").and_then(Value::as_u64)) {
        if (text.chars().count() as u64) < min {
            errors.push(format!("{path} must have at least {min} characters"));
        }
    }
    if let Some(items) = v.as_array() {
        if let Some(min) = s.get("minItems").and_then(Value::as_u64) {
            if (items.len() as u64) < min {
                errors.push(format!("{path} must have at least {min} items"));
            }
        }
        if let Some(max) = s.get("maxItems").and_then(Value::as_u64) {
            if items.len() as u64 > max {
                errors.push(format!("{path} must have at most {max} items, got {}", items.len()));
            }
        }
        if let Some(item_schema) = s.get("items") {
            for (i, item) in items.iter().enumerate() {
                check(item_schema, item, &format!("{path}[{i}]"), errors);
            }
        }
    }
    if let Some(obj) = v.as_object() {
        let props = s.get("properties").and_then(Value::as_object);
        if let Some(required) = s.get("required").and_then(Value::as_array) {
            for r in required.iter().filter_map(Value::as_str) {
                if !obj.contains_key(r) {
                    errors.push(format!("{path}.{r} is required"));
                }
            }
        }
        for (k, val) in obj {
            match props.and_then(|p| p.get(k)) {
                Some(ps) => check(ps, val, &format!("{path}.{k}"), errors),
                None => match s.get("additionalProperties") {
                    Some(Value::Bool(false)) => {
                        let known: Vec<&str> = props.map(|p| p.keys().map(String::as_str).collect()).unwrap_or_default();
                        errors.push(format!("{path}.{k} is not a known field (known: {})", known.join(", ")));
                    }
                    Some(extra @ Value::Object(_)) => check(extra, val, &format!("{path}.{k}"), errors),
                    _ => {}
                },
            }
        }
    }
}

fn describe_type(t: &Value) -> String {
    match t {
        Value::String(s) => format!("a{} {s}", if s.starts_with(['a', 'e', 'i', 'o']) { "n" } else { "" }),
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" or "),
        _ => "valid".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "required": ["sessionId"],
            "additionalProperties": false,
            "properties": {
                "sessionId": {"type": "string", "minLength": 1},
                "limit": {"type": "integer", "minimum": 1, "maximum": 500},
                "eventType": {"type": "string", "enum": ["stdout", "stderr"]},
                "add": {"type": "array", "items": {"type": "string"}}
            }
        })
    }

    #[test]
    fn accepts_valid_input() {
        assert!(validate(&schema(), &json!({"sessionId": "a", "limit": 5, "add": ["x"]})).is_empty());
    }

    #[test]
    fn reports_each_problem_with_its_path() {
        let errs = validate(&schema(), &json!({"limit": 900, "eventType": "x", "add": [1], "bogus": true}));
        let all = errs.join("\n");
        assert!(all.contains("args.sessionId is required"), "{all}");
        assert!(all.contains("args.limit must be <= 500"), "{all}");
        assert!(all.contains("args.eventType must be one of"), "{all}");
        assert!(all.contains("args.add[0] must be a string"), "{all}");
        assert!(all.contains("args.bogus is not a known field"), "{all}");
        assert_eq!(errs.len(), 5);
    }

    #[test]
    fn wrong_top_level_type() {
        assert_eq!(validate(&schema(), &json!([1])), vec!["args must be an object, got array".to_string()]);
    }

    #[test]
    fn integer_fields_take_integers_only() {
        let errs = validate(&schema(), &json!({"limit": 5.0}));
        assert!(errs.iter().any(|e| e.contains("limit") && e.contains("integer") && e.contains("5.0")), "{errs:?}");
    }
}
