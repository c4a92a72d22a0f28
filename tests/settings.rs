//! Settings: defaults < `$STROBE_HOME/settings.json` < `<projectRoot>/.strobe/settings.json`,
//! every key of the spec's table with its range, invalid values ignored with a warning,
//! and no caching (each load reads the files again).

use std::path::Path;

use serde_json::json;
use strobe::settings::{keys, Settings, KEYS};

fn write(path: &Path, v: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, v).unwrap();
}

struct Dirs {
    _tmp: tempfile::TempDir,
    home: std::path::PathBuf,
    project: std::path::PathBuf,
}

fn dirs() -> Dirs {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let project = tmp.path().join("project");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&project).unwrap();
    Dirs { _tmp: tmp, home, project }
}

#[test]
fn defaults_are_the_spec_table() {
    let d = dirs();
    let s = Settings::load(&d.home, Some(&d.project));
    assert!(s.warnings.is_empty());
    assert_eq!(s.get(keys::EVENTS_MAX_PER_SESSION), Some(&json!(200_000)));
    assert_eq!(s.get(keys::TEST_STATUS_RETRY_MS), Some(&json!(5_000)));
    assert_eq!(s.get(keys::VISION_ENABLED), Some(&json!(false)));
    assert_eq!(s.get(keys::VISION_CONFIDENCE_THRESHOLD), Some(&json!(0.3)));
    assert_eq!(s.get(keys::VISION_IOU_MERGE_THRESHOLD), Some(&json!(0.5)));
    assert_eq!(s.get(keys::VISION_SIDECAR_IDLE_TIMEOUT_SECONDS), Some(&json!(300)));
    assert_eq!(s.retention_max_age_secs(), 7 * 86_400);
    assert_eq!(s.retention_max_total_bytes(), 10 * 1024 * 1024 * 1024);
    assert_eq!(s.values_json().as_object().unwrap().len(), KEYS.len());
    assert!(s.sources_json().as_object().unwrap().values().all(|v| v == "default"));
}

