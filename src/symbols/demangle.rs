//! Turning linkage names into the user-facing qualified names Strobe shows and
//! matches against, and splitting qualified names into `::` segments.
//!
//! - Rust legacy (`_ZN...17h<hash>E`) and v0 (`_R...`): `rustc-demangle` with `{:#}`,
//!   which drops the hash / crate disambiguators.
//! - C++ Itanium (`_Z...`): `cpp_demangle` without return type and parameters, then
//!   defensive clean-up (`[clone .cold]`, trailing `const`, a final `(...)`).
//! - Anything else is returned as-is by the caller (C names are not mangled).

use cpp_demangle::{DemangleOptions, Symbol};

/// Source language of a compile unit, from `DW_AT_language`; a hint for which
/// demangler to try first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lang {
    C,
    Cpp,
    Rust,
    Other,
}

impl Lang {
    pub(crate) fn from_dw(lang: gimli::DwLang) -> Lang {
        match lang {
            gimli::DW_LANG_Rust => Lang::Rust,
            gimli::DW_LANG_C_plus_plus
            | gimli::DW_LANG_C_plus_plus_03
            | gimli::DW_LANG_C_plus_plus_11
            | gimli::DW_LANG_C_plus_plus_14
            | gimli::DW_LANG_ObjC_plus_plus => Lang::Cpp,
            gimli::DW_LANG_C89 | gimli::DW_LANG_C | gimli::DW_LANG_C99 | gimli::DW_LANG_C11 => {
                Lang::C
            }
            _ => Lang::Other,
        }
    }
}

/// Demangle a linkage name into a qualified name without parameters or hash.
/// Returns `None` if the name is not a mangled Rust or C++ symbol.
pub(crate) fn demangle(linkage: &str, lang: Lang) -> Option<String> {
    let rustish = linkage.starts_with("_R") || looks_like_rust_legacy(linkage);
    if lang == Lang::Rust || (lang != Lang::Cpp && rustish) {
        demangle_rust(linkage).or_else(|| demangle_cpp(linkage))
    } else {
        demangle_cpp(linkage).or_else(|| {
            if rustish {
                demangle_rust(linkage)
            } else {
                None
            }
        })
    }
}

/// `_ZN...17h<16 hex>E`, optionally followed by a `.llvm.NNN`-style suffix.
fn looks_like_rust_legacy(s: &str) -> bool {
    if !s.starts_with("_ZN") {
        return false;
    }
    let core = s.split('.').next().unwrap_or(s);
    let b = core.as_bytes();
    b.len() > 23
        && b[b.len() - 1] == b'E'
        && &b[b.len() - 20..b.len() - 17] == b"17h"
        && b[b.len() - 17..b.len() - 1]
            .iter()
            .all(u8::is_ascii_hexdigit)
}

fn demangle_rust(s: &str) -> Option<String> {
    let d = rustc_demangle::try_demangle(s).ok()?;
    Some(format!("{d:#}"))
}

fn demangle_cpp(s: &str) -> Option<String> {
    if !s.starts_with("_Z") {
        return None;
    }
    let sym = Symbol::new(s).ok()?;
    let opts = DemangleOptions::new().no_params().no_return_type();
    let text = sym.demangle(&opts).ok()?;
    Some(strip_cpp_signature(&text))
}

/// Remove what is not part of the qualified name from a demangled C++ name: clone
/// suffixes (`[clone .cold]`), trailing qualifiers (`const`, `&`, `noexcept`, ...)
/// and the final top-level parameter list. `operator()` keeps its own `()`.
pub(crate) fn strip_cpp_signature(text: &str) -> String {
    let mut s = text.trim();
    // " [clone .isra.0] [clone .cold]"
    while s.ends_with(']') {
        match s.rfind(" [clone ") {
            Some(i) => s = s[..i].trim_end(),
            None => break,
        }
    }
    loop {
        let before = s;
        for q in [" const", " volatile", " restrict", " noexcept", " &&", " &"] {
            if let Some(rest) = s.strip_suffix(q) {
                if !rest.ends_with("operator") {
                    s = rest.trim_end();
                }
            }
        }
        if s == before {
            break;
        }
    }
    if s.ends_with(')') && !ends_with_call_operator(s) {
        if let Some(open) = matching_open(s, s.len() - 1) {
            let head = s[..open].trim_end();
            if !head.is_empty() {
                s = head;
            }
        }
    }
    s.to_string()
}

