//! A live debug session: one target process, its symbols and its trace state.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde::Serialize;

use crate::error::{ErrorCode, Result, StrobeError};
use crate::store::SessionRow;
use crate::symbols::{Pattern, SymbolIndex};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionStatus {
    Running,
    Exited,
    Stopped,
}

impl SessionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            SessionStatus::Running => "running",
            SessionStatus::Exited => "exited",
            SessionStatus::Stopped => "stopped",
        }
    }
}

pub struct Session {
    pub id: String,
    pub pid: u32,
    pub binary_path: PathBuf,
    pub project_root: PathBuf,
    /// CLOCK_MONOTONIC at spawn; event timestamps are relative to it.
    pub start_mono_ns: i64,
    pub(crate) state: Mutex<SessionState>,
    /// Breakpoints, logpoints and paused threads (engine/debug_state.rs).
    pub debug: super::debug_state::DebugState,
    /// The agents' mapped outboxes, by pid (engine/outbox.rs).
    pub(crate) outboxes: super::outbox::Outboxes,
}

pub(crate) struct SessionState {
    pub status: SessionStatus,
    pub exit_code: Option<i64>,
    pub exit_reason: Option<String>,
    pub symbols: Option<Arc<SymbolIndex>>,
    pub patterns: Vec<Pattern>,
    /// Hooked functions, by agent function id (index into `symbols.functions`).
    pub hooked: BTreeSet<u32>,
    /// Agent call id of an open call → the event id of its enter event (FxHash: looked up
    /// for every traced call).
    pub open_calls: rustc_hash::FxHashMap<u64, i64>,
    /// Fast-path state: events lost, sampled functions (engine/sampling.rs).
    pub tracing: super::sampling::TracingState,
    /// Native typed-capture plans of hooked functions (capture_plan.rs).
    pub capture: super::capture_plan::CaptureState,
    /// Crashes, exit status, children, thread names (lifecycle.rs).
    pub life: super::lifecycle::LifeState,
    /// Watches and serializationDepth (watches.rs).
    pub watch: super::watches::WatchState,
    /// Shared libraries with DWARF (modules.rs).
    pub modules: super::modules::ModuleState,
    /// Typed records kept for a benchmark (capture_samples.rs); `None`: not kept.
    pub typed_samples: Option<super::capture_samples::Kept>,
}

/// What `debug_session status` reports.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusReport {
    pub session_id: String,
    pub status: String,
    pub pid: i64,
    pub binary_path: String,
    pub exit_code: Option<i64>,
    pub exit_reason: Option<String>,
    /// The signal that killed the target ("SIGSEGV"), if one did.
    pub signal: Option<String>,
    /// Forked and exec'd processes of the session.
    pub children: Vec<super::ChildProcess>,
    pub event_count: i64,
    pub hooked_functions: usize,
    pub trace_patterns: Vec<String>,
    /// Trace events the agent could not deliver (its ring was full), counted.
    pub events_lost: u64,
    /// Hot functions recorded 1 call in N.
    pub sampled_functions: Vec<super::sampling::SampledFunction>,
}

impl StatusReport {
    pub fn from_row(row: &SessionRow, event_count: i64) -> StatusReport {
        StatusReport {
            session_id: row.id.clone(),
            status: row.status.clone(),
            pid: row.pid,
            binary_path: row.binary_path.clone(),
            // A negative exit_code column is minus the killing signal (lifecycle.rs).
            exit_code: super::lifecycle::ProcessEnd::from_db_code(row.exit_code).0,
            exit_reason: match row.exit_code {
                Some(c) if c < 0 => Some(format!("signal: {}", super::lifecycle::signal_name(-c as i32))),
                Some(c) => Some(format!("code: {c}")),
                None => None,
            },
            signal: super::lifecycle::ProcessEnd::from_db_code(row.exit_code).1,
            children: Vec::new(),
            event_count,
            hooked_functions: 0,
            trace_patterns: Vec::new(),
            events_lost: 0,
            sampled_functions: Vec::new(),
        }
    }
}

impl Session {
    pub(crate) fn new(id: String, pid: u32, binary_path: PathBuf, project_root: PathBuf, start_mono_ns: i64) -> Session {
        Session {
            id,
            pid,
            binary_path,
            project_root,
            start_mono_ns,
            debug: Default::default(),
            outboxes: Default::default(),
            state: Mutex::new(SessionState {
                status: SessionStatus::Running,
                exit_code: None,
                exit_reason: None,
                symbols: None,
                patterns: Vec::new(),
                hooked: BTreeSet::new(),
                open_calls: Default::default(),
                tracing: Default::default(),
                capture: Default::default(),
                life: Default::default(),
                watch: Default::default(),
                modules: Default::default(),
                typed_samples: None,
            }),
        }
    }

    pub fn status(&self) -> SessionStatus {
        self.state.lock().unwrap().status
    }
    pub fn is_running(&self) -> bool {
        self.status() == SessionStatus::Running
    }

    /// Fails with `PROCESS_EXITED` (saying what is still possible) unless the target runs.
    pub fn ensure_running(&self) -> Result<()> {
        let st = self.state.lock().unwrap();
        match st.status {
            SessionStatus::Running => Ok(()),
            _ => {
                let how = match (st.exit_code, &st.exit_reason) {
                    (Some(c), _) => format!("code: {c}"),
                    (None, Some(r)) => r.clone(),
                    (None, None) => "code unknown".to_string(),
                };
                Err(StrobeError::new(
                    ErrorCode::ProcessExited,
                    format!(
                        "Target process of session '{}' has exited ({how}). The session is still queryable with debug_query, but traces cannot be changed; launch it again to trace more.",
                        self.id
                    ),
                ))
            }
        }
    }

    pub(crate) fn mark_exited(&self, exit_code: Option<i64>, reason: Option<String>) {
        let mut st = self.state.lock().unwrap();
        if st.status == SessionStatus::Running {
            st.status = SessionStatus::Exited;
            st.exit_code = exit_code;
            st.exit_reason = reason;
        }
    }

    pub(crate) fn mark_stopped(&self) {
        self.state.lock().unwrap().status = SessionStatus::Stopped;
    }

    pub fn patterns(&self) -> Vec<String> {
        self.state.lock().unwrap().patterns.iter().map(|p| p.as_str().to_string()).collect()
    }

    pub fn report(&self, event_count: i64) -> StatusReport {
        let st = self.state.lock().unwrap();
        StatusReport {
            session_id: self.id.clone(),
            status: st.status.as_str().to_string(),
            pid: self.pid as i64,
            binary_path: self.binary_path.display().to_string(),
            exit_code: st.exit_code,
            exit_reason: st.exit_reason.clone(),
            signal: match &st.life.root_end {
                Some(super::lifecycle::ProcessEnd::Signal(s)) => Some(s.clone()),
                _ => None,
            },
            children: st.life.children.values().cloned().collect(),
            event_count,
            hooked_functions: st.hooked.len(),
            trace_patterns: st.patterns.iter().map(|p| p.as_str().to_string()).collect(),
            events_lost: st.tracing.events_lost,
            sampled_functions: st.tracing.sampled_functions(),
        }
    }
}
