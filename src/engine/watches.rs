//! Watches (`debug_trace` `watches.add/remove`) and the serialization depth: variables,
//! pointer chains, raw addresses and JS expressions read by the agent on every enter/exit
//! of the traced functions in their scope (`on`). Also the name → address/type resolution
//! that `memory.rs` shares.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::{Engine, Session};
use crate::error::{ErrorCode, Result, StrobeError};
use crate::symbols::{DebugInfo, Pattern, SymbolIndex, TypeId, TypeKind};

pub const MAX_WATCHES: usize = 32;
pub const MAX_EXPR_LEN: usize = 256;
pub const MAX_DEREFS: usize = 4;
pub const DEFAULT_DEPTH: u32 = 3;

/// What `debug_trace` accepts in `watches.add` (spec WatchTarget).
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WatchTarget {
    pub variable: Option<String>,
    pub address: Option<String>,
    #[serde(rename = "type")]
    pub type_hint: Option<String>,
    pub label: Option<String>,
    pub expr: Option<String>,
    #[serde(default)]
    pub on: Vec<String>,
}

/// A watch as reported in `activeWatches` / `debug_session status`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ActiveWatch {
    pub label: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variable: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expr: Option<String>,
    #[serde(rename = "type")]
    pub type_name: String,
    pub on: Vec<String>,
    #[serde(skip)]
    spec: Value,
    #[serde(skip)]
    roots: Vec<TypeId>,
    #[serde(skip)]
    scope: Option<Vec<Pattern>>,
}

/// Per-session watch and serialization state (in `SessionState`).
#[derive(Debug, Default)]
pub struct WatchState {
    pub watches: Vec<ActiveWatch>,
    /// `serializationDepth`; `None` = default (3).
    pub depth: Option<u32>,
    /// Per process of the session's image (the root, its forks): the hooked functions
    /// installed on the JS path because of a watch.
    pub js_for_watch: HashMap<u32, BTreeSet<u32>>,
}

/// Which agent hook specs are built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SpecsFor {
    /// Process `pid` runs the session's image (the root or a fork): the same watches, and
    /// its watch-path hooks are remembered in `js_for_watch`.
    SameImage(u32),
    /// A process running another program (after exec): no watches.
    OtherImage,
}

/// A variable resolved to where it lives: start at `address` (static), apply `ops`.
#[derive(Debug, Clone)]
pub(crate) struct Resolved {
    pub address: u64,
    pub ops: Vec<Value>,
    pub ty: TypeId,
}

