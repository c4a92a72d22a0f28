//! [`DebugInfo`]: the DWARF of one binary kept in memory for lazy questions about
//! types, function parameters and global variables (the model is in `types.rs`).
//!
//! Loading copies the debug sections and makes one pass over every DIE to list
//! global/static variables (`DW_TAG_variable` at a fixed `DW_OP_addr`) and the DIE of
//! each function entry address. Types are resolved only when asked for, by
//! `type_reader.rs`, and memoized per DIE.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

use gimli::{AttributeValue, EndianArcSlice, Reader as _, RunTimeEndian, UnitOffset};
use object::{Object, ObjectSection};

use super::type_reader::TypeReader;
use super::types::{agent_table, GlobalVar, Param, Signature, TemplateParam, Type, TypeId, TypeStore};
use super::SymbolIndex;
use crate::error::{Result, StrobeError};

pub(crate) type AR = EndianArcSlice<RunTimeEndian>;

pub(crate) struct UnitData {
    pub(crate) unit: gimli::Unit<AR>,
    pub(crate) start: u64,
    pub(crate) rust: bool,
    pub(crate) c: bool,
    pub(crate) cxx: bool,
    /// Built with GCC's interprocedural register allocation (`gcc_ipa_ra`).
    pub(crate) ipa_ra: bool,
    /// Built by GCC for AVX (`gcc_avx`).
    pub(crate) avx: bool,
}

/// The lazily consulted DWARF of one binary. `Send + Sync`; share it as `Arc`.
pub struct DebugInfo {
    pub(crate) dwarf: gimli::Dwarf<AR>,
    pub(crate) units: Vec<UnitData>,
    /// (qualified name, static address, type DIE): types resolve on first lookup.
    globals: Vec<(String, u64, Option<u64>)>,
    /// Name (qualified and short) → indexes into `globals`.
    global_names: HashMap<String, Vec<usize>>,
    /// Function entry address → (unit index, DIE offset in the unit).
    functions: HashMap<u64, (usize, UnitOffset)>,
    signatures: Mutex<HashMap<u64, Option<Signature>>>,
    pub(crate) store: Mutex<TypeStore>,
    /// The binary is x86-64 (the System V integer ABI `symbols/abi.rs` checks against).
    pub(crate) x86_64: bool,
    /// The expression evaluator's named types and the types it adds (`eval/types.rs`).
    pub(crate) eval_names: OnceLock<Arc<crate::eval::types::NameIndex>>,
    pub(crate) eval_synthetic: Mutex<HashMap<String, TypeId>>,
    pub(crate) eval_call_sites: OnceLock<crate::eval::entry_value::CallSites>,
}

type Stamp = (u64, Option<SystemTime>);

type Cache = Mutex<HashMap<PathBuf, (Stamp, Arc<DebugInfo>)>>;

fn cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// A gate per binary being parsed (DebugInfo::of_path).
fn loading() -> &'static Mutex<HashMap<PathBuf, Arc<Mutex<()>>>> {
    static LOADING: OnceLock<Mutex<HashMap<PathBuf, Arc<Mutex<()>>>>> = OnceLock::new();
    LOADING.get_or_init(Default::default)
}

/// DWARF parses so far, per binary (DebugInfo::parses_of).
fn parses() -> &'static Mutex<HashMap<PathBuf, usize>> {
    static PARSES: OnceLock<Mutex<HashMap<PathBuf, usize>>> = OnceLock::new();
    PARSES.get_or_init(Default::default)
}

impl DebugInfo {
    /// The debug info of `index`'s binary, from a process-wide cache (reloaded when the
    /// file's size or mtime changes).
    pub fn of(index: &SymbolIndex) -> Result<Arc<DebugInfo>> {
        DebugInfo::of_path(&index.binary)
    }