#[test]
fn project_overrides_global_overrides_defaults() {
    let d = dirs();
    write(&d.home.join("settings.json"), r#"{"events.maxPerSession": 500000, "test.statusRetryMs": 3000}"#);
    write(&d.project.join(".strobe/settings.json"), r#"{"events": {"maxPerSession": 1000}}"#);
    let s = Settings::load(&d.home, Some(&d.project));
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    assert_eq!(s.max_events_per_session(), 1000, "project wins");
    assert_eq!(s.int(keys::TEST_STATUS_RETRY_MS), 3000, "global wins over the default");
    assert!(s.sources_json()[keys::EVENTS_MAX_PER_SESSION].as_str().unwrap().contains(".strobe"));
    // Without a project root only the global layer applies.
    assert_eq!(Settings::load(&d.home, None).max_events_per_session(), 500_000);
}

#[test]
fn every_key_is_range_checked_and_bad_values_fall_back_with_a_warning() {
    let bad = [
        (keys::EVENTS_MAX_PER_SESSION, json!(0)),
        (keys::EVENTS_MAX_PER_SESSION, json!(10_000_001)),
        (keys::TEST_STATUS_RETRY_MS, json!(499)),
        (keys::TEST_STATUS_RETRY_MS, json!(60_001)),
        (keys::VISION_ENABLED, json!("yes")),
        (keys::VISION_CONFIDENCE_THRESHOLD, json!(1.5)),
        (keys::VISION_IOU_MERGE_THRESHOLD, json!(-0.1)),
        (keys::VISION_SIDECAR_IDLE_TIMEOUT_SECONDS, json!(29)),
        (keys::VISION_SIDECAR_IDLE_TIMEOUT_SECONDS, json!(3601)),
        (keys::RETENTION_MAX_AGE_DAYS, json!(0)),
        (keys::RETENTION_MAX_TOTAL_BYTES, json!(100)),
        (keys::EVENTS_MAX_PER_SESSION, json!(2.5)),
        (keys::EVENTS_MAX_PER_SESSION, json!(null)),
    ];
    for (key, value) in bad {
        let d = dirs();
        // The global layer sets a good value; the project's bad one must not replace it.
        write(&d.project.join(".strobe/settings.json"), &json!({ key: value }).to_string());
        let s = Settings::load(&d.home, Some(&d.project));
        let default = Settings::defaults();
        assert_eq!(s.get(key), default.get(key), "{key} = {value} must fall back");
        assert_eq!(s.warnings.len(), 1, "{key} = {value}: {:?}", s.warnings);
        assert!(s.warnings[0].contains(key) && s.warnings[0].contains("settings.json"), "{:?}", s.warnings);
    }
    let good = [
        (keys::EVENTS_MAX_PER_SESSION, json!(1)),
        (keys::EVENTS_MAX_PER_SESSION, json!(10_000_000)),
        (keys::TEST_STATUS_RETRY_MS, json!(500)),
        (keys::VISION_ENABLED, json!(true)),
        (keys::VISION_CONFIDENCE_THRESHOLD, json!(1.0)),
        (keys::VISION_IOU_MERGE_THRESHOLD, json!(0)),
        (keys::VISION_SIDECAR_IDLE_TIMEOUT_SECONDS, json!(3600)),
        (keys::RETENTION_MAX_AGE_DAYS, json!(30)),
    ];
    for (key, value) in good {
        let d = dirs();
        write(&d.home.join("settings.json"), &json!({ key: value }).to_string());
        let s = Settings::load(&d.home, None);
        assert!(s.warnings.is_empty(), "{key} = {value}: {:?}", s.warnings);
        assert_eq!(s.get(key).unwrap().as_f64(), value.as_f64().or(None), "{key}");
    }
}

#[test]
fn an_invalid_project_value_leaves_the_global_one() {
    let d = dirs();
    write(&d.home.join("settings.json"), r#"{"events.maxPerSession": 1234}"#);
    write(&d.project.join(".strobe/settings.json"), r#"{"events.maxPerSession": -5}"#);
    let s = Settings::load(&d.home, Some(&d.project));
    assert_eq!(s.max_events_per_session(), 1234);
    assert!(s.warnings[0].contains("using 1234 instead"), "{:?}", s.warnings);
}

#[test]
fn broken_files_and_unknown_keys_warn() {
    let d = dirs();
    write(&d.home.join("settings.json"), "{ not json");
    write(&d.project.join(".strobe/settings.json"), r#"{"events.maxPerSesion": 5, "vision.enabled": true}"#);
    let s = Settings::load(&d.home, Some(&d.project));
    assert_eq!(s.warnings.len(), 2, "{:?}", s.warnings);
    assert!(s.warnings[0].contains("invalid JSON"));
    assert!(s.warnings[1].contains("unknown setting 'events.maxPerSesion'") && s.warnings[1].contains("events.maxPerSession"));
    assert_eq!(s.max_events_per_session(), 200_000);
    assert_eq!(s.get(keys::VISION_ENABLED), Some(&json!(true)), "the valid key of the same file applies");

    write(&d.home.join("settings.json"), "[1, 2]");
    let s = Settings::load(&d.home, None);
    assert!(s.warnings[0].contains("must be a JSON object"));
}

#[test]
fn files_are_read_again_on_every_load() {
    let d = dirs();
    let path = d.project.join(".strobe/settings.json");
    write(&path, r#"{"events.maxPerSession": 10}"#);
    assert_eq!(Settings::load(&d.home, Some(&d.project)).max_events_per_session(), 10);
    write(&path, r#"{"events.maxPerSession": 20}"#);
    assert_eq!(Settings::load(&d.home, Some(&d.project)).max_events_per_session(), 20);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(Settings::load(&d.home, Some(&d.project)).max_events_per_session(), 200_000);
}
