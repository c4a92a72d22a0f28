//! `strobe.json`: encode/decode, plus `array(t)` to mark a (possibly empty) table as a
//! JSON array and `null` for an explicit JSON null.

use mlua::{Lua, LuaSerdeExt, Table, Value};

pub fn register(lua: &Lua, strobe: &Table) -> mlua::Result<()> {
    let json = lua.create_table()?;
    json.set(
        "encode",
        lua.create_function(|lua, v: Value| {
            let j = super::convert::to_json(lua, v)?;
            Ok(j.to_string())
        })?,
    )?;
    json.set(
        "decode",
        lua.create_function(|lua, text: String| {
            let j: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| super::lua_err(crate::error::StrobeError::validation(format!("invalid JSON: {e}"))))?;
            super::convert::to_lua(lua, &j)
        })?,
    )?;
    json.set(
        "array",
        lua.create_function(|lua, t: Option<Table>| {
            let t = match t {
                Some(t) => t,
                None => lua.create_table()?,
            };
            t.set_metatable(Some(lua.array_metatable()));
            Ok(t)
        })?,
    )?;
    json.set("null", lua.null())?;
    strobe.set("json", json)?;
    Ok(())
}
