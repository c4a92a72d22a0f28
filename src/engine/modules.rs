//! Shared libraries with DWARF: the program's code often lives in a `.so` built with -g.
//! Every module the agent reports (at attach, and each library dlopen loads later,
//! agent/src/modules.ts) that has DWARF functions joins the session's function index.
//!
//! One address space serves every module: the main image's static addresses, extended to
//! libraries as `runtime - main slide` (a "session address"). The agent turns any session
//! address into a runtime one by adding the main slide, as it always did for the program, so
//! hooks, breakpoints, globals and pauses work in libraries unchanged. A library function's
//! session address is its static address + `offset` (its load bias minus the main slide).
//! Library functions are appended to the session's index (`session_symbols`) in load order,
//! so function ids (hooks, events) never move. DWARF lookups (lines, locals, types) go to the
//! module that holds an address, at its own static address (`locate`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{json, Value};

use super::debug_state::parse_hex;
use super::{Engine, Session};
use crate::symbols::{DebugInfo, SymbolIndex};

/// A loaded library with DWARF.
#[derive(Debug, Clone)]
pub(crate) struct LibModule {
    pub path: PathBuf,
    pub index: Arc<SymbolIndex>,
    /// session address = static address + offset (wrapping).
    pub offset: u64,
    /// Its functions in the session's index: `first..first + count`.
    pub first: u32,
    pub count: u32,
    /// Session addresses it occupies: [start, end).
    pub start: u64,
    pub end: u64,
}

#[derive(Default)]
pub(crate) struct ModuleState {
    /// Runtime base of the main image minus its static image base.
    pub main_slide: Option<u64>,
    pub libs: Vec<LibModule>,
    /// Module paths already looked at (with DWARF or not).
    pub seen: std::collections::HashSet<PathBuf>,
    /// The main image's functions followed by every library's, at session addresses.
    pub merged: Option<Arc<SymbolIndex>>,
    /// Every reported module (with DWARF or not), for naming function pointers.
    pub code: Arc<super::code_names::CodeNames>,
    /// Whether `code` as it is now went to the store with a capture (decode.rs).
    pub code_stored: bool,
}

/// Where a session address is: a module's file and the address in it.
#[derive(Debug, Clone)]
pub(crate) struct Located {
    pub path: PathBuf,
    pub static_addr: u64,
    /// session address = static address + offset.
    pub offset: u64,
}

impl Engine {
    /// Ask `session`'s agent for its modules (and to report later loads); index those with
    /// DWARF. Called once the agent is attached, before staged hooks and breakpoints.
    pub(crate) async fn load_modules(&self, session: &Session) {
        let Ok(frida) = self.frida_running() else { return };
        match frida.host().rpc(session.pid, "modules", json!([])).await {
            Ok(reply) => {
                let list = reply.get("modules").and_then(Value::as_array).cloned().unwrap_or_default();
                self.add_modules(session, &list);
            }
            Err(e) => tracing::warn!("session {}: module list unavailable: {}", session.id, e.message),
        }
    }

    /// Index the modules of `list` (`{path, base, size}`) that have DWARF; true if any did.
    pub(crate) fn add_modules(&self, session: &Session, list: &[Value]) -> bool {
        let main = super::canonical_or_same(&session.binary_path);
        // A program without DWARF of its own still gets its libraries' (an empty index first).
        let main_index = self.symbols.get(&session.binary_path).ok().or_else(|| {
            Some(Arc::new(SymbolIndex { binary: main.clone(), image_base: super::backtrace::image_base_of(&main), functions: Vec::new() }))
        });
        let mut added = Vec::new();
        {
            let mut st = session.state.lock().unwrap();
            let code: Vec<(u64, u64, PathBuf)> = list
                .iter()
                .filter_map(|m| Some((parse_hex(m.get("base"))?, m.get("size").and_then(Value::as_u64)?, PathBuf::from(m.get("path").and_then(Value::as_str)?))))
                .collect();
            st.modules.code = Arc::new(st.modules.code.with(&code));
            st.modules.code_stored = false;
            if st.modules.main_slide.is_none() {
                let main_entry = list.iter().find(|m| m.get("path").and_then(Value::as_str).is_some_and(|p| super::canonical_or_same(Path::new(p)) == main)).or(list.first());
                if let (Some(m), Some(idx)) = (main_entry, &main_index) {
                    st.modules.main_slide = parse_hex(m.get("base")).map(|b| b.wrapping_sub(idx.image_base));
                }
            }
            for m in list {
                let Some(path) = m.get("path").and_then(Value::as_str).map(PathBuf::from) else { continue };
                let canonical = super::canonical_or_same(&path);
                if canonical == main || !st.modules.seen.insert(canonical.clone()) {
                    continue;
                }
                if let (Some(base), Some(size)) = (parse_hex(m.get("base")), m.get("size").and_then(Value::as_u64)) {
                    added.push((canonical, base, size));
                }
            }
        }
        let Some(slide) = session.state.lock().unwrap().modules.main_slide else { return false };
        let mut any = false;
        for (path, base, size) in added {
            // System libraries have no DWARF: the index says so at once (NO_DEBUG_SYMBOLS).
            let Ok(index) = self.symbols.get(&path) else { continue };
            let offset = base.wrapping_sub(index.image_base).wrapping_sub(slide);
            let mut st = session.state.lock().unwrap();
            let mut merged: SymbolIndex = match st.modules.merged.as_deref().cloned().or_else(|| main_index.as_deref().cloned()) {
                Some(m) => m,
                None => continue,
            };
            let first = merged.functions.len() as u32;
            merged.functions.extend(index.functions.iter().filter(|f| f.address != 0).map(|f| {
                let mut f = f.clone();
                f.address = f.address.wrapping_add(offset);
                f
            }));
            let count = merged.functions.len() as u32 - first;
            let start = base.wrapping_sub(slide);
            st.modules.libs.push(LibModule { path: path.clone(), index: index.clone(), offset, first, count, start, end: start.wrapping_add(size) });
            let merged = Arc::new(merged);
            st.modules.merged = Some(merged.clone());
            st.symbols = Some(merged);
            tracing::debug!("session {}: {} functions of {} indexed", session.id, count, path.display());
            any = true;
        }
        any
    }

