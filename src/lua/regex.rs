//! `strobe.regex.new(pattern)`: Rust `regex` syntax (linear time, no backtracking), so
//! adapters can parse test output without Lua patterns' limits.
//! Methods: `:match(s)` → bool, `:find(s [, init])` → start, end (1-based) or nil,
//! `:captures(s)` → table (`[0]` whole match, `[1..]` groups, named groups by name) or nil,
//! `:find_all(s)` → list of matched strings, `:replace(s, rep)` → string (`$1`, `$name`).

use mlua::{Lua, Table, UserData, UserDataMethods, Value};

use super::lua_err;
use crate::error::StrobeError;

struct LuaRegex(regex::Regex);

impl UserData for LuaRegex {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_meta_method("__tostring", |_, this, ()| Ok(format!("regex({:?})", this.0.as_str())));
        methods.add_method("match", |_, this, s: mlua::String| Ok(this.0.is_match(&s.to_str()?)));
        methods.add_method("find", |_, this, (s, init): (mlua::String, Option<usize>)| {
            let s = s.to_str()?;
            let from = init.unwrap_or(1).saturating_sub(1).min(s.len());
            if !s.is_char_boundary(from) {
                return Ok((None, None));
            }
            Ok(match this.0.find_at(&s, from) {
                Some(m) => (Some(m.start() + 1), Some(m.end())),
                None => (None, None),
            })
        });
        methods.add_method("captures", |lua, this, s: mlua::String| {
            let s = s.to_str()?;
            let Some(caps) = this.0.captures(&s) else { return Ok(Value::Nil) };
            let t = lua.create_table()?;
            for (i, m) in caps.iter().enumerate() {
                if let Some(m) = m {
                    t.set(i, m.as_str())?;
                }
            }
            for name in this.0.capture_names().flatten() {
                if let Some(m) = caps.name(name) {
                    t.set(name, m.as_str())?;
                }
            }
            Ok(Value::Table(t))
        });
        methods.add_method("find_all", |lua, this, s: mlua::String| {
            let s = s.to_str()?;
            lua.create_sequence_from(this.0.find_iter(&s).map(|m| m.as_str().to_string()).collect::<Vec<_>>())
        });
        methods.add_method("replace", |_, this, (s, rep): (mlua::String, String)| {
            Ok(this.0.replace_all(&s.to_str()?, rep.as_str()).into_owned())
        });
    }
}

pub fn register(lua: &Lua, strobe: &Table) -> mlua::Result<()> {
    let re = lua.create_table()?;
    re.set(
        "new",
        lua.create_function(|_, pattern: String| {
            regex::Regex::new(&pattern).map(LuaRegex).map_err(|e| {
                lua_err(StrobeError::validation(format!("strobe.regex.new: invalid regular expression {pattern:?}: {e}")))
            })
        })?,
    )?;
    strobe.set("regex", re)?;
    Ok(())
}
