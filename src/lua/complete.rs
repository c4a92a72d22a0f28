//! Tab completion for the REPL: `strobe.*` names (any global table path, and Lua
//! keywords at the top level), and session ids inside an open string literal.

use std::collections::BTreeSet;

use mlua::{Lua, Table, Value};

use crate::engine::Engine;

const KEYWORDS: &[&str] = &[
    "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if", "in", "local", "nil", "not",
    "or", "repeat", "return", "then", "true", "until", "while",
];

/// Where the completed word starts in `line`, and the candidates that replace it.
pub fn complete(lua: &Lua, engine: &Engine, line: &str) -> (usize, Vec<String>) {
    if let Some(start) = open_string_start(line) {
        let prefix = &line[start..];
        let mut ids: Vec<String> = engine.live_session_ids();
        if let Ok(rows) = engine.list() {
            ids.extend(rows.into_iter().map(|r| r.id));
        }
        let ids: BTreeSet<String> = ids.into_iter().filter(|id| id.starts_with(prefix)).collect();
        return (start, ids.into_iter().collect());
    }
    let word_len = line.chars().rev().take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '.').map(char::len_utf8).sum::<usize>();
    let start = line.len() - word_len;
    let word = &line[start..];
    let (base, partial) = match word.rfind('.') {
        Some(dot) => (Some(&word[..dot]), &word[dot + 1..]),
        None => (None, word),
    };
    let mut out = BTreeSet::new();
    let table = match base {
        None => {
            out.extend(KEYWORDS.iter().filter(|k| k.starts_with(partial)).map(|k| k.to_string()));
            Some(lua.globals())
        }
        Some(path) => resolve(lua, path),
    };
    if let Some(t) = table {
        for (k, _) in t.pairs::<Value, Value>().flatten() {
            if let Value::String(s) = k {
                let key = s.to_string_lossy();
                if key.starts_with(partial) && !key.starts_with("__") {
                    out.insert(match base {
                        Some(b) => format!("{b}.{key}"),
                        None => key,
                    });
                }
            }
        }
    }
    (start, out.into_iter().collect())
}

fn resolve(lua: &Lua, path: &str) -> Option<Table> {
    let mut cur = lua.globals();
    for seg in path.split('.') {
        cur = match cur.get::<Value>(seg).ok()? {
            Value::Table(t) => t,
            _ => return None,
        };
    }
    Some(cur)
}

/// If `line` ends inside a string literal, the byte offset just after its opening quote.
fn open_string_start(line: &str) -> Option<usize> {
    let mut open: Option<(char, usize)> = None;
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        match open {
            Some((q, _)) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == q {
                    open = None;
                }
            }
            None if c == '"' || c == '\'' => open = Some((c, i + 1)),
            None => {}
        }
    }
    open.map(|(_, s)| s)
}

#[cfg(test)]
mod tests {
    use super::open_string_start;

    #[test]
    fn finds_open_strings() {
        assert_eq!(open_string_start(r#"strobe.session("app-"#), Some(16));
        assert_eq!(open_string_start(r#"x("a") .. "#), None);
        assert_eq!(open_string_start(r#"'it\'s"#), Some(1));
    }
}
