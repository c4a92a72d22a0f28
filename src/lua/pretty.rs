//! Rendering Lua values for people (the REPL, `strobe.inspect`): tables as nested,
//! sorted, indented literals; userdata through `__tostring`; cycles and depth bounded.

use std::collections::HashSet;

use mlua::{Lua, Table, Value};

const MAX_DEPTH: usize = 8;
/// Sequences whose one-line form fits in this many characters stay on one line.
const ONE_LINE: usize = 72;

/// A value as the REPL shows a result: strings unquoted at the top, everything else as a literal.
pub fn render(v: &Value, indent: usize) -> String {
    match v {
        Value::String(s) => s.to_string_lossy(),
        _ => render_value(v, indent, &mut HashSet::new()),
    }
}

fn render_value(v: &Value, indent: usize, seen: &mut HashSet<usize>) -> String {
    match v {
        Value::Nil => "nil".into(),
        Value::Boolean(b) => b.to_string(),
        Value::Integer(i) => i.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => format!("{:?}", s.to_string_lossy()),
        Value::Table(t) => render_table(t, indent, seen),
        Value::LightUserData(p) if p.0.is_null() => "null".into(),
        other => other.to_string().unwrap_or_else(|_| format!("{}: {:p}", other.type_name(), other.to_pointer())),
    }
}

fn render_key(k: &Value) -> String {
    match k {
        Value::String(s) => {
            let s = s.to_string_lossy();
            let ident = s.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if ident {
                s
            } else {
                format!("[{s:?}]")
            }
        }
        other => format!("[{}]", render_value(other, 0, &mut HashSet::new())),
    }
}

fn render_table(t: &Table, indent: usize, seen: &mut HashSet<usize>) -> String {
    let id = t.to_pointer() as usize;
    if !seen.insert(id) || indent / 2 >= MAX_DEPTH {
        return format!("<table: {:p}>", t.to_pointer());
    }
    let len = t.raw_len();
    let mut pairs: Vec<(Value, Value)> = t.clone().pairs::<Value, Value>().flatten().collect();
    let out = if pairs.is_empty() {
        "{}".to_string()
    } else if pairs.len() == len {
        let items: Vec<String> = (1..=len).map(|i| render_value(&t.raw_get(i).unwrap_or(Value::Nil), indent + 2, seen)).collect();
        let flat = format!("{{ {} }}", items.join(", "));
        if flat.len() <= ONE_LINE && !flat.contains('\n') {
            flat
        } else {
            let pad = " ".repeat(indent + 2);
            format!("{{\n{}\n{}}}", items.iter().map(|i| format!("{pad}{i}")).collect::<Vec<_>>().join(",\n"), " ".repeat(indent))
        }
    } else {
        pairs.sort_by_key(|(k, _)| sort_key(k));
        let pad = " ".repeat(indent + 2);
        let lines: Vec<String> =
            pairs.iter().map(|(k, v)| format!("{pad}{} = {}", render_key(k), render_value(v, indent + 2, seen))).collect();
        format!("{{\n{}\n{}}}", lines.join(",\n"), " ".repeat(indent))
    };
    seen.remove(&id);
    out
}

fn sort_key(k: &Value) -> (u8, i64, String) {
    match k {
        Value::Integer(i) => (0, *i, String::new()),
        Value::String(s) => (1, 0, s.to_string_lossy()),
        other => (2, 0, format!("{other:?}")),
    }
}

/// `strobe.inspect(v)`: the REPL's rendering, for scripts.
pub fn register(lua: &Lua, strobe: &Table) -> mlua::Result<()> {
    strobe.set("inspect", lua.create_function(|_, v: Value| Ok(render_value(&v, 0, &mut HashSet::new())))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_tables_render_sorted_and_indented() {
        let lua = Lua::new();
        let v: Value = lua.load(r#"{ b = { 1, 2, "x" }, a = true, ["odd key"] = {} }"#).eval().unwrap();
        assert_eq!(render(&v, 0), "{\n  a = true,\n  b = { 1, 2, \"x\" },\n  [\"odd key\"] = {}\n}");
        let cyc: Value = lua.load("local t = {} t.self = t return t").eval().unwrap();
        assert!(render(&cyc, 0).contains("<table: "));
    }
}