    /// The debug info of the binary at `path` (the same cache as [`DebugInfo::of`]).
    pub fn of_path(path: &std::path::Path) -> Result<Arc<DebugInfo>> {
        let path = &path.to_path_buf();
        let meta = std::fs::metadata(path).map_err(|e| {
            StrobeError::validation(format!("Cannot read binary '{}': {e}.", path.display()))
        })?;
        let stamp = (meta.len(), meta.modified().ok());
        let cached = |c: &HashMap<PathBuf, (Stamp, Arc<DebugInfo>)>| c.get(path).filter(|(s, _)| *s == stamp).map(|(_, d)| d.clone());
        if let Some(d) = cached(&cache().lock().unwrap_or_else(|e| e.into_inner())) {
            return Ok(d);
        }
        // One parse per binary: callers that miss at once (a launch's symbol load and the first
        // trace request) wait on the binary's own gate, not on the whole cache, and the first
        // one's instance serves all (type ids are assigned per instance as types are first
        // resolved: a serialize recipe made with one instance and a type table made with
        // another printed `<? @…>`, tests/capture_native.rs's JavaScript pass).
        let gate = loading().lock().unwrap_or_else(|e| e.into_inner()).entry(path.clone()).or_default().clone();
        let _parsing = gate.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(d) = cached(&cache().lock().unwrap_or_else(|e| e.into_inner())) {
            return Ok(d);
        }
        let info = Arc::new(DebugInfo::load(path)?);
        cache().lock().unwrap_or_else(|e| e.into_inner()).insert(path.clone(), (stamp, info.clone()));
        loading().lock().unwrap_or_else(|e| e.into_inner()).remove(path);
        Ok(info)
    }

    /// How many times this process parsed the DWARF of the binary at `path` (a big binary's
    /// parse costs seconds: the cache and the per-binary gate make it once per version).
    pub fn parses_of(path: &std::path::Path) -> usize {
        parses().lock().unwrap_or_else(|e| e.into_inner()).get(path).copied().unwrap_or(0)
    }

    /// Parse `path`'s DWARF (uncached).
    pub fn load(path: &std::path::Path) -> Result<DebugInfo> {
        *parses().lock().unwrap_or_else(|e| e.into_inner()).entry(path.to_path_buf()).or_default() += 1;
        let bad = |e: &dyn std::fmt::Display| {
            StrobeError::internal(format!("Failed to read DWARF of '{}': {e}", path.display()))
        };
        let data = std::fs::read(path).map_err(|e| bad(&e))?;
        let obj = object::File::parse(&*data).map_err(|e| bad(&e))?;
        let endian = if obj.is_little_endian() { RunTimeEndian::Little } else { RunTimeEndian::Big };
        let dwarf = gimli::Dwarf::load(|id| -> gimli::Result<AR> {
            let bytes: Arc<[u8]> = match obj.section_by_name(id.name()).and_then(|s| s.uncompressed_data().ok()) {
                Some(d) => Arc::from(&*d),
                None => Arc::from(&[][..]),
            };
            Ok(EndianArcSlice::new(bytes, endian))
        })
        .map_err(|e| bad(&e))?;
        let mut info = DebugInfo {
            dwarf,
            units: Vec::new(),
            globals: Vec::new(),
            global_names: HashMap::new(),
            functions: HashMap::new(),
            signatures: Mutex::new(HashMap::new()),
            store: Mutex::new(TypeStore::default()),
            x86_64: obj.architecture() == object::Architecture::X86_64,
            eval_names: OnceLock::new(),
            eval_synthetic: Mutex::new(HashMap::new()),
            eval_call_sites: OnceLock::new(),
        };
        let mut headers = info.dwarf.units();
        while let Ok(Some(header)) = headers.next() {
            let start = header.offset().as_debug_info_offset().map_or(0, |o| o.0 as u64);
            match info.dwarf.unit(header) {
                Ok(unit) => info.units.push(UnitData { unit, start, rust: false, c: false, cxx: false, ipa_ra: false, avx: false }),
                Err(e) => tracing::debug!("skipping DWARF unit at {start:#x}: {e}"),
            }
        }
        for i in 0..info.units.len() {
            if let Err(e) = info.scan_unit(i) {
                tracing::debug!("incomplete scan of DWARF unit {i}: {e}");
            }
        }
        for (i, (name, _, _)) in info.globals.iter().enumerate() {
            info.global_names.entry(name.clone()).or_default().push(i);
            if let Some(short) = name.rsplit("::").next().filter(|s| s != name) {
                info.global_names.entry(short.to_string()).or_default().push(i);
            }
        }
        Ok(info)
    }

