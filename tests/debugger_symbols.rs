//! The debugger's DWARF queries on real fixture binaries: line table resolution (file:line →
//! addresses, snapping, errors, path forms) and the locals in scope at a PC with their
//! locations, at -O0 (frame-relative) and -O2 (registers, location lists).

mod common;

use common::{fixture, line_of};
use strobe::error::ErrorCode;
use strobe::symbols::{LineTable, LocalsInfo, SymbolIndex, VarLocation};

const C: &str = "c/debugee.c";

fn function(index: &SymbolIndex, name: &str) -> (u64, u64) {
    let f = index.functions.iter().find(|f| f.name == name).unwrap_or_else(|| panic!("no function {name}"));
    (f.address, f.address + f.size)
}

#[test]
fn file_line_resolves_in_every_path_form() {
    let bin = fixture("c_debugee");
    let lines = LineTable::load(&bin).unwrap();
    let line = line_of(C, "BUMP_BODY");
    let abs = common::fixtures_src_dir().join(C);
    let a = lines.resolve_line("debugee.c", line).unwrap();
    let b = lines.resolve_line("c/debugee.c", line).unwrap();
    let c = lines.resolve_line(abs.to_str().unwrap(), line).unwrap();
    assert_eq!(a, b);
    assert_eq!(a, c);
    assert_eq!(a.line, line);
    assert!(a.file.ends_with("tests/fixtures/c/debugee.c"), "{}", a.file);
    let index = SymbolIndex::load(&bin).unwrap();
    let (lo, hi) = function(&index, "bump");
    assert!(a.addresses.iter().all(|&x| x > lo && x < hi), "{:x?} not inside bump {lo:x}..{hi:x}", a.addresses);
    // address -> line goes back to the same line.
    assert_eq!(lines.address_to_line(a.addresses[0]).map(|(_, l)| l), Some(line));
}

#[test]
fn lines_without_code_snap_or_fail_with_nearest_lines() {
    let lines = LineTable::load(&fixture("c_debugee")).unwrap();
    // The comment line above a function has no code; the function's first line is close below.
    let decl = line_of(C, "int bump(int by)");
    let snapped = lines.resolve_line("debugee.c", decl - 1).unwrap();
    assert!(snapped.line >= decl && snapped.line <= decl + 1, "snapped to {}", snapped.line);
    let e = lines.resolve_line("debugee.c", 3).unwrap_err();
    assert_eq!(e.code, ErrorCode::NoCodeAtLine);
    assert!(e.message.contains("Valid lines:"), "{}", e.message);
    let e = lines.resolve_line("no_such_file.c", 10).unwrap_err();
    assert_eq!(e.code, ErrorCode::ValidationError);
}

#[test]
fn step_targets_cover_the_other_lines_of_a_function() {
    let bin = fixture("c_debugee");
    let lines = LineTable::load(&bin).unwrap();
    let index = SymbolIndex::load(&bin).unwrap();
    let (lo, hi) = function(&index, "compute");
    let call = line_of(C, "COMPUTE_CALL");
    let targets = lines.statement_starts(lo, hi, Some(call));
    let target_lines: Vec<u32> = targets.iter().filter_map(|&a| lines.address_to_line(a).map(|(_, l)| l)).collect();
    assert!(target_lines.contains(&line_of(C, "COMPUTE_AFTER")), "{target_lines:?}");
    assert!(!target_lines.contains(&call), "{target_lines:?}");
    let ranges = lines.line_ranges(lo, hi, call);
    assert!(!ranges.is_empty() && ranges.iter().all(|&(a, b)| a < b && a >= lo && b <= hi), "{ranges:x?}");
}

#[test]
fn locals_at_o0_are_frame_relative_and_parameters_at_entry_are_registers() {
    let bin = fixture("c_debugee");
    let lines = LineTable::load(&bin).unwrap();
    let info = LocalsInfo::cached(&bin).unwrap();
    let pc = lines.resolve_line("debugee.c", line_of(C, "COMPUTE_AFTER")).unwrap().addresses[0];
    let frame = info.locals_at(pc).unwrap().expect("compute has DWARF");
    let names: Vec<&str> = frame.vars.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["x", "base", "sq", "total"]);
    for v in &frame.vars {
        assert_eq!(v.type_name, "int");
        assert_eq!((v.size, v.encoding), (4, "signed"));
        // CFA = rbp + 16 after the prologue, so fbreg locals sit below rbp.
        match &v.location {
            VarLocation::Memory { base, offset } => assert!(base == "rbp" && *offset < 0, "{v:?}"),
            other => panic!("{} at -O0 should be in memory, is {other:?}", v.name),
        }
    }
    let index = SymbolIndex::load(&bin).unwrap();
    let entry = info.locals_at(function(&index, "compute").0).unwrap().unwrap();
    assert!(entry.at_entry);
    assert_eq!(entry.vars[0].location, VarLocation::Register { reg: "rdi".into() });
}

#[test]
fn locals_at_o2_come_from_location_lists() {
    let bin = fixture("c_debugee_O2");
    let lines = LineTable::load(&bin).unwrap();
    let info = LocalsInfo::cached(&bin).unwrap();
    let pc = lines.resolve_line("debugee.c", line_of(C, "COMPUTE_AFTER")).unwrap().addresses[0];
    let frame = info.locals_at(pc).unwrap().expect("compute has DWARF");
    let base = frame.vars.iter().find(|v| v.name == "base").expect("base in scope");
    // base survives the call to square in a callee-saved register.
    assert!(matches!(&base.location, VarLocation::Register { .. }), "{base:?}");
    assert!(info.locals_at(0x10).unwrap().is_none());
}
