//! Locals of the crashing frame, for `crash` events. The process is about to die when the
//! agent reports a crash, so nothing can be read from it afterwards: the crash message
//! carries the registers and a snapshot of the frame's stack (`stackDump: {address, bytes}`,
//! agent/src/crash.ts), and the DWARF locations of the frame's variables (symbols/locals.rs)
//! are evaluated against those here. Only frame 0 (the faulting pc) has known registers: a
//! crash whose innermost frame has no DWARF (e.g. inside libc's abort) gets no locals.

use serde_json::{json, Map, Value};

use super::Engine;
use crate::symbols::{LocalVar, LocalsInfo, VarLocation};

/// The crash snapshot: registers by Frida name and the stack bytes at `start`.
struct Snapshot {
    registers: Map<String, Value>,
    start: u64,
    bytes: Vec<u8>,
}

fn hex_u64(v: &Value) -> Option<u64> {
    let s = v.as_str()?;
    u64::from_str_radix(s.trim_start_matches("0x"), 16).ok()
}

fn decode_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

impl Snapshot {
    fn of(message: &Value) -> Option<Snapshot> {
        let registers = message.get("registers")?.as_object()?.clone();
        let dump = message.get("stackDump")?;
        Some(Snapshot { registers, start: hex_u64(dump.get("address")?)?, bytes: decode_hex(dump.get("bytes")?.as_str()?)? })
    }

    fn register(&self, name: &str) -> Result<u64, String> {
        self.registers.get(name).and_then(hex_u64).ok_or_else(|| format!("register {name} was not captured"))
    }

    fn read(&self, address: u64, size: usize) -> Result<&[u8], String> {
        let at = address.checked_sub(self.start).map(|o| o as usize);
        match at {
            Some(o) if o.checked_add(size).is_some_and(|end| end <= self.bytes.len()) => Ok(&self.bytes[o..o + size]),
            _ => Err(format!(
                "0x{address:x} is outside the stack snapshot taken at the crash (0x{:x}..0x{:x})",
                self.start,
                self.start + self.bytes.len() as u64
            )),
        }
    }
}

/// A value's JSON form, as the agent shows locals at a breakpoint (agent/src/values.ts).
fn format(bytes: &[u8], var: &LocalVar) -> Value {
    let mut word = [0u8; 8];
    let n = bytes.len().min(8);
    word[..n].copy_from_slice(&bytes[..n]);
    let raw = u64::from_le_bytes(word);
    let unsigned = |v: u64| if v < (1u64 << 53) { json!(v) } else { json!(v.to_string()) };
    match var.encoding {
        "pointer" => json!(format!("0x{raw:x}")),
        "bool" => json!(raw & 0xff != 0),
        "float" if n == 4 => json!(f32::from_bits(raw as u32)),
        "float" => json!(f64::from_bits(raw)),
        "signed" | "char" => {
            let shift = 64 - 8 * n.max(1) as u32;
            json!(((raw << shift) as i64) >> shift)
        }
        "unsigned" => unsigned(raw),
        _ => json!(bytes.iter().take(64).map(|b| format!("{b:02x}")).collect::<String>()),
    }
}

fn size_of(var: &LocalVar) -> usize {
    match var.size {
        0 => 8,
        s => s.min(64) as usize,
    }
}

fn evaluate(var: &LocalVar, snap: &Snapshot) -> (String, Result<Value, String>) {
    match &var.location {
        VarLocation::Register { reg } => (format!("register {reg}"), match var.encoding {
            "float" => Err("floating-point values live in SSE registers, which the crash capture does not include".into()),
            _ => snap.register(reg).map(|v| format(&v.to_le_bytes()[..size_of(var).min(8)], var)),
        }),
        VarLocation::Memory { base, offset } => {
            let value = snap
                .register(base)
                .and_then(|b| snap.read(b.wrapping_add(*offset as u64), size_of(var)))
                .map(|bytes| format(bytes, var));
            (format!("memory {base}{offset:+}"), value)
        }
        VarLocation::Static { address } => {
            (format!("static 0x{address:x}"), Err("a static variable: not in the crash's stack snapshot".into()))
        }
        VarLocation::Value { value } => ("constant".into(), Ok(json!(value))),
        VarLocation::OptimizedOut => ("optimized out".into(), Err(format!("{} is optimized out at the crash site", var.name))),
        VarLocation::Unsupported { why } => (format!("unsupported: {why}"), Err(why.clone())),
    }
}

/// `[{name, type, isParameter, location, value | error}]` for the crash's frame 0, as JSON
/// text; None when there is no snapshot or no DWARF function at the faulting pc.
pub(crate) fn crash_locals(engine: &Engine, message: &Value) -> Option<String> {
    let snap = Snapshot::of(message)?;
    let top = message.get("frames")?.as_array()?.first()?;
    let path = top.get("modulePath")?.as_str()?;
    let offset = hex_u64(top.get("offset")?)?;
    let image_base = engine.symbols.get(path.as_ref()).ok().map(|s| s.image_base).unwrap_or(0);
    let frame = LocalsInfo::cached(path.as_ref()).ok()?.locals_at(image_base + offset).ok()??;
    let vars: Vec<Value> = frame
        .vars
        .iter()
        .map(|v| {
            let (location, value) = evaluate(v, &snap);
            let mut out = json!({ "name": v.name, "type": v.type_name, "isParameter": v.is_parameter, "location": location });
            match value {
                Ok(val) => out["value"] = val,
                Err(e) => out["error"] = json!(e),
            }
            out
        })
        .collect();
    Some(Value::Array(vars).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn var(encoding: &'static str, size: u64, location: VarLocation) -> LocalVar {
        LocalVar { name: "v".into(), type_name: "t".into(), size, encoding, is_parameter: false, location }
    }

    fn snapshot() -> Snapshot {
        let mut bytes = vec![0u8; 32];
        bytes[8..12].copy_from_slice(&(-21i32).to_le_bytes());
        bytes[16..24].copy_from_slice(&0x5555_0000_1234u64.to_le_bytes());
        let registers = json!({ "rbp": "0x1018", "rdi": "0xffffffffffffffff" }).as_object().unwrap().clone();
        Snapshot { registers, start: 0x1000, bytes }
    }

    #[test]
    fn frame_relative_values_come_from_the_snapshot() {
        let s = snapshot();
        let int = var("signed", 4, VarLocation::Memory { base: "rbp".into(), offset: -16 });
        assert_eq!(evaluate(&int, &s).1, Ok(json!(-21)));
        let p = var("pointer", 8, VarLocation::Memory { base: "rbp".into(), offset: -8 });
        assert_eq!(evaluate(&p, &s).1, Ok(json!("0x555500001234")));
        let reg = var("signed", 4, VarLocation::Register { reg: "rdi".into() });
        assert_eq!(evaluate(&reg, &s).1, Ok(json!(-1)));
    }

    #[test]
    fn outside_the_snapshot_is_an_error_not_a_guess() {
        let s = snapshot();
        let far = var("signed", 4, VarLocation::Memory { base: "rbp".into(), offset: 64 });
        assert!(evaluate(&far, &s).1.unwrap_err().contains("outside the stack snapshot"));
        let below = var("signed", 8, VarLocation::Memory { base: "rbp".into(), offset: -0x100 });
        assert!(evaluate(&below, &s).1.is_err());
        let missing = var("signed", 8, VarLocation::Memory { base: "r12".into(), offset: 0 });
        assert!(evaluate(&missing, &s).1.unwrap_err().contains("not captured"));
    }
}
