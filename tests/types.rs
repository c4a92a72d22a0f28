//! The DWARF type model (`strobe::symbols::types`) against the compiled fixtures
//! `c_types` and `rust_types`.

mod common;

use std::sync::Arc;

use common::fixture;
use strobe::symbols::{DebugInfo, Member, SymbolIndex, Type, TypeId, TypeKind};

fn load(name: &str) -> (SymbolIndex, Arc<DebugInfo>) {
    let index = SymbolIndex::load(&fixture(name)).expect("load index");
    let info = DebugInfo::of(&index).expect("load debug info");
    (index, info)
}

fn sig_of(index: &SymbolIndex, info: &DebugInfo, name: &str) -> strobe::symbols::Signature {
    let f = index.functions.iter().find(|f| f.name == name).unwrap_or_else(|| panic!("{name} not found"));
    info.signature(f.address).unwrap_or_else(|| panic!("{name} has no signature"))
}

fn members(t: &Type) -> &[Member] {
    match &t.kind {
        TypeKind::Struct { members, .. } => members,
        k => panic!("{} is not a struct: {k:?}", t.name),
    }
}

fn member(info: &DebugInfo, t: &Type, name: &str) -> (u64, Arc<Type>) {
    let m = members(t).iter().find(|m| m.name == name).unwrap_or_else(|| panic!("{} has no member {name}", t.name));
    (m.offset, info.ty(m.ty))
}

fn pointee(info: &DebugInfo, id: TypeId) -> Arc<Type> {
    match info.ty(id).kind {
        TypeKind::Pointer { target: Some(t) } => info.ty(t),
        ref k => panic!("not a pointer: {k:?}"),
    }
}

#[test]
fn c_struct_members_offsets_arrays_and_cycles() {
    let (index, info) = load("c_types");
    let sig = sig_of(&index, &info, "take_outer");
    assert_eq!(sig.params.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["o", "depth_hint"]);
    assert!(!sig.rust);
    let outer = pointee(&info, sig.params[0].ty.unwrap());
    assert_eq!(outer.name, "struct Outer");
    let (off, inner) = member(&info, &outer, "inner");
    assert_eq!((off, inner.name.as_str(), inner.size), (0, "struct Inner", 24));
    let (off, weight) = member(&info, &inner, "weight");
    assert_eq!((off, &weight.kind), (8, &TypeKind::Float));
    let (_, tag) = member(&info, &inner, "tag");
    let TypeKind::Pointer { target: Some(c) } = tag.kind else { panic!("tag: {tag:?}") };
    assert!(strobe::symbols::types::is_c_char(&info.ty(c)), "const char resolves to char");
    let (off, values) = member(&info, &outer, "values");
    assert_eq!(off, 32);
    assert!(matches!(values.kind, TypeKind::Array { count: Some(4), .. }), "{values:?}");
    assert_eq!(values.size, 16);

    // struct Node { int value; struct Node *next; }: the cycle resolves to the same id.
    let node_ptr = sig_of(&index, &info, "walk_list").params[0].ty.unwrap();
    let node = pointee(&info, node_ptr);
    let next = members(&node).iter().find(|m| m.name == "next").unwrap();
    assert_eq!(next.ty, node_ptr, "Node.next has the same type as the Node * parameter");
}

#[test]
fn c_enums_typedefs_and_globals() {
    let (index, info) = load("c_types");
    let sig = sig_of(&index, &info, "set_mode");
    let mode = info.ty(sig.params[0].ty.unwrap());
    assert_eq!(mode.name, "Mode");
    let TypeKind::Enum { enumerators, .. } = &mode.kind else { panic!("{mode:?}") };
    assert!(enumerators.contains(&("MODE_STOP".to_string(), 7)));
    assert_eq!(info.ty(sig.ret.unwrap()).name, "Mode");

    let counter = info.global("g_counter").expect("g_counter");
    assert!(counter.address > 0);
    assert_eq!(info.ty(counter.ty.unwrap()).kind, TypeKind::Int { signed: true });
    let clock = info.global("g_clock").expect("g_clock");
    let clock_t = pointee(&info, clock.ty.unwrap());
    assert_eq!(clock_t.name, "Clock", "anonymous struct named by its typedef");
    assert_eq!(member(&info, &clock_t, "counter").0, 8);
    assert!(info.global("s_total").is_some(), "file-static variables are listed");
    assert!(info.global("g_mode").is_some(), "volatile globals are listed");
    assert!(info.global("nope_not_here").is_none());
    assert!(info.closest_globals("g_countr", 3).contains(&"g_counter".to_string()));
}

