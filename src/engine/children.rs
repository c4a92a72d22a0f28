//! Hooks in followed children (forks and execs, lifecycle.rs): a child gets the session's
//! patterns when it is instrumented, and again whenever `debug_trace` changes them. A fork
//! runs the session's binary and gets the root's hooked set; an exec'd program has its own
//! symbols, matched against the patterns.
//!
//! A fresh agent (a child's, or the root's after a re-attach) also gets what the session set
//! up besides patterns: tracing options, `serializationDepth`, typed-argument recipes, and —
//! for the session's own image only, since they name its addresses and functions — watches
//! and the functions taken out of sampling, breakpoints and logpoints. Later changes of each
//! reach live children too.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use serde_json::{json, Value};

use super::watches::SpecsFor;
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

/// The live followed processes that run the session's image (forks; not execs).
pub(super) fn live_forks(s: &Session) -> Vec<u32> {
    let live = s.state.lock().unwrap().life.live_children();
    live.into_iter().filter(|p| same_image(s, *p)).collect()
}

/// Whether `pid` runs the session's image (the root, or a fork of it).
fn same_image(s: &Session, pid: u32) -> bool {
    !s.state.lock().unwrap().life.has_own_image(pid)
}

/// What an agent did with `hooks add`.
pub(super) struct Added {
    pub installed: Vec<u32>,
    /// "Could not hook NAME: why", per function the agent refused.
    pub failed: Vec<String>,
}

/// Add hooks for `ids` in `pid`'s agent (the root's or a child's), with typed-argument
/// recipes and watch flags (watches.rs) and in the session's hook mode ("auto": the agent
/// puts hooks that need no JS on the CModule fast path, sampling.rs).
pub(super) async fn add_hooks(engine: &Engine, frida: &FridaRuntime, s: &Session, pid: u32, symbols: &SymbolIndex, ids: &BTreeSet<u32>) -> crate::error::Result<Added> {
    let mut specs = describe(symbols, ids);
    let target = if same_image(s, pid) { SpecsFor::SameImage(pid) } else { SpecsFor::OtherImage };
    let types = engine.enrich_hook_specs(s, symbols, &mut specs, target);
    let (mode, chosen_share) = {
        let st = s.state.lock().unwrap();
        (st.tracing.hook_mode(), st.tracing.agent_options.get("costShare").and_then(Value::as_f64))
    };
    // configure_tracing({costShare}) for this session wins over the setting.
    let cost_share = chosen_share.unwrap_or_else(|| engine.settings_for(Some(&s.project_root)).cost_share());
    let request = json!([{ "action": "add", "functions": specs, "types": types, "mode": mode, "costShare": cost_share }]);
    let reply = frida.host().rpc(pid, "hooks", request).await?;
    let list = |key: &str| reply.get(key).and_then(Value::as_array).cloned().unwrap_or_default();
    let warnings: Vec<String> = list("jsPath").iter().filter_map(Value::as_u64).filter_map(|i| js_path_avx_warning(engine, s, symbols, i as u32)).collect();
    s.state.lock().unwrap().tracing.hook_warnings.extend(warnings);
    Ok(Added {
        installed: list("installed").iter().filter_map(Value::as_u64).map(|v| v as u32).collect(),
        failed: list("failed")
            .iter()
            .map(|f| {
                let text = |k: &str, default: &'static str| f.get(k).and_then(Value::as_str).unwrap_or(default).to_string();
                format!("Could not hook {}: {}", text("name", "?"), text("error", "unknown error"))
            })
            .collect(),
    })
}

/// The warning for function `id` hooked on the JS path when GCC built it for AVX with
/// interprocedural register allocation: its callers may keep 256-bit values in vector
/// registers across the call, and Frida's trampoline saves only their lower halves while the
/// JS hook runs code (the JS runtime, glibc's AVX functions) that changes the rest. Its
/// native hook runs no AVX code (the `ipaRa` hook spec, watches.rs).
fn js_path_avx_warning(engine: &Engine, s: &Session, symbols: &SymbolIndex, id: u32) -> Option<String> {
    let (info, address) = engine.function_dwarf(s, symbols, id)?;
    let sig = info.signature(address)?;
    (sig.ipa_ra && sig.avx).then(|| {
        format!(
            "function '{}' is traced on the JS path (a watch on it, argumentsAtExit, tracing mode \"js\", or a value the native capture cannot print) in code GCC built for AVX with -O2: its callers may keep 256-bit values in vector registers across the call, and the JS hook can change their upper halves, so results can differ from an untraced run. If they do, trace it without what put it on the JS path: its native hook leaves them alone.",
            symbols.functions[id as usize].name
        )
    })
}

