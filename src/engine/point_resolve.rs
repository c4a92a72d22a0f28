//! From what the user asked (`function` or `file`+`line`, condition, hit count, message) to
//! what an agent is sent: static addresses from the DWARF function index and line table,
//! and the frame's variables for conditions and templates. Needs only the binary, so a
//! launch checks its breakpoints before the program exists.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::debug_state::{function_at, hex};
use crate::error::{Result, StrobeError};
use crate::symbols::{LineTable, LocalVar, LocalsInfo, Pattern, SymbolIndex};

pub const MAX_CONDITION_BYTES: usize = 1024;
pub const MAX_MESSAGE_BYTES: usize = 2048;

/// One entry of `debug_breakpoint`'s `add` (and of `debug_launch`'s `breakpoints`).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PointRequest {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hit_count: Option<u32>,
    /// Present: a logpoint with this `{expr}` template.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl PointRequest {
    /// The request as the user wrote it, for error messages: `function 'foo'`, `main.c:12`.
    pub fn describe(&self) -> String {
        match (&self.function, &self.file, self.line) {
            (Some(f), _, _) => format!("function '{f}'"),
            (None, Some(file), Some(line)) => format!("{file}:{line}"),
            _ => "this item".into(),
        }
    }
}

/// The program a point is resolved against.
pub(crate) struct PointTarget {
    pub binary: PathBuf,
    pub project_root: PathBuf,
    /// The program's functions, then its loaded libraries' (engine/modules.rs).
    pub symbols: Arc<SymbolIndex>,
    /// Shared libraries with DWARF: (file, offset to session addresses, session range).
    pub libraries: Vec<(PathBuf, u64, (u64, u64))>,
}

impl PointTarget {
    /// Whether session address `addr` lies in code GCC built for AVX (its unit's DWARF
    /// producer). Frida's trampoline saves only the lower 128 bits of vector registers, and a
    /// probe runs code (Frida's, the JS runtime, glibc's AVX functions) that changes the rest.
    fn in_avx_code(&self, addr: u64) -> bool {
        let (path, at, _) = self.locate(addr);
        LocalsInfo::cached(path).is_ok_and(|l| l.built_for_avx(at))
    }

    /// The warning for point `p` (named `what` to the caller) when it lies in code built for
    /// AVX: what it may do to the program, and what to do instead.
    pub(crate) fn avx_warning(&self, p: &Prepared, what: &str) -> Option<String> {
        p.addresses.iter().any(|&a| self.in_avx_code(a)).then(|| {
            format!(
                "{what} is in code built for AVX: while a breakpoint or logpoint runs there, the upper halves of 256-bit vector registers the program keeps may change (Frida saves only their lower 128 bits), so results computed with them can differ from an untraced run. If they do, remove it and use debug_trace on the function: its native hook leaves them alone."
            )
        })
    }

    /// The file holding session address `addr`, the address in it, and the offset.
    fn locate(&self, addr: u64) -> (&Path, u64, u64) {
        match self.libraries.iter().find(|(_, _, (lo, hi))| addr >= *lo && addr < *hi) {
            Some((path, offset, _)) => (path, addr.wrapping_sub(*offset), *offset),
            None => (&self.binary, addr, 0),
        }
    }

    /// Every file with DWARF, the program first, with its offset to session addresses.
    fn files(&self) -> impl Iterator<Item = (&Path, u64)> {
        std::iter::once((self.binary.as_path(), 0)).chain(self.libraries.iter().map(|(p, o, _)| (p.as_path(), *o)))
    }

    /// `file:line` in the program or, failing that, in a library (as gdb searches every
    /// objfile), at session addresses.
    fn resolve_line(&self, file: &str, line: u32) -> Result<crate::symbols::ResolvedLine> {
        let mut first_err: Option<StrobeError> = None;
        for (path, offset) in self.files() {
            match LineTable::cached(path).and_then(|t| t.resolve_line(file, line)) {
                Ok(mut r) if !r.addresses.is_empty() => {
                    r.addresses.iter_mut().for_each(|a| *a = a.wrapping_add(offset));
                    return Ok(r);
                }
                // The line table names the line but no instruction is its own (optimized code).
                Ok(r) => {
                    first_err = Some(StrobeError::new(
                        crate::error::ErrorCode::NoCodeAtLine,
                        format!("Line {} of '{}' has no instructions of its own in this build (optimized away or merged into another line). Break on a nearby line or on the function.", r.line, r.file),
                    ))
                }
                // "No code at line N" of a file a module has beats "no such file" of the others.
                Err(e) if e.code == crate::error::ErrorCode::NoCodeAtLine || first_err.is_none() => first_err = Some(e),
                Err(_) => {}
            }
        }
        Err(first_err.unwrap_or_else(|| StrobeError::validation(format!("No line {line} in '{file}'."))))
    }
}

