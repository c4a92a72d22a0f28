//! The watchdog on every Lua execution in the daemon. A count hook (on the main state,
//! inherited by every coroutine created from it) checks the budget of whatever is
//! running on this thread; a chunk that runs past it is interrupted with
//! `SCRIPT_TIMEOUT: ...` and, once tripped, every further instruction fails too, so
//! `pcall` loops cannot swallow it. Budgets are set per poll of a request's future
//! (`Budgeted`): a chunk may run that long *without yielding* (awaiting the engine does
//! not count), and optionally until an absolute deadline (debug_script's `timeoutMs`).
//! Hint rules get a shorter nested budget (`with_budget`). Also: a memory limit per
//! state, and no process-exiting functions. The same check stops a chunk whose request
//! the client cancelled (`crate::inflight`): `CANCELLED: ...`, at every instruction too.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use mlua::{ffi, Lua};

/// How long a tool call's Lua may run without yielding.
pub const TOOL_SLICE: Duration = Duration::from_secs(5);
/// A REPL chunk (typed by a person: allowed a little longer).
pub const REPL_SLICE: Duration = Duration::from_secs(10);
/// A hint rule, nested inside a tool call.
pub const HINT_SLICE: Duration = Duration::from_secs(1);
/// `strobe run` files and scenario steps (in-process CI runs).
pub const RUN_SLICE: Duration = Duration::from_secs(120);
/// Memory per Lua state.
pub const STATE_MEMORY_LIMIT: usize = 512 << 20;
/// Instructions between two budget checks (a check reads the clock: ~25 ns).
const CHECK_EVERY: i32 = 10_000;

#[derive(Clone, Copy)]
struct Active {
    /// When the current slice (or the overall deadline) ends.
    until: Instant,
    slice: Duration,
    what: &'static str,
}

thread_local! {
    static ACTIVE: Cell<Option<Active>> = const { Cell::new(None) };
}

/// What a budget allows: `slice` without yielding, and never past `deadline`.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    pub slice: Duration,
    pub deadline: Option<Instant>,
    pub what: &'static str,
}

impl Budget {
    pub fn slice(slice: Duration, what: &'static str) -> Budget {
        Budget { slice, deadline: None, what }
    }

    fn start(&self) -> Active {
        let mut until = Instant::now() + self.slice;
        if let Some(d) = self.deadline {
            until = until.min(d);
        }
        Active { until, slice: self.slice, what: self.what }
    }
}

/// Run `f` under a nested budget (never longer than the one around it).
pub fn with_budget<R>(budget: Budget, f: impl FnOnce() -> R) -> R {
    let outer = ACTIVE.with(|a| a.get());
    let mut inner = budget.start();
    if let Some(o) = outer {
        inner.until = inner.until.min(o.until);
    }
    ACTIVE.with(|a| a.set(Some(inner)));
    let r = f();
    ACTIVE.with(|a| a.set(outer));
    r
}

/// A future whose every poll runs under `budget`, which replaces any budget around it
/// (a debug_script's `timeoutMs` outlasts the tool call's slice), restoring it after.
pub struct Budgeted<F> {
    inner: Pin<Box<F>>,
    budget: Budget,
}

impl<F: Future> Budgeted<F> {
    pub fn new(budget: Budget, inner: F) -> Budgeted<F> {
        Budgeted { inner: Box::pin(inner), budget }
    }
}

impl<F: Future> Future for Budgeted<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let outer = ACTIVE.with(|a| a.replace(Some(self.budget.start())));
        let r = self.inner.as_mut().poll(cx);
        ACTIVE.with(|a| a.set(outer));
        r
    }
}

