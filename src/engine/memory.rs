//! `debug_memory`: read globals/statics (by name, pointer chain, raw address), write them,
//! and poll them into `variable_snapshot` events. Names are resolved here against DWARF
//! (watches.rs::resolve_variable); the agent (agent/src/memory.ts) reads and writes.
//!
//! A later "frame" source (locals of a paused thread) plugs in at [`Engine::memory_recipe`]:
//! it only has to produce the same recipe (address + ops + type).

use serde::Deserialize;
use serde_json::{json, Value};

use super::watches::{hint_type, parse_address, resolve_variable, TYPE_HINTS};
use super::{Engine, Session};
use crate::error::{ErrorCode, Result, StrobeError};
use crate::symbols::{DebugInfo, TypeKind};

pub const MAX_TARGETS: usize = 16;
pub const MAX_RAW_SIZE: u64 = 4096;

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemoryTarget {
    pub variable: Option<String>,
    /// A debug_eval expression (`memory_expr.rs`): locals of a paused frame, fields, elements.
    pub expr: Option<String>,
    pub address: Option<String>,
    pub size: Option<u64>,
    #[serde(rename = "type")]
    pub type_hint: Option<String>,
    pub value: Option<Value>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PollSpec {
    pub interval_ms: i64,
    pub duration_ms: i64,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemoryRequest {
    #[serde(default)]
    pub targets: Vec<MemoryTarget>,
    pub depth: Option<i64>,
    pub poll: Option<PollSpec>,
    /// Which process: the session's root (default) or a followed fork.
    pub pid: Option<u32>,
}

/// One target as the agent reads it, plus what the response reports about it.
struct Recipe {
    spec: Value,
    label: String,
    type_name: String,
    size: u64,
    is_struct: bool,
    /// A pointer to a struct: shown as the pointer's value plus the pointee's `fields`.
    is_struct_pointer: bool,
}

fn validation(msg: String) -> StrobeError {
    StrobeError::validation(msg)
}

impl Engine {
    /// Resolve one target to an agent recipe; the types it needs are merged into `types`.
    fn memory_recipe(&self, info: &DebugInfo, t: &MemoryTarget, index: usize, types: &mut serde_json::Map<String, Value>) -> Result<Recipe> {
        match (&t.variable, &t.address) {
            (Some(v), None) => {
                let r = resolve_variable(info, v, ErrorCode::ValidationError)?;
                let ty = info.ty(r.ty);
                if let Value::Object(m) = info.agent_types(&[r.ty]) {
                    types.extend(m);
                }
                let spec = json!({ "label": v, "addr": format!("0x{:x}", r.address), "ops": r.ops, "type": r.ty });
                let is_struct_pointer = match ty.kind {
                    TypeKind::Pointer { target: Some(t) } => matches!(info.ty(t).kind, TypeKind::Struct { .. }),
                    _ => false,
                };
                Ok(Recipe {
                    spec,
                    label: v.clone(),
                    type_name: ty.name.clone(),
                    size: ty.size,
                    is_struct: matches!(ty.kind, TypeKind::Struct { .. }),
                    is_struct_pointer,
                })
            }
            (None, Some(a)) => {
                let addr = parse_address(a)?;
                let hint = t.type_hint.as_deref().ok_or_else(|| validation(format!("Raw address {a} needs a 'type': one of {TYPE_HINTS:?}.")))?;
                let (id, desc) = hint_type(hint).ok_or_else(|| validation(format!("Unknown type '{hint}'. Use one of {TYPE_HINTS:?}.")))?;
                let elem_size = desc.as_object().and_then(|m| m.values().next()).and_then(|d| d.get("s")).and_then(Value::as_u64).unwrap_or(8);
                let size = t.size.unwrap_or(elem_size);
                if size == 0 || size > MAX_RAW_SIZE || !size.is_multiple_of(elem_size) {
                    return Err(validation(format!("size {size} must be 1-{MAX_RAW_SIZE} bytes and a multiple of the size of {hint} ({elem_size}).")));
                }
                if let Value::Object(m) = desc {
                    types.extend(m);
                }
                let mut ty = id;
                let count = size / elem_size;
                if count > 1 {
                    // An array of the hinted type, under an id of its own for this request.
                    ty = id + 0x1000 + index as u32;
                    types.insert(ty.to_string(), json!({ "k": "array", "n": format!("{hint}[{count}]"), "of": id, "c": count }));
                }
                let spec = json!({ "label": a, "addr": format!("0x{addr:x}"), "noSlide": true, "type": ty });
                Ok(Recipe { spec, label: a.clone(), type_name: if count > 1 { format!("{hint}[{count}]") } else { hint.to_string() }, size, is_struct: false, is_struct_pointer: false })
            }
            _ => Err(validation("Each target needs exactly one of 'variable' (e.g. \"gClock->counter\"), 'expr' (e.g. \"q->items[2].key\") or 'address' (with 'size' and 'type').".to_string())),
        }
    }

    /// `memory_recipe` for a global of the program or, failing that, of a shared library
    /// with DWARF (its address moved to session addresses, modules.rs).
    fn module_memory_recipe(&self, session: &Session, info: &DebugInfo, t: &MemoryTarget, index: usize, types: &mut serde_json::Map<String, Value>) -> Result<Recipe> {
        let err = match self.memory_recipe(info, t, index, types) {
            Ok(r) => return Ok(r),
            Err(e) if t.variable.is_some() => e,
            Err(e) => return Err(e),
        };
        for (path, offset) in self.dwarf_modules(session).into_iter().skip(1) {
            let Ok(lib) = self.symbols.get(&path).and_then(|idx| DebugInfo::of(&idx)) else { continue };
            if let Ok(mut r) = self.memory_recipe(&lib, t, index, types) {
                // A library global the program uses lives in the program (copy relocation).
                let root = t.variable.as_deref().unwrap_or_default().split(['.', '-']).next().unwrap_or_default();
                let live = match super::modules::copy_relocated(&session.binary_path, root) {
                    Some(a) => Some(a),
                    None => super::debug_state::parse_hex(r.spec.get("addr")).map(|a| a.wrapping_add(offset)),
                };
                if let Some(a) = live {
                    r.spec["addr"] = json!(format!("0x{a:x}"));
                }
                return Ok(r);
            }
        }
        Err(err)
    }

    /// The process a memory request goes to: the root, or a live fork (it runs the same
    /// program, so the same globals; an exec'd child runs another one).
    fn memory_process(&self, session: &Session, pid: Option<u32>) -> Result<u32> {
        let Some(pid) = pid.filter(|p| *p != session.pid) else { return Ok(session.pid) };
        let forks = super::children::live_forks(session);
        if forks.contains(&pid) {
            return Ok(pid);
        }
        Err(validation(format!(
            "pid {pid} is not a running process of this session that runs its program. Use the root ({}){}; an exec'd child runs another program, whose globals are not this session's.",
            session.pid,
            if forks.is_empty() { String::new() } else { format!(" or a fork ({})", forks.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")) }
        )))
    }

    fn memory_session(&self, id: &str, n: usize) -> Result<std::sync::Arc<Session>> {
        if n == 0 || n > MAX_TARGETS {
            return Err(validation(format!("debug_memory takes 1-{MAX_TARGETS} targets ({n} given).")));
        }
        let session = self.session(id)?;
        session.ensure_running()?;
        Ok(session)
    }

    /// One-shot read (`{results}`) or, with `poll`, start sampling (`{polling: true, ...}`).
    pub async fn read_memory(self: &std::sync::Arc<Engine>, id: &str, req: MemoryRequest) -> Result<Value> {
        let depth = req.depth.unwrap_or(1);
        if !(1..=5).contains(&depth) {
            return Err(validation(format!("depth must be 1-5 (got {depth}).")));
        }
        if let Some(p) = &req.poll {
            if !(50..=5000).contains(&p.interval_ms) || !(100..=30000).contains(&p.duration_ms) {
                return Err(validation(format!(
                    "poll.intervalMs must be 50-5000 and poll.durationMs 100-30000 (got {} and {}).",
                    p.interval_ms, p.duration_ms
                )));
            }
        }
        let session = self.memory_session(id, req.targets.len())?;
        let pid = self.memory_process(&session, req.pid)?;
        if req.targets.iter().any(|t| t.expression().is_some()) {
            if req.poll.is_some() || req.targets.iter().any(|t| t.expression().is_none()) {
                return Err(validation("'expr' targets (and type 'string') cannot be polled or mixed with 'variable'/'address' targets in one call; write them all as expressions, e.g. {expr: \"g_clock->counter\"}.".to_string()));
            }
            if req.targets.iter().any(|t| t.value.is_some()) {
                return Err(validation("'value' is only for action 'write'.".to_string()));
            }
            let exprs = req.targets.iter().filter_map(|t| t.expression().map(|e| (e, None))).collect();
            let results = self.memory_exprs(&session, pid, exprs, depth as u32).await?;
            return Ok(json!({ "results": results }));
        }
        let (_, info) = self.debug_info(&session)?;
        let mut types = serde_json::Map::new();
        let mut recipes = Vec::new();
        for (i, t) in req.targets.iter().enumerate() {
            if t.value.is_some() {
                return Err(validation("'value' is only for action 'write'.".to_string()));
            }
            recipes.push(self.module_memory_recipe(&session, &info, t, i, &mut types)?);
        }
        let specs: Vec<Value> = recipes.iter().map(|r| r.spec.clone()).collect();
        let mut msg = json!({ "recipes": specs, "types": Value::Object(types), "depth": depth });
        if let Some(p) = &req.poll {
            msg["poll"] = json!({ "intervalMs": p.interval_ms, "durationMs": p.duration_ms });
        }
        let reply = self.frida_running()?.host().rpc(pid, "readMemory", json!([msg])).await?;
        if let Some(p) = &req.poll {
            return Ok(json!({
                "polling": true,
                "variableCount": recipes.len(),
                "intervalMs": p.interval_ms,
                "durationMs": p.duration_ms,
                "expectedSamples": p.duration_ms / p.interval_ms,
                "eventType": "variable_snapshot",
            }));
        }
        let agent = reply.get("results").and_then(Value::as_array).cloned().unwrap_or_default();
        let results: Vec<Value> = recipes
            .iter()
            .zip(agent.iter().chain(std::iter::repeat(&Value::Null)))
            .map(|(r, a)| {
                let mut out = json!({ "target": r.label, "type": r.type_name, "size": r.size, "address": a.get("address").cloned().unwrap_or(Value::Null) });
                if let Some(e) = a.get("error") {
                    out["error"] = e.clone();
                    out["value"] = Value::Null;
                } else if r.is_struct && a.get("value").is_some_and(Value::is_object) {
                    out["value"] = json!(format!("<{}>", r.type_name));
                    out["fields"] = a["value"].clone();
                } else if r.is_struct_pointer && a.get("value").is_some_and(Value::is_object) {
                    // One shape for a struct and a pointer to one: the pointer's own value, and
                    // the pointee's members in `fields`.
                    let at = a.get("address").and_then(Value::as_str).and_then(|h| u64::from_str_radix(h.trim_start_matches("0x"), 16).ok());
                    let pointer = at.and_then(|at| crate::eval::Memory::read_u64(&crate::eval::ProcessMemory::new(pid), at).ok());
                    out["value"] = pointer.map_or(Value::Null, |p| json!(format!("0x{p:x}")));
                    out["fields"] = a["value"].clone();
                } else {
                    out["value"] = a.get("value").cloned().unwrap_or(Value::Null);
                }
                out
            })
            .collect();
        Ok(json!({ "results": results }))
    }

    /// Write scalar globals (by name or raw address + type) of the root or of fork `pid`;
    /// reports previous and new values.
    pub async fn write_memory(self: &std::sync::Arc<Engine>, id: &str, targets: Vec<MemoryTarget>, pid: Option<u32>) -> Result<Value> {
        let session = self.memory_session(id, targets.len())?;
        let pid = self.memory_process(&session, pid)?;
        if targets.iter().any(|t| t.expr.is_some()) {
            if targets.iter().any(|t| t.expr.is_none() || t.value.is_none()) {
                return Err(validation("Write targets are either all {expr, value} or all variable/address targets; every one needs a 'value'.".to_string()));
            }
            let exprs = targets.into_iter().map(|t| (t.expr.unwrap_or_default(), t.value)).collect();
            let results = self.memory_exprs(&session, pid, exprs, 1).await?;
            return Ok(json!({ "results": results }));
        }
        let (_, info) = self.debug_info(&session)?;
        let mut types = serde_json::Map::new();
        let mut specs = Vec::new();
        for (i, t) in targets.iter().enumerate() {
            let Some(value) = &t.value else {
                return Err(validation(format!("Target {} has no 'value' to write.", i + 1)));
            };
            let r = self.module_memory_recipe(&session, &info, t, i, &mut types)?;
            let writable = match r.spec.get("type").and_then(Value::as_u64).and_then(|t| types.get(&t.to_string())) {
                Some(d) => matches!(d.get("k").and_then(Value::as_str), Some("int" | "float" | "bool" | "char" | "enum" | "ptr")),
                None => false,
            };
            if !writable {
                return Err(validation(format!(
                    "'{}' is a {}; only scalars (integers, floats, bools, enums, pointers) can be written. Write one of its fields, e.g. \"{}.field\".",
                    r.label, r.type_name, r.label
                )));
            }
            let mut spec = r.spec;
            spec["value"] = value.clone();
            specs.push(spec);
        }
        let reply = self.frida_running()?.host().rpc(pid, "writeMemory", json!([{ "recipes": specs, "types": Value::Object(types) }])).await?;
        // A target the agent could not write carries its own `error` (e.g. read-only memory).
        let results = reply.get("results").cloned().unwrap_or_else(|| json!([]));
        Ok(json!({ "results": results }))
    }
}

/// A poll sample from the agent (`{type: "variable_snapshot", ts, values}`) becomes one
/// `variable_snapshot` event whose `watchValues` hold `{target: value}`.
pub(super) fn ingest_snapshot(engine: &Engine, s: &Session, pid: u32, message: &Value) {
    use crate::store::event::{Event, EventType};
    let ts = message.get("ts").and_then(Value::as_f64).map(|t| t as i64 - s.start_mono_ns).unwrap_or(0);
    let mut e = Event::new(&s.id, EventType::VariableSnapshot, ts);
    e.id = engine.store.next_event_id();
    e.pid = Some(pid as i64);
    e.watch_values = message.get("values").map(Value::to_string);
    engine.store.insert(vec![e]);
}
