//! `debug_eval`: gdb-grade expressions over a paused frame, evaluated in the daemon from
//! DWARF. The target is read directly (`memory.rs`); values render into the one JSON value
//! model every tool shares (`render.rs`, with pretty printers for C++ and Rust containers).
//!
//! - `memory.rs`: [`Memory`], reads of a live process (process_vm_readv, page-cached).
//! - `render.rs` + `pretty/`: a typed value → JSON (depth-limited, containers pretty-printed).

pub mod memory;
mod pretty;
pub mod render;

pub use memory::{Memory, ProcessMemory};
pub use render::{render, render_at, RenderOptions};
