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
    let home = tempfile::tempdir().unwrap();
    let cache_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target").join("strobe-cache");
    let engine = Engine::new(EngineConfig { home: home.path().to_path_buf(), cache_dir }).unwrap();
    Harness { home, engine }
}
