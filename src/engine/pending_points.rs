//! Breakpoints and logpoints in code that is not loaded yet: in a program that loads
//! libraries at run time (it imports `dlopen`), a function or file that no loaded module has
//! is "pending" (gdb's pending breakpoint) instead of an error. When a library loads
//! (modules.rs), pending points resolve again; the loading thread waits until they are set,
//! so the first call into the library already stops.

use object::{Object, ObjectSymbol};
use serde_json::Value;

use super::breakpoints::PointRequest;
use super::debug_state::PointInfo;
use super::point_resolve::prepare;
use super::{Engine, Session};
use crate::error::StrobeError;

/// Whether `err` (resolving a point) only says the code is in no loaded module, in a
/// program that may load more (it imports dlopen).
pub(super) fn may_load_later(binary: &std::path::Path, err: &StrobeError) -> bool {
    let missing = err.message.starts_with("No function matches") || err.message.starts_with("No source file matching");
    missing && loads_libraries(binary)
}

/// A pending point for `req` (no address yet).
pub(super) fn pending_info(id: &str, req: &PointRequest) -> PointInfo {
    PointInfo {
        id: id.to_string(),
        logpoint: req.message.is_some(),
        function: req.function.clone(),
        file: req.file.clone(),
        line: req.line,
        address: String::new(),
        addresses: Vec::new(),
        runtime_address: None,
        module: None,
        condition: req.condition.clone(),
        hit_count: req.hit_count.filter(|&n| n > 0),
        message: req.message.clone(),
        hits: 0,
        hook: "pending".into(),
        hook_reason: Some(format!("{} is in no loaded code yet; it is set when a library that has it is loaded (dlopen)", req.describe())),
        pending: true,
        request: req.clone(),
        agent_spec: Value::Null,
    }
}

/// Whether the program imports `dlopen` (it may load code later).
fn loads_libraries(binary: &std::path::Path) -> bool {
    let Ok(data) = std::fs::read(binary) else { return false };
    let Ok(obj) = object::File::parse(&*data) else { return false };
    let imports_dlopen = obj.dynamic_symbols().any(|s| s.is_undefined() && matches!(s.name(), Ok(n) if n.starts_with("dlopen") || n.starts_with("dlmopen")));
    imports_dlopen
}

impl Engine {
    /// Record a pending point; its id.
    pub(super) fn add_pending_point(&self, session: &Session, req: &PointRequest) -> String {
        let mut st = session.debug.lock();
        st.next_id += 1;
        let id = format!("{}-{}", if req.message.is_some() { "lp" } else { "bp" }, st.next_id);
        st.points.insert(id.clone(), pending_info(&id, req));
        id
    }

    /// After a library loaded: set every pending point it has (root and forks; install_one).
    pub(super) async fn resolve_pending_points(&self, session: &Session) {
        let pending: Vec<PointInfo> = session.debug.lock().points.values().filter(|p| p.pending).cloned().collect();
        if pending.is_empty() {
            return;
        }
        let Ok(target) = self.point_target(session) else { return };
        for p in pending {
            let Ok(prepared) = prepare(&target, &p.request) else { continue };
            if let Err(e) = self.install_one(session, &prepared, Some(&p.id)).await {
                tracing::warn!("session {}: pending {} could not be set: {}", session.id, p.id, e.message);
            }
        }
    }
}