/// Remove the hooks of `ids` from `pid`'s agent.
pub(super) async fn remove_hooks(frida: &FridaRuntime, s: &Session, pid: u32, symbols: &SymbolIndex, ids: &BTreeSet<u32>) -> crate::error::Result<()> {
    frida.host().rpc(pid, "hooks", json!([{ "action": "remove", "functions": describe(symbols, ids) }])).await?;
    if let Some(js) = s.state.lock().unwrap().watch.js_for_watch.get_mut(&pid) {
        js.retain(|i| !ids.contains(i));
    }
    Ok(())
}

/// A fresh agent in `pid`: the session's tracing options and serialization depth, and for
/// its own image, its watches. (Sampling choices follow the hooks: see `sync_child`.)
async fn carry_agent_state(engine: &Engine, frida: &FridaRuntime, s: &Session, pid: u32) -> crate::error::Result<()> {
    let (options, depth, watching) = {
        let st = s.state.lock().unwrap();
        (st.tracing.agent_options.clone(), st.watch.depth, !st.watch.watches.is_empty())
    };
    if !options.is_empty() {
        frida.host().rpc(pid, "tracingConfig", json!([options])).await?;
    }
    if let Some(depth) = depth {
        frida.host().rpc(pid, "serialization", json!([{ "depth": depth }])).await?;
    }
    if watching && same_image(s, pid) {
        let (symbols, info) = engine.debug_info(s)?;
        let list = s.state.lock().unwrap().watch.watches.clone();
        engine.send_watches(s, pid, &symbols, &info, &list).await?;
    }
    // Breakpoints and logpoints name addresses of the session's image: a fork's too.
    if same_image(s, pid) {
        engine.install_points(s, pid).await;
    }
    Ok(())
}

/// Bring child `pid`'s hooks to what the patterns select now. `fresh`: its agent was just
/// attached and has none of the session's state yet.
pub(super) async fn sync_child(engine: &Engine, frida: &FridaRuntime, s: &Session, pid: u32, symbols: &SymbolIndex, fresh: bool) -> crate::error::Result<()> {
    if fresh {
        carry_agent_state(engine, frida, s, pid).await?;
    }
    let want = wanted(s, pid, symbols);
    let have = s.state.lock().unwrap().life.child_hooked.get(&pid).cloned().unwrap_or_default();
    let remove: BTreeSet<u32> = have.difference(&want).copied().collect();
    let add: BTreeSet<u32> = want.difference(&have).copied().collect();
    if !remove.is_empty() {
        remove_hooks(frida, s, pid, symbols, &remove).await?;
    }
    let mut hooked: BTreeSet<u32> = have.difference(&remove).copied().collect();
    if !add.is_empty() {
        hooked.extend(add_hooks(engine, frida, s, pid, symbols, &add).await?.installed);
        // The user's "no sampling" choices, for the functions just hooked (the agent keeps
        // them per hooked function).
        let never: Vec<u32> = {
            let st = s.state.lock().unwrap();
            st.tracing.never_sample.iter().copied().filter(|i| add.contains(i)).collect()
        };
        if !never.is_empty() && same_image(s, pid) {
            frida.host().rpc(pid, "sampling", json!([{ "disable": never, "enable": [] }])).await?;
        }
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
            if let Err(e) = sync_child(self, &frida, s, pid, &symbols, false).await {
                warnings.push(format!("Child process {pid} keeps its previous hooks: {}", e.message));
            }
        }
        warnings
    }
}

impl Engine {
    /// After the watch list changed: the same list in every live fork, and its hooks that a
    /// watch now covers moved to the JS path (which reads watches), as for the root.
    pub(super) async fn watches_to_children(&self, s: &Session, symbols: &SymbolIndex, info: &crate::symbols::DebugInfo) {
        let pids = live_forks(s);
        let list = s.state.lock().unwrap().watch.watches.clone();
        for pid in pids {
            let result: crate::error::Result<()> = async {
                self.send_watches(s, pid, symbols, info, &list).await?;
                let hooked = s.state.lock().unwrap().life.child_hooked.get(&pid).cloned().unwrap_or_default();
                self.rehook_watched(s, pid, symbols, info, hooked).await
            }
            .await;
            if let Err(e) = result {
                tracing::warn!("session {}: child {pid} keeps its previous watches: {}", s.id, e.message);
            }
        }
    }

    /// Send one agent RPC to every live child (tracing options, serialization depth,
    /// sampling), `same_image_only` for requests that name the session image's functions.
    pub(super) async fn rpc_to_children(&self, s: &Session, method: &str, args: Value, same_image_only: bool) {
        let pids: Vec<u32> = s.state.lock().unwrap().life.live_children();
        let Ok(frida) = self.frida_running() else { return };
        for pid in pids.into_iter().filter(|p| !same_image_only || same_image(s, *p)) {
            if let Err(e) = frida.host().rpc(pid, method, args.clone()).await {
                tracing::warn!("session {}: child {pid} did not take {method}: {}", s.id, e.message);
            }
        }
    }
}
