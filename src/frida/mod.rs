//! Frida, reached through the official Python package: a "Frida host" child process
//! (`agent/host.py`) owns the Frida device, sessions and scripts, and talks to the daemon
//! over framed stdin/stdout (see [`host`]). The agent injected into targets is TypeScript
//! under `agent/src/`, compiled by the host and cached (see [`agent_build`]).
//!
//! [`FridaRuntime::start`] does it all: Python env → host → compiled agent.

pub mod agent_build;
pub mod host;
pub mod python_env;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::error::{Result, StrobeError};

pub use agent_build::agent_js;
pub use host::{host_script_path, FridaHost, HostEvent};
pub use python_env::{ensure_python_env, FRIDA_VERSION};

/// What a Frida start-up is doing now (for progress notifications); `None` when idle.
static SETUP_PHASE: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

pub(crate) fn set_setup_phase(phase: Option<String>) {
    *SETUP_PHASE.lock().unwrap() = phase;
}

/// The start-up phase under way, e.g. "installing the Frida Python package (first use)".
pub fn setup_phase() -> Option<String> {
    SETUP_PHASE.lock().unwrap().clone()
}

/// A started Frida host with the compiled agent: what a session needs to spawn and instrument.
pub struct FridaRuntime {
    host: Arc<FridaHost>,
    agent_js: Arc<str>,
    python: PathBuf,
    cache_dir: PathBuf,
    /// How long each start-up phase took (env, host, agent).
    pub timings: StartTimings,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct StartTimings {
    pub python_env: Duration,
    pub host_start: Duration,
    pub agent_build: Duration,
}

impl FridaRuntime {
    /// Ensure the Python env (may take ~20 s the very first time), start the host (its events
    /// go to `events`), and get the compiled agent (cached by content hash).
    pub async fn start(cache_dir: &Path, events: mpsc::UnboundedSender<HostEvent>) -> Result<FridaRuntime> {
        let t0 = Instant::now();
        let dir = cache_dir.to_path_buf();
        set_setup_phase(Some("checking the Frida Python environment".into()));
        let python = tokio::task::spawn_blocking(move || ensure_python_env(&dir)).await;
        set_setup_phase(Some("starting the Frida host".into()));
        let python = python.map_err(|e| {
            set_setup_phase(None);
            StrobeError::internal(format!("Python environment setup panicked: {e}"))
        })?;
        let started = async {
            let python = python?;
            let t1 = Instant::now();
            let script = host_script_path(cache_dir)?;
            let host = Arc::new(FridaHost::start(&python, &script, events).await?);
            set_setup_phase(Some("compiling the agent (first use of these sources)".into()));
            Ok::<_, StrobeError>((python, host, t1))
        }
        .await;
        let (python, host, t1) = match started {
            Ok(s) => s,
            Err(e) => {
                set_setup_phase(None);
                return Err(e);
            }
        };
        let t2 = Instant::now();
        let js = agent_js(&host, cache_dir).await;
        set_setup_phase(None);
        let js = match js {
            Ok(js) => js,
            Err(e) => {
                host.shutdown(Duration::from_secs(2)).await;
                return Err(e);
            }
        };
        let t3 = Instant::now();
        let timings = StartTimings { python_env: t1 - t0, host_start: t2 - t1, agent_build: t3 - t2 };
        tracing::debug!("Frida runtime started: {timings:?}");
        Ok(FridaRuntime { host, agent_js: Arc::from(js), python, cache_dir: cache_dir.to_path_buf(), timings })
    }

    pub fn host(&self) -> &Arc<FridaHost> {
        &self.host
    }

    /// The compiled agent, to pass to [`FridaHost::attach`].
    pub fn agent_js(&self) -> &str {
        &self.agent_js
    }

    pub fn python(&self) -> &Path {
        &self.python
    }

    pub fn cache_dir(&self) -> &Path {
        &self.cache_dir
    }

    pub fn is_alive(&self) -> bool {
        self.host.is_alive()
    }
}

impl std::fmt::Debug for FridaRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FridaRuntime").field("host", &self.host).field("python", &self.python).finish()
    }
}

/// Starts a [`FridaRuntime`] on first need and again after the host died.
pub struct LazyFridaRuntime {
    cache_dir: PathBuf,
    events: mpsc::UnboundedSender<HostEvent>,
    current: tokio::sync::Mutex<Option<Arc<FridaRuntime>>>,
}

impl LazyFridaRuntime {
    pub fn new(cache_dir: PathBuf, events: mpsc::UnboundedSender<HostEvent>) -> Self {
        LazyFridaRuntime { cache_dir, events, current: tokio::sync::Mutex::new(None) }
    }

    /// The running runtime, or a freshly started one if there is none or its host died.
    pub async fn get_or_start(&self) -> Result<Arc<FridaRuntime>> {
        let mut cur = self.current.lock().await;
        if let Some(rt) = cur.as_ref().filter(|rt| rt.is_alive()) {
            return Ok(rt.clone());
        }
        let rt = Arc::new(FridaRuntime::start(&self.cache_dir, self.events.clone()).await?);
        *cur = Some(rt.clone());
        Ok(rt)
    }

    /// The running runtime, without starting one.
    pub async fn current(&self) -> Option<Arc<FridaRuntime>> {
        self.current.lock().await.as_ref().filter(|rt| rt.is_alive()).cloned()
    }
}