/// A request resolved to addresses, with the agent's spec (all but the id).
#[derive(Debug, Clone)]
pub(crate) struct Prepared {
    pub request: PointRequest,
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
    /// Session addresses (engine/modules.rs).
    pub addresses: Vec<u64>,
    /// session address - static address in the file that has the code (0: the program).
    pub offset: u64,
    /// That file's name, when it is a shared library.
    pub module: Option<String>,
    pub spec: Value,
}

/// The agent's description of a variable: its symbolic location plus how to decode it.
pub(crate) fn recipe(v: &LocalVar) -> Value {
    let mut r = serde_json::to_value(&v.location).unwrap_or_else(|_| json!({ "kind": "unsupported" }));
    if let Some(a) = r.get("address").and_then(Value::as_u64) {
        r["address"] = json!(hex(a));
    }
    r["name"] = json!(v.name);
    r["size"] = json!(v.size);
    r["encoding"] = json!(v.encoding);
    r["typeName"] = json!(v.type_name);
    r
}

/// Check the shape of a request (no symbols needed).
pub(crate) fn validate(req: &PointRequest) -> Result<()> {
    match (&req.function, &req.file, req.line) {
        (Some(_), None, None) | (None, Some(_), Some(_)) => {}
        (Some(_), _, _) => return Err(StrobeError::validation("Give either 'function' or 'file'+'line', not both.")),
        (None, Some(_), None) => return Err(StrobeError::validation("'file' needs a 'line' (1-based).")),
        (None, None, Some(_)) => return Err(StrobeError::validation("'line' needs a 'file' (e.g. 'src/main.c' or 'main.c').")),
        (None, None, None) => return Err(StrobeError::validation("Each breakpoint needs 'function' (a name or pattern) or 'file'+'line'.")),
    }
    if req.line == Some(0) {
        return Err(StrobeError::validation("'line' is 1-based; 0 is not a line."));
    }
    if let Some(c) = &req.condition {
        if c.len() > MAX_CONDITION_BYTES {
            return Err(StrobeError::validation(format!("'condition' is {} bytes; at most {MAX_CONDITION_BYTES}.", c.len())));
        }
        if c.trim().is_empty() {
            return Err(StrobeError::validation("'condition' is empty; omit it to break on every hit."));
        }
    }
    if let Some(m) = &req.message {
        if m.len() > MAX_MESSAGE_BYTES {
            return Err(StrobeError::validation(format!("'message' is {} bytes; at most {MAX_MESSAGE_BYTES}.", m.len())));
        }
        if req.hit_count.is_some_and(|n| n > 0) {
            return Err(StrobeError::validation("'hitCount' applies to breakpoints only; a logpoint (with 'message') logs every hit."));
        }
    }
    Ok(())
}

/// Validate and resolve `req` against `target`, and describe it for the agent.
pub(crate) fn prepare(target: &PointTarget, req: &PointRequest) -> Result<Prepared> {
    validate(req)?;
    let mut line_ranges: Vec<(u64, u64)> = Vec::new();
    let (function, file, line, addresses, scans) = match &req.function {
        Some(pattern) => {
            let f = single_function(&target.symbols, &target.project_root, pattern)?;
            let (path, at, _) = target.locate(f.address);
            let (file, line) = match LineTable::cached(path)?.address_to_line(at) {
                Some((file, line)) => (Some(file.to_string()), Some(line)),
                None => (f.file.clone(), f.line),
            };
            (Some(f.name.clone()), file, line, vec![f.address], vec![None])
        }
        None => {
            let (Some(file), Some(line)) = (&req.file, req.line) else { unreachable!("validated") };
            let resolved = target.resolve_line(file, line)?;
            let f = function_at(&target.symbols, resolved.addresses[0]);
            // A function's very entry needs no jump-target or red-zone check.
            let scans: Vec<Option<(u64, u64)>> = resolved
                .addresses
                .iter()
                .map(|&a| function_at(&target.symbols, a).filter(|f| f.address != a).map(|f| (f.address, f.address + f.size)))
                .collect();
            if resolved.addresses.len() > 1 {
                // The line's code: one execution of it passes through several of its
                // addresses at most once (agent/src/breakpoints.ts `continuations`).
                let mut funcs: Vec<(u64, u64)> =
                    resolved.addresses.iter().filter_map(|&a| function_at(&target.symbols, a)).map(|f| (f.address, f.address + f.size)).collect();
                funcs.dedup();
                for (lo, hi) in funcs {
                    // In the file that has the function, at its static addresses.
                    let (path, at, offset) = target.locate(lo);
                    let ranges = LineTable::cached(path)?.line_ranges(at, at + (hi - lo), resolved.line);
                    line_ranges.extend(ranges.into_iter().map(|(a, b)| (a.wrapping_add(offset), b.wrapping_add(offset))));
                }
            }
            (f.map(|f| f.name.clone()), Some(resolved.file), Some(resolved.line), resolved.addresses, scans)
        }
    };
    let (path, at, offset) = target.locate(addresses[0]);
    let mut vars = LocalsInfo::cached(path)?.locals_at(at)?.map(|f| f.vars).unwrap_or_default();
    for v in &mut vars {
        if let crate::symbols::VarLocation::Static { address } = &mut v.location {
            *address = address.wrapping_add(offset);
        }
    }
    let params: Vec<Value> = vars.iter().filter(|v| v.is_parameter).map(recipe).collect();
    let mut spec = json!({
        "addresses": addresses.iter().map(|a| hex(*a)).collect::<Vec<_>>(),
        "condition": req.condition,
        "hitCount": req.hit_count,
        "message": req.message,
        "scans": scans.iter().map(|s| s.map(|(lo, hi)| json!({ "start": hex(lo), "end": hex(hi) }))).collect::<Vec<_>>(),
        "params": params,
        "lineRanges": line_ranges.iter().map(|(lo, hi)| [hex(*lo), hex(*hi)]).collect::<Vec<_>>(),
        "vars": vars.iter().map(recipe).collect::<Vec<_>>(),
    });
    super::point_compile::compile_point(path, offset, &vars, at, &mut spec)?;
    let module = (offset != 0).then(|| path.file_name().map(|n| n.to_string_lossy().into_owned())).flatten();
    Ok(Prepared { request: req.clone(), function, file, line, addresses, offset, module, spec })
}