/// `...operator()` (with no parameter list after it).
fn ends_with_call_operator(s: &str) -> bool {
    s.strip_suffix("()")
        .is_some_and(|h| h.trim_end().ends_with("operator"))
}

/// Index of the `(` matching the `)` at `close`, scanning backwards.
fn matching_open(s: &str, close: usize) -> Option<usize> {
    let b = s.as_bytes();
    let mut depth = 0usize;
    for i in (0..=close).rev() {
        match b[i] {
            b')' => depth += 1,
            b'(' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

const OPERATOR_CHARS: &[u8] = b"<>=!+-*/%^&|~,";

/// If `name[i..]` starts an `operator<sym>` token (e.g. `operator<<`, `operator()`),
/// return the index just past it; brackets inside it must not count as nesting.
pub(crate) fn skip_operator(name: &str, i: usize) -> Option<usize> {
    let b = name.as_bytes();
    if !name[i..].starts_with("operator") || (i > 0 && is_ident(b[i - 1])) {
        return None;
    }
    let mut j = i + "operator".len();
    if j < b.len() && is_ident(b[j]) {
        return None; // an identifier such as `operators`
    }
    if name[j..].starts_with("()") || name[j..].starts_with("[]") {
        return Some(j + 2);
    }
    let start = j;
    while j < b.len() && j - start < 3 && OPERATOR_CHARS.contains(&b[j]) {
        j += 1;
    }
    Some(j)
}

/// Split a qualified name at top-level `::` (not inside `<>`, `()`, `[]`, `{}`).
/// A segment starting with `<` that follows another segment (Rust turbofish,
/// `foo::<T>`) stays attached to it, so `a::foo::<T>` is `["a", "foo::<T>"]`.
pub(crate) fn split_path(name: &str) -> Vec<&str> {
    let b = name.as_bytes();
    let mut parts: Vec<(usize, usize)> = Vec::new();
    let (mut depth, mut start, mut i) = (0i32, 0usize, 0usize);
    while i < b.len() {
        if b[i] == b'o' {
            if let Some(j) = skip_operator(name, i) {
                i = j;
                continue;
            }
        }
        match b[i] {
            b'<' | b'(' | b'[' | b'{' => depth += 1,
            b'>' | b')' | b']' | b'}' => depth = (depth - 1).max(0),
            b':' if depth == 0 && b.get(i + 1) == Some(&b':') => {
                if b.get(i + 2) == Some(&b'<') && i > start {
                    // turbofish: keep `::<...>` with the current segment
                    i += 2;
                    continue;
                }
                parts.push((start, i));
                i += 2;
                start = i;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    parts.push((start, b.len()));
    parts.into_iter().map(|(s, e)| &name[s..e]).collect()
}

/// A segment without its trailing generic arguments: `scale<double>` -> `scale`,
/// `foo::<i32>` -> `foo`. Returns `None` if there are none.
pub(crate) fn strip_generics(seg: &str) -> Option<&str> {
    if !seg.ends_with('>') {
        return None;
    }
    let b = seg.as_bytes();
    let mut depth = 0usize;
    for i in (0..b.len()).rev() {
        match b[i] {
            b'>' => depth += 1,
            b'<' => {
                depth -= 1;
                if depth == 0 {
                    let head = seg[..i].trim_end();
                    let head = head.strip_suffix("::").unwrap_or(head);
                    return (!head.is_empty()).then_some(head);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_legacy_hash_is_stripped() {
        let d = demangle(
            "_ZN6sample6engine7physics4step17h452812959db2b9c4E",
            Lang::Rust,
        );
        assert_eq!(d.as_deref(), Some("sample::engine::physics::step"));
        // without a language hint the hash shape identifies Rust
        let d = demangle(
            "_ZN6sample6engine7physics4step17h452812959db2b9c4E",
            Lang::Other,
        );
        assert_eq!(d.as_deref(), Some("sample::engine::physics::step"));
        // LLVM suffix
        let d = demangle(
            "_ZN4core3fmt5write17h0123456789abcdefE.llvm.1234",
            Lang::Rust,
        );
        assert_eq!(d.as_deref(), Some("core::fmt::write"));
    }

    #[test]
    fn rust_v0_hash_is_stripped() {
        // sample::engine::step, crate disambiguator hidden by {:#}
        let d = demangle("_RNvNtCs1234_6sample6engine4step", Lang::Rust).unwrap();
        assert_eq!(d, "sample::engine::step");
        let d = demangle("_RNvNtCs1234_6sample6engine4step", Lang::Other).unwrap();
        assert_eq!(d, "sample::engine::step");
    }

    #[test]
    fn cpp_parameters_and_qualifiers_are_stripped() {
        let cases = [
            ("_ZNK8geometry6Circle4areaEv", "geometry::Circle::area"),
            (
                "_ZN8geometry8distanceERKNS_5PointES2_",
                "geometry::distance",
            ),
            ("_ZN5audio7processEPfi", "audio::process"),
            ("_Z11compute_sumii", "compute_sum"),
            // template function with return type: int geometry::scale<int>(int, int)
            ("_ZN8geometry5scaleIiEET_S1_S1_", "geometry::scale<int>"),
            ("_ZN8geometry6CircleC2Eid", "geometry::Circle::Circle"),
            ("_ZN8geometry5ShapeD0Ev", "geometry::Shape::~Shape"),
        ];
        for (mangled, want) in cases {
            assert_eq!(
                demangle(mangled, Lang::Cpp).as_deref(),
                Some(want),
                "{mangled}"
            );
        }
    }

    #[test]
    fn cpp_operators_keep_their_tokens() {
        // Foo::operator()(int) const
        assert_eq!(
            demangle("_ZNK3FooclEi", Lang::Cpp).as_deref(),
            Some("Foo::operator()")
        );
        // Foo::operator<(Foo const&) const
        assert_eq!(
            demangle("_ZNK3FooltERKS_", Lang::Cpp).as_deref(),
            Some("Foo::operator<")
        );
        // operator<<(std::ostream&, Foo const&)
        let d = demangle("_ZlsRSoRK3Foo", Lang::Cpp).unwrap();
        assert_eq!(d, "operator<<");
    }

    #[test]
    fn strip_signature_text() {
        let cases = [
            ("ns::f(int, char const*)", "ns::f"),
            ("ns::C::get() const", "ns::C::get"),
            ("ns::C::operator()(int) const", "ns::C::operator()"),
            ("ns::C::operator()", "ns::C::operator()"),
            (
                "ns::apply<void (*)(int)>(void (*)(int))",
                "ns::apply<void (*)(int)>",
            ),
            ("ns::f(int) [clone .cold]", "ns::f"),
            ("ns::C::m() &&", "ns::C::m"),
            ("ns::C::m &&", "ns::C::m"),
            ("ns::C::get const", "ns::C::get"),
            ("ns::C::operator&", "ns::C::operator&"),
            ("ns::C::operator&&", "ns::C::operator&&"),
            ("compute_sum", "compute_sum"),
        ];
        for (input, want) in cases {
            assert_eq!(strip_cpp_signature(input), want, "{input}");
        }
    }

    #[test]
    fn c_names_are_not_demangled() {
        assert_eq!(demangle("compute_sum", Lang::C), None);
        assert_eq!(demangle("main", Lang::Cpp), None);
    }

    #[test]
    fn split_respects_nesting_and_operators() {
        assert_eq!(split_path("a::b::c"), ["a", "b", "c"]);
        assert_eq!(split_path("compute_sum"), ["compute_sum"]);
        assert_eq!(
            split_path("ns::scale<std::vector<int>>"),
            ["ns", "scale<std::vector<int>>"]
        );
        assert_eq!(
            split_path("<sample::Foo as core::fmt::Debug>::fmt"),
            ["<sample::Foo as core::fmt::Debug>", "fmt"]
        );
        assert_eq!(split_path("a::foo::<i32>"), ["a", "foo::<i32>"]);
        assert_eq!(split_path("Foo::operator<"), ["Foo", "operator<"]);
        assert_eq!(split_path("Foo::operator<<::x"), ["Foo", "operator<<", "x"]);
        assert_eq!(split_path("Foo::operator()"), ["Foo", "operator()"]);
        assert_eq!(
            split_path("std::rt::lang_start::{{closure}}"),
            ["std", "rt", "lang_start", "{{closure}}"]
        );
        assert_eq!(
            split_path("ns::{lambda(int)#1}::operator()"),
            ["ns", "{lambda(int)#1}", "operator()"]
        );
    }

    #[test]
    fn generics_are_stripped_from_segments() {
        assert_eq!(strip_generics("scale<double>"), Some("scale"));
        assert_eq!(strip_generics("foo::<i32>"), Some("foo"));
        assert_eq!(
            strip_generics("drop_in_place<alloc::vec::Vec<u8>>"),
            Some("drop_in_place")
        );
        assert_eq!(strip_generics("operator>"), None);
        assert_eq!(strip_generics("plain"), None);
        assert_eq!(strip_generics("<A as B>"), None);
    }
}