    /// One pass over a unit: its language, its global variables, its function entries.
    fn scan_unit(&mut self, ui: usize) -> gimli::Result<()> {
        let mut found_globals = Vec::new();
        let mut found_functions = Vec::new();
        let mut rust = false;
        let mut c = false;
        let mut cxx = false;
        let mut ipa_ra = false;
        let mut avx = false;
        {
            let unit = &self.units[ui].unit;
            let mut scopes: Vec<(isize, String)> = Vec::new();
            let mut depth = 0isize;
            let mut entries = unit.entries();
            while let Some((delta, e)) = entries.next_dfs()? {
                depth += delta;
                while scopes.last().is_some_and(|(d, _)| *d >= depth) {
                    scopes.pop();
                }
                match e.tag() {
                    gimli::DW_TAG_compile_unit => {
                        if let Some(AttributeValue::Language(l)) = e.attr_value(gimli::DW_AT_language)? {
                            rust = l == gimli::DW_LANG_Rust;
                            c = matches!(l, gimli::DW_LANG_C89 | gimli::DW_LANG_C | gimli::DW_LANG_C99 | gimli::DW_LANG_C11 | gimli::DW_LANG_C17);
                            cxx = matches!(
                                l,
                                gimli::DW_LANG_C_plus_plus
                                    | gimli::DW_LANG_C_plus_plus_03
                                    | gimli::DW_LANG_C_plus_plus_11
                                    | gimli::DW_LANG_C_plus_plus_14
                                    | gimli::DW_LANG_C_plus_plus_17
                                    | gimli::DW_LANG_C_plus_plus_20
                            );
                        }
                        // GCC's interprocedural register allocation (on from -O1) lets a caller
                        // keep values in registers the callee is known not to touch, which a
                        // native call wrapper clobbers: such units are not offered to wrappers
                        // (Interceptor.attach, which saves every register, still serves them).
                        let producer = self.attr_string(unit, e, gimli::DW_AT_producer).unwrap_or_default();
                        ipa_ra = producer.starts_with("GNU ") && gcc_ipa_ra(&producer);
                        avx = gcc_avx(&producer);
                    }
                    gimli::DW_TAG_namespace => {
                        let name = self.attr_string(unit, e, gimli::DW_AT_name).unwrap_or_else(|| "(anonymous namespace)".into());
                        scopes.push((depth, name));
                    }
                    gimli::DW_TAG_subprogram => {
                        if let Some(v) = e.attr_value(gimli::DW_AT_low_pc)? {
                            if let Ok(Some(addr)) = self.dwarf.attr_address(unit, v) {
                                if addr != 0 {
                                    found_functions.push((addr, e.offset()));
                                }
                            }
                        } else if e.attr_value(gimli::DW_AT_ranges)?.is_some() {
                            // Split in hot and cold parts (GCC -O2): the entry is one range's start.
                            if let Ok(mut ranges) = self.dwarf.die_ranges(unit, e) {
                                while let Ok(Some(r)) = ranges.next() {
                                    if r.begin != 0 {
                                        found_functions.push((r.begin, e.offset()));
                                    }
                                }
                            }
                        }
                    }
                    gimli::DW_TAG_variable => {
                        if let Some(address) = static_address(e)? {
                            let spec = match e.attr_value(gimli::DW_AT_specification)? {
                                Some(AttributeValue::UnitRef(o)) => unit.entry(o).ok(),
                                _ => None,
                            };
                            let name = self
                                .attr_string(unit, e, gimli::DW_AT_name)
                                .or_else(|| spec.as_ref().and_then(|s| self.attr_string(unit, s, gimli::DW_AT_name)));
                            let ty = e.attr_value(gimli::DW_AT_type)?.or(match &spec {
                                Some(s) => s.attr_value(gimli::DW_AT_type)?,
                                None => None,
                            });
                            if let Some(name) = name {
                                let mut q: Vec<&str> = scopes.iter().map(|(_, s)| s.as_str()).collect();
                                q.push(&name);
                                found_globals.push((q.join("::"), address, ty.and_then(|t| die_offset(unit, t))));
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        self.units[ui].rust = rust;
        self.units[ui].c = c;
        self.units[ui].cxx = cxx;
        self.units[ui].ipa_ra = ipa_ra;
        self.units[ui].avx = avx;
        for (addr, off) in found_functions {
            self.functions.entry(addr).or_insert((ui, off));
        }
        self.globals.extend(found_globals);
        Ok(())
    }

    pub(crate) fn attr_string(&self, unit: &gimli::Unit<AR>, e: &gimli::DebuggingInformationEntry<AR>, at: gimli::DwAt) -> Option<String> {
        let v = e.attr_value(at).ok()??;
        let s = self.dwarf.attr_string(unit, v).ok()?;
        Some(s.to_string_lossy().ok()?.into_owned())
    }

    /// Resolve the type DIE at `.debug_info` offset `die` (memoized).
    fn resolve(&self, die: u64) -> TypeId {
        let mut store = self.store.lock().unwrap_or_else(|e| e.into_inner());
        TypeReader { info: self, store: &mut store }.resolve(die)
    }

    /// The type whose DIE starts at `.debug_info` offset `die_offset`.
    pub fn type_at(&self, die_offset: u64) -> Option<TypeId> {
        self.unit_of(die_offset)?;
        Some(self.resolve(die_offset))
    }

    pub fn ty(&self, id: TypeId) -> Arc<Type> {
        self.store.lock().unwrap_or_else(|e| e.into_inner()).get(id)
    }

    /// Template parameters of struct type `id`, in declaration order (empty if none).
    pub fn template_params(&self, id: TypeId) -> Arc<[TemplateParam]> {
        let store = self.store.lock().unwrap_or_else(|e| e.into_inner());
        store.templates.get(&id).cloned().unwrap_or_else(|| Arc::from(Vec::new()))
    }

    /// Whether C++ class `id` is passed and returned by invisible reference (a non-trivial
    /// copy or move constructor or destructor, or virtual functions: the Itanium C++ ABI).
    pub fn passed_by_reference(&self, id: TypeId) -> bool {
        let store = self.store.lock().unwrap_or_else(|e| e.into_inner());
        store.by_reference.contains(&id)
    }

    /// Whether pointer type `id` is a reference: C++ `T &` / `T &&`, Rust `&T` / `&mut T`.
    pub fn is_reference(&self, id: TypeId) -> bool {
        let store = self.store.lock().unwrap_or_else(|e| e.into_inner());
        store.references.contains(&id) || store.get(id).name.starts_with('&')
    }

    /// Whether the serializer prints struct `id` specially (`std::string`, `std::optional`:
    /// `cxx_std.rs`) rather than as its members.
    /// `std::string`'s data pointer and length offsets, when `id` is one.
    pub(crate) fn std_string_layout(&self, id: TypeId) -> Option<(u64, u64)> {
        super::cxx_std::string_layout(&self.store.lock().unwrap_or_else(|e| e.into_inner()), id)
    }

    /// `std::vector<T>`'s first-element and past-the-end pointer offsets and `T`, when `id`
    /// is one.
    pub(crate) fn std_vector_layout(&self, id: TypeId) -> Option<(u64, u64, TypeId)> {
        super::cxx_std::vector_layout(&self.store.lock().unwrap_or_else(|e| e.into_inner()), id)
    }

    /// What a `std::unique_ptr<T>` or `std::shared_ptr<T>` points to, when `id` is one.
    pub(crate) fn std_smart_pointer_target(&self, id: TypeId) -> Option<TypeId> {
        super::cxx_std::smart_pointer_target(&self.store.lock().unwrap_or_else(|e| e.into_inner()), id)
    }

    /// `std::optional<T>`'s engaged flag offset, value offset and `T`, when `id` is one.
    pub(crate) fn std_optional_layout(&self, id: TypeId) -> Option<(u64, u64, TypeId)> {
        super::cxx_std::optional_layout(&self.store.lock().unwrap_or_else(|e| e.into_inner()), id)
    }

    /// How a libstdc++ tree or hash container links its nodes, when `id` is one.
    pub(crate) fn std_node_layout(&self, id: TypeId) -> Option<super::cxx_std::NodeLayout> {
        super::cxx_std::node_layout(&self.store.lock().unwrap_or_else(|e| e.into_inner()), id)
    }

    pub(crate) fn is_std_special(&self, id: TypeId) -> bool {
        super::cxx_std::special_desc(&self.store.lock().unwrap_or_else(|e| e.into_inner()), id).is_some()
    }

    /// The agent's type table for everything reachable from `roots`.
    pub fn agent_types(&self, roots: &[TypeId]) -> serde_json::Value {
        agent_table(&self.store.lock().unwrap_or_else(|e| e.into_inner()), roots)
    }

    /// Index of the unit holding `.debug_info` offset `off`.
    pub(crate) fn unit_of(&self, off: u64) -> Option<usize> {
        let i = self.units.partition_point(|u| u.start <= off);
        let i = i.checked_sub(1)?;
        let u = &self.units[i].unit;
        let end = self.units[i].start + u.header.length_including_self() as u64;
        (off < end).then_some(i)
    }

    /// Qualified names of all global and static variables.
    pub fn global_names(&self) -> impl Iterator<Item = &str> {
        self.globals.iter().map(|(n, _, _)| n.as_str())
    }

    /// A global by qualified or short name; the first one if a short name is ambiguous.
    pub fn global(&self, name: &str) -> Option<GlobalVar> {
        let &i = self.global_names.get(name)?.first()?;
        let (name, address, die) = &self.globals[i];
        Some(GlobalVar { name: name.clone(), address: *address, ty: die.map(|d| self.resolve(d)) })
    }

    /// Up to `n` global names closest to `name` (for "did you mean" errors).
    pub fn closest_globals(&self, name: &str, n: usize) -> Vec<String> {
        let lower = name.to_lowercase();
        let mut scored: Vec<(usize, &str)> = self
            .global_names
            .keys()
            .filter(|k| !k.contains('.') && !k.starts_with('_'))
            .map(|k| (strsim(&lower, &k.to_lowercase()), k.as_str()))
            .collect();
        scored.sort();
        scored.into_iter().take(n).map(|(_, k)| k.to_string()).collect()
    }

    /// Parameters and return type of the function entered at static address `fn_address`.
    pub fn signature(&self, fn_address: u64) -> Option<Signature> {
        if let Some(s) = self.signatures.lock().unwrap_or_else(|e| e.into_inner()).get(&fn_address) {
            return s.clone();
        }
        let sig = self.read_signature(fn_address);
        self.signatures.lock().unwrap_or_else(|e| e.into_inner()).insert(fn_address, sig.clone());
        sig
    }

    fn read_signature(&self, fn_address: u64) -> Option<Signature> {
        let &(ui, off) = self.functions.get(&fn_address)?;
        let unit = &self.units[ui].unit;
        // Concrete out-of-line instances keep their parameters' types on the abstract origin.
        let mut target = off;
        let mut ret = None;
        for _ in 0..4 {
            let e = unit.entry(target).ok()?;
            if ret.is_none() {
                ret = e.attr_value(gimli::DW_AT_type).ok()?.and_then(|v| die_offset(unit, v));
            }
            if ret.is_none() {
                // A C++ method defined out of its class: the result type is on the declaration.
                if let Ok(Some(AttributeValue::UnitRef(decl))) = e.attr_value(gimli::DW_AT_specification) {
                    ret = unit.entry(decl).ok().and_then(|d| d.attr_value(gimli::DW_AT_type).ok().flatten()).and_then(|v| die_offset(unit, v));
                }
            }
            match e.attr_value(gimli::DW_AT_abstract_origin).ok()? {
                Some(AttributeValue::UnitRef(o)) if o != target => {
                    if self.has_params(unit, target) {
                        break;
                    }
                    target = o;
                }
                _ => break,
            }
        }
        let mut params = Vec::new();
        let mut variadic = false;
        let mut tree = unit.entries_tree(Some(target)).ok()?;
        let root = tree.root().ok()?;
        let mut children = root.children();
        while let Ok(Some(child)) = children.next() {
            let e = child.entry();
            variadic |= e.tag() == gimli::DW_TAG_unspecified_parameters;
            if e.tag() != gimli::DW_TAG_formal_parameter {
                continue;
            }
            let origin = match e.attr_value(gimli::DW_AT_abstract_origin).ok().flatten() {
                Some(AttributeValue::UnitRef(o)) => unit.entry(o).ok(),
                _ => None,
            };
            let src = origin.as_ref().unwrap_or(e);
            let name = self.attr_string(unit, src, gimli::DW_AT_name).unwrap_or_default();
            let ty = src.attr_value(gimli::DW_AT_type).ok().flatten().and_then(|v| die_offset(unit, v));
            let artificial = matches!(src.attr_value(gimli::DW_AT_artificial).ok().flatten(), Some(AttributeValue::Flag(true)));
            params.push((name, ty, artificial));
        }
        let u = &self.units[ui];
        let (rust, c_language, cxx_language, ipa_ra, avx) = (u.rust, u.c, u.cxx, u.ipa_ra, u.avx);
        // rustc lists a closure's environment as an unnamed first parameter only when it is
        // passed by value; a `&self` environment pointer still takes the first register.
        let closure = rust && self.attr_string(unit, &unit.entry(target).ok()?, gimli::DW_AT_name).is_some_and(|n| n.starts_with("{closure#"));
        let closure_env = closure && params.first().is_none_or(|p| !p.0.is_empty());
        let params = params
            .into_iter()
            .map(|(name, ty, artificial)| Param { name, ty: ty.map(|d| self.resolve(d)), artificial })
            .collect();
        Some(Signature { params, ret: ret.map(|d| self.resolve(d)), rust, c_language, cxx_language, ipa_ra, avx, variadic, closure_env })
    }

    fn has_params(&self, unit: &gimli::Unit<AR>, off: UnitOffset) -> bool {
        let Ok(mut tree) = unit.entries_tree(Some(off)) else { return false };
        let Ok(root) = tree.root() else { return false };
        let mut children = root.children();
        while let Ok(Some(c)) = children.next() {
            if c.entry().tag() == gimli::DW_TAG_formal_parameter && c.entry().attr_value(gimli::DW_AT_type).ok().flatten().is_some() {
                return true;
            }
        }
        false
    }
}

/// `.debug_info` offset of a reference attribute.
pub(crate) fn die_offset(unit: &gimli::Unit<AR>, v: AttributeValue<AR>) -> Option<u64> {
    match v {
        AttributeValue::UnitRef(o) => o.to_debug_info_offset(&unit.header).map(|d| d.0 as u64),
        AttributeValue::DebugInfoRef(d) => Some(d.0 as u64),
        _ => None,
    }
}

/// The address of a variable stored at a fixed location (`DW_OP_addr A` alone).
fn static_address(e: &gimli::DebuggingInformationEntry<AR>) -> gimli::Result<Option<u64>> {
    let Some(AttributeValue::Exprloc(expr)) = e.attr_value(gimli::DW_AT_location)? else {
        return Ok(None);
    };
    let bytes = expr.0.to_slice()?;
    if bytes.len() == 9 && bytes[0] == gimli::DW_OP_addr.0 {
        let mut a = [0u8; 8];
        a.copy_from_slice(&bytes[1..9]);
        let addr = u64::from_le_bytes(a);
        return Ok((addr != 0).then_some(addr));
    }
    Ok(None)
}

/// Edit distance, for suggestions.
fn strsim(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            cur.push((prev[j] + usize::from(ca != *cb)).min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Whether a GCC producer string says the unit was built for AVX: an `-mavx…` flag in force
/// (`-march=native` is recorded expanded, `-march=znver3 … -mavx -mavx2 …`), or an
/// `-march` whose CPUs all have it.
pub(crate) fn gcc_avx(producer: &str) -> bool {
    if !producer.starts_with("GNU ") {
        return false; // clang and rustc do not record their flags
    }
    const AVX_MARCH: &[&str] = &[
        "x86-64-v3", "x86-64-v4", "sandybridge", "ivybridge", "haswell", "broadwell", "skylake", "cannonlake", "icelake", "tigerlake", "cooperlake",
        "cascadelake", "rocketlake", "alderlake", "raptorlake", "meteorlake", "arrowlake", "lunarlake", "pantherlake", "sapphirerapids",
        "graniterapids", "emeraldrapids", "diamondrapids", "sierraforest", "grandridge", "clearwaterforest", "knl", "knm", "znver", "bdver", "btver2",
    ];
    // An explicit -m flag wins over -march, wherever either is recorded.
    let (mut explicit, mut by_arch) = (None, false);
    for flag in producer.split_whitespace() {
        if flag == "-mavx" || flag.starts_with("-mavx2") || flag.starts_with("-mavx512") {
            explicit = Some(true);
        } else if flag == "-mno-avx" {
            explicit = Some(false);
        } else if let Some(arch) = flag.strip_prefix("-march=") {
            by_arch = AVX_MARCH.iter().any(|a| arch.starts_with(a));
        }
    }
    explicit.unwrap_or(by_arch)
}

/// Whether a GCC producer string (`GNU C17 12.2.0 -mtune=generic -g -O2`) says the unit was
/// built with interprocedural register allocation: optimized, and not `-fno-ipa-ra`.
fn gcc_ipa_ra(producer: &str) -> bool {
    let mut on = false;
    for flag in producer.split_whitespace() {
        match flag {
            "-O0" | "-fno-ipa-ra" => on = false,
            "-fipa-ra" => on = true,
            f if f.starts_with("-O") => on = true,
            _ => {}
        }
    }
    on
}

#[cfg(test)]
mod avx_tests {
    use super::gcc_avx;

    #[test]
    fn avx_from_the_producer_string() {
        assert!(gcc_avx("GNU C17 12.2.0 -mavx2 -mtune=generic -march=x86-64 -g -O2 -fPIE"));
        assert!(gcc_avx("GNU C17 12.2.0 -march=znver3 -mmmx -mpopcnt -msse -mavx -mavx2 -mno-fma4 -g -O2"));
        assert!(gcc_avx("GNU C17 12.2.0 -march=haswell -g -O2"));
        assert!(!gcc_avx("GNU C17 12.2.0 -mtune=generic -march=x86-64 -g -O2"));
        assert!(!gcc_avx("GNU C17 12.2.0 -march=haswell -mno-avx -g -O2"));
        assert!(!gcc_avx("GNU C17 12.2.0 -mno-avx512f -mtune=generic -march=x86-64 -g"));
        assert!(!gcc_avx("clang version 16.0.6 -mavx2"));
    }
}
