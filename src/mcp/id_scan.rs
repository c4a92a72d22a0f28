//! Finding a request's `id` in a line the JSON parser refused (too deeply nested, or
//! broken after the id): the answer then still carries the client's id, so the client
//! is not left waiting for a reply that names no request. A scan of the top-level
//! object that skips nested values by counting brackets, with no recursion.

/// The raw text of the top-level `"id"` member, when it is a number or a string.
pub fn scan_id(line: &str) -> Option<&str> {
    let b = line.as_bytes();
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    loop {
        i = skip_ws(b, i);
        let key_end = string_end(b, i)?;
        let key = &line[i..key_end];
        i = skip_ws(b, key_end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        i = skip_ws(b, i + 1);
        let value_end = value_end(b, i)?;
        if key == "\"id\"" {
            let raw = &line[i..value_end];
            // Only what a JSON-RPC id may be, and only if it is well formed.
            return match serde_json::from_str::<serde_json::Value>(raw) {
                Ok(v) if v.is_number() || v.is_string() => Some(raw),
                _ => None,
            };
        }
        i = skip_ws(b, value_end);
        if b.get(i) != Some(&b',') {
            return None;
        }
        i += 1;
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while b.get(i).is_some_and(|c| c.is_ascii_whitespace()) {
        i += 1;
    }
    i
}

/// End (exclusive) of the string starting at `i`.
fn string_end(b: &[u8], i: usize) -> Option<usize> {
    if b.get(i) != Some(&b'"') {
        return None;
    }
    let mut j = i + 1;
    loop {
        match b.get(j)? {
            b'\\' => j += 2,
            b'"' => return Some(j + 1),
            _ => j += 1,
        }
    }
}

/// End (exclusive) of the value starting at `i`: nested arrays and objects are skipped
/// by counting brackets outside strings.
fn value_end(b: &[u8], i: usize) -> Option<usize> {
    match b.get(i)? {
        b'"' => string_end(b, i),
        b'[' | b'{' => {
            let mut depth = 0usize;
            let mut j = i;
            loop {
                match b.get(j)? {
                    b'"' => {
                        j = string_end(b, j)?;
                        continue;
                    }
                    b'[' | b'{' => depth += 1,
                    b']' | b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        _ => {
            let mut j = i;
            while b.get(j).is_some_and(|c| !matches!(c, b',' | b'}' | b']') && !c.is_ascii_whitespace()) {
                j += 1;
            }
            (j > i).then_some(j)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::scan_id;

    #[test]
    fn finds_the_id_past_values_too_deep_to_parse() {
        let deep = "[".repeat(1000) + &"]".repeat(1000);
        let line = format!(r#"{{"jsonrpc":"2.0","params":{{"a":{deep},"s":"}}]\"{{"}},"id":"req-7","method":"x"}}"#);
        assert!(serde_json::from_str::<serde_json::Value>(&line).is_err());
        assert_eq!(scan_id(&line), Some(r#""req-7""#));
        assert_eq!(scan_id(r#"{"id": 18446744073709551617, "method": [[["#), Some("18446744073709551617"));
    }

    #[test]
    fn no_id_when_there_is_none_or_it_is_not_an_id() {
        for line in [r#"{"method":"ping"}"#, r#"{"id":{"a":1}}"#, r#"{"id":tru"#, "[1,2]", r#"{"id""#, r#"{"a":[1,2"#, ""] {
            assert_eq!(scan_id(line), None, "{line}");
        }
    }
}
