//! The DWARF function index against the compiled fixture programs.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use common::{fixture, fixtures_src_dir, line_of};
use strobe::error::ErrorCode;
use strobe::symbols::{FunctionInfo, Pattern, SymbolCache, SymbolIndex};

fn load(name: &str) -> SymbolIndex {
    let path = fixture(name);
    SymbolIndex::load(&path).unwrap_or_else(|e| panic!("load {}: {e:?}", path.display()))
}

fn find<'a>(index: &'a SymbolIndex, name: &str) -> &'a FunctionInfo {
    index
        .functions
        .iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| {
            panic!(
                "{name} not in index of {} ({} functions); closest: {:?}",
                index.binary.display(),
                index.functions.len(),
                index.closest_names(name, 8)
            )
        })
}

/// `name` exists, declared in `tests/fixtures/<src>` on the line containing `decl`.
fn assert_declared(index: &SymbolIndex, name: &str, src: &str, decl: &str) {
    let f = find(index, name);
    let file = f
        .file
        .as_deref()
        .unwrap_or_else(|| panic!("{name} has no file"));
    assert!(
        file.ends_with(src),
        "{name}: file {file} should end with {src}"
    );
    assert!(
        Path::new(file).is_absolute(),
        "{name}: file {file} should be absolute"
    );
    assert!(
        !file.contains("/./") && !file.contains("/../"),
        "{name}: {file} not normalized"
    );
    assert_eq!(f.line, Some(line_of(src, decl)), "{name}: declaration line");
    assert!(f.address != 0, "{name}: address");
    assert!(f.size > 0, "{name}: size");
}

fn names<'a>(index: &'a SymbolIndex, pattern: &str, root: &Path) -> Vec<&'a str> {
    let p = Pattern::parse(pattern).unwrap();
    index
        .matching(&p, root)
        .into_iter()
        .map(|f| f.name.as_str())
        .collect()
}

fn assert_unique_addresses(found: &[&FunctionInfo]) {
    let mut addrs: Vec<u64> = found.iter().map(|f| f.address).collect();
    addrs.sort_unstable();
    addrs.dedup();
    assert_eq!(
        addrs.len(),
        found.len(),
        "matching() must return one function per address"
    );
}

fn check_c_index(index: &SymbolIndex) {
    assert_declared(index, "main", "c/sample.c", "int main(int argc");
    assert_declared(
        index,
        "process_point",
        "c/sample.c",
        "int process_point(struct Point *p)",
    );
    assert_declared(
        index,
        "validate_input",
        "c/sample.c",
        "int validate_input(const char *label)",
    );
    assert_declared(
        index,
        "scale_value",
        "c/sample.c",
        "static int scale_value(",
    );
    assert_declared(
        index,
        "compute_sum",
        "c/math_utils.c",
        "int compute_sum(int a, int b)",
    );
    assert_declared(index, "clamp_value", "c/math_utils.c", "int clamp_value(");
    assert_declared(
        index,
        "point_magnitude_sq",
        "c/math_utils.c",
        "long point_magnitude_sq(",
    );
    assert_eq!(find(index, "compute_sum").raw_name, "compute_sum");

    let src = fixtures_src_dir();
    let mut by_file = names(index, "@file:math_utils.c", &src);
    by_file.sort_unstable();
    assert_eq!(
        by_file,
        ["clamp_value", "compute_sum", "point_magnitude_sq"]
    );
    let user = names(index, "@usercode", &src);
    for f in [
        "main",
        "process_point",
        "compute_sum",
        "scale_value",
        "validate_input",
    ] {
        assert!(user.contains(&f), "@usercode should match {f}: {user:?}");
    }
    assert!(names(index, "@usercode", Path::new("/nonexistent/project")).is_empty());
    assert_eq!(names(index, "compute_*", &src), ["compute_sum"]);
}

#[test]
fn c_fixture_functions_files_and_lines() {
    let index = load("c_sample");
    assert_eq!(index.image_base, 0, "PIE fixture");
    check_c_index(&index);
}

