//! The stops a launch installs while the process is still suspended: `stopOnEntry` (a
//! breakpoint at the program's `main`, point_resolve.rs `entry_function`), the caller's
//! staged breakpoints (staging.rs) and the launch's own `breakpoints`. All are resolved
//! against the binary before it is spawned, so a bad one fails the launch with nothing
//! left running.
//!
//! A point that needs a hardware breakpoint (a line in a leaf function, where an inline hook
//! would clobber the red zone) cannot be armed while the process is still suspended at
//! spawn (Frida cannot attach to its thread yet). Those wait at a gate: a breakpoint at
//! `main`'s entry (the stopOnEntry one, or an internal `gate-N` whose pause is not
//! recorded); when the main thread reaches it they are armed, then the gate lets it go.
//! Code that runs before `main` (static constructors) does not stop at them.

use std::path::Path;
use std::sync::Arc;

use serde::Serialize;

use super::debug_state::PointInfo;
use super::point_resolve::{entry_function, prepare, PointRequest, PointTarget, Prepared};
use super::{Engine, Session, StagedPoint};
use crate::error::{Result, StrobeError};

/// Internal gate breakpoints (their pause is not recorded as an event: debug_state.rs).
pub const GATE_PREFIX: &str = "gate-";

/// How long a launch with stops waits for the first pause (or the exit) to report it.
pub const ENTRY_PAUSE_WAIT_MS: u64 = 2000;
pub const BREAKPOINT_PAUSE_WAIT_MS: u64 = 1000;

/// Where a launch stop came from.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub enum Origin {
    StopOnEntry,
    Staged,
    Launch,
}

/// A stop to install, before it has an id.
pub(crate) struct LaunchStop {
    pub prepared: Prepared,
    pub origin: Origin,
    pub staged_id: Option<String>,
    /// How the caller named it, for errors: `breakpoints[1] (main.c:12)`.
    pub label: String,
}

/// Every stop of a launch, and where points that need a running thread wait for it.
pub(crate) struct LaunchStops {
    pub stops: Vec<LaunchStop>,
    /// Stops in no code of the program itself: resolved once its libraries are loaded, or
    /// pending on one loaded later (pending_points.rs).
    pub in_libraries: Vec<(PointRequest, Origin, Option<String>, String)>,
    /// `main`'s entry, when the program has one.
    pub gate: Option<Prepared>,
    /// About the stops asked for (one in code built for AVX: `PointTarget::avx_warning`).
    pub warnings: Vec<String>,
}

/// What `install_launch_stops` did: the points set (None: waiting for the gate), the
/// points to arm at the gate, and the gate (its id, and whether it is internal).
pub(crate) struct InstalledStops {
    pub points: Vec<Option<LaunchPoint>>,
    pub later: Vec<(usize, LaunchStop)>,
    pub gate: Option<(String, bool)>,
}

/// How long the launch waits for the main thread to reach the gate.
const GATE_WAIT_MS: u64 = 15_000;

/// An agent's refusal that only means "not while the process is suspended at spawn".
fn needs_running_thread(e: &StrobeError) -> bool {
    e.message.contains("no hardware breakpoint is available")
}

/// A stop a launch installed, as its response lists it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LaunchPoint {
    #[serde(flatten)]
    pub point: PointInfo,
    pub origin: Origin,
    /// The `staged-N` id it had before the launch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub staged_id: Option<String>,
}

