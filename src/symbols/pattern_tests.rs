//! Unit tests of `Pattern` (the spec's "Pattern Syntax" table and invalid forms).

use super::*;
use crate::error::ErrorCode;

fn func(name: &str, file: Option<&str>) -> FunctionInfo {
    FunctionInfo {
        name: name.to_string(),
        raw_name: name.to_string(),
        address: 0x1000,
        size: 16,
        file: file.map(str::to_string),
        line: Some(1),
    }
}

fn m(pattern: &str, name: &str) -> bool {
    Pattern::parse(pattern)
        .unwrap_or_else(|e| panic!("{pattern} should parse: {e:?}"))
        .matches(&func(name, Some("/p/src/a.rs")), Path::new("/p"))
}

fn check(pattern: &str, yes: &[&str], no: &[&str]) {
    for n in yes {
        assert!(m(pattern, n), "'{pattern}' should match '{n}'");
    }
    for n in no {
        assert!(!m(pattern, n), "'{pattern}' should NOT match '{n}'");
    }
}

#[test]
fn spec_table() {
    check(
        "foo::bar",
        &["foo::bar"],
        &["foo::baz", "foo::bar::qux", "x::foo::bar", "foo"],
    );
    check(
        "foo::*",
        &["foo::bar", "foo::baz"],
        &["foo::bar::qux", "foo", "other::bar"],
    );
    check(
        "foo::**",
        &["foo::bar", "foo::bar::baz"],
        &["other::bar", "foo", "foobar::x"],
    );
    check(
        "*::validate",
        &["auth::validate", "form::validate"],
        &["auth::deep::validate", "validate"],
    );
    check(
        "auth::**::validate",
        &[
            "auth::validate",
            "auth::user::validate",
            "auth::a::b::validate",
        ],
        &["form::validate", "auth::validator", "x::auth::validate"],
    );
}

#[test]
fn globs_in_more_shapes() {
    check(
        "**::step",
        &["sample::engine::physics::step", "step"],
        &["sample::stepper", "step::x"],
    );
    check("**", &["a", "a::b::c"], &[]);
    check("*", &["compute_sum", "main"], &["a::b"]);
    check(
        "compute_*",
        &["compute_sum"],
        &["do_compute_sum", "m::compute_sum"],
    );
    check("*_sum", &["compute_sum"], &["compute_sums"]);
    check(
        "geometry::*",
        &["geometry::distance", "geometry::scale<int>"],
        &["geometry::Circle::area"],
    );
    check(
        "geometry::**",
        &["geometry::Circle::area", "geometry::distance"],
        &["audio::process"],
    );
    check(
        "geometry::*::area",
        &["geometry::Circle::area"],
        &["geometry::area"],
    );
    check(
        "a::*b*c",
        &["a::bxc", "a::abc", "a::xxbyyczz".trim_end_matches("zz")],
        &["a::cb", "a::b"],
    );
    check(
        "a::**::b::**",
        &["a::b::c", "a::x::b::c::d"],
        &["a::b", "a::x::b"],
    );
}

#[test]
fn templates_and_generics() {
    // template arguments belong to their segment, `*` stays inside one segment
    check(
        "geometry::scale",
        &["geometry::scale<double>", "geometry::scale"],
        &["geometry::scaled"],
    );
    check(
        "geometry::scale<int>",
        &["geometry::scale<int>"],
        &["geometry::scale<double>", "geometry::scale"],
    );
    check("ns::*", &["ns::f<std::vector<int>>"], &["ns::C::f"]);
    check("**::fmt", &["<sample::Foo as core::fmt::Debug>::fmt"], &[]);
    check("sample::foo", &["sample::foo::<i32>"], &[]);
    // Rust methods in v0 names: the self type in brackets reads as its path.
    check(
        "slab::Slab::insert_at",
        &["<slab::Slab<i32>>::insert_at", "<slab::Slab<&str>>::insert_at", "slab::Slab<T>::insert_at"],
        &["<slab::Slab<i32>>::insert", "<slab::Entry<i32>>::insert_at"],
    );
    check("slab::**::insert_at", &["<slab::Slab<i32>>::insert_at"], &["<other::Slab<i32>>::insert_at"]);
    check("slab::Slab<i32>::*", &["<slab::Slab<i32>>::insert_at"], &["<slab::Slab<u8>>::insert_at"]);
    check(
        "slab::Slab::index",
        &["<slab::Slab<T> as core::ops::index::Index<usize>>::index"],
        &["<&slab::Slab<T> as core::ops::index::Index<usize>>::index"],
    );
    check("**::fmt", &["<sample::Foo as core::fmt::Debug>::fmt", "<&u8 as core::fmt::Debug>::fmt"], &[]);
    check("Foo::operator()", &["Foo::operator()"], &["Foo::operator<"]);
    check("Foo::operator<", &["Foo::operator<"], &["Foo::operator<<"]);
    check(
        "std::rt::lang_start::{{closure}}",
        &["std::rt::lang_start::{{closure}}"],
        &[],
    );
}

