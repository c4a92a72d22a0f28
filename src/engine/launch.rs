//! `launch`: spawn a target suspended under Frida, load the agent, apply the caller's staged
//! patterns and its stops (launch_points.rs), then let it run. Output is captured from the
//! first byte.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

use super::{canonical_or_same, monotonic_ns, now_unix, Engine, Session};
use crate::error::{ErrorCode, Result, StrobeError};
use crate::store::SessionRow;

#[derive(Debug, Clone, Default)]
pub struct LaunchRequest {
    pub command: String,
    pub args: Vec<String>,
    pub cwd: Option<String>,
    pub project_root: String,
    pub env: Vec<(String, String)>,
    /// Breakpoints/logpoints set before the first instruction runs.
    pub breakpoints: Vec<super::PointRequest>,
    /// Pause at the program's `main` (the user's `<crate>::main` for Rust).
    pub stop_on_entry: bool,
    /// Whose staged patterns and breakpoints apply (staging.rs).
    pub scope: super::StageScope,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LaunchResult {
    pub session_id: String,
    pub pid: u32,
    pub pending_patterns_applied: usize,
    pub hooked_functions: usize,
    /// The staged patterns it applied.
    pub staged_patterns: Vec<String>,
    /// The stops it installed before the process ran (stopOnEntry, staged, its own).
    pub breakpoints: Vec<super::launch_points::LaunchPoint>,
    /// With stops: the first pause (or `running`/`exited`) after a bounded wait.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pause: Option<serde_json::Value>,
    pub warnings: Vec<String>,
    /// A Python program where a staged pattern matched no native function (python_target.rs).
    pub python_target: bool,
}

/// Resolve `command` like a shell would: a path with a slash is taken relative to `cwd`,
/// a bare name is looked up in `PATH`.
pub(super) fn resolve_command(command: &str, cwd: &Path) -> Result<PathBuf> {
    if command.trim().is_empty() {
        return Err(StrobeError::validation("'command' is empty. Pass the path to the executable to debug."));
    }
    let candidate = if command.contains('/') {
        let p = Path::new(command);
        if p.is_absolute() { p.to_path_buf() } else { cwd.join(p) }
    } else {
        let found = std::env::var_os("PATH")
            .map(|paths| std::env::split_paths(&paths).map(|d| d.join(command)).find(|p| p.is_file()));
        match found.flatten() {
            Some(p) => p,
            None => cwd.join(command),
        }
    };
    let meta = std::fs::metadata(&candidate).map_err(|_| {
        StrobeError::validation(format!(
            "Command '{}' does not exist. Check the path (relative paths are resolved against cwd '{}'), and build the program first if needed.",
            candidate.display(),
            cwd.display()
        ))
    })?;
    use std::os::unix::fs::PermissionsExt;
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return Err(StrobeError::validation(format!(
            "'{}' is not an executable file. Pass the compiled program (chmod +x if needed).",
            candidate.display()
        )));
    }
    Ok(canonical_or_same(&candidate))
}

/// `{binary}-{YYYY-MM-DD}-{HHhMM}`, local time, with `-2`, `-3`… on collision. `taken`
/// says whether an id is in use (live, launching or stored).
fn session_id_for(binary: &Path, taken: impl Fn(&str) -> Result<bool>) -> Result<String> {
    let name: String = binary
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_else(|| "session".into())
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.' { c } else { '_' })
        .collect();
    let base = format!("{name}-{}", chrono::Local::now().format("%Y-%m-%d-%Hh%M"));
    if !taken(&base)? {
        return Ok(base);
    }
    for n in 2.. {
        let id = format!("{base}-{n}");
        if !taken(&id)? {
            return Ok(id);
        }
    }
    unreachable!()
}

/// A binary and session id held by one launch until it has registered its session (or
/// failed): concurrent launches of the same binary see it and are refused before spawning.
struct Reservation<'a> {
    engine: &'a Engine,
    binary: PathBuf,
    id: String,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        self.engine.launching.lock().unwrap().remove(&self.binary);
    }
}

impl Engine {
    /// One live session per binary (a second would race on the same output), checked and
    /// reserved atomically with the session id, under the sessions lock.
    fn reserve_launch(&self, binary: &Path) -> Result<Reservation<'_>> {
        let sessions = self.sessions.lock().unwrap();
        let mut launching = self.launching.lock().unwrap();
        let existing = sessions
            .values()
            .find(|s| s.is_running() && s.binary_path == binary)
            .map(|s| s.id.clone())
            .or_else(|| launching.get(binary).cloned());
        if let Some(existing) = existing {
            return Err(StrobeError::new(
                ErrorCode::SessionExists,
                format!(
                    "Session '{existing}' is already active for {}. Call debug_session {{action: 'stop', sessionId: '{existing}'}} before relaunching.",
                    binary.display()
                ),
            ));
        }
        let id = session_id_for(binary, |id| {
            Ok(sessions.contains_key(id) || launching.values().any(|l| l == id) || self.store.session_id_exists(id)?)
        })?;
        launching.insert(binary.to_path_buf(), id.clone());
        Ok(Reservation { engine: self, binary: binary.to_path_buf(), id })
    }
}