/// The budget check, run by Lua every `CHECK_EVERY` instructions.
unsafe extern "C-unwind" fn hook(state: *mut ffi::lua_State, ar: *mut ffi::lua_Debug) {
    let active = ACTIVE.with(|a| a.get());
    let over = active.filter(|a| Instant::now() >= a.until);
    // The client cancelled the request this chunk serves: stop it like a timeout.
    let cancelled = over.is_none() && crate::inflight::is_cancelled();
    if over.is_none() && !cancelled {
        // A coroutine tripped earlier (then recycled) goes back to the cheap rate.
        if ffi::lua_gethookcount(state) == 1 {
            ffi::lua_sethook(state, Some(hook), ffi::LUA_MASKCOUNT, CHECK_EVERY);
        }
        return;
    }
    // Tripped: from now on this coroutine fails at every instruction.
    ffi::lua_sethook(state, Some(hook), ffi::LUA_MASKCOUNT, 1);
    let mut place = String::new();
    if ffi::lua_getinfo(state, c"Sl".as_ptr(), ar) != 0 && (*ar).currentline > 0 {
        let src = std::ffi::CStr::from_ptr((*ar).short_src.as_ptr()).to_string_lossy();
        place = format!(" at {src}:{}", (*ar).currentline);
    }
    let msg = match over {
        Some(active) => format!(
            "SCRIPT_TIMEOUT: {} ran longer than its budget ({} ms without yielding, or past its timeoutMs) and was interrupted{place}. Look for an endless loop; long waits should use strobe.sleep or session:wait_for, which yield.",
            active.what,
            active.slice.as_millis()
        ),
        None => format!("{}{place}", crate::inflight::cancelled_error()),
    };
    ffi::lua_pushlstring(state, msg.as_ptr() as *const _, msg.len());
    drop(msg);
    drop(place);
    ffi::lua_error(state);
}

/// Install the watchdog hook, the memory limit and the hardening on a fresh state.
/// Call before any coroutine is created: they inherit the hook from the main state.
pub fn install(lua: &Lua, memory_limit: usize) -> mlua::Result<()> {
    unsafe {
        lua.exec_raw::<()>((), |state| {
            ffi::lua_sethook(state, Some(hook), ffi::LUA_MASKCOUNT, CHECK_EVERY);
        })?;
    }
    lua.set_memory_limit(memory_limit)?;
    harden(lua)
}

/// No way out of the daemon from Lua: `os.exit` is gone, and `load` takes text only
/// (malformed bytecode can crash the interpreter).
fn harden(lua: &Lua) -> mlua::Result<()> {
    let g = lua.globals();
    if let Ok(os) = g.get::<mlua::Table>("os") {
        os.set("exit", mlua::Value::Nil)?;
    }
    lua.load(
        r#"local raw_load = load
        load = function(chunk, name, _mode, env)
          if env == nil then return raw_load(chunk, name, "t") end
          return raw_load(chunk, name, "t", env)
        end"#,
    )
    .set_name("=strobe-harden")
    .exec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runaway_loop_is_interrupted_even_under_pcall() {
        let lua = Lua::new();
        install(&lua, STATE_MEMORY_LIMIT).unwrap();
        let f = lua.load("while true do pcall(function() while true do end end) end").into_function().unwrap();
        let t0 = Instant::now();
        let r = with_budget(Budget::slice(Duration::from_millis(200), "test chunk"), || f.call::<()>(()));
        let e = r.unwrap_err().to_string();
        assert!(e.contains("SCRIPT_TIMEOUT: test chunk"), "{e}");
        assert!(t0.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn coroutines_the_script_creates_are_watched_too() {
        let lua = Lua::new();
        install(&lua, STATE_MEMORY_LIMIT).unwrap();
        let f = lua.load("coroutine.wrap(function() while true do end end)()").into_function().unwrap();
        let co = lua.create_thread(f).unwrap();
        let r = with_budget(Budget::slice(Duration::from_millis(200), "test chunk"), || co.resume::<()>(()));
        assert!(r.unwrap_err().to_string().contains("SCRIPT_TIMEOUT"));
    }

    #[test]
    fn os_exit_and_binary_chunks_are_unavailable() {
        let lua = Lua::new();
        install(&lua, STATE_MEMORY_LIMIT).unwrap();
        assert!(lua.load("return os.exit").eval::<mlua::Value>().unwrap().is_nil());
        let r: (Option<mlua::Function>, Option<String>) =
            lua.load("return load(string.dump(function() return 1 end))").eval().unwrap();
        assert!(r.0.is_none() && r.1.unwrap().contains("binary"));
    }

    #[test]
    fn memory_is_limited() {
        let lua = Lua::new();
        install(&lua, 16 << 20).unwrap();
        let r = lua.load("local t = {} for i = 1, 1e8 do t[i] = string.rep('x', 100) .. i end").exec();
        assert!(matches!(r, Err(mlua::Error::MemoryError(_))), "{r:?}");
    }
}
