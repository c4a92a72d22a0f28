//! `trace`: turn patterns into the set of hooked functions of a live target, or
//! stage them for the next launch when no session is given.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use serde::Serialize;

use super::{Engine, Session};
use crate::error::{ErrorCode, Result, StrobeError};
use crate::symbols::{Pattern, SymbolIndex};

/// Above this many hooks a target slows to a crawl and install takes seconds;
/// refusing with a hint is kinder than hanging the target.
pub const MAX_HOOKS: usize = 10_000;

#[derive(Debug, Clone, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct TraceResult {
    pub mode: String,
    pub active_patterns: Vec<String>,
    pub hooked_functions: usize,
    pub matched_functions: usize,
    pub warnings: Vec<String>,
    /// Per added pattern: how many functions it matched (the hint rules use it).
    pub matches_per_pattern: Vec<(String, usize)>,
    /// For patterns that matched nothing: the closest function names.
    pub suggestions: Vec<(String, Vec<String>)>,
    /// Trace events the agent could not deliver so far (ring full), counted.
    pub events_lost: u64,
    /// Hot functions currently recorded 1 call in N (see engine/sampling.rs).
    pub sampled_functions: Vec<super::sampling::SampledFunction>,
    /// A Python target where some added pattern matched no native function (python_target.rs).
    pub python_target: bool,
}

fn parse_all(patterns: &[String]) -> Result<Vec<Pattern>> {
    patterns.iter().map(|p| Pattern::parse(p)).collect()
}

impl Engine {
    /// Add/remove patterns on a live session, or (no session) on the local stage (staging.rs).
    pub async fn trace(self: &Arc<Engine>, session_id: Option<&str>, add: &[String], remove: &[String]) -> Result<TraceResult> {
        let Some(id) = session_id else {
            let staged = self.stage_patterns(super::StageScope::Local, add, remove, false)?;
            return Ok(TraceResult { mode: "pending".into(), active_patterns: staged, ..Default::default() });
        };
        let session = self.session(id)?;
        session.ensure_running()?;
        self.apply_trace(&session, add, remove).await
    }

    pub(crate) fn session_symbols(&self, session: &Session) -> Result<Arc<SymbolIndex>> {
        if let Some(s) = session.state.lock().unwrap().symbols.clone() {
            return Ok(s);
        }
        let syms = match self.symbols.get(&session.binary_path) {
            // A stripped interpreter, or a script run through its `#!` line: C extensions with
            // DWARF join as they load (modules.rs), so patterns wait for them instead of failing.
            Err(e) if matches!(e.code, ErrorCode::NoDebugSymbols | ErrorCode::ValidationError) && super::python_target::is_python(&session.binary_path) => {
                let main = super::canonical_or_same(&session.binary_path);
                let image_base = super::backtrace::image_base_of(&main);
                return Ok(Arc::new(SymbolIndex { binary: main, image_base, functions: Vec::new() }));
            }
            other => other?,
        };
        session.state.lock().unwrap().symbols = Some(syms.clone());
        Ok(syms)
    }

