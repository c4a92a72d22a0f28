//! `strobe.exec{...}`: run a helper command (a compiler, a build step) to completion
//! and get its exit status and output. `strobe.spawn{...}`: start one and stream its
//! output line by line (`spawn.rs`). Asynchronous: other clients keep being served.

use std::process::Stdio;

use mlua::{Lua, Table, Value};
use serde::Deserialize;

use super::convert::to_lua;
use super::lua_err;
use super::session::args;
use crate::error::StrobeError;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ExecArgs {
    /// Program and arguments.
    cmd: Vec<String>,
    cwd: Option<String>,
    #[serde(default)]
    env: std::collections::BTreeMap<String, String>,
    /// Give up (and kill it) after this many milliseconds; default 10 minutes.
    timeout_ms: Option<u64>,
}

pub fn register(lua: &Lua, strobe: &Table) -> mlua::Result<()> {
    strobe.set(
        "exec",
        lua.create_async_function(|lua, v: Value| async move {
            let a: ExecArgs = args(&lua, v, "strobe.exec")?;
            let Some((program, rest)) = a.cmd.split_first() else {
                return Err(lua_err(StrobeError::validation("strobe.exec: 'cmd' needs at least the program name")));
            };
            let mut cmd = tokio::process::Command::new(program);
            cmd.args(rest).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
            if let Some(cwd) = &a.cwd {
                cmd.current_dir(cwd);
            }
            cmd.envs(&a.env);
            let child = cmd
                .spawn()
                .map_err(|e| lua_err(StrobeError::validation(format!("strobe.exec: cannot run '{program}': {e}"))))?;
            let limit = std::time::Duration::from_millis(a.timeout_ms.unwrap_or(600_000));
            // Cancelling the request drops the wait, and with it the child (kill_on_drop).
            let out = crate::inflight::or_cancelled(tokio::time::timeout(limit, child.wait_with_output()))
                .await
                .map_err(lua_err)?
                .map_err(|_| lua_err(StrobeError::validation(format!("strobe.exec: '{program}' timed out after {limit:?}"))))?
                .map_err(|e| lua_err(StrobeError::internal(format!("strobe.exec: {e}"))))?;
            let result = serde_json::json!({
                "status": out.status.code(),
                "ok": out.status.success(),
                "stdout": String::from_utf8_lossy(&out.stdout),
                "stderr": String::from_utf8_lossy(&out.stderr),
            });
            to_lua(&lua, &result)
        })?,
    )?;
    super::spawn::register(lua, strobe)?;
    Ok(())
}