/// Resolve `gClock->counter`, `g_l1.down->down->leaf`, `types::HITS` against DWARF globals.
/// `code` is the error code for resolution failures (WATCH_FAILED for watches).
pub(crate) fn resolve_variable(info: &DebugInfo, text: &str, code: ErrorCode) -> Result<Resolved> {
    let fail = |m: String| StrobeError::new(code, m);
    if text.len() > MAX_EXPR_LEN {
        return Err(StrobeError::validation(format!("Variable '{}…' is longer than {MAX_EXPR_LEN} characters.", &text[..40])));
    }
    let mut parts: Vec<(&str, &str)> = Vec::new(); // (separator before, name)
    let mut rest = text.trim();
    let mut sep = "";
    loop {
        let next = [rest.find("->").map(|i| (i, 2)), rest.find('.').map(|i| (i, 1))].into_iter().flatten().min();
        match next {
            Some((i, n)) => {
                parts.push((sep, rest[..i].trim()));
                sep = &rest[i..i + n];
                rest = &rest[i + n..];
            }
            None => {
                parts.push((sep, rest.trim()));
                break;
            }
        }
    }
    let derefs = parts.iter().filter(|p| p.0 == "->").count();
    if derefs > MAX_DEREFS {
        return Err(StrobeError::validation(format!("'{text}' dereferences {derefs} pointers; at most {MAX_DEREFS} are allowed (a->b->c->d->e).")));
    }
    let ident = regex::Regex::new(r"^[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)*$").unwrap();
    if let Some((_, bad)) = parts.iter().find(|p| !ident.is_match(p.1)) {
        return Err(StrobeError::validation(format!(
            "'{text}' is not a variable path ('{bad}' is not a name). Use a global name with '->' and '.' fields, e.g. \"gClock->counter\", or use 'expr' for arbitrary JavaScript."
        )));
    }
    let root = parts[0].1;
    let g = info.global(root).ok_or_else(|| {
        let near = info.closest_globals(root, 5);
        fail(format!(
            "No global or static variable named '{root}' in the binary's DWARF. Closest names: {near:?}. Locals are only readable at a breakpoint; for raw memory use {{address, type}}."
        ))
    })?;
    let mut ty = g.ty.ok_or_else(|| fail(format!("Global '{root}' has no type in DWARF; watch it by {{address: \"0x{:x}\", type: \"u64\"}} instead.", g.address)))?;
    let mut ops = Vec::new();
    let mut path = root.to_string();
    for (sep, field) in &parts[1..] {
        let mut t = info.ty(ty);
        if *sep == "->" {
            let TypeKind::Pointer { target: Some(to) } = t.kind else {
                return Err(fail(format!("'{path}' is a {} , not a pointer: use '.' instead of '->' before '{field}'.", t.name)));
            };
            ops.push(json!(["d"]));
            t = info.ty(to);
        } else if matches!(t.kind, TypeKind::Pointer { .. }) {
            return Err(fail(format!("'{path}' is a pointer ({}): use '->' instead of '.' before '{field}'.", t.name)));
        }
        let TypeKind::Struct { members, .. } = &t.kind else {
            return Err(fail(format!("'{path}' is a {}, which has no field '{field}'.", t.name)));
        };
        let m = members.iter().find(|m| m.name == *field).ok_or_else(|| {
            let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
            fail(format!("{} has no field '{field}'. Its fields: {names:?}.", t.name))
        })?;
        ops.push(json!(["o", m.offset]));
        ty = m.ty;
        path = format!("{path}{sep}{field}");
    }
    Ok(Resolved { address: g.address, ops, ty })
}