    pub(crate) async fn apply_trace(&self, session: &Session, add: &[String], remove: &[String]) -> Result<TraceResult> {
        let added = parse_all(add)?;
        let mut warnings = Vec::new();
        let symbols = if add.is_empty() && remove.is_empty() && session.state.lock().unwrap().patterns.is_empty() {
            None
        } else {
            Some(self.session_symbols(session)?)
        };

        // The new pattern list: old minus removed, plus added (no duplicates).
        let patterns: Vec<Pattern> = {
            let st = session.state.lock().unwrap();
            for r in remove {
                if !st.patterns.iter().any(|p| p.as_str() == r) {
                    warnings.push(format!("Pattern '{r}' was not active; nothing removed."));
                }
            }
            let mut v: Vec<Pattern> = st.patterns.iter().filter(|p| !remove.iter().any(|r| r == p.as_str())).cloned().collect();
            for p in added {
                if !v.iter().any(|q| q.as_str() == p.as_str()) {
                    v.push(p);
                }
            }
            v
        };

        let mut result = TraceResult { mode: "runtime".into(), ..Default::default() };
        let mut desired: BTreeSet<u32> = BTreeSet::new();
        if let Some(symbols) = &symbols {
            for p in &patterns {
                let mut seen_addr = HashSet::new();
                let mut n = 0;
                for (i, f) in symbols.functions.iter().enumerate() {
                    if f.address != 0 && p.matches(f, &session.project_root) && seen_addr.insert(f.address) {
                        desired.insert(i as u32);
                        n += 1;
                    }
                }
                if add.iter().any(|a| a == p.as_str()) {
                    result.matches_per_pattern.push((p.as_str().to_string(), n));
                    if n == 0 {
                        result.suggestions.push((p.as_str().to_string(), symbols.closest_names(p.as_str(), 5)));
                    }
                }
            }
            // Two names can share one address (aliases): hook each address once.
            let mut by_addr = HashSet::new();
            desired.retain(|i| by_addr.insert(symbols.functions[*i as usize].address));
        }
        if desired.len() > MAX_HOOKS {
            return Err(StrobeError::new(
                ErrorCode::ValidationError,
                format!(
                    "These patterns match {} functions; more than {MAX_HOOKS} hooks would stall the target. Narrow the patterns (e.g. 'mymodule::*' instead of '**', or @file:name.c).",
                    desired.len()
                ),
            ));
        }

        let current: BTreeSet<u32> = session.state.lock().unwrap().hooked.clone();
        let to_remove: Vec<u32> = current.difference(&desired).copied().collect();
        let to_add: Vec<u32> = desired.difference(&current).copied().collect();
        let mut hooked = current.clone();
        if !to_remove.is_empty() || !to_add.is_empty() {
            let symbols = symbols.as_ref().expect("symbols are loaded whenever hooks change");
            let frida = self.frida_running()?;
            if !to_remove.is_empty() {
                let ids: BTreeSet<u32> = to_remove.iter().copied().collect();
                super::children::remove_hooks(&frida, session, session.pid, symbols, &ids).await?;
                for i in &to_remove {
                    hooked.remove(i);
                }
            }
            if !to_add.is_empty() {
                let ids: BTreeSet<u32> = to_add.iter().copied().collect();
                let added = super::children::add_hooks(self, &frida, session, session.pid, symbols, &ids).await?;
                hooked.extend(added.installed);
                warnings.extend(added.failed);
            }
        }
        let hooked_count = hooked.len();
        let changed = hooked != current;
        {
            let mut st = session.state.lock().unwrap();
            st.hooked = hooked;
            st.patterns = patterns.clone();
        }
        if changed || !add.is_empty() || !remove.is_empty() {
            // Followed children get the new patterns too (children.rs).
            warnings.extend(self.sync_children(session).await);
        }
        result.active_patterns = patterns.iter().map(|p| p.as_str().to_string()).collect();
        result.hooked_functions = hooked_count;
        result.matched_functions = desired.len();
        warnings.extend(take_hook_warnings(session));
        result.warnings = warnings;
        {
            let st = session.state.lock().unwrap();
            result.events_lost = st.tracing.events_lost + self.store.events_shed(&session.id) as u64;
            result.sampled_functions = st.tracing.sampled_functions();
        }
        // Added patterns that matched nothing in a Python target likely name Python code.
        if !add.is_empty() && super::python_target::is_python(&session.binary_path) {
            super::python_target::explain_unmatched(&mut result);
        }
        Ok(result)
    }

    /// The Frida runtime of live sessions; it exists whenever a session is live.
    pub(crate) fn frida_running(&self) -> Result<Arc<crate::frida::FridaRuntime>> {
        self.frida
            .lock()
            .unwrap()
            .get()
            .cloned()
            .ok_or_else(|| StrobeError::new(ErrorCode::ProcessExited, "The Frida host is not running; the session's target is gone. Launch again."))
    }
}

impl Engine {
    /// The warnings about hooks installed since the last report (e.g. by a watch moving a
    /// function to the JS path), each once; none for a session that is gone.
    pub fn take_hook_warnings(&self, id: &str) -> Vec<String> {
        self.sessions.lock().unwrap().get(id).cloned().map(|s| take_hook_warnings(&s)).unwrap_or_default()
    }
}

/// The warnings about hooks installed since the last report, each once.
pub(crate) fn take_hook_warnings(session: &Session) -> Vec<String> {
    let mut taken = std::mem::take(&mut session.state.lock().unwrap().tracing.hook_warnings);
    let mut seen = HashSet::new();
    taken.retain(|w| seen.insert(w.clone()));
    taken
}
