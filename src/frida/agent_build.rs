//! The agent injected into targets: TypeScript sources embedded in the binary, compiled by
//! the Frida host (`frida.Compiler`, offline, full type check) on first use and cached by
//! content hash as `cache_dir/agent-<hash>.js`.

use std::fs::File;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::host::{hex16, write_atomically, FridaHost};
use super::python_env::FRIDA_VERSION;
use crate::error::{Result, StrobeError};

/// The agent's sources, as (path relative to the agent project root, text).
pub const AGENT_SOURCES: &[(&str, &str)] = &[
    ("src/index.ts", include_str!("../../agent/src/index.ts")),
    ("src/hooks.ts", include_str!("../../agent/src/hooks.ts")),
    ("src/events.ts", include_str!("../../agent/src/events.ts")),
    ("src/clock.ts", include_str!("../../agent/src/clock.ts")),
    ("src/fastpath.ts", include_str!("../../agent/src/fastpath.ts")),
    ("src/fastpath_c.ts", include_str!("../../agent/src/fastpath_c.ts")),
    ("src/wrappers.ts", include_str!("../../agent/src/wrappers.ts")),
    ("src/wrapper_unwind.ts", include_str!("../../agent/src/wrapper_unwind.ts")),
    ("src/unwinding.ts", include_str!("../../agent/src/unwinding.ts")),
    ("src/quiesce.ts", include_str!("../../agent/src/quiesce.ts")),
    ("src/js_gate.ts", include_str!("../../agent/src/js_gate.ts")),
    ("src/logpoint_messages.ts", include_str!("../../agent/src/logpoint_messages.ts")),
    ("src/batch.ts", include_str!("../../agent/src/batch.ts")),
    ("src/outbox.ts", include_str!("../../agent/src/outbox.ts")),
    ("src/cost_sampling.ts", include_str!("../../agent/src/cost_sampling.ts")),
    ("src/crash.ts", include_str!("../../agent/src/crash.ts")),
    ("src/frames.ts", include_str!("../../agent/src/frames.ts")),
    ("src/hook_frames.ts", include_str!("../../agent/src/hook_frames.ts")),
    ("src/modules.ts", include_str!("../../agent/src/modules.ts")),
    ("src/dlopen_watch.ts", include_str!("../../agent/src/dlopen_watch.ts")),
    ("src/altstack.ts", include_str!("../../agent/src/altstack.ts")),
    ("src/compiled.ts", include_str!("../../agent/src/compiled.ts")),
    ("src/threads.ts", include_str!("../../agent/src/threads.ts")),
    ("src/debugger_rpc.ts", include_str!("../../agent/src/debugger_rpc.ts")),
    ("src/breakpoints.ts", include_str!("../../agent/src/breakpoints.ts")),
    ("src/pause.ts", include_str!("../../agent/src/pause.ts")),
    ("src/stepping.ts", include_str!("../../agent/src/stepping.ts")),
    ("src/values.ts", include_str!("../../agent/src/values.ts")),
    ("src/probes.ts", include_str!("../../agent/src/probes.ts")),
    ("src/probe_detach.ts", include_str!("../../agent/src/probe_detach.ts")),
    ("src/hwbreak.ts", include_str!("../../agent/src/hwbreak.ts")),
    ("src/serialize.ts", include_str!("../../agent/src/serialize.ts")),
    ("src/watches.ts", include_str!("../../agent/src/watches.ts")),
    ("src/memory.ts", include_str!("../../agent/src/memory.ts")),
    ("src/forksafe.ts", include_str!("../../agent/src/forksafe.ts")),
    ("src/fd_guard.ts", include_str!("../../agent/src/fd_guard.ts")),
    ("src/import_slots.ts", include_str!("../../agent/src/import_slots.ts")),
    ("src/xmm.ts", include_str!("../../agent/src/xmm.ts")),
    ("src/capture.ts", include_str!("../../agent/src/capture.ts")),
    ("src/capture_c.ts", include_str!("../../agent/src/capture_c.ts")),
    // Machine code of agent/native/capture_walk.c, compiled by build.rs.
    ("src/capture_walk.ts", include_str!(concat!(env!("OUT_DIR"), "/capture_walk.ts"))),
];

/// The entry point, relative to the project root.
pub const AGENT_ENTRY: &str = "src/index.ts";

/// Content hash of the agent sources (and the Frida version that compiles them).
pub fn agent_hash() -> String {
    let mut h = Sha256::new();
    h.update(FRIDA_VERSION.as_bytes());
    for (name, text) in AGENT_SOURCES {
        h.update((name.len() as u64).to_le_bytes());
        h.update(name.as_bytes());
        h.update((text.len() as u64).to_le_bytes());
        h.update(text.as_bytes());
    }
    hex16(&h.finalize())
}

/// Where the compiled agent for the current sources is cached.
pub fn agent_cache_path(cache_dir: &Path) -> PathBuf {
    cache_dir.join(format!("agent-{}.js", agent_hash()))
}

/// The compiled agent: from the cache, or compiled by `host` (once; concurrent callers in
/// other processes wait on a file lock).
pub async fn agent_js(host: &FridaHost, cache_dir: &Path) -> Result<String> {
    let hash = agent_hash();
    let out = cache_dir.join(format!("agent-{hash}.js"));
    if let Ok(js) = std::fs::read_to_string(&out) {
        return Ok(js);
    }
    std::fs::create_dir_all(cache_dir)
        .map_err(|e| StrobeError::internal(format!("cannot create {}: {e}", cache_dir.display())))?;

    let lock_path = cache_dir.join("agent.lock");
    let lock = tokio::task::spawn_blocking(move || -> Result<File> {
        let f = File::create(&lock_path)
            .map_err(|e| StrobeError::internal(format!("cannot create {}: {e}", lock_path.display())))?;
        f.lock().map_err(|e| StrobeError::internal(format!("cannot lock {}: {e}", lock_path.display())))?;
        Ok(f)
    })
    .await
    .map_err(|e| StrobeError::internal(format!("agent cache lock task failed: {e}")))??;

    if let Ok(js) = std::fs::read_to_string(&out) {
        return Ok(js);
    }
    let src_dir = cache_dir.join(format!("agent-src-{hash}"));
    for (name, text) in AGENT_SOURCES {
        let path = src_dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| StrobeError::internal(format!("cannot create {}: {e}", parent.display())))?;
        }
        std::fs::write(&path, text).map_err(|e| StrobeError::internal(format!("cannot write {}: {e}", path.display())))?;
    }
    let js = host.compile(&src_dir, AGENT_ENTRY).await?;
    write_atomically(&out, js.as_bytes())?;
    drop(lock);
    Ok(js)
}
