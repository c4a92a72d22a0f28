//! Settings: built-in defaults < `$STROBE_HOME/settings.json` < `<projectRoot>/.strobe/settings.json`.
//!
//! Read from disk on every call (no caching: an edit takes effect on the next tool call).
//! A value that is invalid (wrong type, out of range) or a file that is not valid JSON is
//! ignored with a warning, so the layer below — ultimately the built-in default — stays
//! in effect; unknown keys are reported too (they are usually typos).

mod file;
pub mod keys;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

pub use keys::{KeySpec, Kind, KEYS};

/// Settings file name in `$STROBE_HOME` and in `<projectRoot>/.strobe/`.
pub const FILE_NAME: &str = "settings.json";

/// The effective settings and how they came about.
#[derive(Debug, Clone)]
pub struct Settings {
    values: BTreeMap<&'static str, Value>,
    /// Where each value came from: "default" or a file path.
    sources: BTreeMap<&'static str, String>,
    /// Human-readable problems met while reading the layers (for tool responses).
    pub warnings: Vec<String>,
}

impl Settings {
    /// Built-in defaults only.
    pub fn defaults() -> Settings {
        let values = KEYS.iter().map(|k| (k.key, k.default.to_json())).collect();
        let sources = KEYS.iter().map(|k| (k.key, "default".to_string())).collect();
        Settings { values, sources, warnings: Vec::new() }
    }

    /// Defaults, then the global file under `home`, then the project's file.
    pub fn load(home: &Path, project_root: Option<&Path>) -> Settings {
        let mut s = Settings::defaults();
        s.apply_file(&global_path(home));
        if let Some(root) = project_root {
            s.apply_file(&project_path(root));
        }
        s
    }

    fn apply_file(&mut self, path: &Path) {
        let pairs = match file::read_layer(path) {
            Ok(Some(p)) => p,
            Ok(None) => return,
            Err(w) => {
                self.warnings.push(w);
                return;
            }
        };
        for (key, value) in pairs {
            let Some(spec) = keys::spec(&key) else {
                let known: Vec<&str> = KEYS.iter().map(|k| k.key).collect();
                self.warnings.push(format!(
                    "{}: unknown setting '{key}' ignored. Known settings: {}.",
                    path.display(),
                    known.join(", ")
                ));
                continue;
            };
            match keys::validate(spec, &value) {
                Ok(v) => {
                    self.values.insert(spec.key, v);
                    self.sources.insert(spec.key, path.display().to_string());
                }
                Err(why) => self.warnings.push(format!(
                    "{}: '{key}' {why}; using {} instead. Fix the value in that file.",
                    path.display(),
                    self.values[spec.key]
                )),
            }
        }
    }

    /// The value of a known key (`None` for an unknown one).
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.values.get(key)
    }

    /// A whole-number key; the built-in default if the key is not an integer key.
    pub fn int(&self, key: &str) -> i64 {
        self.get(key).and_then(Value::as_i64).unwrap_or_else(|| match keys::spec(key).map(|s| s.default) {
            Some(keys::DefaultValue::Int(i)) => i,
            _ => 0,
        })
    }

    /// `events.maxPerSession`.
    pub fn max_events_per_session(&self) -> i64 {
        self.int(keys::EVENTS_MAX_PER_SESSION)
    }

    /// `tracing.costShare`: JS-path hooks above this share of their threads' time are sampled.
    pub fn cost_share(&self) -> f64 {
        self.get(keys::TRACING_COST_SHARE).and_then(Value::as_f64).unwrap_or(0.5)
    }

    /// `retention.maxAgeDays` in seconds.
    pub fn retention_max_age_secs(&self) -> i64 {
        self.int(keys::RETENTION_MAX_AGE_DAYS).saturating_mul(86_400)
    }

    /// `retention.maxTotalBytes`.
    pub fn retention_max_total_bytes(&self) -> i64 {
        self.int(keys::RETENTION_MAX_TOTAL_BYTES)
    }

    /// `{ "events.maxPerSession": 200000, ... }`.
    pub fn values_json(&self) -> Value {
        Value::Object(self.values.iter().map(|(k, v)| (k.to_string(), v.clone())).collect::<Map<_, _>>())
    }

    /// `{ "events.maxPerSession": "default" | "/path/settings.json", ... }`.
    pub fn sources_json(&self) -> Value {
        Value::Object(self.sources.iter().map(|(k, v)| (k.to_string(), Value::from(v.clone()))).collect::<Map<_, _>>())
    }
}

pub fn global_path(home: &Path) -> PathBuf {
    home.join(FILE_NAME)
}

pub fn project_path(project_root: &Path) -> PathBuf {
    project_root.join(".strobe").join(FILE_NAME)
}
