//! The settings table of `spec-current.md` ("Configuration"), plus retention: each key
//! with its type, default and allowed range. Validation lives here so that every layer
//! (global file, project file) is checked by the same rules.

use serde_json::Value;

/// The kind and range of a setting's value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// A whole number within `[min, max]`.
    Integer { min: i64, max: i64 },
    /// A number within `[min, max]`.
    Number { min: f64, max: f64 },
    Boolean,
}

/// One key of the settings table.
#[derive(Debug, Clone, Copy)]
pub struct KeySpec {
    pub key: &'static str,
    pub kind: Kind,
    pub default: DefaultValue,
    pub description: &'static str,
}

/// A default, kept `const`-friendly (a `serde_json::Value` is not).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DefaultValue {
    Int(i64),
    Num(f64),
    Bool(bool),
}

impl DefaultValue {
    pub fn to_json(self) -> Value {
        match self {
            DefaultValue::Int(i) => Value::from(i),
            DefaultValue::Num(f) => Value::from(f),
            DefaultValue::Bool(b) => Value::from(b),
        }
    }
}

pub const EVENTS_MAX_PER_SESSION: &str = "events.maxPerSession";
pub const TEST_STATUS_RETRY_MS: &str = "test.statusRetryMs";
pub const TRACING_COST_SHARE: &str = "tracing.costShare";
pub const VISION_ENABLED: &str = "vision.enabled";
pub const VISION_CONFIDENCE_THRESHOLD: &str = "vision.confidenceThreshold";
pub const VISION_IOU_MERGE_THRESHOLD: &str = "vision.iouMergeThreshold";
pub const VISION_SIDECAR_IDLE_TIMEOUT_SECONDS: &str = "vision.sidecarIdleTimeoutSeconds";
pub const RETENTION_MAX_AGE_DAYS: &str = "retention.maxAgeDays";
pub const RETENTION_MAX_TOTAL_BYTES: &str = "retention.maxTotalBytes";

const GB: i64 = 1024 * 1024 * 1024;

/// Every known key, in the order the spec lists them (retention last: it is ours).
pub const KEYS: &[KeySpec] = &[
    KeySpec {
        key: EVENTS_MAX_PER_SESSION,
        kind: Kind::Integer { min: 1, max: 10_000_000 },
        default: DefaultValue::Int(200_000),
        description: "Per-session event limit (FIFO: the oldest events are evicted)",
    },
    KeySpec {
        key: TEST_STATUS_RETRY_MS,
        kind: Kind::Integer { min: 500, max: 60_000 },
        default: DefaultValue::Int(5_000),
        description: "Base polling delay for test status",
    },
    KeySpec {
        key: TRACING_COST_SHARE,
        kind: Kind::Number { min: 0.0, max: 1.0 },
        default: DefaultValue::Num(0.5),
        description: "A function whose JS-path hooks take more than this share of its threads' time is sampled (0: never)",
    },
    KeySpec {
        key: VISION_ENABLED,
        kind: Kind::Boolean,
        default: DefaultValue::Bool(false),
        description: "Enable the AI vision pipeline for debug_ui",
    },
    KeySpec {
        key: VISION_CONFIDENCE_THRESHOLD,
        kind: Kind::Number { min: 0.0, max: 1.0 },
        default: DefaultValue::Num(0.3),
        description: "Minimum confidence for vision detections",
    },
    KeySpec {
        key: VISION_IOU_MERGE_THRESHOLD,
        kind: Kind::Number { min: 0.0, max: 1.0 },
        default: DefaultValue::Num(0.5),
        description: "IoU threshold for merging vision with AX",
    },
    KeySpec {
        key: VISION_SIDECAR_IDLE_TIMEOUT_SECONDS,
        kind: Kind::Integer { min: 30, max: 3_600 },
        default: DefaultValue::Int(300),
        description: "Auto-shutdown of the vision sidecar after idle seconds",
    },
    KeySpec {
        key: RETENTION_MAX_AGE_DAYS,
        kind: Kind::Integer { min: 1, max: 3_650 },
        default: DefaultValue::Int(7),
        description: "Retained (stopped or exited) sessions older than this are purged",
    },
    KeySpec {
        key: RETENTION_MAX_TOTAL_BYTES,
        kind: Kind::Integer { min: 1024 * 1024, max: 1024 * GB },
        default: DefaultValue::Int(10 * GB),
        description: "Cap on the event database size; the oldest retained sessions are purged first",
    },
];

pub fn spec(key: &str) -> Option<&'static KeySpec> {
    KEYS.iter().find(|k| k.key == key)
}

/// Check one value against its key's type and range; `Err` says why it was refused.
pub fn validate(spec: &KeySpec, v: &Value) -> Result<Value, String> {
    match spec.kind {
        Kind::Boolean => v.as_bool().map(Value::from).ok_or_else(|| format!("must be true or false, got {v}")),
        Kind::Integer { min, max } => {
            // 500000.0 is a whole number too; 1.5 is not.
            let n = v
                .as_i64()
                .or_else(|| v.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.0e18).map(|f| f as i64))
                .ok_or_else(|| format!("must be a whole number between {min} and {max}, got {v}"))?;
            if n < min || n > max {
                return Err(format!("must be between {min} and {max}, got {n}"));
            }
            Ok(Value::from(n))
        }
        Kind::Number { min, max } => {
            let n = v.as_f64().ok_or_else(|| format!("must be a number between {min} and {max}, got {v}"))?;
            if !(min..=max).contains(&n) {
                return Err(format!("must be between {min} and {max}, got {n}"));
            }
            Ok(Value::from(n))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ranges_are_enforced() {
        let s = spec(EVENTS_MAX_PER_SESSION).unwrap();
        assert_eq!(validate(s, &json!(500_000)).unwrap(), json!(500_000));
        assert_eq!(validate(s, &json!(500_000.0)).unwrap(), json!(500_000));
        assert!(validate(s, &json!(0)).is_err());
        assert!(validate(s, &json!(10_000_001)).is_err());
        assert!(validate(s, &json!(1.5)).is_err());
        assert!(validate(s, &json!("500000")).is_err());
        let t = spec(VISION_CONFIDENCE_THRESHOLD).unwrap();
        assert!(validate(t, &json!(1.01)).is_err());
        assert_eq!(validate(t, &json!(0)).unwrap(), json!(0.0));
        assert!(validate(spec(VISION_ENABLED).unwrap(), &json!(1)).is_err());
    }
}
