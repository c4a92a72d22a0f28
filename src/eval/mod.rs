//! `debug_eval`: gdb-grade expressions over a paused frame, evaluated in the daemon from
//! DWARF. The target is read directly (`memory.rs`); values render into the one JSON value
//! model every tool shares (`render.rs`, with pretty printers for C++ and Rust containers).
//!
//! - `lexer.rs`, `parser.rs`: the C-like expression language (plus `@`, `$reg`, `as`).
//! - `scope.rs`: the variables in scope at a PC, with their DWARF location expressions.
//! - `location.rs`: a location expression → where the value is, with `gimli::Evaluation`.
//! - `unwind.rs`: the registers of caller frames, from `.eh_frame`.
//! - `entry_value.rs`: `DW_OP_entry_value` through the caller's call-site parameters.
//! - `interp.rs`: evaluation of a parsed expression to a typed value.
//! - `compile.rs`: conditions and logpoint templates compiled to JS the agent runs per hit.
//! - `memory.rs`: [`Memory`], reads of a live process (process_vm_readv, page-cached).
//! - `render.rs` + `pretty/`: a typed value → JSON (depth-limited, containers pretty-printed).

pub mod compile;
pub mod entry_value;
pub mod interp;
pub mod lexer;
pub mod location;
pub mod memory;
pub mod parser;
mod pretty;
pub mod render;
pub mod scope;
pub mod types;
pub mod unwind;

pub use interp::{Evaluator, Frame, Place, TypedValue};
pub use memory::{Memory, ProcessMemory};
pub use render::{render, render_at, RenderOptions};

/// Why an expression cannot be evaluated, pointing at the token when there is one.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalError {
    pub message: String,
    /// Byte offset in the expression.
    pub pos: Option<usize>,
}

impl EvalError {
    pub fn new(message: String) -> EvalError {
        EvalError { message, pos: None }
    }
    pub fn at(pos: usize, message: &str) -> EvalError {
        EvalError { message: message.to_string(), pos: Some(pos) }
    }
    /// Attach a position if the error has none yet.
    pub fn or_at(mut self, pos: usize) -> EvalError {
        self.pos.get_or_insert(pos);
        self
    }
}

impl std::fmt::Display for EvalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.pos {
            Some(p) => write!(f, "at column {}: {}", p + 1, self.message),
            None => f.write_str(&self.message),
        }
    }
}
