//! Registers of a crash as the LLM reads them: integer registers as the agent's hex
//! strings, vector registers (`xmm0`..`xmm15`, sent as their 16 bytes in memory order) as
//! `{bytes, doubles}`: `{"bytes": "000000000000e03f0000000000000000", "doubles": [0.5, 0.0]}`.

use serde_json::{json, Map, Value};

pub(super) fn render(registers: &Value) -> Value {
    let Some(map) = registers.as_object() else { return registers.clone() };
    let out: Map<String, Value> = map.iter().map(|(k, v)| (k.clone(), vector(k, v).unwrap_or_else(|| v.clone()))).collect();
    Value::Object(out)
}

fn vector(name: &str, v: &Value) -> Option<Value> {
    if !name.starts_with("xmm") {
        return None;
    }
    let text = v.as_str()?;
    if text.len() != 32 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let bytes: Vec<u8> = (0..16).map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).unwrap_or(0)).collect();
    let double = |i: usize| f64::from_le_bytes(bytes[i..i + 8].try_into().unwrap_or([0; 8]));
    // JSON has no NaN or infinities: those go as text.
    let number = |x: f64| if x.is_finite() { json!(x) } else { json!(x.to_string()) };
    Some(json!({ "bytes": text, "doubles": [number(double(0)), number(double(8))] }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xmm_bytes_become_bytes_and_doubles() {
        let mut bytes = 0.5f64.to_le_bytes().to_vec();
        bytes.extend((-2.25f64).to_le_bytes());
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let r = render(&json!({ "rip": "0x1234", "xmm0": hex }));
        assert_eq!(r["rip"], "0x1234");
        assert_eq!(r["xmm0"]["doubles"], json!([0.5, -2.25]));
        assert_eq!(r["xmm0"]["bytes"], hex);
    }

    #[test]
    fn anything_else_passes_through() {
        let r = render(&json!({ "xmm1": "[object Object]", "rax": "0x0" }));
        assert_eq!(r, json!({ "xmm1": "[object Object]", "rax": "0x0" }));
    }
}
