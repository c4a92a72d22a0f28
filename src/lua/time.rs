//! `strobe.time`: wall-clock and monotonic milliseconds, and formatting of timestamps.

use std::time::Instant;

use mlua::{Lua, Table};

pub fn register(lua: &Lua, strobe: &Table) -> mlua::Result<()> {
    let time = lua.create_table()?;
    time.set("now_ms", lua.create_function(|_, ()| Ok(chrono::Utc::now().timestamp_millis()))?)?;
    // Milliseconds since the runtime started: for measuring durations (never jumps).
    let origin = Instant::now();
    time.set("monotonic_ms", lua.create_function(move |_, ()| Ok(origin.elapsed().as_secs_f64() * 1000.0))?)?;
    // strobe.time.format(ms?, fmt?) -> local time text; fmt is strftime ("%Y-%m-%d %H:%M:%S" by default).
    time.set(
        "format",
        lua.create_function(|_, (ms, fmt): (Option<i64>, Option<String>)| {
            use chrono::TimeZone;
            let ms = ms.unwrap_or_else(|| chrono::Utc::now().timestamp_millis());
            let t = chrono::Local.timestamp_millis_opt(ms).single().ok_or_else(|| {
                super::lua_err(crate::error::StrobeError::validation(format!("strobe.time.format: {ms} is not a valid time in ms")))
            })?;
            let fmt = fmt.unwrap_or_else(|| "%Y-%m-%d %H:%M:%S".into());
            let mut out = String::new();
            use std::fmt::Write;
            write!(out, "{}", t.format(&fmt)).map_err(|_| {
                super::lua_err(crate::error::StrobeError::validation(format!("strobe.time.format: invalid format {fmt:?}")))
            })?;
            Ok(out)
        })?,
    )?;
    strobe.set("time", time)?;
    Ok(())
}
