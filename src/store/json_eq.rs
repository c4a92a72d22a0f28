//! `returnValue.equals`: equality of JSON values as `debug_query` means it.
//!
//! Numbers compare numerically (`5 == 5.0`); a number equals a string holding the same
//! number in decimal or `0x` hex (`5 == "5"`, `255 == "0xff"`), because pointers arrive as
//! hex strings and callers often quote numbers; a target string holding a decimal number
//! (`"40"`) equals a stored number or numeric string of the same value (`40`, `"0x28"`); arrays and objects compare element-wise
//! with the same rule; everything else compares exactly. A stored value that is not JSON
//! equals only the identical string.

use serde_json::Value;

/// `returnValue.equals` on stored JSON text (see the module docs for the rule).
pub fn json_text_equals(stored: &str, target: &Value) -> bool {
    if let Some(answer) = scalar_fast_path(stored, target) {
        return answer;
    }
    match serde_json::from_str::<Value>(stored) {
        Ok(v) => values_equal(&v, target),
        Err(_) => matches!(target, Value::String(s) if s == stored),
    }
}

/// The common cases without building a `Value`: a stored number or escape-free string
/// against a number or string target. `None`: decide the slow way.
fn scalar_fast_path(stored: &str, target: &Value) -> Option<bool> {
    let t = stored.trim();
    let quoted = t.len() >= 2 && t.starts_with('"') && t.ends_with('"');
    let inner = &t[1..t.len().saturating_sub(1).max(1)];
    if quoted && inner.contains(['"', '\\']) {
        return None;
    }
    let bare_number = !quoted && t.starts_with(|c: char| c == '-' || c.is_ascii_digit());
    match target {
        Value::Number(n) => {
            let n = num_of(n)?;
            if quoted {
                Some(num_of_text(inner).is_some_and(|x| nums_equal(x, n)))
            } else if bare_number {
                // Only if it really is a JSON number (no hex, no trailing garbage).
                let x = serde_json::from_str::<serde_json::Number>(t).ok().and_then(|x| num_of(&x))?;
                Some(nums_equal(x, n))
            } else {
                None
            }
        }
        Value::String(s) => {
            if quoted {
                Some(inner == s || decimal_target_equals(inner, s))
            } else if bare_number {
                let x = serde_json::from_str::<serde_json::Number>(t).ok().and_then(|x| num_of(&x))?;
                Some(num_of_text(s).is_some_and(|y| nums_equal(x, y)))
            } else {
                None
            }
        }
        _ => None,
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

/// A target string holding a decimal number (`"40"`, `"-3"`, `"2.5"`) equals a stored
/// string holding the same number in any notation (`"0x28"`: a pointer-sized word).
fn decimal_target_equals(stored: &str, target: &str) -> bool {
    let t = target.trim();
    let decimal = !t.is_empty() && !t.contains(['x', 'X']) && t.parse::<f64>().is_ok();
    decimal && matches!((num_of_text(stored), num_of_text(t)), (Some(x), Some(y)) if nums_equal(x, y))
}

fn nums_equal(a: Num, b: Num) -> bool {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => x == y,
        (Num::Float(x), Num::Float(y)) => x == y,
        (Num::Int(i), Num::Float(f)) | (Num::Float(f), Num::Int(i)) => f.fract() == 0.0 && (i as f64) == f,
    }
}

pub(crate) fn values_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (num_of(x), num_of(y)) {
            (Some(x), Some(y)) => nums_equal(x, y),
            _ => false,
        },
        (Value::String(x), Value::String(y)) => x == y || decimal_target_equals(x, y),
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
        assert!(json_text_equals("\"0x28\"", &json!("40")), "a decimal target string compares as a number");
        assert!(json_text_equals("[\"0x28\"]", &json!(["40"])));
        assert!(!json_text_equals("\"0x28\"", &json!("41")));
        assert!(!json_text_equals("\"abc\"", &json!("40")));
        assert!(json_text_equals("40", &json!("40")));
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
        assert!(json_text_equals(" 7 ", &json!(7)));
        assert!(!json_text_equals("0x10", &json!(16)), "bare hex is not JSON");
        assert!(json_text_equals("0x10", &json!("0x10")), "but equals the identical string");
        assert!(!json_text_equals("\"a\\\"b\"", &json!("a")));
        assert!(json_text_equals("\"a\\\"b\"", &json!("a\"b")), "escaped strings take the slow path");
        assert!(!json_text_equals("1e2", &json!("abc")));
        assert!(json_text_equals("1e2", &json!(100)));
    }
}