impl Engine {
    pub async fn launch(self: &Arc<Engine>, req: LaunchRequest) -> Result<LaunchResult> {
        if req.project_root.trim().is_empty() {
            return Err(StrobeError::validation(
                "'projectRoot' is required: the root directory of the code being debugged (used for @usercode).",
            ));
        }
        let project_root = PathBuf::from(&req.project_root);
        if !project_root.is_dir() {
            return Err(StrobeError::validation(format!(
                "projectRoot '{}' is not a directory. Pass the root of the project being debugged.",
                project_root.display()
            )));
        }
        let cwd = match &req.cwd {
            Some(c) => {
                let c = PathBuf::from(c);
                if !c.is_dir() {
                    return Err(StrobeError::validation(format!("cwd '{}' is not a directory.", c.display())));
                }
                c
            }
            None => std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
        };
        let command = resolve_command(&req.command, &cwd)?;
        // A `#!` script runs as its interpreter's process (shebang.rs).
        let (binary, mut argv) = match super::shebang::interpreter_of(&command) {
            Some(started) => started,
            None => (command.clone(), vec![command.display().to_string()]),
        };

        // Held until the session is registered or the launch failed (dropped on return).
        let reservation = self.reserve_launch(&binary)?;

        // Staged patterns were parsed when staged; stops are resolved against the binary
        // now, so a bad one fails before anything runs.
        let staged = self.staged(req.scope);
        let pending = staged.patterns.clone();
        let mut stops = self.prepare_launch_stops(&binary, &canonical_or_same(&project_root), req.stop_on_entry, &staged.breakpoints, &req.breakpoints)?;
        let stop_warnings = std::mem::take(&mut stops.warnings);
        // Logpoints never pause: only breakpoints are worth waiting for.
        let pauses = stops.stops.iter().any(|s| s.prepared.request.message.is_none());
        let wait_ms = match (req.stop_on_entry, pauses) {
            (true, _) => Some(super::launch_points::ENTRY_PAUSE_WAIT_MS),
            (false, true) => Some(super::launch_points::BREAKPOINT_PAUSE_WAIT_MS),
            (false, false) => None,
        };

        let frida = self.frida().await?;
        let session_id = reservation.id.clone();
        argv.extend(req.args.iter().cloned());
        let mut env: Vec<(String, String)> = std::env::vars().filter(|(k, _)| !k.starts_with("STROBE_")).collect();
        for (k, v) in &req.env {
            env.retain(|(ek, _)| ek != k);
            env.push((k.clone(), v.clone()));
        }

        let start_mono_ns = monotonic_ns();
        let pid = frida.host().spawn(&argv, Some(&cwd), &env).await?;
        let session = Arc::new(Session::new(
            session_id.clone(),
            pid,
            binary.clone(),
            canonical_or_same(&project_root),
            start_mono_ns,
        ));
        // Register before resuming so the very first bytes of output find their session.
        self.sessions.lock().unwrap().insert(session_id.clone(), session.clone());
        self.by_pid.lock().unwrap().insert(pid, session.clone());
        let created = self.store.create_session(&SessionRow {
            id: session_id.clone(),
            binary_path: binary.display().to_string(),
            project_root: session.project_root.display().to_string(),
            pid: pid as i64,
            started_at: now_unix(),
            ended_at: None,
            status: "running".into(),
            exit_code: None,
        });
        if let Err(e) = created {
            // Nothing half-registered and no suspended process left behind.
            let _ = frida.host().kill(pid).await;
            self.sessions.lock().unwrap().remove(&session_id);
            self.by_pid.lock().unwrap().remove(&pid);
            return Err(e);
        }
        // Settings are read now (not cached): the FIFO limit, and warnings about bad values.
        let settings_warnings = self.apply_event_limit(&session_id, &session.project_root).warnings;

        let image_base = self.symbols.get(&binary).map(|s| s.image_base).unwrap_or(0);
        let init = serde_json::json!({
            "sessionId": session_id,
            "imageBase": format!("0x{image_base:x}"),
            "followChildren": super::children::follow_children(),
        });
        let setup = async {
            frida.host().attach(pid, frida.agent_js(), init).await?;
            // Libraries with DWARF join the symbols before staged hooks resolve (modules.rs).
            self.load_modules(&session).await;
            let mut applied = (0, 0, Vec::new(), false);
            if !pending.is_empty() {
                let r = self.apply_trace(&session, &pending, &[]).await?;
                applied = (pending.len(), r.hooked_functions, r.warnings, r.python_target);
            }
            let mut stops = self.install_launch_stops(&session, stops).await?;
            frida.host().resume(pid).await?;
            self.arm_at_gate(&session, &mut stops).await?;
            Ok::<_, StrobeError>((applied, stops.points.into_iter().flatten().collect::<Vec<_>>()))
        };
        match setup.await {
            Ok(((pending_applied, hooked, mut warnings, python_target), points)) => {
                warnings.extend(settings_warnings);
                warnings.extend(stop_warnings);
                let pause = match wait_ms {
                    Some(ms) => Some(self.launch_pause(&session_id, ms).await?),
                    None => None,
                };
                Ok(LaunchResult {
                    session_id,
                    pid,
                    pending_patterns_applied: pending_applied,
                    hooked_functions: hooked,
                    staged_patterns: pending,
                    breakpoints: points,
                    pause,
                    warnings,
                    python_target,
                })
            }
            Err(e) => {
                let _ = frida.host().kill(pid).await;
                self.sessions.lock().unwrap().remove(&session_id);
                self.by_pid.lock().unwrap().remove(&pid);
                let _ = self.store.delete_session(&session_id);
                Err(match e.code {
                    ErrorCode::InvalidPattern | ErrorCode::NoDebugSymbols | ErrorCode::ValidationError => e,
                    _ => StrobeError::new(ErrorCode::FridaAttachFailed, format!("Failed to attach Frida: {}", e.message)),
                })
            }
        }
    }
}
