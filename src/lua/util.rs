//! `strobe.error`, `strobe.sleep`, `strobe.progress`, `strobe.log`, `strobe.now_ms`:
//! small helpers every script needs.

use mlua::{Lua, Table, Variadic};

use crate::error::{ErrorCode, StrobeError};

pub fn register(lua: &Lua, strobe: &Table) -> mlua::Result<()> {
    // strobe.error(code, message): raise a coded error that reaches the MCP client as is.
    strobe.set(
        "error",
        lua.create_function(|_, (code, message): (String, String)| -> mlua::Result<()> {
            let code = ErrorCode::parse(&code).ok_or_else(|| {
                mlua::Error::RuntimeError(format!("strobe.error: unknown error code '{code}'"))
            })?;
            Err(super::lua_err(StrobeError::new(code, message)))
        })?,
    )?;
    // strobe.sleep(ms): yields to other clients while waiting; ends the script with
    // CANCELLED when the client cancels the request.
    strobe.set(
        "sleep",
        lua.create_async_function(|_, ms: u64| async move {
            crate::inflight::or_cancelled(tokio::time::sleep(std::time::Duration::from_millis(ms)))
                .await
                .map_err(super::lua_err)
        })?,
    )?;
    // strobe.progress(progress, total?, message?): a progress notification to the MCP
    // client, if it asked for them; progress must grow. Returns whether one was sent.
    strobe.set(
        "progress",
        lua.create_function(|_, (progress, total, message): (f64, Option<f64>, Option<String>)| {
            Ok(crate::inflight::progress(progress, total, message.as_deref()))
        })?,
    )?;
    strobe.set(
        "now_ms",
        lua.create_function(|_, ()| {
            Ok(std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as i64)
                .unwrap_or(0))
        })?,
    )?;
    let log = lua.create_table()?;
    for level in ["debug", "info", "warn", "error"] {
        log.set(
            level,
            lua.create_function(move |_, parts: Variadic<mlua::Value>| {
                let text: Vec<String> = parts.iter().map(|v| v.to_string().unwrap_or_default()).collect();
                let text = text.join(" ");
                match level {
                    "debug" => tracing::debug!(target: "lua", "{text}"),
                    "info" => tracing::info!(target: "lua", "{text}"),
                    "warn" => tracing::warn!(target: "lua", "{text}"),
                    _ => tracing::error!(target: "lua", "{text}"),
                }
                Ok(())
            })?,
        )?;
    }
    strobe.set("log", log)?;
    Ok(())
}
