//! Moving values between JSON (the MCP wire), Rust types and Lua tables.

use mlua::{Lua, LuaSerdeExt, SerializeOptions, Value};
use serde::Serialize;

/// JSON → Lua. JSON `null` becomes `nil` (so `if args.x then` works), arrays keep the
/// array metatable so they encode back as arrays even when empty.
pub fn to_lua(lua: &Lua, v: &impl Serialize) -> mlua::Result<Value> {
    let opts = SerializeOptions::new()
        .serialize_none_to_null(false)
        .serialize_unit_to_null(false)
        .set_array_metatable(true);
    lua.to_value_with(v, opts)
}

/// JSON → Lua for recorded data (event arguments, return values): a JSON `null` inside
/// them is a value worth seeing (a NULL pointer field), so it stays as `strobe.json.null`
/// and encodes back as `null` instead of the key vanishing.
pub fn to_lua_keep_null(lua: &Lua, v: &impl Serialize) -> mlua::Result<Value> {
    let opts = SerializeOptions::new()
        .serialize_none_to_null(true)
        .serialize_unit_to_null(true)
        .set_array_metatable(true);
    lua.to_value_with(v, opts)
}

/// Lua → JSON.
pub fn to_json(lua: &Lua, v: Value) -> mlua::Result<serde_json::Value> {
    lua.from_value(v)
}
