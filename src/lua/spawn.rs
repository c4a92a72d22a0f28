//! `strobe.spawn{cmd, cwd?, env?, stdin?, stderr?}` → a process handle that streams its
//! output line by line: `for line, stream in p:lines() do ... end`, `p:read_line(ms?)`,
//! `p:write(text)`, `p:close_stdin()`, `p:wait(ms?)`, `p:status()`, `p:kill()`, `p:close()`.
//! The handle holds an id into a per-runtime table and resolves it on every call, so a
//! closed process gives an error that says so. Dropping the handle kills the process.

use std::cell::RefCell;
use std::collections::HashMap;
use std::process::Stdio;
use std::rc::Rc;
use std::time::Duration;

use mlua::{Lua, Table, UserData, UserDataFields, UserDataMethods, UserDataRef, Value};
use serde::Deserialize;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, Mutex};

use super::convert::to_lua;
use super::lua_err;
use super::session::args;
use crate::error::StrobeError;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct SpawnArgs {
    cmd: Vec<String>,
    cwd: Option<String>,
    #[serde(default)]
    env: std::collections::BTreeMap<String, String>,
    /// Give the process a stdin pipe for `:write` (default: no input).
    #[serde(default)]
    stdin: bool,
    /// "pipe" (default: stderr lines come through `:lines()` tagged "stderr") or "null".
    stderr: Option<String>,
}

struct Proc {
    cmd: String,
    child: Mutex<tokio::process::Child>,
    lines: Mutex<mpsc::UnboundedReceiver<(&'static str, String)>>,
    stdin: Mutex<Option<tokio::process::ChildStdin>>,
}

type ProcTable = Rc<RefCell<HashMap<u64, Rc<Proc>>>>;

struct LuaProcess {
    id: u64,
    cmd: String,
    pid: Option<u32>,
    table: ProcTable,
}

impl LuaProcess {
    fn resolve(&self) -> mlua::Result<Rc<Proc>> {
        self.table.borrow().get(&self.id).cloned().ok_or_else(|| {
            lua_err(StrobeError::validation(format!(
                "process {} ('{}') was closed; spawn it again with strobe.spawn",
                self.id, self.cmd
            )))
        })
    }
}

impl Drop for LuaProcess {
    fn drop(&mut self) {
        // The last reference to the process: kill_on_drop ends it.
        self.table.borrow_mut().remove(&self.id);
    }
}

fn stream_lines<R: AsyncRead + Unpin + Send + 'static>(r: R, tag: &'static str, tx: mpsc::UnboundedSender<(&'static str, String)>) {
    tokio::spawn(async move {
        let mut reader = BufReader::new(r);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    while buf.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
                        buf.pop();
                    }
                    if tx.send((tag, String::from_utf8_lossy(&buf).into_owned())).is_err() {
                        break;
                    }
                }
            }
        }
    });
}

/// The next line (and its stream), `None` at the end of output; `Err(())` at the timeout.
async fn next_line(p: &Proc, timeout: Option<u64>) -> Result<Option<(&'static str, String)>, ()> {
    let mut rx = p.lines.lock().await;
    let read = async {
        match timeout {
            None => Ok(rx.recv().await),
            Some(ms) => tokio::time::timeout(Duration::from_millis(ms), rx.recv()).await.map_err(|_| ()),
        }
    };
    // A cancelled request reads as a timeout; the script's next instruction then stops it.
    crate::inflight::or_cancelled(read).await.unwrap_or(Err(()))
}

fn status_json(s: std::process::ExitStatus) -> serde_json::Value {
    use std::os::unix::process::ExitStatusExt;
    serde_json::json!({ "status": s.code(), "ok": s.success(), "signal": s.signal() })
}

impl UserData for LuaProcess {
    fn add_fields<F: UserDataFields<Self>>(fields: &mut F) {
        fields.add_field_method_get("id", |_, this| Ok(this.id));
        fields.add_field_method_get("pid", |_, this| Ok(this.pid));
    }

    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_meta_method("__tostring", |_, this, ()| Ok(format!("Process({}, pid {:?}, {})", this.id, this.pid, this.cmd)));

        // p:read_line(timeout_ms?) -> line, stream | nil (end of output) | nil, "timeout"
        methods.add_async_method("read_line", |_, this: UserDataRef<Self>, timeout: Option<u64>| {
            let p = this.resolve();
            async move {
                match next_line(&*p?, timeout).await {
                    Ok(Some((tag, line))) => Ok((Some(line), Some(tag.to_string()))),
                    Ok(None) => Ok((None, None)),
                    Err(()) => Ok((None, Some("timeout".to_string()))),
                }
            }
        });

        // for line, stream in p:lines() do ... end  (ends with the output)
        methods.add_method("lines", |lua, this, ()| {
            let p = this.resolve()?;
            lua.create_async_function(move |_, ()| {
                let p = p.clone();
                async move {
                    Ok(match next_line(&p, None).await {
                        Ok(Some((tag, line))) => (Some(line), Some(tag)),
                        _ => (None, None),
                    })
                }
            })
        });

