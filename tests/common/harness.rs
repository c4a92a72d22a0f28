//! An engine on a temporary STROBE_HOME, with the shared agent cache of the build tree.

use std::path::Path;
use std::sync::Arc;

use strobe::engine::{Engine, EngineConfig};

pub struct Harness {
    /// The engine's home: settings.json goes here; removed with the harness.
    pub home: tempfile::TempDir,
    pub engine: Arc<Engine>,
}

pub fn harness() -> Harness {
    // The daemon's own log on stderr, to diagnose a failing test: STROBE_LOG=warn (or info).
    if let Ok(filter) = std::env::var("STROBE_LOG") {
        let _ = tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::new(filter)).with_writer(std::io::stderr).try_init();
    }
    let home = tempfile::tempdir().unwrap();
    let cache_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target").join("strobe-cache");
    let engine = Engine::new(EngineConfig { home: home.path().to_path_buf(), cache_dir }).unwrap();
    Harness { home, engine }
}
