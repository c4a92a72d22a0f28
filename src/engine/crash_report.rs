//! The `crash` event of a fatal signal: the agent's report (registers, stack snapshot, raw
//! frames) symbolized from each module's DWARF — functions, file:line, inlined calls as
//! frames of their own — with the crashing frame's locals (crash_locals.rs).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Value};

use super::{Engine, Session};
use crate::store::event::{Event, EventType};
use crate::symbols::{expand_inlined, LineTable, LocalsInfo, SymbolIndex};

pub(super) fn crash_event(engine: &Engine, s: &Session, pid: u32, m: &Value) -> Event {
    let ts = m.get("ts").and_then(Value::as_f64).map(|t| t as i64 - s.start_mono_ns).unwrap_or(0);
    let mut e = Event::new(&s.id, EventType::Crash, ts);
    e.id = engine.store.next_event_id();
    e.pid = Some(pid as i64);
    e.thread_id = m.get("tid").and_then(Value::as_i64);
    e.thread_name = m.get("threadName").and_then(Value::as_str).map(str::to_string);
    let signal = m.get("signal").and_then(Value::as_str).unwrap_or("UNKNOWN").to_string();
    let memory = m.get("memory").filter(|v| v.is_object());
    let fault = memory.and_then(|mm| mm.get("address")).or_else(|| m.get("address")).and_then(Value::as_str);
    e.fault_address = fault.map(str::to_string);
    e.registers = m.get("registers").map(Value::to_string);
    let frames = symbolize(engine, m.get("frames").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]));
    // The crash site: the innermost frame with a DWARF function (frame 0 may be in libc).
    if let Some(top) = frames.iter().find(|f| f.get("file").is_some()) {
        e.function_name = top.get("function").and_then(Value::as_str).map(str::to_string);
        e.source_file = top.get("file").and_then(Value::as_str).map(str::to_string);
        e.line_number = top.get("line").and_then(Value::as_i64);
    }
    let access = memory.and_then(|mm| mm.get("operation")).and_then(Value::as_str);
    let mut text = match (access, fault) {
        (Some(op), Some(addr)) => format!("{signal}: invalid {op} at {addr}"),
        _ => signal.clone(),
    };
    let at = |f: &str, file: &str, line: i64| format!("{f} ({}:{line})", file.rsplit('/').next().unwrap_or(file));
    if let (Some(f), Some(file), Some(line)) = (&e.function_name, &e.source_file, e.line_number) {
        text.push_str(&format!(" in {}", at(f, file, line)));
    }
    // Inside inlined code: name the function it was inlined into, where the user's code is.
    if frames.first().is_some_and(|f| f.get("inlined").is_some()) {
        let host = frames.iter().find(|f| f.get("inlined").is_none());
        if let Some((f, file, line)) = host.and_then(|h| Some((h["function"].as_str()?, h["file"].as_str()?, h["line"].as_i64()?))) {
            text.push_str(&format!(", inlined into {}", at(f, file, line)));
        }
    }
    e.text = Some(text);
    e.signal = Some(signal);
    e.backtrace = Some(Value::Array(frames).to_string());
    e.locals = super::crash_locals::crash_locals(engine, m);
    e
}

/// Agent frames `{address, module, modulePath, offset, symbol}` → `{address, module,
/// function, file, line}`, from the DWARF of each frame's module when it has some. A frame
/// inside inlined code becomes one frame per inlined call (`inlined: true`, same address),
/// innermost first, each at the line that called the next (symbols/inlines.rs).
fn symbolize(engine: &Engine, frames: &[Value]) -> Vec<Value> {
    type ModuleDebugInfo = (Option<Arc<SymbolIndex>>, Option<Arc<LineTable>>, Option<Arc<LocalsInfo>>);
    let mut modules: HashMap<String, ModuleDebugInfo> = HashMap::new();
    let mut out = Vec::with_capacity(frames.len());
    for (i, f) in frames.iter().enumerate() {
        let address = f.get("address").and_then(Value::as_str).unwrap_or("0x0");
        let (mut function, mut here, mut inlined) = (None, None, Vec::new());
        let offset = f.get("offset").and_then(Value::as_str).and_then(|o| u64::from_str_radix(o.trim_start_matches("0x"), 16).ok());
        if let (Some(path), Some(offset)) = (f.get("modulePath").and_then(Value::as_str), offset) {
            let (syms, lines, dwarf) = modules
                .entry(path.to_string())
                .or_insert_with(|| {
                    let p: &Path = path.as_ref();
                    (engine.symbols.get(p).ok(), LineTable::cached(p).ok(), LocalsInfo::cached(p).ok())
                })
                .clone();
            let base = syms.as_ref().map(|x| x.image_base).unwrap_or(0);
            // Outer frames hold return addresses: the call is the instruction before.
            let at = base + offset - u64::from(i > 0 && offset > 0);
            if let Some(func) = syms.as_ref().and_then(|x| x.function_at(at)) {
                function = Some(func.name.clone());
                inlined = dwarf.and_then(|d| d.inlined_calls(at).ok()).unwrap_or_default();
            }
            here = lines.as_ref().and_then(|t| t.address_to_line(at)).map(|(file, line)| (file.to_string(), line));
        }
        // Without DWARF, the agent's nearest ELF symbol.
        let function = function.or_else(|| f.get("symbol").and_then(Value::as_str).map(str::to_string));
        for sf in expand_inlined(function, here, &inlined) {
            let mut frame = json!({ "address": address });
            if let Some(m) = f.get("module").and_then(Value::as_str) {
                frame["module"] = json!(m);
            }
            for (key, v) in [("function", sf.function.map(Value::from)), ("file", sf.file.map(Value::from)), ("line", sf.line.map(Value::from))] {
                if let Some(v) = v {
                    frame[key] = v;
                }
            }
            if sf.inlined {
                frame["inlined"] = json!(true);
            }
            out.push(frame);
        }
    }
    out
}
