//! `strobe.test`: test runs (src/testrun/) for `debug_test` and scripts.
//! High level (Lua, scripts/lib/testrun.lua): `strobe.test.run{projectRoot, ...}` → run id,
//! `strobe.test.status(id)`, `strobe.test.adapters()`.
//! Primitives the library builds on: `start{cmd, cwd, env, meta, killOnStuck}` → id,
//! `get(id)` (output so far, exit, warnings, stuck reports, result), `finish(id, result)`,
//! `track{meta, sessionId}` (a run whose process a Frida session owns), `kill(id)`,
//! `current(id, test, project)` → elapsed ms since first seen, baseline ms,
//! `record(project, test, ms)`.

use std::collections::BTreeMap;
use std::sync::Arc;

use mlua::{Lua, Table, Value};
use serde::Deserialize;

use super::convert::{to_json, to_lua};
use super::lua_err;
use super::session::args;
use crate::error::{ErrorCode, StrobeError};
use crate::testrun::{self, registry, TestRun};

/// Named registry value holding the loaded adapters by name (filled by the loader).
pub const ADAPTERS_KEY: &str = "strobe.adapters";

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StartArgs {
    cmd: Vec<String>,
    cwd: String,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    meta: serde_json::Value,
    #[serde(default)]
    kill_on_stuck: bool,
    /// Detector thresholds in ms: {suspect, firstStack, confirm}.
    stuck_ms: Option<[u64; 3]>,
    /// "SIGUSR1" or "SIGQUIT": sent to a stuck process so its runtime prints its stacks.
    dump_signal: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TrackArgs {
    #[serde(default)]
    meta: serde_json::Value,
    session_id: String,
}

fn find(id: &str) -> mlua::Result<Arc<TestRun>> {
    testrun::get(id).ok_or_else(|| {
        lua_err(StrobeError::new(
            ErrorCode::TestRunNotFound,
            format!("No test run with id '{id}'. Use the testRunId that debug_test action 'run' returned (runs are forgotten when the daemon restarts)."),
        ))
    })
}

fn snapshot(run: &TestRun) -> serde_json::Value {
    let s = run.state.lock().unwrap();
    let (code, signal) = s.exit.unwrap_or((None, None));
    serde_json::json!({
        "id": run.id,
        "status": if s.exit.is_some() && !s.capturing { "exited" } else { "running" },
        "elapsedMs": s.ended_ms.unwrap_or_else(|| run.elapsed_ms()),
        "pid": s.pid,
        "exitCode": code,
        "signal": signal,
        "phase": s.phase,
        "stdout": String::from_utf8_lossy(&s.stdout),
        "stderr": String::from_utf8_lossy(&s.stderr),
        "droppedBytes": s.dropped_bytes,
        "warnings": s.warnings,
        // A report whose stacks are still being captured is shown once they are in.
        "stuck": &s.stuck[..s.stuck.len() - usize::from(s.capturing && !s.stuck.is_empty())],
        "killed": s.killed,
        "meta": run.meta,
        "result": s.result,
        "sessionId": s.session_id,
    })
}

pub fn register(lua: &Lua, strobe: &Table) -> mlua::Result<()> {
    let t = lua.create_table()?;
    t.set(
        "start",
        lua.create_function(|lua, v: Value| {
            let a: StartArgs = args(lua, v, "strobe.test.start")?;
            let mut stuck = testrun::stuck::Thresholds::default();
            if let Some([s, f, c]) = a.stuck_ms {
                stuck = testrun::stuck::Thresholds { suspect_ms: s, first_stack_ms: f, confirm_ms: c };
            }
            let dump_signal = match a.dump_signal.as_deref() {
                None => None,
                Some("SIGUSR1") => Some(libc::SIGUSR1),
                Some("SIGUSR2") => Some(libc::SIGUSR2),
                Some("SIGQUIT") => Some(libc::SIGQUIT),
                Some(other) => {
                    return Err(lua_err(StrobeError::validation(format!(
                        "strobe.test.start: dumpSignal '{other}' is not one of SIGUSR1, SIGUSR2, SIGQUIT"
                    ))))
                }
            };
            let spec = testrun::RunSpec { cmd: a.cmd, cwd: a.cwd, env: a.env, meta: a.meta, kill_on_stuck: a.kill_on_stuck, stuck, dump_signal };
            Ok(testrun::start(spec).map_err(lua_err)?.id.clone())
        })?,
    )?;
    t.set(
        "track",
        lua.create_function(|lua, v: Value| {
            let a: TrackArgs = args(lua, v, "strobe.test.track")?;
            let run = registry::create(a.meta);
            run.state.lock().unwrap().session_id = Some(a.session_id);
            Ok(run.id.clone())
        })?,
    )?;
    t.set("get", lua.create_function(|lua, id: String| to_lua(lua, &snapshot(&*find(&id)?)))?)?;
    t.set(
        "finish",
        lua.create_function(|lua, (id, result): (String, Value)| {
            let run = find(&id)?;
            let json = to_json(lua, result)?;
            let mut s = run.state.lock().unwrap();
            if s.exit.is_none() {
                s.exit = Some((None, None));
                s.ended_ms = Some(run.elapsed_ms());
            }
            s.result = Some(json);
            Ok(())
        })?,
    )?;
    t.set(
        "kill",
        lua.create_function(|_, id: String| {
            let run = find(&id)?;
            testrun::runner::kill(&run);
            Ok(())
        })?,
    )?;
    t.set(
        "current",
        lua.create_function(|_, (id, test, project): (String, String, String)| {
            let run = find(&id)?;
            let now = run.elapsed_ms();
            let first = *run.state.lock().unwrap().current_seen.entry(test.clone()).or_insert(now);
            Ok((now - first, testrun::baseline::lookup(&project, &test)))
        })?,
    )?;
    t.set(
        "record",
        lua.create_function(|_, (project, test, ms): (String, String, u64)| {
            testrun::baseline::record(&project, &test, ms);
            Ok(())
        })?,
    )?;
    // strobe.test.scratch() -> a fresh directory for a run's report files (JUnit XML, ...).
    t.set(
        "scratch",
        lua.create_function(|_, ()| {
            use std::sync::atomic::{AtomicU64, Ordering};
            static N: AtomicU64 = AtomicU64::new(0);
            let dir = std::env::temp_dir()
                .join(format!("strobe-test-{}-{}-{}", std::process::id(), crate::testrun::registry::now_tag(), N.fetch_add(1, Ordering::Relaxed)));
            std::fs::create_dir_all(&dir).map_err(|e| lua_err(StrobeError::internal(format!("cannot create {}: {e}", dir.display()))))?;
            Ok(dir.display().to_string())
        })?,
    )?;
    t.set(
        "adapters",
        lua.create_function(|lua, ()| {
            let a: Option<Table> = lua.named_registry_value(ADAPTERS_KEY)?;
            match a {
                Some(t) => Ok(t),
                None => lua.create_table(),
            }
        })?,
    )?;
    // The high-level calls live in scripts/lib/testrun.lua (hot-reloaded with the scripts).
    let high: Table = lua
        .load("return { run = function(a) return require('testrun').run(a) end, status = function(id) return require('testrun').status(id) end, kill = function(id) return require('testrun').kill(id) end }")
        .set_name("=strobe.test")
        .eval()?;
    t.set("run", high.get::<mlua::Function>("run")?)?;
    t.set("status", high.get::<mlua::Function>("status")?)?;
    t.set("stop", high.get::<mlua::Function>("kill")?)?;
    strobe.set("test", t)
}