#[test]
fn usercode_directive() {
    let p = Pattern::parse("@usercode").unwrap();
    let root = Path::new("/home/u/proj");
    assert!(p.matches(&func("main", Some("/home/u/proj/src/main.rs")), root));
    assert!(p.matches(
        &func("a::b", Some("/home/u/proj/sub/dir/x.c")),
        Path::new("/home/u/proj/")
    ));
    assert!(
        !p.matches(&func("main", Some("/home/u/project2/src/main.rs")), root),
        "prefix must be path-wise"
    );
    assert!(!p.matches(
        &func(
            "core::fmt::write",
            Some("/rustc/abc/library/core/src/fmt/mod.rs")
        ),
        root
    ));
    assert!(!p.matches(
        &func("serde::x", Some("/home/u/.cargo/registry/src/serde/lib.rs")),
        Path::new("/home/u")
    ));
    assert!(!p.matches(
        &func("printf", Some("/usr/include/stdio.h")),
        Path::new("/")
    ));
    assert!(p.matches(&func("main", Some("/home/u/proj/main.c")), Path::new("/")));
    assert!(!p.matches(&func("f", None), root), "no file, not user code");
    // relative roots are resolved against the current directory
    let cwd = std::env::current_dir().unwrap();
    let inside = cwd.join("src/x.rs");
    assert!(p.matches(&func("f", Some(inside.to_str().unwrap())), Path::new(".")));
    assert!(p.matches(
        &func("f", Some(inside.to_str().unwrap())),
        Path::new("./src/../src")
    ));
}

#[test]
fn file_directive() {
    let p = Pattern::parse("@file:foo.cpp").unwrap();
    let root = Path::new("/p");
    assert!(p.matches(&func("a", Some("/p/src/foo.cpp")), root));
    assert!(!p.matches(&func("a", Some("/p/src/bar.cpp")), root));
    assert!(!p.matches(&func("a", None), root));
    let dir = Pattern::parse("@file:src/net/").unwrap();
    assert!(dir.matches(&func("a", Some("/p/src/net/tcp.rs")), root));
    assert!(!dir.matches(&func("a", Some("/p/src/netx/tcp.rs")), root));
    assert_eq!(dir.as_str(), "@file:src/net/");
}

#[test]
fn invalid_patterns_are_rejected() {
    let bad = [
        "",
        "   ",
        "\t",
        "foo:::bar",
        ":::foo",
        "foo::",
        "::foo",
        "a::::b",
        "***",
        "foo::***",
        "@unknown",
        "@user",
        "@file:",
        "@file:  ",
        "foo bar",
        " foo",
        "foo ",
        "foo;bar",
        "foo\"",
        "a:b",
        "foo::**bar",
        "**foo",
        "foo?",
        "foo\\bar",
        "foo<int",
        "foo>",
        "a\nb",
        "foo@bar",
    ];
    for text in bad {
        let err = Pattern::parse(text).expect_err(&format!("{text:?} should be invalid"));
        assert_eq!(err.code, ErrorCode::InvalidPattern, "{text:?}");
        let prefix = format!("Invalid trace pattern '{text}': ");
        assert!(
            err.message.starts_with(&prefix),
            "{text:?}: message was {:?}",
            err.message
        );
        assert!(
            err.message.trim_end().ends_with('.'),
            "{text:?}: message should end with advice: {}",
            err.message
        );
    }
}

#[test]
fn valid_unusual_patterns_parse() {
    for text in [
        "ns::vec<std::pair<int, char>>",
        "Foo::operator new",
        "Foo::~Foo",
        "<T as core::fmt::Debug>::fmt",
        "main::{closure#0}",
        "**::*",
        "ns::**::**::f",
        "@file:my dir/a.c",
    ] {
        let p = Pattern::parse(text).unwrap_or_else(|e| panic!("{text:?}: {e:?}"));
        assert_eq!(p.as_str(), text);
    }
}

#[test]
fn message_names_the_problem() {
    let msg = |t: &str| Pattern::parse(t).unwrap_err().message;
    assert!(msg("foo:::bar").contains("':::'"));
    assert!(msg("@nope").contains("@usercode"));
    assert!(msg("@file:").contains("@file:"));
    assert!(msg("foo bar").contains("space"));
}

#[test]
fn normalize_is_lexical() {
    assert_eq!(
        normalize_path(Path::new("/a/./b/../c")),
        PathBuf::from("/a/c")
    );
    assert_eq!(normalize_path(Path::new("/../a")), PathBuf::from("/a"));
    assert_eq!(
        normalize_path(Path::new("a/../../b")),
        PathBuf::from("../b")
    );
}
