//! Backtraces of pauses and crashes, symbolized the way gdb's `bt` shows them: the agent's
//! raw frames `{address, module, modulePath, offset, symbol}` become `{address (static),
//! runtimeAddress, module, function, file, line}` from the DWARF of each frame's module
//! (the program or any shared library built with -g); code without DWARF (libc) is named
//! from its ELF symbols (symbols/elf_symbols.rs). Caller frames hold return addresses: the
//! call is the instruction before, so they are looked up at `pc - 1` (gdb's rule), which
//! gives the line of the call, not the line after it. A frame inside inlined code becomes
//! one frame per inlined call (`inlined: true`, same address), innermost first.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use super::debug_state::{hex, parse_hex, FrameInfo};
use super::Engine;
use crate::symbols::{expand_inlined, ElfSymbols, LineTable, LocalsInfo, SymbolIndex};

/// What one module contributes to naming its frames.
#[derive(Clone)]
struct ModuleNames {
    image_base: u64,
    functions: Option<Arc<SymbolIndex>>,
    lines: Option<Arc<LineTable>>,
    dwarf: Option<Arc<LocalsInfo>>,
    elf: Arc<ElfSymbols>,
}

impl ModuleNames {
    fn load(engine: &Engine, p: &Path) -> ModuleNames {
        let functions = engine.symbols.get(p).ok();
        let image_base = functions.as_ref().map(|x| x.image_base).unwrap_or_else(|| image_base_of(p));
        let has_dwarf = functions.is_some();
        ModuleNames {
            image_base,
            functions,
            lines: has_dwarf.then(|| LineTable::cached(p).ok()).flatten(),
            dwarf: has_dwarf.then(|| LocalsInfo::cached(p).ok()).flatten(),
            elf: ElfSymbols::cached(p),
        }
    }
}

/// Lowest PT_LOAD address of a file without DWARF (0 for shared libraries).
pub(super) fn image_base_of(p: &Path) -> u64 {
    use object::{Object, ObjectSegment};
    let Ok(data) = std::fs::read(p) else { return 0 };
    object::File::parse(&*data).ok().and_then(|o| o.segments().map(|s| s.address()).min()).unwrap_or(0)
}

/// Symbolize the agent's raw frames (frame 0 is the pc, the others return addresses).
pub(super) fn symbolize(engine: &Engine, frames: &[Value]) -> Vec<FrameInfo> {
    let mut modules: HashMap<String, ModuleNames> = HashMap::new();
    let mut out = Vec::with_capacity(frames.len());
    for (i, f) in frames.iter().enumerate() {
        let runtime = parse_hex(f.get("address")).unwrap_or(0);
        let module = f.get("module").and_then(Value::as_str).map(str::to_string);
        let (mut function, mut here, mut inlined, mut address) = (None, None, Vec::new(), runtime);
        let offset = parse_hex(f.get("offset"));
        if let (Some(path), Some(offset)) = (f.get("modulePath").and_then(Value::as_str), offset) {
            let m = modules.entry(path.to_string()).or_insert_with(|| ModuleNames::load(engine, path.as_ref())).clone();
            address = m.image_base + offset;
            // Outer frames hold return addresses: the call is the instruction before.
            let at = address - u64::from(i > 0 && offset > 0);
            if let Some(func) = m.functions.as_ref().and_then(|x| x.function_at(at)) {
                function = Some(func.name.clone());
                inlined = m.dwarf.and_then(|d| d.inlined_calls(at).ok()).unwrap_or_default();
            } else {
                function = m.elf.name_at(at).map(str::to_string);
            }
            here = m.lines.as_ref().and_then(|t| t.address_to_line(at)).map(|(file, line)| (file.to_string(), line));
        }
        // Neither DWARF nor ELF symbols: Frida's nearest symbol, if any.
        let function = function.or_else(|| f.get("symbol").and_then(Value::as_str).map(str::to_string));
        // A frame the agent found by scanning the stack (crash.ts) in the same function as
        // the frame before is a stale return address of that function's earlier calls.
        let guessed = f.get("guessed").and_then(Value::as_bool).unwrap_or(false);
        if guessed && function.is_some() && out.last().is_some_and(|p: &FrameInfo| p.function == function && p.module == module) {
            continue;
        }
        for sf in expand_inlined(function, here, &inlined) {
            out.push(FrameInfo {
                address: hex(address),
                runtime_address: hex(runtime),
                module: module.clone(),
                function: sf.function,
                file: sf.file,
                line: sf.line,
                inlined: sf.inlined,
            });
        }
    }
    out
}
