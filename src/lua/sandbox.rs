//! Fresh, isolated Lua states for code a client types or sends: a REPL connection's
//! chunks and each debug_script call. Each is its own Lua state (own globals, own
//! `strobe` table, own memory limit) with the script libraries and hint rules loaded,
//! so redefining `strobe.hint` or a global there changes nothing another client sees.
//! `print` goes to a capped buffer; sessions launched from it are recorded, so their
//! owner can stop them.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use mlua::{AnyUserData, Function, Lua, Table, Value, Variadic};

use super::loader::Loaded;
use super::scripts::ScriptSources;
use crate::engine::Engine;
use crate::error::{ErrorCode, StrobeError};

/// Live sessions one sandbox may hold at once (as one MCP connection).
pub const MAX_LIVE_SESSIONS: usize = 10;

/// What a sandbox printed, up to `cap` bytes.
#[derive(Default)]
pub struct Capture {
    pub text: String,
    pub cap: usize,
    /// Bytes printed past the cap.
    pub dropped: usize,
}

impl Capture {
    fn push(&mut self, s: &str) {
        let room = self.cap.saturating_sub(self.text.len());
        if s.len() <= room {
            self.text.push_str(s);
            return;
        }
        let mut cut = room;
        while cut > 0 && !s.is_char_boundary(cut) {
            cut -= 1;
        }
        self.text.push_str(&s[..cut]);
        self.dropped += s.len() - cut;
    }

    /// Everything captured so far (emptying the buffer), with a notice when some was cut.
    pub fn take(&mut self) -> (String, usize) {
        let dropped = std::mem::take(&mut self.dropped);
        (std::mem::take(&mut self.text), dropped)
    }
}

pub struct Sandbox {
    pub lua: Lua,
    pub output: Rc<RefCell<Capture>>,
    /// Ids of sessions launched through `strobe.launch` here, in order.
    pub launched: Rc<RefCell<Vec<String>>>,
    /// Keeps the loaded script definitions (hints, scenario steps) alive.
    _loaded: Loaded,
}

impl Sandbox {
    /// A new state with the `strobe` module, the scripts of `sources`, a memory limit and
    /// an output cap.
    pub fn fresh(engine: &Arc<Engine>, sources: &ScriptSources, memory: usize, output_cap: usize) -> mlua::Result<Sandbox> {
        let lua = super::new_state(engine)?;
        lua.set_memory_limit(memory)?;
        let output = Rc::new(RefCell::new(Capture { cap: output_cap, ..Default::default() }));
        let launched: Rc<RefCell<Vec<String>>> = Rc::default();
        let out = output.clone();
        lua.globals().set(
            "print",
            lua.create_function(move |_, parts: Variadic<Value>| {
                let text: Vec<String> = parts.iter().map(|v| v.to_string().unwrap_or_else(|_| format!("{v:?}"))).collect();
                let mut o = out.borrow_mut();
                o.push(&text.join("\t"));
                o.push("\n");
                Ok(())
            })?,
        )?;
        let strobe: Table = lua.globals().get("strobe")?;
        let raw_launch: Function = strobe.get("launch")?;
        let seen = launched.clone();
        let engine = engine.clone();
        strobe.set(
            "launch",
            lua.create_async_function(move |_, v: Value| {
                let (raw, seen, engine) = (raw_launch.clone(), seen.clone(), engine.clone());
                async move {
                    // Only running targets count (exited and crashed ones hold no process).
                    let live = engine.running_session_ids();
                    let mine = seen.borrow().iter().filter(|id| live.contains(id)).count();
                    if mine >= MAX_LIVE_SESSIONS {
                        return Err(super::lua_err(StrobeError::new(
                            ErrorCode::SessionLimit,
                            format!("This script already has {mine} live sessions (max {MAX_LIVE_SESSIONS}). Stop one with s:stop() first."),
                        )));
                    }
                    let (s, info): (AnyUserData, Value) = raw.call_async(v).await?;
                    seen.borrow_mut().push(s.borrow::<super::session::LuaSession>()?.id.clone());
                    Ok((s, info))
                }
            })?,
        )?;
        let mut loaded = Loaded::default();
        super::watchdog::with_budget(super::watchdog::Budget::slice(super::watchdog::TOOL_SLICE, "loading scripts"), || {
            loaded.reload(&lua, sources)
        });
        Ok(Sandbox { lua, output, launched, _loaded: loaded })
    }
}