#[test]
fn cpp_fixture_names_are_demangled_and_qualified() {
    let index = load("cpp_sample");
    assert_eq!(index.image_base, 0, "PIE fixture");
    let src = "cpp/sample.cpp";
    assert_declared(
        &index,
        "geometry::Circle::area",
        src,
        "double Circle::area() const",
    );
    assert_declared(
        &index,
        "geometry::distance",
        src,
        "double distance(const Point &a, const Point &b)",
    );
    assert_declared(
        &index,
        "audio::process",
        src,
        "void process(float *buf, int n)",
    );
    assert_declared(
        &index,
        "geometry::scale<double>",
        src,
        "T scale(T value, T factor)",
    );
    assert_declared(
        &index,
        "geometry::scale<int>",
        src,
        "T scale(T value, T factor)",
    );
    assert_declared(&index, "geometry::Shape::id", src, "int id() const");
    assert_declared(&index, "main", src, "int main(int argc");
    find(&index, "geometry::Circle::Circle");
    // extern "C" in a namespace: no linkage name, definition refers to the
    // declaration via DW_AT_specification; qualified from the namespace scope.
    assert_declared(
        &index,
        "audio::audio_gain",
        src,
        "extern \"C\" int audio_gain(int level)",
    );
    assert_eq!(find(&index, "audio::audio_gain").raw_name, "audio_gain");
    assert!(find(&index, "geometry::Circle::area")
        .raw_name
        .starts_with("_ZNK8geometry6Circle4area"));

    for f in &index.functions {
        assert!(
            !f.name.ends_with(')') || f.name.ends_with("operator()"),
            "parameter list left in {}",
            f.name
        );
    }

    let root = fixtures_src_dir();
    let one_level = names(&index, "geometry::*", &root);
    assert!(one_level.contains(&"geometry::distance"), "{one_level:?}");
    assert!(one_level.contains(&"geometry::scale<int>"), "{one_level:?}");
    assert!(
        !one_level.contains(&"geometry::Circle::area"),
        "'*' must not cross '::': {one_level:?}"
    );
    assert!(names(&index, "geometry::**", &root).contains(&"geometry::Circle::area"));
    assert_eq!(
        names(&index, "geometry::Circle::area", &root),
        ["geometry::Circle::area"]
    );
    assert!(names(&index, "**::area", &root).contains(&"geometry::Circle::area"));
    let scale = names(&index, "geometry::scale", &root);
    assert_eq!(scale.len(), 2, "both instantiations: {scale:?}");
    let mut audio = names(&index, "audio::*", &root);
    audio.sort_unstable();
    assert_eq!(audio, ["audio::audio_gain", "audio::process"]);

    let user = names(&index, "@usercode", &root);
    assert!(
        user.contains(&"geometry::Circle::area") && user.contains(&"audio::process"),
        "{user:?}"
    );
    assert!(
        user.iter().all(|n| !n.starts_with("std::")),
        "libstdc++ is not user code: {user:?}"
    );
}