/// Agent type ids for raw-address type hints (beyond any DWARF table index).
const HINT_BASE: u32 = 0x7000_0000;
pub(crate) const TYPE_HINTS: &[&str] = &["i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "f32", "f64", "pointer", "bool"];

/// `(type id, {id: descriptor})` for a type hint such as "i32".
pub(crate) fn hint_type(hint: &str) -> Option<(u32, Value)> {
    let i = TYPE_HINTS.iter().position(|h| *h == hint)?;
    let desc = match hint {
        "f32" => json!({"k": "float", "n": hint, "s": 4}),
        "f64" => json!({"k": "float", "n": hint, "s": 8}),
        "pointer" => json!({"k": "ptr", "n": "pointer", "to": null}),
        "bool" => json!({"k": "bool", "n": hint, "s": 1}),
        _ => {
            let bits: u64 = hint[1..].parse().unwrap_or(32);
            json!({"k": "int", "n": hint, "s": bits / 8, "sg": hint.starts_with('i')})
        }
    };
    let id = HINT_BASE + i as u32;
    Some((id, json!({ id.to_string(): desc })))
}

pub(crate) fn parse_address(text: &str) -> Result<u64> {
    let hex = text.trim().strip_prefix("0x").or_else(|| text.trim().strip_prefix("0X"));
    hex.and_then(|h| u64::from_str_radix(h, 16).ok()).filter(|a| *a != 0).ok_or_else(|| {
        StrobeError::validation(format!("Address '{text}' is not a non-zero hex address like \"0x7ffd1234\"."))
    })
}

fn merge(into: &mut Value, table: Value) {
    if let (Some(a), Value::Object(b)) = (into.as_object_mut(), table) {
        a.extend(b);
    }
}

impl Engine {
    pub(crate) fn debug_info(&self, session: &Session) -> Result<(Arc<SymbolIndex>, Arc<DebugInfo>)> {
        let symbols = self.session_symbols(session)?;
        let info = DebugInfo::of(&symbols)?;
        Ok((symbols, info))
    }

    fn build_watch(&self, session: &Session, info: &DebugInfo, w: WatchTarget) -> Result<ActiveWatch> {
        let kinds = [w.variable.is_some(), w.address.is_some(), w.expr.is_some()].iter().filter(|b| **b).count();
        if kinds != 1 {
            return Err(StrobeError::validation(
                "A watch needs exactly one of 'variable' (e.g. \"gClock->counter\"), 'address' (with 'type'), or 'expr' (JavaScript).",
            ));
        }
        let scope = if w.on.is_empty() { None } else { Some(w.on.iter().map(|p| Pattern::parse(p)).collect::<Result<Vec<_>>>()?) };
        let (spec, roots, type_name) = if let Some(v) = &w.variable {
            let r = resolve_variable(info, v, ErrorCode::WatchFailed)?;
            let spec = json!({ "addr": format!("0x{:x}", r.address), "ops": r.ops, "type": r.ty });
            (spec, vec![r.ty], info.ty(r.ty).name.clone())
        } else if let Some(a) = &w.address {
            let addr = parse_address(a)?;
            let hint = w.type_hint.as_deref().unwrap_or("u64");
            let (id, _) = hint_type(hint).ok_or_else(|| {
                StrobeError::validation(format!("Unknown type '{hint}'. Use one of {TYPE_HINTS:?}."))
            })?;
            (json!({ "addr": format!("0x{addr:x}"), "noSlide": true, "type": id }), vec![], hint.to_string())
        } else {
            let e = w.expr.as_deref().unwrap_or_default();
            if e.len() > MAX_EXPR_LEN || e.trim().is_empty() {
                return Err(StrobeError::validation(format!("'expr' must be 1-{MAX_EXPR_LEN} characters of JavaScript, e.g. \"ptr('0x1234').readU32()\".")));
            }
            (json!({ "expr": e }), vec![], "js".to_string())
        };
        let label = w.label.clone().filter(|l| !l.is_empty()).unwrap_or_else(|| {
            w.variable.clone().or(w.address.clone()).unwrap_or_else(|| w.expr.clone().unwrap_or_default().chars().take(40).collect())
        });
        let _ = session;
        Ok(ActiveWatch { label, variable: w.variable, address: w.address, expr: w.expr, type_name, on: w.on, spec, roots, scope })
    }

    /// Add and remove watches of a live session; returns the active list.
    pub async fn update_watches(&self, id: &str, add: Vec<WatchTarget>, remove: &[String]) -> Result<Vec<ActiveWatch>> {
        let session = self.session(id)?;
        session.ensure_running()?;
        let (symbols, info) = self.debug_info(&session)?;
        let mut list = session.state.lock().unwrap().watch.watches.clone();
        for r in remove {
            let before = list.len();
            list.retain(|w| &w.label != r);
            if list.len() == before {
                let labels: Vec<&str> = list.iter().map(|w| w.label.as_str()).collect();
                return Err(StrobeError::new(ErrorCode::WatchFailed, format!("No watch labelled '{r}'. Active watches: {labels:?}.")));
            }
        }
        for w in add {
            let built = self.build_watch(&session, &info, w)?;
            if list.iter().any(|x| x.label == built.label) {
                return Err(StrobeError::validation(format!("A watch labelled '{}' already exists; remove it first or give this one another 'label'.", built.label)));
            }
            list.push(built);
        }
        if list.len() > MAX_WATCHES {
            return Err(StrobeError::validation(format!("At most {MAX_WATCHES} watches per session ({} requested). Remove some with watches.remove.", list.len())));
        }
        self.send_watches(&session, session.pid, &symbols, &info, &list).await?;
        session.state.lock().unwrap().watch.watches = list.clone();
        self.rehook_for_watches(&session, &symbols, &info).await?;
        // Forks run the same image: their agents get the same watches (children.rs).
        self.watches_to_children(&session, &symbols, &info).await;
        Ok(list)
    }

    /// The watch list of `pid`'s agent becomes `list` (addresses and function ids of the
    /// session's image: the root, or a fork of it).
    pub(crate) async fn send_watches(&self, session: &Session, pid: u32, symbols: &SymbolIndex, info: &DebugInfo, list: &[ActiveWatch]) -> Result<()> {
        let mut types = info.agent_types(&list.iter().flat_map(|w| w.roots.clone()).collect::<Vec<_>>());
        let mut specs = Vec::new();
        for w in list {
            let mut spec = w.spec.clone();
            spec["label"] = json!(w.label);
            if let Some(t) = spec.get("type").and_then(Value::as_u64) {
                if t >= HINT_BASE as u64 {
                    merge(&mut types, hint_type(&w.type_name).map(|h| h.1).unwrap_or(Value::Null));
                }
            }
            if let Some(scope) = &w.scope {
                let fns: Vec<usize> = symbols.functions.iter().enumerate().filter(|(_, f)| scope.iter().any(|p| p.matches(f, &session.project_root))).map(|(i, _)| i).collect();
                spec["fns"] = json!(fns);
            }
            specs.push(spec);
        }
        let reply = self.frida_running()?.host().rpc(pid, "watches", json!([{ "watches": specs, "types": types }])).await?;
        if let Some(err) = reply.get("errors").and_then(Value::as_array).and_then(|e| e.first()) {
            return Err(StrobeError::new(
                ErrorCode::WatchFailed,
                format!("Watch '{}' failed in the target: {}. Check the JavaScript expression.", err["label"].as_str().unwrap_or("?"), err["error"].as_str().unwrap_or("?")),
            ));
        }
        Ok(())
    }

    /// Whether a hooked function must take the JS path because a watch covers it.
    pub(crate) fn watched(&self, session: &Session, symbols: &SymbolIndex, fn_index: u32) -> bool {
        let st = session.state.lock().unwrap();
        let f = &symbols.functions[fn_index as usize];
        st.watch.watches.iter().any(|w| w.scope.as_ref().is_none_or(|s| s.iter().any(|p| p.matches(f, &session.project_root))))
    }

    /// Functions hooked on the native fast path before a watch covered them are hooked
    /// again on the JS path, which records watch values.
    async fn rehook_for_watches(&self, session: &Session, symbols: &SymbolIndex, info: &DebugInfo) -> Result<()> {
        let hooked = session.state.lock().unwrap().hooked.clone();
        self.rehook_watched(session, session.pid, symbols, info, hooked).await
    }

    /// Of `candidates`, hooked in `pid`, those a watch covers that are not on the JS path for
    /// a watch already (`js_for_watch`) and have no typed recipe (so they may be on the fast
    /// path, which records no watch values) are hooked again, with the watch flag that puts
    /// them on the JS path.
    pub(crate) async fn rehook_watched(&self, session: &Session, pid: u32, symbols: &SymbolIndex, info: &DebugInfo, candidates: BTreeSet<u32>) -> Result<()> {
        let done = session.state.lock().unwrap().watch.js_for_watch.get(&pid).cloned().unwrap_or_default();
        let redo: BTreeSet<u32> = candidates
            .into_iter()
            .filter(|i| !done.contains(i))
            // A natively captured hook records no watch values either (capture_plan.rs).
            .filter(|i| self.watched(session, symbols, *i) && (self.hook_extras(session, symbols, info, *i).0.is_none() || session.state.lock().unwrap().capture.plans.contains_key(i)))
            .collect();
        if redo.is_empty() {
            return Ok(());
        }
        let frida = self.frida_running()?;
        super::children::remove_hooks(&frida, session, pid, symbols, &redo).await?;
        super::children::add_hooks(self, &frida, session, pid, symbols, &redo).await?;
        Ok(())
    }

    /// Extra fields of a hook spec: the `serialize` recipe (when typed reads help) and the
    /// type ids it needs. `(None, [])` for functions without DWARF parameters.
    /// The typed-argument recipe of function `fn_index`, from the DWARF of the module that
    /// has it (the program or a shared library, modules.rs; `info` is the program's).
    pub(crate) fn hook_extras(&self, session: &Session, symbols: &SymbolIndex, info: &DebugInfo, fn_index: u32) -> (Option<Value>, Vec<TypeId>) {
        let own = self.function_dwarf(session, symbols, fn_index);
        let (info, address) = match &own {
            Some((i, a)) => (&**i, *a),
            None => (info, symbols.functions[fn_index as usize].address),
        };
        self.extras_in(session, info, address)
    }

    /// `hook_extras` for a function at `address` of the module whose DWARF is `info`: the
    /// recipe's type ids are `info`'s, so its type table must come from `info` too.
    fn extras_in(&self, session: &Session, info: &DebugInfo, address: u64) -> (Option<Value>, Vec<TypeId>) {
        // `argumentsAtExit`: pointer parameters' pointees are read again at exit (JS path).
        let at_exit = session.state.lock().unwrap().tracing.args_at_exit;
        match info.signature(address) {
            Some(sig) if super::recipes::worth_serializing(info, &sig) || (at_exit && super::args_at_exit::has_pointer_param(info, &sig)) => {
                let (mut recipe, roots) = super::recipes::serialize_recipe(info, &sig);
                if at_exit {
                    recipe["exit"] = json!(true);
                }
                (Some(recipe), roots)
            }
            _ => (None, Vec::new()),
        }
    }

    /// Add `serialize` / `watches` fields to hook specs being added, and return the type
    /// table they need (for the `types` field of the hooks request). Watches are the
    /// session image's: an exec'd program's hooks never read them.
    pub(crate) fn enrich_hook_specs(&self, session: &Session, symbols: &SymbolIndex, specs: &mut [Value], target: SpecsFor) -> Value {
        let Ok(info) = DebugInfo::of(symbols) else { return json!({}) };
        // Type ids are distinct per binary (symbols/types.rs): one table serves all modules.
        let mut tables = serde_json::Map::new();
        let mut roots = Vec::new();
        let mut for_watch = Vec::new();
        let mut not_for_watch = Vec::new();
        for spec in specs.iter_mut() {
            let Some(i) = spec.get("id").and_then(Value::as_u64).map(|i| i as u32) else { continue };
            // One lookup of the function's DWARF: its recipe and its type table come from it.
            let (own, address) = self.function_dwarf(session, symbols, i).unwrap_or_else(|| (info.clone(), symbols.functions[i as usize].address));
            let (recipe, r) = self.extras_in(session, &own, address);
            // Whether a native replaceFast wrapper may stand in for the function (symbols/abi.rs);
            // the agent uses it only for hooks that also take the fast path.
            let sig = own.signature(address);
            if let Some(abi) = sig.as_ref().and_then(|sig| crate::symbols::wrapper_abi(&own, sig)) {
                spec["abi"] = json!(abi);
            }
            // Callers may keep values in vector registers across its calls: no AVX in its hook.
            if sig.as_ref().is_some_and(|sig| sig.ipa_ra) {
                spec["ipaRa"] = json!(true);
            }
            if let Some(recipe) = recipe {
                // Typed capture in native code where it can print what the serializer would
                // (capture_plan.rs); the recipe stays for the JS path (mode "js", no CModule).
                let plan = (target != SpecsFor::OtherImage && recipe.get("exit").is_none() && !self.watched(session, symbols, i))
                    .then_some(sig.as_ref())
                    .flatten()
                    .and_then(|sig| {
                        let depth = session.state.lock().unwrap().watch.depth.unwrap_or(DEFAULT_DEPTH);
                        super::capture_plan::compile(&own, sig, depth)
                    });
                // A plan is kept when this hook moves to the JS path: other processes of the
                // session (followed forks) may still run the native hook and need it to decode
                // their records, and to be moved to the JS path in turn (rehook_watched).
                if let Some(plan) = plan {
                    spec["capture"] = plan.to_agent();
                    session.state.lock().unwrap().capture.plans.insert(i, Arc::new(plan));
                }
                spec["serialize"] = recipe;
                session.state.lock().unwrap().tracing.word_shapes.remove(&i);
                if !Arc::ptr_eq(&own, &info) {
                    if let Value::Object(m) = own.agent_types(&r) {
                        tables.extend(m);
                    }
                    not_for_watch.push(i);
                    continue;
                }
                roots.extend(r);
            } else {
                // Raw words, typed by the daemon (word_shapes.rs): only the declared parameters.
                if let Some(shape) = own.signature(address).and_then(|sig| super::word_shapes::word_shape(&own, &sig)) {
                    spec["argCount"] = json!(shape.hidden + shape.params.len());
                    if target != SpecsFor::OtherImage {
                        session.state.lock().unwrap().tracing.word_shapes.insert(i, std::sync::Arc::new(shape));
                    }
                }
                if target != SpecsFor::OtherImage && self.watched(session, symbols, i) {
                    spec["watches"] = json!(true);
                    for_watch.push(i);
                    continue;
                }
            }
            not_for_watch.push(i);
        }
        if let SpecsFor::SameImage(pid) = target {
            let mut st = session.state.lock().unwrap();
            let js = st.watch.js_for_watch.entry(pid).or_default();
            js.extend(for_watch);
            for i in not_for_watch {
                js.remove(&i);
            }
        }
        if let Value::Object(m) = info.agent_types(&roots) {
            tables.extend(m);
        }
        Value::Object(tables)
    }

    /// `serializationDepth` (1-10) for typed arguments, return values and watches.
    pub async fn set_serialization_depth(&self, id: &str, depth: i64) -> Result<u32> {
        if !(1..=10).contains(&depth) {
            return Err(StrobeError::validation(format!("serializationDepth must be 1-10 (got {depth}); the default is {DEFAULT_DEPTH}.")));
        }
        let session = self.session(id)?;
        session.ensure_running()?;
        self.frida_running()?.host().rpc(session.pid, "serialization", json!([{ "depth": depth }])).await?;
        session.state.lock().unwrap().watch.depth = Some(depth as u32);
        self.recapture(&session).await?;
        self.rpc_to_children(&session, "serialization", json!([{ "depth": depth }]), false).await;
        Ok(depth as u32)
    }

    /// Natively captured hooks print at the depth their plan was compiled for
    /// (capture_plan.rs): after a depth change they are hooked again with new plans.
    async fn recapture(&self, session: &Session) -> Result<()> {
        let ids: BTreeSet<u32> = {
            let st = session.state.lock().unwrap();
            st.hooked.iter().copied().filter(|i| st.capture.plans.contains_key(i)).collect()
        };
        if ids.is_empty() {
            return Ok(());
        }
        let symbols = self.session_symbols(session)?;
        let frida = self.frida_running()?;
        super::children::remove_hooks(&frida, session, session.pid, &symbols, &ids).await?;
        super::children::add_hooks(self, &frida, session, session.pid, &symbols, &ids).await?;
        Ok(())
    }

    pub fn watches(&self, id: &str) -> Vec<ActiveWatch> {
        match self.sessions.lock().unwrap().get(id) {
            Some(s) => s.state.lock().unwrap().watch.watches.clone(),
            None => Vec::new(),
        }
    }
}
