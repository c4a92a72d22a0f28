//! What is staged for the next launch: trace patterns (`debug_trace` without a session) and
//! breakpoints/logpoints (`debug_breakpoint` without a session). Each caller has its own
//! stage: an MCP connection (cleared when it disconnects), or the process's own front end
//! (`strobe run`, the in-process REPL). A launch applies only its caller's stage.

use serde::Serialize;

use super::breakpoints::{validate, PointRequest};
use super::Engine;
use crate::error::{Result, StrobeError};
use crate::symbols::Pattern;

/// Whose stage: one per MCP connection, plus the in-process front end's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum StageScope {
    /// `strobe run`, the in-process REPL, Rust callers.
    #[default]
    Local,
    /// One MCP client connection (its `strobe repl --connect` included).
    Connection(u64),
}

/// A breakpoint or logpoint waiting for the next launch.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StagedPoint {
    /// `staged-N`: what `remove` takes before the launch.
    pub id: String,
    #[serde(flatten)]
    pub request: PointRequest,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Staged {
    pub patterns: Vec<String>,
    pub breakpoints: Vec<StagedPoint>,
    #[serde(skip)]
    next_id: u32,
}

/// Staged breakpoints per caller, at most this many (the session limits apply at launch).
const MAX_STAGED_POINTS: usize = super::MAX_BREAKPOINTS + super::MAX_LOGPOINTS;

impl Engine {
    /// The caller's stage as it is now.
    pub fn staged(&self, scope: StageScope) -> Staged {
        self.staged.lock().unwrap().get(&scope).cloned().unwrap_or_default()
    }

    /// Add/remove staged patterns (`clear` first drops them all); returns the list.
    pub fn stage_patterns(&self, scope: StageScope, add: &[String], remove: &[String], clear: bool) -> Result<Vec<String>> {
        for p in add {
            Pattern::parse(p)?;
        }
        let mut all = self.staged.lock().unwrap();
        let stage = all.entry(scope).or_default();
        if clear {
            stage.patterns.clear();
        }
        stage.patterns.retain(|p| !remove.contains(p));
        for p in add {
            if !stage.patterns.contains(p) {
                stage.patterns.push(p.clone());
            }
        }
        Ok(stage.patterns.clone())
    }

    /// Add/remove staged breakpoints and logpoints (`clear` first drops them all), all or
    /// nothing: an unknown id or a malformed item changes nothing. Names are resolved at
    /// launch, against the program launched.
    pub fn stage_points(&self, scope: StageScope, add: &[PointRequest], remove: &[String], clear: bool) -> Result<Vec<StagedPoint>> {
        for (i, req) in add.iter().enumerate() {
            validate(req).map_err(|e| StrobeError::validation(format!("add[{i}]: {}", e.message)))?;
        }
        let mut all = self.staged.lock().unwrap();
        let stage = all.entry(scope).or_default();
        if !clear {
            if let Some(unknown) = remove.iter().find(|r| !stage.breakpoints.iter().any(|p| &p.id == *r)) {
                let known: Vec<&str> = stage.breakpoints.iter().map(|p| p.id.as_str()).collect();
                return Err(StrobeError::validation(format!(
                    "No staged breakpoint '{unknown}'. Staged: {}. (Without sessionId, remove takes staged ids; pass sessionId for a live session's bp-N/lp-N.)",
                    if known.is_empty() { "none".to_string() } else { known.join(", ") }
                )));
            }
        }
        let kept = if clear { 0 } else { stage.breakpoints.iter().filter(|p| !remove.contains(&p.id)).count() };
        if kept + add.len() > MAX_STAGED_POINTS {
            return Err(StrobeError::validation(format!(
                "At most {MAX_STAGED_POINTS} staged breakpoints and logpoints; clear some first (debug_breakpoint {{clear: true}})."
            )));
        }
        if clear {
            stage.breakpoints.clear();
        }
        stage.breakpoints.retain(|p| !remove.contains(&p.id));
        for req in add {
            stage.next_id += 1;
            stage.breakpoints.push(StagedPoint { id: format!("staged-{}", stage.next_id), request: req.clone() });
        }
        Ok(stage.breakpoints.clone())
    }

    /// Forget everything `scope` staged (its connection closed).
    pub fn clear_staged(&self, scope: StageScope) {
        self.staged.lock().unwrap().remove(&scope);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::EngineConfig;

    fn engine(home: &std::path::Path) -> std::sync::Arc<Engine> {
        Engine::new(EngineConfig { home: home.to_path_buf(), cache_dir: home.join("cache") }).unwrap()
    }

    fn at(function: &str) -> PointRequest {
        PointRequest { function: Some(function.into()), ..Default::default() }
    }

    #[tokio::test]
    async fn each_caller_has_its_own_stage() {
        let home = tempfile::tempdir().unwrap();
        let e = engine(home.path());
        let (a, b) = (StageScope::Connection(1), StageScope::Connection(2));
        e.stage_patterns(a, &["parse_*".into()], &[], false).unwrap();
        e.stage_points(a, &[at("main")], &[], false).unwrap();
        assert_eq!(e.staged(b).patterns, Vec::<String>::new());
        assert!(e.staged(b).breakpoints.is_empty() && e.staged(StageScope::Local).breakpoints.is_empty());
        assert_eq!(e.staged(a).patterns, vec!["parse_*".to_string()]);
        e.clear_staged(a);
        assert!(e.staged(a).patterns.is_empty() && e.staged(a).breakpoints.is_empty());
    }

    #[tokio::test]
    async fn staging_points_is_all_or_nothing() {
        let home = tempfile::tempdir().unwrap();
        let e = engine(home.path());
        let s = StageScope::Local;
        let ids = |v: Vec<StagedPoint>| v.into_iter().map(|p| p.id).collect::<Vec<_>>();
        assert_eq!(ids(e.stage_points(s, &[at("a"), at("b")], &[], false).unwrap()), ["staged-1", "staged-2"]);
        // An unknown id, or a malformed item, changes nothing.
        let err = e.stage_points(s, &[at("c")], &["staged-9".into()], false).unwrap_err();
        assert!(err.message.contains("staged-1, staged-2"), "{}", err.message);
        let bad = PointRequest { file: Some("x.c".into()), ..Default::default() };
        let err = e.stage_points(s, &[at("c"), bad], &["staged-1".into()], false).unwrap_err();
        assert!(err.message.starts_with("add[1]"), "{}", err.message);
        assert_eq!(ids(e.staged(s).breakpoints), ["staged-1", "staged-2"]);
        // Ids are never reused; clear drops everything first.
        assert_eq!(ids(e.stage_points(s, &[at("c")], &["staged-1".into()], false).unwrap()), ["staged-2", "staged-3"]);
        assert_eq!(ids(e.stage_points(s, &[at("d")], &[], true).unwrap()), ["staged-4"]);
        let many: Vec<PointRequest> = (0..=MAX_STAGED_POINTS).map(|i| at(&format!("f{i}"))).collect();
        assert!(e.stage_points(s, &many, &[], true).is_err());
        assert_eq!(ids(e.staged(s).breakpoints), ["staged-4"]);
    }
}