#[test]
fn rust_fixture_modules_usercode_and_load_time() {
    let path = fixture("rust_sample");
    let start = Instant::now();
    let index = SymbolIndex::load(&path).unwrap();
    let elapsed = start.elapsed();
    println!(
        "SymbolIndex::load(rust_sample): {} functions in {:.1} ms",
        index.functions.len(),
        elapsed.as_secs_f64() * 1000.0
    );
    assert!(elapsed.as_secs() < 10, "loading took {elapsed:?}");
    assert_eq!(index.image_base, 0, "PIE fixture");

    let src = "rust/sample.rs";
    assert_declared(
        &index,
        "sample::engine::physics::step",
        src,
        "pub fn step(body: Body",
    );
    assert_declared(&index, "sample::engine::tick", src, "pub fn tick(");
    assert_declared(
        &index,
        "sample::parser::parse_line",
        src,
        "pub fn parse_line(line: &str)",
    );
    assert_declared(&index, "sample::main", src, "fn main()");
    // #[no_mangle]: no linkage name, qualified from the enclosing DWARF namespaces.
    assert_declared(
        &index,
        "sample::ffi::sample_checksum",
        src,
        "pub extern \"C\" fn sample_checksum(",
    );
    assert_eq!(
        find(&index, "sample::ffi::sample_checksum").raw_name,
        "sample_checksum"
    );
    assert!(find(&index, "sample::engine::physics::step")
        .raw_name
        .starts_with("_ZN6sample6engine7physics4step17h"));

    let hash = |n: &str| {
        n.rsplit("::")
            .next()
            .is_some_and(|l| l.len() == 17 && l.starts_with('h'))
    };
    assert!(
        index.functions.iter().all(|f| !hash(&f.name)),
        "hash suffix left in a name"
    );

    let root = fixtures_src_dir();
    let steps = names(&index, "**::step", &root);
    assert!(
        steps.contains(&"sample::engine::physics::step"),
        "{steps:?}"
    );
    assert!(
        steps.iter().all(|n| *n == "step" || n.ends_with("::step")),
        "{steps:?}"
    );
    assert_eq!(
        names(&index, "sample::engine::*", &root),
        ["sample::engine::tick"]
    );

    let std_count = index
        .functions
        .iter()
        .filter(|f| f.name.starts_with("core::") || f.name.starts_with("std::"))
        .count();
    assert!(
        std_count > 100,
        "std functions should be indexed too ({std_count})"
    );
    let user = Pattern::parse("@usercode").unwrap();
    let matched = index.matching(&user, &root);
    assert_unique_addresses(&matched);
    let matched_names: Vec<&str> = matched.iter().map(|f| f.name.as_str()).collect();
    for f in [
        "sample::engine::physics::step",
        "sample::parser::parse_line",
        "sample::main",
    ] {
        assert!(matched_names.contains(&f), "@usercode should match {f}");
    }
    for f in &matched {
        assert!(
            !(f.name.starts_with("core::")
                || f.name.starts_with("std::")
                || f.name.starts_with("alloc::")),
            "@usercode matched std function {} ({:?})",
            f.name,
            f.file
        );
        assert!(
            f.file
                .as_deref()
                .unwrap()
                .starts_with(root.to_str().unwrap()),
            "{:?}",
            f.file
        );
    }

    assert_eq!(
        index.closest_names("engine::physics::stpe", 3)[0],
        "sample::engine::physics::step"
    );
    assert_eq!(
        index.closest_names("parse_line", 1),
        ["sample::parser::parse_line"]
    );
    let step = find(&index, "sample::engine::physics::step");
    assert_eq!(
        index.function_at(step.address + 1).map(|f| f.name.as_str()),
        Some(step.name.as_str())
    );
}

#[test]
fn binary_without_debug_info_is_no_debug_symbols() {
    let path = fixture("c_sample_nodebug");
    let err = SymbolIndex::load(&path).unwrap_err();
    assert_eq!(err.code, ErrorCode::NoDebugSymbols);
    assert!(
        err.message.starts_with("Binary has no DWARF debug info."),
        "{}",
        err.message
    );
    assert!(err.message.contains("`-g`"), "{}", err.message);
    assert!(
        err.message.contains(path.to_str().unwrap()),
        "message should name the binary: {}",
        err.message
    );
}

#[test]
fn unreadable_inputs_are_validation_errors() {
    let missing = SymbolIndex::load(Path::new("/nonexistent/dir/app")).unwrap_err();
    assert_eq!(missing.code, ErrorCode::ValidationError);
    assert!(
        missing.message.contains("/nonexistent/dir/app"),
        "{}",
        missing.message
    );
    let not_elf = fixtures_src_dir().join("c/sample.c");
    assert_eq!(
        SymbolIndex::load(&not_elf).unwrap_err().code,
        ErrorCode::ValidationError
    );
    assert_eq!(
        SymbolIndex::load(&fixtures_src_dir()).unwrap_err().code,
        ErrorCode::ValidationError
    );
}

/// Run `program args... -o out` in `cwd`; `None` if the compiler rejects the arguments.
fn compile(program: &str, cwd: &Path, args: &[&str], out: &Path) -> Option<PathBuf> {
    let status = Command::new(program)
        .current_dir(cwd)
        .args(args)
        .arg("-o")
        .arg(out)
        .status()
        .ok()?;
    status.success().then(|| out.to_path_buf())
}

