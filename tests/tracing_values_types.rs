//! What the agent is told about traced functions' values (type table and signatures), on
//! the `cpp_values` and `rust_traced` fixtures: libstdc++ strings and optionals read as
//! their values, C++ methods' result types, Rust closures' environment pointer.

mod common;

use common::fixture;
use strobe::symbols::{DebugInfo, SymbolIndex};

fn sig(prog: &str, name: &str) -> (SymbolIndex, std::sync::Arc<DebugInfo>, strobe::symbols::Signature) {
    let index = SymbolIndex::load(&fixture(prog)).expect("load index");
    let info = DebugInfo::of(&index).expect("load debug info");
    let f = index.functions.iter().find(|f| f.name == name).unwrap_or_else(|| panic!("{name} not found"));
    let s = info.signature(f.address).unwrap_or_else(|| panic!("{name} has no signature"));
    (index, info, s)
}

#[test]
fn std_string_and_optional_are_read_as_values() {
    for prog in ["cpp_values", "cpp_values_O2"] {
        let (_, info, s) = sig(prog, "lookup");
        let table = info.agent_types(&[s.params[0].ty.unwrap(), s.ret.unwrap()]);
        let kinds: Vec<String> = table.as_object().unwrap().values().map(|d| format!("{} {}", d["k"], d["n"])).collect();
        assert!(kinds.iter().any(|k| k.starts_with("\"rstr\"") && k.contains("basic_string")), "{prog}: {kinds:?}");
        assert!(kinds.iter().any(|k| k.starts_with("\"opt\"") && k.contains("optional")), "{prog}: {kinds:?}");
    }
}

#[test]
fn methods_have_their_declared_result_type() {
    for prog in ["cpp_values", "cpp_values_O2"] {
        let (_, info, s) = sig(prog, "Counter::ratio");
        assert_eq!(info.ty(s.ret.expect("ratio returns float")).name, "float", "{prog}");
        let (_, info, s) = sig(prog, "Counter::positive");
        assert_eq!(info.ty(s.ret.expect("positive returns bool")).name, "bool", "{prog}");
    }
}

#[test]
fn a_closure_called_through_a_reference_has_a_hidden_environment_pointer() {
    let index = SymbolIndex::load(&fixture("rust_traced")).expect("load index");
    let info = DebugInfo::of(&index).expect("load debug info");
    let closures: Vec<_> = index
        .functions
        .iter()
        .filter(|f| f.name == "traced::main::{{closure}}")
        .filter_map(|f| info.signature(f.address))
        .collect();
    // {closure#1} (`move |x| x + base`, called as Fn): DWARF lists only `x`.
    assert!(closures.iter().any(|s| s.closure_env && s.params.len() == 1 && s.params[0].name == "x"), "{closures:?}");
    // Closures whose environment DWARF lists by value have none.
    assert!(closures.iter().any(|s| !s.closure_env && s.params.first().is_some_and(|p| p.name.is_empty())), "{closures:?}");
}

/// Threads asking for the debug info of a binary not yet cached (a launch's symbol load and
/// the first trace request) all get one instance. Type ids are assigned per instance as
/// types are first resolved, so a serialize recipe made with one instance and a type table
/// made with another named ids the table lacked (the agent printed `<? @…>`).
#[test]
fn concurrent_loads_of_one_binary_share_one_instance() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("cpp_values_copy");
    std::fs::copy(fixture("cpp_values"), &copy).unwrap();
    let start = std::sync::Arc::new(std::sync::Barrier::new(8));
    let loads: Vec<_> = (0..8)
        .map(|_| {
            let (start, copy) = (start.clone(), copy.clone());
            std::thread::spawn(move || {
                start.wait();
                DebugInfo::of_path(&copy).expect("load debug info")
            })
        })
        .collect();
    let infos: Vec<std::sync::Arc<DebugInfo>> = loads.into_iter().map(|t| t.join().unwrap()).collect();
    assert!(infos.iter().all(|i| std::sync::Arc::ptr_eq(i, &infos[0])), "{} loads, not one instance", infos.len());
    assert!(std::sync::Arc::ptr_eq(&infos[0], &DebugInfo::of_path(&copy).unwrap()), "the cached one");
    // Parsed once, not once per caller that missed the cache.
    assert_eq!(DebugInfo::parses_of(&copy), 1, "parses of one binary loaded by 8 callers at once");
}