impl Engine {
    /// Resolve every stop of a launch against `binary`; the first bad one is the error.
    pub(crate) fn prepare_launch_stops(
        &self,
        binary: &Path,
        project_root: &Path,
        stop_on_entry: bool,
        staged: &[StagedPoint],
        own: &[PointRequest],
    ) -> Result<LaunchStops> {
        if !stop_on_entry && staged.is_empty() && own.is_empty() {
            return Ok(LaunchStops { stops: Vec::new(), in_libraries: Vec::new(), gate: None, warnings: Vec::new() });
        }
        let symbols = self.symbols.get(binary).map_err(|e| {
            let staged_ids: Vec<&str> = staged.iter().map(|s| s.id.as_str()).collect();
            let staged_note = if staged_ids.is_empty() {
                String::new()
            } else {
                format!(" Staged breakpoints apply to every launch of this connection ({}): drop them with debug_breakpoint {{clear: true}}.", staged_ids.join(", "))
            };
            StrobeError::new(e.code, format!("Breakpoints and stopOnEntry need the program's debug info: {}{staged_note}", e.message))
        })?;
        let target = PointTarget { binary: binary.to_path_buf(), project_root: project_root.to_path_buf(), symbols, libraries: Vec::new() };
        let mut stops = Vec::new();
        let mut in_libraries = Vec::new();
        // Not in the program: maybe in a shared library, known once the process exists.
        let missing = |e: &StrobeError| e.message.starts_with("No function matches") || e.message.starts_with("No source file matching");
        if stop_on_entry {
            let req = PointRequest { function: Some(entry_function(&target)?), ..Default::default() };
            let prepared = prepare(&target, &req).map_err(|e| StrobeError::new(e.code, format!("stopOnEntry: {}", e.message)))?;
            stops.push(LaunchStop { prepared, origin: Origin::StopOnEntry, staged_id: None, label: "stopOnEntry".into() });
        }
        for s in staged {
            let label = format!("staged breakpoint {} ({})", s.id, s.request.describe());
            if matches!(prepare(&target, &s.request), Err(e) if missing(&e)) {
                in_libraries.push((s.request.clone(), Origin::Staged, Some(s.id.clone()), label.clone()));
                continue;
            }
            let prepared = prepare(&target, &s.request).map_err(|e| {
                let fix = format!("Fix or drop it (debug_breakpoint {{remove: ['{}']}} without sessionId), then launch again.", s.id);
                StrobeError::new(e.code, format!("{label}: {} {fix}", e.message))
            })?;
            stops.push(LaunchStop { prepared, origin: Origin::Staged, staged_id: Some(s.id.clone()), label });
        }
        for (i, req) in own.iter().enumerate() {
            let label = format!("breakpoints[{i}] ({})", req.describe());
            if matches!(prepare(&target, req), Err(e) if missing(&e)) {
                in_libraries.push((req.clone(), Origin::Launch, None, label));
                continue;
            }
            let prepared = prepare(&target, req).map_err(|e| StrobeError::new(e.code, format!("{label}: {}", e.message)))?;
            stops.push(LaunchStop { prepared, origin: Origin::Launch, staged_id: None, label });
        }
        for (logpoint, max, what) in [(false, super::MAX_BREAKPOINTS, "breakpoints"), (true, super::MAX_LOGPOINTS, "logpoints")] {
            let n = stops.iter().filter(|s| s.prepared.request.message.is_some() == logpoint).count();
            if n > max {
                return Err(StrobeError::validation(format!("This launch would set {n} {what} (staged and given); at most {max} per session.")));
            }
        }
        let gate = match stops.iter().find(|s| s.origin == Origin::StopOnEntry) {
            Some(entry) => Some(entry.prepared.clone()),
            None => entry_function(&target).ok().and_then(|f| prepare(&target, &PointRequest { function: Some(f), ..Default::default() }).ok()),
        };
        let warnings = stops.iter().filter(|s| s.origin != Origin::StopOnEntry).filter_map(|s| target.avx_warning(&s.prepared, &s.label)).collect();
        Ok(LaunchStops { stops, in_libraries, gate, warnings })
    }

