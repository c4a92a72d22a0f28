//! `debug_eval`: expressions over a paused thread's frame (gdb's `print`), evaluated in the
//! daemon from DWARF with the target's memory read directly (src/eval/). Frame N's registers
//! come from unwinding frame 0's with `.eh_frame`.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{json, Value};

use super::debug_state::{function_at, hex};
use super::{Engine, Session};
use crate::error::{ErrorCode, Result, StrobeError};
use crate::eval::interp::{Evaluator, Frame, Place};
use crate::eval::memory::{write_remote, ProcessMemory};
use crate::eval::parser::MAX_EXPRESSION_BYTES;
use crate::eval::scope::scope_at;
use crate::eval::unwind::{FrameRegs, Unwinder};
use crate::eval::RenderOptions;
use crate::symbols::{DebugInfo, LineTable};

pub const MAX_EXPRESSIONS: usize = 32;
pub const MAX_DEPTH: u32 = 10;
pub const MAX_FRAME: u32 = 256;

/// `debug_eval`'s arguments (besides the session).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EvalRequest {
    pub expressions: Vec<String>,
    pub thread_id: Option<u64>,
    #[serde(default)]
    pub frame: u32,
    pub depth: Option<u32>,
    /// "natural" (default) or "hex".
    pub format: Option<String>,
}

impl EvalRequest {
    fn validate(&self) -> Result<RenderOptions> {
        if self.expressions.is_empty() || self.expressions.len() > MAX_EXPRESSIONS {
            return Err(StrobeError::validation(format!(
                "'expressions' takes 1 to {MAX_EXPRESSIONS} expressions, got {}. Example: [\"q->len\", \"q->items[0]\"].",
                self.expressions.len()
            )));
        }
        if let Some((i, e)) = self.expressions.iter().enumerate().find(|(_, e)| e.len() > MAX_EXPRESSION_BYTES) {
            return Err(StrobeError::validation(format!(
                "expression {i} is {} bytes; at most {MAX_EXPRESSION_BYTES}. Split it into smaller expressions.",
                e.len()
            )));
        }
        let depth = self.depth.unwrap_or(2);
        if depth > MAX_DEPTH {
            return Err(StrobeError::validation(format!("'depth' is 0 to {MAX_DEPTH}, got {depth}.")));
        }
        if self.frame > MAX_FRAME {
            return Err(StrobeError::validation(format!("'frame' is 0 (innermost) to {MAX_FRAME}, got {}.", self.frame)));
        }
        let hex = match self.format.as_deref() {
            None | Some("natural") => false,
            Some("hex") => true,
            Some(other) => return Err(StrobeError::validation(format!("'format' is 'natural' or 'hex', got '{other}'."))),
        };
        Ok(RenderOptions { depth, hex, ..RenderOptions::default() })
    }
}

/// A paused frame, ready to evaluate in (`Engine::in_frame`).
pub(crate) struct FrameContext<'a> {
    pub eval: Evaluator<'a>,
    /// The file holding the frame's code and the frame's static address in it (for the
    /// declared spelling of locals' types, `Engine::locals`).
    pub module: std::path::PathBuf,
    pub static_pc: u64,
    /// `{index, function?, file?, line?, address}` of the frame.
    pub describe: Value,
}

impl Engine {
    /// Evaluate expressions in a paused thread's frame `req.frame` (0 = innermost).
    /// Answer: `{threadId, pid, frame: {index, function, file, line, address}, results: [...]}`.
    pub async fn eval(self: &Arc<Engine>, id: &str, req: EvalRequest) -> Result<Value> {
        let opts = req.validate()?;
        let session = self.session(id)?;
        session.ensure_running()?;
        let paused = self.paused_thread(&session, req.thread_id).map_err(|e| StrobeError::new(ErrorCode::NotPaused, e.message))?;
        let (thread, pid) = (paused.thread_id, paused.pid);
        let expressions = req.expressions.clone();
        self.in_frame(&session, paused, req.frame, move |f| {
            let results: Vec<Value> = expressions.iter().map(|e| f.eval.eval_to_json(e, &opts)).collect();
            json!({ "threadId": thread, "pid": pid, "frame": f.describe, "results": results })
        })
        .await
    }

    /// Run `work` over frame `frame_index` of a paused thread, on a blocking thread (it reads
    /// the target's memory synchronously). Assignments write memory directly and registers of
    /// frame 0 through the agent (applied when the thread resumes).
    pub(crate) async fn in_frame<T: Send + 'static>(
        self: &Arc<Engine>,
        session: &Arc<Session>,
        paused: super::PausedThread,
        frame_index: u32,
        work: impl FnOnce(&FrameContext<'_>) -> T + Send + 'static,
    ) -> Result<T> {
        let source = FrameSource { pid: paused.pid, thread: Some(paused.thread_id), registers: paused.registers, slide: paused.slide };
        self.in_context(session, source, frame_index, work).await
    }

    /// Run `work` with only globals in scope (no thread paused): `debug_memory {expr}` on a
    /// running process. The load slide comes from the process's mappings.
    pub(crate) async fn in_globals<T: Send + 'static>(
        self: &Arc<Engine>,
        session: &Arc<Session>,
        pid: u32,
        work: impl FnOnce(&FrameContext<'_>) -> T + Send + 'static,
    ) -> Result<T> {
        let symbols = self.session_symbols(session)?;
        let slide = runtime_slide(pid, &session.binary_path, symbols.image_base)
            .ok_or_else(|| StrobeError::new(ErrorCode::ProcessExited, format!("Process {pid} has no mapping of {} (it exited?).", session.binary_path.display())))?;
        let source = FrameSource { pid, thread: None, registers: Default::default(), slide };
        self.in_context(session, source, 0, work).await
    }

