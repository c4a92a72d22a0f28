//! Tool arguments checked against the JSON Schema a tool script declares, before its
//! handler runs. A real JSON Schema implementation (the `jsonschema` crate, draft
//! 2020-12 unless the schema names another with `$schema`): every keyword counts.
//! Schemas are compiled once when the script loads; a schema that is not valid JSON
//! Schema refuses the script. Errors are rewritten for an LLM in `schema/messages.rs`.

mod messages;

use std::sync::Arc;

use jsonschema::{Keyword, ValidationError, Validator};
use serde_json::{Map, Value};

/// Problems reported per call: a flood of errors says less than the first few.
const MAX_REPORTED: usize = 8;

/// Marks a schema place that says `integer`: whole floats (`5.0`) are refused there,
/// because the tools read integers strictly (JSON Schema itself accepts 5.0).
const STRICT_INTEGER: &str = "x-strobe-strict-integer";

/// A compiled schema, cheap to clone.
#[derive(Clone)]
pub struct CompiledSchema {
    validator: Arc<Validator>,
    /// The schema as compiled (with the strict-integer marks): error paths point into it.
    schema: Arc<Value>,
}

impl std::fmt::Debug for CompiledSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledSchema").field("schema", &self.schema).finish()
    }
}

impl CompiledSchema {
    /// Compile `schema`; the error says what is wrong with it (for the script's author).
    pub fn compile(schema: &Value) -> Result<CompiledSchema, String> {
        let marked = mark_integers(schema);
        let validator = jsonschema::options()
            .with_keyword(STRICT_INTEGER, |_: &Map<String, Value>, _: &Value, _| Ok(Box::new(StrictInteger) as Box<_>))
            .build(&marked)
            .map_err(|e| format!("not a valid JSON Schema: {e} (at {})", pointer_or_root(e.instance_path().as_str())))?;
        Ok(CompiledSchema { validator: Arc::new(validator), schema: Arc::new(marked) })
    }

    /// Every problem with `value`, each naming its place (`args.add[2]`) and what to send.
    pub fn check(&self, value: &Value) -> Vec<String> {
        let mut out = Vec::new();
        let mut total = 0;
        for err in self.validator.iter_errors(value) {
            for msg in messages::describe(&err, &self.schema) {
                total += 1;
                if out.len() < MAX_REPORTED {
                    out.push(msg);
                }
            }
        }
        if total > out.len() {
            out.push(format!("and {} more problems", total - out.len()));
        }
        out
    }
}

fn pointer_or_root(p: &str) -> &str {
    if p.is_empty() { "the root" } else { p }
}

/// A copy of `schema` where each subschema whose `type` allows `integer` (but not
/// `number`) carries the strict-integer keyword.
fn mark_integers(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => {
            let mut out: Map<String, Value> = map.iter().map(|(k, v)| (k.clone(), mark_integers_in(k, v))).collect();
            let says = |t: &str| match map.get("type") {
                Some(Value::String(s)) => s == t,
                Some(Value::Array(ts)) => ts.iter().any(|x| x == t),
                _ => false,
            };
            if says("integer") && !says("number") {
                out.insert(STRICT_INTEGER.into(), Value::Bool(true));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(mark_integers).collect()),
        other => other.clone(),
    }
}

/// Values that hold data, not schemas, are copied as they are.
fn mark_integers_in(key: &str, v: &Value) -> Value {
    match key {
        "enum" | "const" | "default" | "examples" | "required" => v.clone(),
        _ => mark_integers(v),
    }
}

struct StrictInteger;

impl<'i> Keyword<'i> for StrictInteger {
    fn validate(&self, instance: &'i Value) -> Result<(), ValidationError<'i>> {
        if self.is_valid(instance) {
            return Ok(());
        }
        Err(ValidationError::custom(format!("must be an integer, got number {instance}")))
    }

    /// Only whole floats: other non-integers fail `type` already.
    fn is_valid(&self, instance: &'i Value) -> bool {
        !(instance.is_f64() && instance.as_f64().is_some_and(|f| f.fract() == 0.0))
    }
}

#[cfg(test)]
mod tests;