#[test]
fn rust_str_vec_string_option_and_slices() {
    let (index, info) = load("rust_types");
    let sig = sig_of(&index, &info, "types::describe");
    assert!(sig.rust);
    let label = info.ty(sig.params[0].ty.unwrap());
    assert!(matches!(label.kind, TypeKind::RustStr { ptr: 0, len: 8 }), "{label:?}");
    let cfg = pointee(&info, sig.params[1].ty.unwrap());
    let (_, name) = member(&info, &cfg, "name");
    let TypeKind::RustVec { utf8: true, element, .. } = name.kind else { panic!("String: {name:?}") };
    assert_eq!(info.ty(element).size, 1);
    let (_, limit) = member(&info, &cfg, "limit");
    let TypeKind::RustEnum { discr, variants } = &limit.kind else { panic!("Option<u32>: {limit:?}") };
    assert!(discr.is_some());
    assert_eq!(variants.iter().map(|v| v.name.as_str()).collect::<Vec<_>>(), ["None", "Some"]);
    let values = pointee(&info, sig.params[2].ty.unwrap());
    let TypeKind::RustVec { utf8: false, element, len, ptr } = values.kind else { panic!("Vec<i32>: {values:?}") };
    assert_eq!(info.ty(element).name, "i32");
    assert_ne!(len, ptr);

    let xs = info.ty(sig_of(&index, &info, "types::total").params[0].ty.unwrap());
    assert!(matches!(xs.kind, TypeKind::RustSlice { .. }), "{xs:?}");
    // Option<&Config>: niche-encoded, one variant without a discriminant value.
    let v = info.ty(sig_of(&index, &info, "types::maybe").params[0].ty.unwrap());
    let TypeKind::RustEnum { variants, .. } = &v.kind else { panic!("{v:?}") };
    assert!(variants.iter().any(|v| v.name == "Some"));

    let hits = info.global("HITS").expect("types::HITS by short name");
    assert_eq!(hits.name, "types::HITS");
    assert!(info.global("types::LEVEL").is_some());
}

#[test]
fn agent_table_covers_reachable_types() {
    let (index, info) = load("c_types");
    let sig = sig_of(&index, &info, "walk_list");
    let root = sig.params[0].ty.unwrap();
    let table = info.agent_types(&[root]);
    let obj = table.as_object().unwrap();
    let desc = &obj[&root.to_string()];
    assert_eq!(desc["k"], "ptr");
    let node = &obj[&desc["to"].to_string()];
    assert_eq!(node["k"], "struct");
    assert_eq!(node["f"][1][0], "next");
}

#[test]
fn debug_info_is_send_sync() {
    fn check<T: Send + Sync>() {}
    check::<DebugInfo>();
}

/// Prints load and first-signature times (`cargo test --test types -- --nocapture`); no
/// assertion on speed, which belongs in docs/performance.md.
#[test]
fn reports_load_time() {
    for name in ["c_types", "rust_types"] {
        let index = SymbolIndex::load(&fixture(name)).unwrap();
        let t = std::time::Instant::now();
        let info = DebugInfo::load(&index.binary).unwrap();
        let load = t.elapsed();
        let t = std::time::Instant::now();
        let n = index.functions.iter().filter(|f| info.signature(f.address).is_some()).count();
        println!("{name}: DebugInfo::load {load:?}; {n} signatures of {} functions in {:?}", index.functions.len(), t.elapsed());
        assert!(n > 0);
    }
}