    /// The module holding session address `addr`, and the address in its file.
    pub(crate) fn locate(&self, session: &Session, addr: u64) -> Located {
        let st = session.state.lock().unwrap();
        match st.modules.libs.iter().find(|m| addr >= m.start && addr < m.end) {
            Some(m) => Located { path: m.path.clone(), static_addr: addr.wrapping_sub(m.offset), offset: m.offset },
            None => Located { path: session.binary_path.clone(), static_addr: addr, offset: 0 },
        }
    }

    /// The DWARF of function `id` of `symbols` (the session's index or a child's own) and
    /// its static address there.
    pub(crate) fn function_dwarf(&self, session: &Session, symbols: &SymbolIndex, id: u32) -> Option<(Arc<DebugInfo>, u64)> {
        let f = symbols.functions.get(id as usize)?;
        if symbols.binary == super::canonical_or_same(&session.binary_path) {
            let lib = session.state.lock().unwrap().modules.libs.iter().find(|m| id >= m.first && id < m.first + m.count).cloned();
            if let Some(m) = lib {
                return Some((DebugInfo::of(&m.index).ok()?, f.address.wrapping_sub(m.offset)));
            }
        }
        Some((DebugInfo::of(symbols).ok()?, f.address))
    }

    /// Shared libraries with DWARF: (file, offset to session addresses, session range).
    pub(crate) fn dwarf_libraries(&self, session: &Session) -> Vec<(PathBuf, u64, (u64, u64))> {
        session.state.lock().unwrap().modules.libs.iter().map(|m| (m.path.clone(), m.offset, (m.start, m.end))).collect()
    }

    /// Every module with DWARF: (file, offset to session addresses), the program first.
    pub(crate) fn dwarf_modules(&self, session: &Session) -> Vec<(PathBuf, u64)> {
        let st = session.state.lock().unwrap();
        std::iter::once((session.binary_path.clone(), 0)).chain(st.modules.libs.iter().map(|m| (m.path.clone(), m.offset))).collect()
    }

    /// A library loaded at run time (the agent waits for the ack): index it, hook what the
    /// patterns select in it, and set the breakpoints that were pending on it.
    pub(crate) async fn on_modules_loaded(&self, session: &Session, pid: u32, message: &Value) {
        let list = message.get("modules").and_then(Value::as_array).cloned().unwrap_or_default();
        if pid == session.pid && self.add_modules(session, &list) {
            let patterns = session.patterns();
            if !patterns.is_empty() {
                if let Err(e) = self.apply_trace(session, &[], &[]).await {
                    tracing::warn!("session {}: patterns not applied to a loaded library: {}", session.id, e.message);
                }
            }
            self.resolve_pending_points(session).await;
        }
        if let Ok(frida) = self.frida_running() {
            let _ = frida.host().post(pid, json!({ "type": "modules-ack" })).await;
        }
    }
}

/// Where the program keeps its copy of a shared library's global `name` (a copy relocation:
/// the executable defines and exports it, and the library's code uses that copy through its
/// GOT), at the program's static address.
pub(crate) fn copy_relocated(program: &Path, name: &str) -> Option<u64> {
    use object::{Object, ObjectSymbol, SymbolKind};
    let data = std::fs::read(program).ok()?;
    let obj = object::File::parse(&*data).ok()?;
    obj.dynamic_symbols()
        .find(|s| s.kind() == SymbolKind::Data && s.is_definition() && s.name().ok() == Some(name))
        .map(|s| s.address())
}
