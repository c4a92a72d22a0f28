//! Hooks in followed children (forks and execs, lifecycle.rs): a child gets the session's
//! patterns when it is instrumented, and again whenever `debug_trace` changes them. A fork
//! runs the session's binary and gets the root's hooked set; an exec'd program has its own
//! symbols, matched against the patterns.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use serde_json::{json, Value};

use super::{Engine, Session};
use crate::frida::FridaRuntime;
use crate::symbols::SymbolIndex;

/// Whether forks and execs are followed: yes, unless the daemon runs with
/// `STROBE_FOLLOW_CHILDREN=0` (the host enables Frida's child gating when the agent's init
/// says so, and the agent gates the program's fork() calls, agent/src/forksafe.ts).
pub(super) fn follow_children() -> bool {
    std::env::var("STROBE_FOLLOW_CHILDREN").map_or(true, |v| v != "0")
}

/// The functions of `symbols` that the session's current patterns select in child `pid`.
fn wanted(s: &Session, pid: u32, symbols: &SymbolIndex) -> BTreeSet<u32> {
    let st = s.state.lock().unwrap();
    if !st.life.has_own_image(pid) {
        return st.hooked.clone();
    }
    let mut seen = HashSet::new();
    symbols
        .functions
        .iter()
        .enumerate()
        .filter(|(_, f)| f.address != 0 && st.patterns.iter().any(|p| p.matches(f, &s.project_root)))
        .filter(|(_, f)| seen.insert(f.address))
        .map(|(i, _)| i as u32)
        .take(super::trace::MAX_HOOKS)
        .collect()
}

fn describe(symbols: &SymbolIndex, ids: &BTreeSet<u32>) -> Vec<Value> {
    ids.iter()
        .map(|&i| {
            let f = &symbols.functions[i as usize];
            json!({ "id": i, "address": format!("0x{:x}", f.address), "name": f.name })
        })
        .collect()
}

/// Bring child `pid`'s hooks to what the patterns select now.
pub(super) async fn sync_child(frida: &FridaRuntime, s: &Session, pid: u32, symbols: &SymbolIndex) -> crate::error::Result<()> {
    let want = wanted(s, pid, symbols);
    let have = s.state.lock().unwrap().life.child_hooked.get(&pid).cloned().unwrap_or_default();
    let remove: BTreeSet<u32> = have.difference(&want).copied().collect();
    let add: BTreeSet<u32> = want.difference(&have).copied().collect();
    if !remove.is_empty() {
        frida.host().rpc(pid, "hooks", json!([{ "action": "remove", "functions": describe(symbols, &remove) }])).await?;
    }
    let mut hooked: BTreeSet<u32> = have.difference(&remove).copied().collect();
    if !add.is_empty() {
        let reply = frida.host().rpc(pid, "hooks", json!([{ "action": "add", "functions": describe(symbols, &add) }])).await?;
        let installed = reply.get("installed").and_then(Value::as_array).into_iter().flatten();
        hooked.extend(installed.filter_map(Value::as_u64).map(|v| v as u32));
    }
    s.state.lock().unwrap().life.child_hooked.insert(pid, hooked);
    Ok(())
}

impl Engine {
    /// After the root's hooks changed: the same change in every live child. A child that
    /// cannot be updated (it is exiting) is named in the returned warnings.
    pub(super) async fn sync_children(&self, s: &Session) -> Vec<String> {
        let pids = s.state.lock().unwrap().life.live_children();
        if pids.is_empty() {
            return Vec::new();
        }
        let Ok(frida) = self.frida_running() else { return Vec::new() };
        let mut warnings = Vec::new();
        for pid in pids {
            let own = s.state.lock().unwrap().life.image_of(pid);
            let symbols: Option<Arc<SymbolIndex>> = own.or_else(|| self.session_symbols(s).ok());
            let Some(symbols) = symbols else { continue };
            if let Err(e) = sync_child(&frida, s, pid, &symbols).await {
                warnings.push(format!("Child process {pid} keeps its previous hooks: {}", e.message));
            }
        }
        warnings
    }
}
