//! Moving values between JSON (the MCP wire), Rust types and Lua tables.
//!
//! A Lua table forgets the order of its keys, but the order is worth keeping: a struct's
//! fields print in declaration order (as gdb prints them), an event's fields in the order
//! the docs list them. So every JSON object turned into a table has its key order noted in
//! a weak-keyed registry table, and a table turned back into JSON lists those keys first,
//! in that order (keys a script added follow).

use mlua::{Lua, LuaSerdeExt, SerializeOptions, Table, Value};
use serde::Serialize;
use serde_json::Map;

/// Registry name of the table `{[object table] = {key, key, ...}}` (weak keys).
const KEY_ORDER: &str = "strobe.key_order";

/// JSON → Lua. JSON `null` becomes `nil` (so `if args.x then` works), arrays keep the
/// array metatable so they encode back as arrays even when empty.
pub fn to_lua(lua: &Lua, v: &impl Serialize) -> mlua::Result<Value> {
    let opts = SerializeOptions::new()
        .serialize_none_to_null(false)
        .serialize_unit_to_null(false)
        .set_array_metatable(true);
    ordered_to_lua(lua, v, opts)
}

/// JSON → Lua for recorded data (event arguments, return values): a JSON `null` inside
/// them is a value worth seeing (a NULL pointer field), so it stays as `strobe.json.null`
/// and encodes back as `null` instead of the key vanishing.
pub fn to_lua_keep_null(lua: &Lua, v: &impl Serialize) -> mlua::Result<Value> {
    let opts = SerializeOptions::new()
        .serialize_none_to_null(true)
        .serialize_unit_to_null(true)
        .set_array_metatable(true);
    ordered_to_lua(lua, v, opts)
}

/// Lua → JSON, objects in the key order they came with (see the module comment).
pub fn to_json(lua: &Lua, v: Value) -> mlua::Result<serde_json::Value> {
    let mut j: serde_json::Value = lua.from_value(v.clone())?;
    if let Some(order) = key_order(lua, false)? {
        restore_order(&order, &v, &mut j)?;
    }
    Ok(j)
}

fn ordered_to_lua(lua: &Lua, v: &impl Serialize, opts: SerializeOptions) -> mlua::Result<Value> {
    let out = lua.to_value_with(v, opts)?;
    // The order is read from v's JSON form (a table key not found there is skipped).
    let Ok(j) = serde_json::to_value(v) else { return Ok(out) };
    if composite(&j) {
        let order = key_order(lua, true)?.expect("created");
        note_order(lua, &order, &out, &j)?;
    }
    Ok(out)
}

fn key_order(lua: &Lua, create: bool) -> mlua::Result<Option<Table>> {
    if let Ok(t) = lua.named_registry_value::<Table>(KEY_ORDER) {
        return Ok(Some(t));
    }
    if !create {
        return Ok(None);
    }
    let t = lua.create_table()?;
    let weak = lua.create_table()?;
    weak.set("__mode", "k")?;
    t.set_metatable(Some(weak));
    lua.set_named_registry_value(KEY_ORDER, &t)?;
    Ok(Some(t))
}

fn composite(j: &serde_json::Value) -> bool {
    matches!(j, serde_json::Value::Object(_) | serde_json::Value::Array(_))
}

fn note_order(lua: &Lua, order: &Table, v: &Value, j: &serde_json::Value) -> mlua::Result<()> {
    let Value::Table(t) = v else { return Ok(()) };
    match j {
        serde_json::Value::Object(m) => {
            if m.len() > 1 {
                order.raw_set(t.clone(), lua.create_sequence_from(m.keys().map(String::as_str))?)?;
            }
            for (k, jv) in m.iter().filter(|(_, jv)| composite(jv)) {
                note_order(lua, order, &t.raw_get::<Value>(k.as_str())?, jv)?;
            }
        }
        serde_json::Value::Array(a) => {
            for (i, jv) in a.iter().enumerate().filter(|(_, jv)| composite(jv)) {
                note_order(lua, order, &t.raw_get::<Value>(i + 1)?, jv)?;
            }
        }
        _ => {}
    }
    Ok(())
}

fn restore_order(order: &Table, v: &Value, j: &mut serde_json::Value) -> mlua::Result<()> {
    let Value::Table(t) = v else { return Ok(()) };
    match j {
        serde_json::Value::Object(m) => {
            if let Value::Table(keys) = order.raw_get::<Value>(t.clone())? {
                let mut sorted = Map::with_capacity(m.len());
                for k in keys.sequence_values::<String>() {
                    let k = k?;
                    if let Some(val) = m.remove(&k) {
                        sorted.insert(k, val);
                    }
                }
                sorted.append(m);
                *m = sorted;
            }
            for (k, jv) in m.iter_mut().filter(|(_, jv)| composite(jv)) {
                restore_order(order, &t.raw_get::<Value>(k.as_str())?, jv)?;
            }
        }
        serde_json::Value::Array(a) => {
            for (i, jv) in a.iter_mut().enumerate().filter(|(_, jv)| composite(jv)) {
                restore_order(order, &t.raw_get::<Value>(i + 1)?, jv)?;
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_keep_their_key_order_through_lua() {
        let lua = Lua::new();
        let j: serde_json::Value = serde_json::from_str(
            r#"{"zeta": 1, "alpha": {"y": 2, "b": [{"q": 1, "c": 2, "m": 3}], "a": null}, "mid": "x"}"#,
        )
        .unwrap();
        let v = to_lua_keep_null(&lua, &j).unwrap();
        lua.globals().set("v", v.clone()).unwrap();
        // A script adds a key and keeps the rest.
        lua.load("v.alpha.added = true").exec().unwrap();
        let back = to_json(&lua, v).unwrap();
        assert_eq!(
            back.to_string(),
            r#"{"zeta":1,"alpha":{"y":2,"b":[{"q":1,"c":2,"m":3}],"a":null,"added":true},"mid":"x"}"#
        );
    }
}