    /// Install the stops in the suspended root (all or none). Points that need a running
    /// thread are returned to be armed at the gate (`arm_at_gate`, after the resume), and
    /// the gate is set: the stopOnEntry breakpoint, or an internal one.
    pub(crate) async fn install_launch_stops(&self, session: &Session, all: LaunchStops) -> Result<InstalledStops> {
        // The stopOnEntry breakpoint is the gate when there is one. Otherwise an internal
        // gate goes in first, whenever a line point may need it: at `main`'s entry its
        // probe must run before a user's breakpoint there, which would hold the thread
        // away from it. It is taken out again if nothing waits for it.
        let entry_stop = all.stops.iter().any(|s| s.origin == Origin::StopOnEntry);
        let maybe_hardware = all.stops.iter().any(|s| s.prepared.request.file.is_some());
        let mut internal_gate = None;
        if let (false, true, Some(entry)) = (entry_stop, maybe_hardware, &all.gate) {
            let id = format!("{GATE_PREFIX}{}", session.debug.lock().next_id + 1);
            internal_gate = Some(self.install_one(session, entry, Some(&id)).await?.id);
        }
        let mut points: Vec<Option<LaunchPoint>> = Vec::new();
        let mut later = Vec::new();
        for (i, stop) in all.stops.into_iter().enumerate() {
            match self.install_one(session, &stop.prepared, None).await {
                Ok(point) => points.push(Some(LaunchPoint { point, origin: stop.origin, staged_id: stop.staged_id })),
                Err(e) if (entry_stop || internal_gate.is_some()) && needs_running_thread(&e) => {
                    points.push(None);
                    later.push((i, stop));
                }
                Err(e) => return Err(StrobeError::new(e.code, format!("{}: {}", stop.label, e.message))),
            }
        }
        // The libraries the program is linked with are loaded now (modules.rs).
        let target = if all.in_libraries.is_empty() { None } else { Some(self.point_target(session)?) };
        for (request, origin, staged_id, label) in all.in_libraries {
            let Some(target) = &target else { break };
            let point = match prepare(target, &request) {
                Ok(prepared) => self.install_one(session, &prepared, None).await.map_err(|e| StrobeError::new(e.code, format!("{label}: {}", e.message)))?,
                Err(e) if super::pending_points::may_load_later(&session.binary_path, &e) => {
                    let id = self.add_pending_point(session, &request);
                    session.debug.lock().points.get(&id).cloned().ok_or_else(|| StrobeError::internal("pending point vanished"))?
                }
                Err(e) => {
                    let fix = staged_id.as_ref().map(|id| format!(" Fix or drop it (debug_breakpoint {{remove: ['{id}']}} without sessionId), then launch again.")).unwrap_or_default();
                    return Err(StrobeError::new(e.code, format!("{label}: {}{fix}", e.message)));
                }
            };
            points.push(Some(LaunchPoint { point, origin, staged_id }));
        }
        let gate = match (later.is_empty(), internal_gate) {
            (true, Some(id)) => {
                self.unset_point(session, &id).await?; // suspended: no thread waits on it
                None
            }
            (true, None) => None,
            (false, Some(id)) => Some((id, true)),
            (false, None) => points.iter().flatten().find(|p| p.origin == Origin::StopOnEntry).map(|p| (p.point.id.clone(), false)),
        };
        Ok(InstalledStops { points, later, gate })
    }

    /// After the resume: wait for the main thread at the gate, arm the points that needed
    /// it, and let it go on (the stopOnEntry gate keeps it paused).
    pub(crate) async fn arm_at_gate(&self, session: &Session, installed: &mut InstalledStops) -> Result<()> {
        let Some((gate_id, internal)) = installed.gate.clone() else { return Ok(()) };
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(GATE_WAIT_MS);
        while !session.debug.lock().paused.values().any(|p| p.breakpoint_id.as_deref() == Some(gate_id.as_str())) {
            if !session.is_running() || std::time::Instant::now() >= deadline {
                let names: Vec<&str> = installed.later.iter().map(|(_, s)| s.label.as_str()).collect();
                return Err(StrobeError::validation(format!(
                    "{} need a hardware breakpoint, armed when the program reaches main, which it did not (within {} s). Use a function's entry or a line of a function that calls others.",
                    names.join(", "),
                    GATE_WAIT_MS / 1000
                )));
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        for (i, stop) in std::mem::take(&mut installed.later) {
            let point = self.install_one(session, &stop.prepared, None).await.map_err(|e| StrobeError::new(e.code, format!("{}: {}", stop.label, e.message)))?;
            installed.points[i] = Some(LaunchPoint { point, origin: stop.origin, staged_id: stop.staged_id });
        }
        if internal {
            let waiting = self.unset_point(session, &gate_id).await?;
            self.resume_waiting(waiting).await?;
        }
        Ok(())
    }

    /// The first pause after a launch with stops, waited for a bounded time: the paused
    /// thread with its arguments, or `running` / `exited`.
    pub(crate) async fn launch_pause(self: &Arc<Engine>, session_id: &str, wait_ms: u64) -> Result<serde_json::Value> {
        let r = self.wait_for_pause(session_id, std::time::Duration::from_millis(wait_ms)).await?;
        let mut out = serde_json::to_value(&r).unwrap_or_default();
        if let (Some(tid), Ok(s)) = (r.thread_id, self.session(session_id)) {
            if let Some(p) = s.debug.lock().paused.get(&tid) {
                out["arguments"] = p.arguments.clone();
            }
        }
        Ok(out)
    }
}