#[test]
fn other_dwarf_versions_and_relative_paths() {
    fixture("c_sample"); // compilers are known to work
    let dir = tempfile::tempdir().unwrap();
    let src = fixtures_src_dir();

    // GCC's default is DWARF 5 (line_strp, file index 0 = primary file); check DWARF 4
    // too, with relative source paths (comp_dir + "../c/x.c" must be joined and normalized).
    let out = dir.path().join("c_dwarf4");
    let args = [
        "-gdwarf-4",
        "-O0",
        "-fPIE",
        "-pie",
        "./sample.c",
        "../c/math_utils.c",
    ];
    let bin = compile("cc", &src.join("c"), &args, &out).expect("cc -gdwarf-4");
    check_c_index(&SymbolIndex::load(&bin).unwrap());

    // rustc's default is DWARF 4; DWARF 5 uses addrx/strx forms (.debug_addr, .debug_str_offsets).
    let rs = Path::new("rust/sample.rs");
    let out = dir.path().join("rust_dwarf5");
    let args = [
        "-g",
        "-C",
        "opt-level=0",
        "-C",
        "relocation-model=pie",
        "-C",
        "dwarf-version=5",
        rs.to_str().unwrap(),
    ];
    match compile("rustc", &src, &args, &out) {
        Some(bin) => {
            let index = SymbolIndex::load(&bin).unwrap();
            assert_declared(
                &index,
                "sample::engine::physics::step",
                "rust/sample.rs",
                "pub fn step(body: Body",
            );
            assert_declared(
                &index,
                "sample::parser::parse_line",
                "rust/sample.rs",
                "pub fn parse_line(",
            );
        }
        None => println!("rustc does not support -C dwarf-version=5; skipped"),
    }
}

#[test]
fn cache_reuses_and_invalidates() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("app");
    std::fs::copy(fixture("c_sample"), &bin).unwrap();
    let cache = SymbolCache::new();
    let first = cache.get(&bin).unwrap();
    let again = cache.get(&dir.path().join(".").join("app")).unwrap();
    assert!(
        Arc::ptr_eq(&first, &again),
        "same canonical path, unchanged file => cached"
    );
    assert!(first.functions.iter().any(|f| f.name == "compute_sum"));

    // Rebuild: different content and size.
    std::fs::copy(fixture("cpp_sample"), &bin).unwrap();
    let rebuilt = cache.get(&bin).unwrap();
    assert!(!Arc::ptr_eq(&first, &rebuilt), "changed file => reloaded");
    assert!(rebuilt
        .functions
        .iter()
        .any(|f| f.name == "geometry::Circle::area"));

    std::fs::remove_file(&bin).unwrap();
    assert_eq!(
        cache.get(&bin).unwrap_err().code,
        ErrorCode::ValidationError
    );
}

/// Inlined calls at a PC (symbols/inlines.rs), in a real Rust binary: `Canvas::plot`
/// (tests/fixtures/rust/sample.rs) writes through `<*mut T>::write_volatile`, which rustc
/// inlines with `core::ptr::write_volatile` inside it, even unoptimized. Some PC of `plot`
/// is in both, outermost first, each called from the line of the frame around it; PCs
/// outside any inlined code have none.
#[test]
fn inlined_calls_name_the_functions_and_their_call_lines() {
    let index = load("rust_sample");
    let plot = find(&index, "sample::canvas::Canvas::plot");
    let info = strobe::symbols::LocalsInfo::cached(&fixture("rust_sample")).expect("binary");
    let chains: Vec<_> = (plot.address..plot.address + plot.size).map(|pc| info.inlined_calls(pc).expect("DWARF")).collect();
    assert!(chains.iter().any(Vec::is_empty), "plot's own code (prologue) is in no inlined call");
    let deepest = chains.iter().max_by_key(|c| c.len()).expect("plot has code");
    let names: Vec<&str> = deepest.iter().map(|c| c.function.as_str()).collect();
    assert_eq!(names.last(), Some(&"core::ptr::write_volatile"), "{deepest:?}");
    let hashed = |n: &str| n.rsplit("::").next().is_some_and(|l| l.len() == 17 && l.starts_with('h') && l[1..].chars().all(|c| c.is_ascii_hexdigit()));
    assert!(names.iter().all(|n| !n.starts_with("_Z") && !hashed(n)), "demangled, no hash: {names:?}");
    let outer = &deepest[0];
    assert!(outer.call_file.as_deref().is_some_and(|f| f.ends_with("tests/fixtures/rust/sample.rs")), "{outer:?}");
    assert_eq!(outer.call_line, Some(line_of("rust/sample.rs", "RUST_PLOT")), "{outer:?}");
    let inner = deepest.last().unwrap();
    assert!(inner.call_file.as_deref().is_some_and(|f| f.ends_with("ptr/mut_ptr.rs")), "{inner:?}");
}
