//! Symbols: a function index built from a binary's DWARF debug info, and the trace
//! patterns (`ns::*`, `**::step`, `@usercode`, `@file:x.c`) that select from it.
//!
//! - [`SymbolIndex::load`] reads an ELF binary (memory-mapped) and lists every
//!   `DW_TAG_subprogram` with code: demangled qualified name, raw name, static
//!   address, size, declaring file and line. Addresses are pre-slide; the agent adds
//!   `module base - image_base` at runtime.
//! - [`SymbolCache`] shares indexes across sessions, per canonical path, reloading
//!   when the file's size or mtime changes.
//! - [`Pattern`] parses and matches trace patterns (spec "Pattern Syntax").
//!
//! Errors: `NO_DEBUG_SYMBOLS` (no DWARF functions), `INVALID_PATTERN`, and
//! `VALIDATION_ERROR` for a missing or non-ELF file.

mod abi;
mod cache;
pub(crate) mod cxx_std; // std::string, std::vector, smart pointers and std::optional as their values
mod demangle;
mod dwarf;
mod dwarf_unit;
mod elf_symbols;
mod frame;
mod inlines;
mod lines;
mod locals;
mod pattern;
mod query;
mod type_reader;
pub mod types;
mod variables;

pub use abi::{wrapper_abi, SYSV_INT_ABI};
pub use cache::SymbolCache;
pub use dwarf::{FunctionInfo, SymbolIndex};
pub use elf_symbols::ElfSymbols;
pub use frame::VarLocation;
pub use inlines::{expand_inlined, InlinedCall, SourceFrame};
pub use lines::{LineTable, ResolvedLine};
pub use locals::{FrameLocals, LocalVar, LocalsInfo};
pub use pattern::Pattern;
pub use types::{GlobalVar, Member, Param, Signature, TemplateParam, Type, TypeId, TypeKind};
pub use variables::DebugInfo;
