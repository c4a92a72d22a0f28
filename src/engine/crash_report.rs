//! The `crash` event of a fatal signal: the agent's report (registers, stack snapshot, raw
//! frames) symbolized from each module's DWARF or ELF symbols (backtrace.rs) — functions,
//! file:line, inlined calls as frames of their own — with the crashing frame's locals
//! (crash_locals.rs).

use serde_json::{json, Value};

use super::debug_state::parse_hex;
use super::{Engine, Session};
use crate::store::event::{Event, EventType};

pub(super) fn crash_event(engine: &Engine, s: &Session, pid: u32, m: &Value) -> Event {
    let ts = m.get("ts").and_then(Value::as_f64).map(|t| t as i64 - s.start_mono_ns).unwrap_or(0);
    let mut e = Event::new(&s.id, EventType::Crash, ts);
    e.pid = Some(pid as i64);
    e.thread_id = m.get("tid").and_then(Value::as_i64);
    e.thread_name = m.get("threadName").and_then(Value::as_str).map(str::to_string);
    let signal = m.get("signal").and_then(Value::as_str).unwrap_or("UNKNOWN").to_string();
    let memory = m.get("memory").filter(|v| v.is_object());
    let fault = memory.and_then(|mm| mm.get("address")).or_else(|| m.get("address")).and_then(Value::as_str);
    e.fault_address = fault.map(str::to_string);
    e.registers = m.get("registers").map(|r| super::registers::render(r).to_string());
    let raw = m.get("frames").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
    let omitted = m.get("omittedFrames").and_then(Value::as_u64).unwrap_or(0);
    let overflow = m.get("stackOverflow").and_then(Value::as_bool).unwrap_or(false);
    let frames: Vec<Value> = super::backtrace::symbolize(engine, raw).iter().map(|f| json!(f)).collect();
    let frames = if overflow { summarise_deep(engine, raw, frames, omitted) } else { frames };
    // The crash site: the innermost frame with a DWARF function (frame 0 may be in libc).
    let site = frames.iter().position(|f| f.get("file").is_some());
    if let Some(top) = site.map(|i| &frames[i]) {
        e.function_name = top.get("function").and_then(Value::as_str).map(str::to_string);
        e.source_file = top.get("file").and_then(Value::as_str).map(str::to_string);
        e.line_number = top.get("line").and_then(Value::as_i64);
    }
    let access = memory.and_then(|mm| mm.get("operation")).and_then(Value::as_str);
    let mut text = match (access, fault) {
        _ if overflow => match m.get("stackDepth").and_then(Value::as_u64) {
            Some(depth) => format!("{signal}: stack overflow ({depth} frames deep)"),
            None => format!("{signal}: stack overflow"),
        },
        (Some(op), Some(addr)) => format!("{signal}: invalid {op} at {addr}"),
        _ => signal.clone(),
    };
    let at = |f: &str, file: &str, line: i64| format!("{f} ({}:{line})", file.rsplit('/').next().unwrap_or(file));
    if let (Some(f), Some(file), Some(line)) = (&e.function_name, &e.source_file, e.line_number) {
        text.push_str(&format!(" in {}", at(f, file, line)));
    }
    // Raised inside a library the user's code called (abort in free): name that call.
    if let Some(callee) = site.filter(|&i| i > 0).and_then(|i| frames[i - 1].get("function")).and_then(Value::as_str) {
        text.push_str(&format!(", in its call to {callee}"));
    }
    // Inside inlined code: name the function it was inlined into, where the user's code is.
    if frames.first().is_some_and(|f| f.get("inlined").is_some()) {
        let host = frames.iter().find(|f| f.get("inlined").is_none());
        if let Some((f, file, line)) = host.and_then(|h| Some((h["function"].as_str()?, h["file"].as_str()?, h["line"].as_i64()?))) {
            text.push_str(&format!(", inlined into {}", at(f, file, line)));
        }
    }
    if let Some(patch) = m.get("patch").filter(|p| p.is_object()) {
        let code = s.state.lock().unwrap().modules.code.clone();
        text.push_str(&strobe_patch_note(patch, &code));
    }
    e.text = Some(text);
    e.signal = Some(signal);
    e.backtrace = Some(Value::Array(frames).to_string());
    e.locals = super::crash_locals::crash_locals(engine, m);
    e
}

/// A deep stack's backtrace (`frames`, symbolized from `raw`), summarised: the frames the
/// agent kept at both ends with a `{omittedFrames: n}` marker between them, and runs of the
/// same frame (recursion) folded into one with `repeated: count`.
fn summarise_deep(engine: &Engine, raw: &[Value], frames: Vec<Value>, omitted: u64) -> Vec<Value> {
    let mut frames = frames;
    if omitted > 0 {
        let split = raw.len().saturating_sub(KEPT_OUTER).max(1);
        let at = super::backtrace::symbolize(engine, &raw[..split]).len().min(frames.len());
        frames.insert(at, json!({ "omittedFrames": omitted }));
    }
    let mut out: Vec<Value> = Vec::new();
    for f in frames {
        let same = |a: &Value| ["function", "file", "line"].iter().all(|k| a.get(*k) == f.get(*k)) && a.get("function").is_some();
        match out.last_mut() {
            Some(last) if same(last) => {
                let n = last.get("repeated").and_then(Value::as_u64).unwrap_or(1);
                last["repeated"] = json!(n + 1);
            }
            _ => out.push(f),
        }
    }
    out
}

/// The outermost frames the agent keeps of an overflowed stack (crash.ts KEEP_OUTER).
const KEPT_OUTER: usize = 16;

/// A crash in bytes a hook patched moments before is most likely Strobe's, not the
/// program's: say so, with how the agent's park went (agent/src/quiesce.ts patchNear), which
/// is what finding its cause takes.
fn strobe_patch_note(patch: &Value, code: &super::code_names::CodeNames) -> String {
    // Where the parked threads stood, by function: "0x55d0… <worker+35>".
    let mut patch = patch.clone();
    if let Some(parked) = patch.get_mut("parked").and_then(Value::as_array_mut) {
        for p in parked.iter_mut() {
            let Some(pc) = parse_hex(p.get("pc")) else { continue };
            let name = code.name(pc).map_or_else(String::new, |n| format!(" <{n}>"));
            let syscall = if p.get("inSyscall").and_then(Value::as_bool) == Some(true) { " (in a system call)" } else { "" };
            *p = Value::String(format!("0x{pc:x}{name}{syscall}"));
        }
    }
    let ago = patch.get("agoMs").and_then(Value::as_u64).unwrap_or(0);
    let entry = patch.get("entry").and_then(Value::as_str).unwrap_or("?");
    let function = parse_hex(patch.get("entry")).and_then(|a| code.name(a)).map_or_else(|| "the function".to_string(), |n| n.to_string());
    format!(
        "; in the entry bytes of {function} at {entry}, which Strobe patched for a hook {ago} ms before: likely Strobe's fault, not the program's (relaunch to go on; please report it with this text). Patch: {patch}"
    )
}
