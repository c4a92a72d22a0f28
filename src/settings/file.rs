//! Reading one settings layer: a JSON object of dotted keys (`{"events.maxPerSession": 1}`);
//! nested objects (`{"events": {"maxPerSession": 1}}`) are accepted and flattened.

use std::path::Path;

use serde_json::{Map, Value};

/// The key/value pairs of the file at `path`: `Ok(None)` when it does not exist, `Err`
/// (a warning for the caller) when it cannot be read or is not a JSON object.
pub fn read_layer(path: &Path) -> Result<Option<Vec<(String, Value)>>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: cannot be read ({e}); its settings are ignored", path.display())),
    };
    if text.trim().is_empty() {
        return Ok(Some(Vec::new()));
    }
    let v: Value = serde_json::from_str(&text).map_err(|e| {
        format!("{}: invalid JSON ({e}); its settings are ignored. Fix the file or remove it.", path.display())
    })?;
    let Value::Object(map) = v else {
        return Err(format!(
            "{}: must be a JSON object such as {{\"events.maxPerSession\": 500000}}; its settings are ignored",
            path.display()
        ));
    };
    let mut out = Vec::new();
    flatten("", map, &mut out);
    Ok(Some(out))
}

fn flatten(prefix: &str, map: Map<String, Value>, out: &mut Vec<(String, Value)>) {
    for (k, v) in map {
        let key = if prefix.is_empty() { k } else { format!("{prefix}.{k}") };
        match v {
            // A dotted key whose value is an object is a nesting level, not a value:
            // no setting takes an object.
            Value::Object(inner) => flatten(&key, inner, out),
            v => out.push((key, v)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nested_and_dotted_forms_agree() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.json");
        std::fs::write(&p, r#"{"events": {"maxPerSession": 7}, "vision.enabled": true}"#).unwrap();
        let mut kv = read_layer(&p).unwrap().unwrap();
        kv.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(kv, vec![("events.maxPerSession".into(), json!(7)), ("vision.enabled".into(), json!(true))]);
        assert_eq!(read_layer(&dir.path().join("missing.json")).unwrap(), None);
        std::fs::write(&p, "{not json").unwrap();
        assert!(read_layer(&p).unwrap_err().contains("invalid JSON"));
        std::fs::write(&p, "[1]").unwrap();
        assert!(read_layer(&p).unwrap_err().contains("JSON object"));
    }
}