        methods.add_async_method("write", |_, this: UserDataRef<Self>, data: mlua::String| {
            let p = this.resolve();
            let bytes = data.as_bytes().to_vec();
            async move {
                let p = p?;
                let mut stdin = p.stdin.lock().await;
                let Some(w) = stdin.as_mut() else {
                    return Err(lua_err(StrobeError::validation(format!(
                        "'{}' has no stdin pipe (or it was closed): spawn it with stdin = true",
                        p.cmd
                    ))));
                };
                w.write_all(&bytes).await.map_err(|e| lua_err(StrobeError::validation(format!("write to '{}': {e}", p.cmd))))?;
                w.flush().await.map_err(|e| lua_err(StrobeError::validation(format!("write to '{}': {e}", p.cmd))))
            }
        });

        methods.add_async_method("close_stdin", |_, this: UserDataRef<Self>, ()| {
            let p = this.resolve();
            async move {
                p?.stdin.lock().await.take();
                Ok(())
            }
        });

        // p:wait(timeout_ms?) -> {status, ok, signal} | nil at the timeout
        methods.add_async_method("wait", |lua, this: UserDataRef<Self>, timeout: Option<u64>| {
            let p = this.resolve();
            async move {
                let p = p?;
                let mut child = p.child.lock().await;
                // A cancelled request stops waiting (the process keeps running until the
                // script's owner stops it, as at a timeout).
                let waited = crate::inflight::or_cancelled(async {
                    match timeout {
                        None => Ok(child.wait().await),
                        Some(ms) => tokio::time::timeout(Duration::from_millis(ms), child.wait()).await,
                    }
                })
                .await
                .map_err(lua_err)?;
                match waited {
                    Ok(Ok(s)) => to_lua(&lua, &status_json(s)),
                    Ok(Err(e)) => Err(lua_err(StrobeError::internal(format!("wait for '{}': {e}", p.cmd)))),
                    Err(_) => Ok(Value::Nil),
                }
            }
        });

        // p:status() -> nil while running, {status, ok, signal} once it ended
        methods.add_method("status", |lua, this, ()| {
            let p = this.resolve()?;
            let Ok(mut child) = p.child.try_lock() else { return Ok(Value::Nil) };
            match child.try_wait() {
                Ok(Some(s)) => to_lua(lua, &status_json(s)),
                _ => Ok(Value::Nil),
            }
        });

        // p:kill() -> {status, ok, signal}
        methods.add_async_method("kill", |lua, this: UserDataRef<Self>, ()| {
            let p = this.resolve();
            async move {
                let p = p?;
                let mut child = p.child.lock().await;
                let _ = child.start_kill();
                let s = child.wait().await.map_err(|e| lua_err(StrobeError::internal(format!("kill '{}': {e}", p.cmd))))?;
                to_lua(&lua, &status_json(s))
            }
        });

        // p:close(): kill if still running and forget it; the handle is unusable afterwards.
        methods.add_method("close", |_, this, ()| {
            this.table.borrow_mut().remove(&this.id);
            Ok(())
        });
    }
}

pub fn register(lua: &Lua, strobe: &Table) -> mlua::Result<()> {
    let table: ProcTable = Rc::default();
    let next_id = Rc::new(RefCell::new(0u64));
    strobe.set(
        "spawn",
        lua.create_function(move |lua, v: Value| {
            let a: SpawnArgs = args(lua, v, "strobe.spawn")?;
            let Some((program, rest)) = a.cmd.split_first() else {
                return Err(lua_err(StrobeError::validation("strobe.spawn: 'cmd' needs at least the program name")));
            };
            let stderr_null = match a.stderr.as_deref() {
                None | Some("pipe") => false,
                Some("null") => true,
                Some(other) => {
                    return Err(lua_err(StrobeError::validation(format!(
                        "strobe.spawn: stderr = '{other}' is not one of 'pipe', 'null'"
                    ))))
                }
            };
            let mut cmd = tokio::process::Command::new(program);
            cmd.args(rest)
                .stdin(if a.stdin { Stdio::piped() } else { Stdio::null() })
                .stdout(Stdio::piped())
                .stderr(if stderr_null { Stdio::null() } else { Stdio::piped() })
                .kill_on_drop(true);
            if let Some(cwd) = &a.cwd {
                cmd.current_dir(cwd);
            }
            cmd.envs(&a.env);
            let mut child = cmd
                .spawn()
                .map_err(|e| lua_err(StrobeError::validation(format!("strobe.spawn: cannot run '{program}': {e}"))))?;
            let (tx, rx) = mpsc::unbounded_channel();
            if let Some(out) = child.stdout.take() {
                stream_lines(out, "stdout", tx.clone());
            }
            if let Some(err) = child.stderr.take() {
                stream_lines(err, "stderr", tx);
            }
            let id = {
                let mut n = next_id.borrow_mut();
                *n += 1;
                *n
            };
            let pid = child.id();
            let stdin = child.stdin.take();
            let proc = Proc {
                cmd: a.cmd.join(" "),
                child: Mutex::new(child),
                lines: Mutex::new(rx),
                stdin: Mutex::new(stdin),
            };
            table.borrow_mut().insert(id, Rc::new(proc));
            Ok(LuaProcess { id, cmd: a.cmd.join(" "), pid, table: table.clone() })
        })?,
    )?;
    Ok(())
}
