//! Settings applied to sessions: each session's `events.maxPerSession` comes from the
//! settings of its project root, re-read on every tool call (settings are never cached).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::Engine;
use crate::settings::Settings;

impl Engine {
    /// Settings for `project_root` (or the global layers only).
    pub fn settings_for(&self, project_root: Option<&Path>) -> Settings {
        Settings::load(&self.config.home, project_root)
    }

    /// The project root a session was launched with (live, or from its stored row).
    pub fn session_project_root(&self, id: &str) -> Option<PathBuf> {
        if let Some(s) = self.sessions.lock().unwrap().get(id) {
            return Some(s.project_root.clone());
        }
        self.store.get_session(id).ok().flatten().map(|row| PathBuf::from(row.project_root))
    }

    /// Re-read settings and apply `events.maxPerSession` to every live session. Returns
    /// the settings warnings met on the way (deduplicated), for tool responses.
    pub fn apply_event_limits(&self) -> Vec<String> {
        let live: Vec<Arc<super::Session>> = self.sessions.lock().unwrap().values().cloned().collect();
        let mut warnings = Vec::new();
        let mut by_root: Vec<(PathBuf, i64)> = Vec::new();
        for s in live {
            let limit = match by_root.iter().find(|(r, _)| *r == s.project_root) {
                Some((_, l)) => *l,
                None => {
                    let settings = self.settings_for(Some(&s.project_root));
                    for w in settings.warnings.iter() {
                        if !warnings.contains(w) {
                            warnings.push(w.clone());
                        }
                    }
                    let l = settings.max_events_per_session();
                    by_root.push((s.project_root.clone(), l));
                    l
                }
            };
            self.store.set_max_events_per_session(&s.id, limit);
        }
        warnings
    }

    /// Apply `events.maxPerSession` to one session (at launch).
    pub(crate) fn apply_event_limit(&self, id: &str, project_root: &Path) -> Settings {
        let settings = self.settings_for(Some(project_root));
        self.store.set_max_events_per_session(id, settings.max_events_per_session());
        settings
    }
}