    async fn in_context<T: Send + 'static>(
        self: &Arc<Engine>,
        session: &Arc<Session>,
        paused: FrameSource,
        frame_index: u32,
        work: impl FnOnce(&FrameContext<'_>) -> T + Send + 'static,
    ) -> Result<T> {
        let symbols = self.session_symbols(session)?;
        let frida = self.debugger_frida()?;
        let handle = tokio::runtime::Handle::current();
        let session = session.clone();
        let engine = self.clone();
        let blocking = move || -> Result<T> {
            let mem = ProcessMemory::new(paused.pid);
            let main_slide = paused.slide;
            // Each frame's code may be in the program or in a shared library with DWARF
            // (modules.rs): its file, its static address there, and its own load slide.
            let module_of = |regs: &FrameRegs| {
                let at = engine.locate(&session, regs.lookup_pc().wrapping_sub(main_slide));
                let slide = main_slide.wrapping_add(at.offset);
                (at, slide)
            };
            let mut regs = FrameRegs { regs: paused.registers.clone(), caller: false };
            for n in 0..frame_index {
                let (at, slide) = module_of(&regs);
                let caller = Unwinder::cached(&at.path).ok().and_then(|u| u.caller(&regs, slide, &mem));
                regs = caller.ok_or_else(|| {
                    StrobeError::validation(format!(
                        "frame {frame_index} is beyond the stack: only frames 0 to {n} can be unwound here (the backtrace of the pause lists them)."
                    ))
                })?;
            }
            let (at, slide) = module_of(&regs);
            let session_pc = regs.lookup_pc().wrapping_sub(main_slide);
            let static_pc = at.static_addr;
            let info = match paused.thread {
                Some(_) => DebugInfo::of_path(&at.path)?,
                None => DebugInfo::of(&symbols)?,
            };
            let unwinder = Unwinder::cached(&at.path).ok();
            let function = function_at(&symbols, session_pc).map(|f| f.name.clone());
            let line = LineTable::cached(&at.path).ok().and_then(|l| l.address_to_line(static_pc).map(|(f, n)| (f.to_string(), n)));
            // Without a paused thread only globals are in scope.
            let scope = if paused.thread.is_some() { scope_at(&info, static_pc) } else { None };
            let frame = Frame { scope, regs, slide, function: function.clone() };
            let (pid, thread) = (paused.pid, paused.thread.unwrap_or(0));
            let writer = |place: &Place, bytes: &[u8]| -> std::result::Result<(), String> {
                match place {
                    Place::Memory(a) => {
                        write_remote(pid, *a, bytes)?;
                        mem.forget();
                        Ok(())
                    }
                    Place::Register(r) if frame_index == 0 && paused.thread.is_some() => {
                        let old = frame.regs.regs.get(r).copied().unwrap_or(0).to_le_bytes();
                        let mut new = old;
                        new[..bytes.len().min(8)].copy_from_slice(&bytes[..bytes.len().min(8)]);
                        let value = hex(u64::from_le_bytes(new));
                        // Later reads in this pause see the new value (the agent applies it on resume).
                        if let Some(p) = session.debug.lock().paused.get_mut(&thread) {
                            p.registers.insert(r.clone(), u64::from_le_bytes(new));
                        }
                        let recipe = json!({ "kind": "register", "reg": r, "size": 8, "encoding": "unsigned", "name": r, "typeName": "register" });
                        handle
                            .block_on(frida.host().rpc(pid, "writeLocal", json!([thread, recipe, value])))
                            .map(|_| ())
                            .map_err(|e| format!("cannot write {r}: {}", e.message))
                    }
                    Place::Register(r) => Err(format!("{r} of a caller frame cannot be written; write it in frame 0 or write memory")),
                    Place::None => Err("not a place in the target".into()),
                }
            };
            let mut describe = json!({ "index": frame_index, "address": hex(session_pc) });
            if at.offset != 0 {
                describe["module"] = json!(at.path.file_name().map(|n| n.to_string_lossy().into_owned()));
            }
            if paused.thread.is_none() {
                describe = json!({ "globals": true });
            }
            if let Some(f) = function {
                describe["function"] = json!(f);
            }
            if let Some((file, line)) = line {
                describe["file"] = json!(file);
                describe["line"] = json!(line);
            }
            let ctx = FrameContext {
                module: at.path.clone(),
                static_pc,
                eval: Evaluator {
                    info: &info,
                    mem: &mem,
                    frame: &frame,
                    unwinder: unwinder.as_deref(),
                    writer: Some(&writer),
                    caller: Default::default(),
                },
                describe,
            };
            Ok(work(&ctx))
        };
        tokio::task::spawn_blocking(blocking).await.map_err(|e| StrobeError::internal(format!("evaluation panicked: {e}")))?
    }
}

/// Where an evaluation's registers and memory come from.
struct FrameSource {
    pid: u32,
    /// The paused thread; None for a globals-only context.
    thread: Option<u64>,
    registers: std::collections::BTreeMap<String, u64>,
    slide: u64,
}

/// Runtime minus static addresses of `binary` in process `pid`, from its first mapping.
fn runtime_slide(pid: u32, binary: &std::path::Path, image_base: u64) -> Option<u64> {
    let maps = crate::eval::memory::parse_maps(&std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?);
    let want = binary.to_string_lossy();
    let first = maps.iter().find(|m| m.path == want)?;
    Some(first.start.wrapping_sub(first.offset).wrapping_sub(image_base))
}