/// The one function `pattern` names.
fn single_function<'a>(symbols: &'a SymbolIndex, project_root: &Path, pattern: &str) -> Result<&'a crate::symbols::FunctionInfo> {
    let p = Pattern::parse(pattern)?;
    let mut matches: Vec<&crate::symbols::FunctionInfo> =
        symbols.functions.iter().filter(|f| f.address != 0 && p.matches(f, project_root)).collect();
    matches.dedup_by_key(|f| f.address);
    match matches.as_slice() {
        [one] => Ok(one),
        [] => Err(StrobeError::validation(format!(
            "No function matches '{pattern}'. Closest names: {}.",
            symbols.closest_names(pattern, 5).join(", ")
        ))),
        many => {
            let names: Vec<&str> = many.iter().take(10).map(|f| f.name.as_str()).collect();
            Err(StrobeError::validation(format!(
                "'{pattern}' matches {} functions ({}); a breakpoint needs exactly one. Use its full name.",
                many.len(),
                names.join(", ")
            )))
        }
    }
}

/// Where `stopOnEntry` pauses: the program's own `main` (C, C++), else the user's Rust
/// `<crate>::main` (the C `main` rustc generates runs the std runtime first) or Go's
/// `main.main`; the one under the project root first.
pub(crate) fn entry_function(target: &PointTarget) -> Result<String> {
    let fns = &target.symbols.functions;
    let with_source = |f: &&crate::symbols::FunctionInfo| f.address != 0 && f.file.is_some();
    let under_root = |f: &&crate::symbols::FunctionInfo| f.file.as_deref().is_some_and(|p| Path::new(p).starts_with(&target.project_root));
    let std_lib = |name: &str| ["std::", "core::", "alloc::", "test::"].iter().any(|p| name.starts_with(p));
    let rust_main = fns
        .iter()
        .filter(with_source)
        .filter(|f| (f.name.ends_with("::main") || f.name == "main.main") && !std_lib(&f.name))
        .min_by_key(|f| (!under_root(f), f.name.matches("::").count(), f.name.len()));
    let c_main = fns.iter().filter(with_source).find(|f| f.name == "main");
    // rustc's generated C `main` has no source of its own in the project: prefer the crate's.
    let pick = match (c_main, rust_main) {
        (Some(c), _) if under_root(&c) => Some(c),
        (_, Some(r)) => Some(r),
        (Some(c), None) => Some(c),
        (None, None) => None,
    };
    match pick {
        Some(f) => Ok(f.name.clone()),
        None => {
            let user: Vec<&str> = fns.iter().filter(with_source).filter(under_root).take(5).map(|f| f.name.as_str()).collect();
            Err(StrobeError::validation(format!(
                "stopOnEntry found no 'main' with debug info in {}. Name the first function to stop at instead: breakpoints: [{{function: '...'}}]{}.",
                target.binary.display(),
                if user.is_empty() { String::new() } else { format!(" (functions under projectRoot: {})", user.join(", ")) }
            )))
        }
    }
}
