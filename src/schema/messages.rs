//! A schema violation as a sentence an LLM can act on: the place (`args.add[0]`), what
//! is expected there, and what was sent (shortened).

use jsonschema::error::{ValidationErrorKind, ValidationError};
use jsonschema::paths::LocationSegment;
use serde_json::Value;

/// Longest rendering of a sent value inside a message.
const MAX_SHOWN: usize = 80;

/// One or more messages for one validation error.
pub fn describe(err: &ValidationError<'_>, schema: &Value) -> Vec<String> {
    let path = place(err);
    let sent = err.instance();
    let at = |keyword_path: &str| schema.pointer(keyword_path).cloned().unwrap_or(Value::Null);
    let one = |m: String| vec![m];
    match err.kind() {
        ValidationErrorKind::Type { .. } => {
            let expected = at(err.schema_path().as_str());
            one(format!("{path} must be {}, got {}", describe_type(&expected), type_of(sent)))
        }
        ValidationErrorKind::Custom { message, .. } => one(format!("{path} {message}")),
        ValidationErrorKind::Required { property } => {
            one(format!("{path}.{} is required", property.as_str().unwrap_or_default()))
        }
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            // The keyword's parent schema lists the known fields.
            let parent = err.schema_path().as_str().rsplit_once('/').map(|(p, _)| p).unwrap_or("");
            let known = at(&format!("{parent}/properties"));
            let known: Vec<&str> = known.as_object().map(|m| m.keys().map(String::as_str).collect()).unwrap_or_default();
            unexpected
                .iter()
                .map(|k| format!("{path}{} is not a known field (known: {})", field(k), known.join(", ")))
                .collect()
        }
        ValidationErrorKind::Enum { options } => {
            let list: Vec<String> = options.as_array().map(|o| o.iter().map(short).collect()).unwrap_or_default();
            one(format!("{path} must be one of {}, got {}", list.join(", "), short(sent)))
        }
        ValidationErrorKind::Constant { expected_value } => one(format!("{path} must be {}", short(expected_value))),
        ValidationErrorKind::Minimum { limit } => one(format!("{path} must be >= {limit}, got {}", short(sent))),
        ValidationErrorKind::Maximum { limit } => one(format!("{path} must be <= {limit}, got {}", short(sent))),
        ValidationErrorKind::ExclusiveMinimum { limit } => one(format!("{path} must be > {limit}, got {}", short(sent))),
        ValidationErrorKind::ExclusiveMaximum { limit } => one(format!("{path} must be < {limit}, got {}", short(sent))),
        ValidationErrorKind::MultipleOf { multiple_of } => {
            one(format!("{path} must be a multiple of {multiple_of}, got {}", short(sent)))
        }
        ValidationErrorKind::MinLength { limit } => one(format!("{path} must have at least {limit} characters")),
        ValidationErrorKind::MaxLength { limit } => one(format!(
            "{path} must have at most {limit} characters, got {}",
            sent.as_str().map(|s| s.chars().count()).unwrap_or(0)
        )),
        ValidationErrorKind::Pattern { pattern } => {
            one(format!("{path} must match the regular expression {pattern}, got {}", short(sent)))
        }
        ValidationErrorKind::MinItems { limit } => one(format!("{path} must have at least {limit} items")),
        ValidationErrorKind::MaxItems { limit } => one(format!(
            "{path} must have at most {limit} items, got {}",
            sent.as_array().map(Vec::len).unwrap_or(0)
        )),
        ValidationErrorKind::UniqueItems => one(format!("{path} must not repeat an item, got {}", short(sent))),
        ValidationErrorKind::MinProperties { limit } => one(format!("{path} must have at least {limit} fields")),
        ValidationErrorKind::MaxProperties { limit } => one(format!("{path} must have at most {limit} fields")),
        ValidationErrorKind::OneOfNotValid { context } | ValidationErrorKind::AnyOf { context } => {
            // Each alternative's first problem says what would have made it fit.
            let why: Vec<String> = context
                .iter()
                .enumerate()
                .filter_map(|(i, errs)| errs.first().map(|e| format!("({}) {}", i + 1, describe(e, schema).join("; "))))
                .collect();
            one(format!("{path} matches none of the {} allowed forms: {}", context.len(), why.join(" or ")))
        }
        ValidationErrorKind::OneOfMultipleValid { .. } => {
            one(format!("{path} matches more than one of the allowed forms (oneOf): make it fit exactly one"))
        }
        ValidationErrorKind::Not { .. } => one(format!("{path} must not match the excluded form, got {}", short(sent))),
        ValidationErrorKind::FalseSchema => one(format!("{path} is not allowed here")),
        _ => one(format!("{path}: {err}")),
    }
}

/// `args`, `args.add[2]`, `args.env["A-B"]`.
fn place(err: &ValidationError<'_>) -> String {
    let mut out = String::from("args");
    for seg in err.instance_path().segments() {
        match seg {
            LocationSegment::Property(p) => out.push_str(&field(&p)),
            LocationSegment::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// `.name` for plain names, `["odd name"]` otherwise.
fn field(name: &str) -> String {
    let plain = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain { format!(".{name}") } else { format!("[{}]", Value::from(name)) }
}

fn type_of(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(_) => "boolean".into(),
        // A number is shown as written: "got number 5.5" says why it is not an integer.
        Value::Number(_) => format!("number {}", short(v)),
        Value::String(_) => "string".into(),
        Value::Array(_) => "array".into(),
        Value::Object(_) => "object".into(),
    }
}

fn describe_type(t: &Value) -> String {
    let article = |s: &str| format!("a{} {s}", if s.starts_with(['a', 'e', 'i', 'o']) { "n" } else { "" });
    match t {
        Value::String(s) => article(s),
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" or "),
        _ => "of another type".into(),
    }
}

/// A value as JSON, cut to a readable length.
fn short(v: &Value) -> String {
    let text = v.to_string();
    if text.chars().count() <= MAX_SHOWN {
        return text;
    }
    let cut: String = text.chars().take(MAX_SHOWN).collect();
    format!("{cut}... ({} characters)", text.chars().count())
}
