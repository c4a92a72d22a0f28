//! Trace patterns (spec "Pattern Syntax"): glob over qualified, demangled names,
//! plus the `@usercode` and `@file:<part>` directives.
//!
//! Matching works on `::` segments of the name (split outside `<>`/`()`/`{}`, so
//! template arguments and `<T as Trait>` count as part of one segment):
//! - `*` inside a segment matches any characters of that one segment;
//! - a `**` segment matches zero or more whole segments (`a::**::b` matches `a::b`),
//!   except that a trailing `a::**` needs at least one segment after `a`;
//! - a literal segment without `<` also matches a name segment whose generic
//!   arguments it omits (`geometry::scale` matches `geometry::scale<int>`);
//! - a Rust method named with its self type in brackets (v0 mangling: `<slab::Slab<i32>>::insert`,
//!   `<slab::Slab<T> as core::ops::Index<usize>>::index`) also matches as the self type's path
//!   followed by the method (`slab::Slab::insert`, `slab::**::index`).

use std::path::{Component, Path, PathBuf};

use super::demangle::{skip_operator, split_path, strip_generics};
use super::FunctionInfo;
use crate::error::{ErrorCode, Result, StrobeError};

#[derive(Debug, Clone, PartialEq)]
pub struct Pattern {
    text: String,
    kind: Kind,
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    UserCode,
    File(String),
    Glob(Vec<Seg>),
}

#[derive(Debug, Clone, PartialEq)]
enum Seg {
    /// `**`: zero or more segments.
    Deep,
    /// Literal text split at `*`: `["ab", "cd"]` is `ab*cd`.
    Glob { parts: Vec<String>, generic: bool },
}

const SYNTAX_HELP: &str =
    "Patterns are glob-style on qualified names: 'ns::func', 'ns::*' (one level), \
'ns::**' (any depth), '**::func', '@usercode', '@file:name.c'";

fn invalid(text: &str, reason: &str, todo: &str) -> StrobeError {
    StrobeError::new(
        ErrorCode::InvalidPattern,
        format!("Invalid trace pattern '{text}': {reason}. {todo}"),
    )
}

impl Pattern {
    pub fn parse(text: &str) -> Result<Pattern> {
        if text.trim().is_empty() {
            return Err(invalid(
                text,
                "pattern is empty",
                &format!("{SYNTAX_HELP}."),
            ));
        }
        if text.trim() != text {
            return Err(invalid(
                text,
                "leading or trailing whitespace",
                &format!("Remove the spaces: '{}'.", text.trim()),
            ));
        }
        let kind = if let Some(directive) = text.strip_prefix('@') {
            parse_directive(text, directive)?
        } else {
            Kind::Glob(parse_glob(text)?)
        };
        Ok(Pattern {
            text: text.to_string(),
            kind,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Cheap enough to call for every function of an index: `@usercode` reuses the
    /// normalized root of the previous call on this thread when the root is the same.
    pub fn matches(&self, f: &FunctionInfo, project_root: &Path) -> bool {
        if self.kind != Kind::UserCode {
            return self.matches_in(f, &Roots { roots: Vec::new() });
        }
        thread_local! {
            static LAST_ROOT: std::cell::RefCell<Option<(PathBuf, Roots)>> =
                const { std::cell::RefCell::new(None) };
        }
        LAST_ROOT.with(|last| {
            let mut last = last.borrow_mut();
            if last.as_ref().is_none_or(|(p, _)| p != project_root) {
                *last = Some((project_root.to_path_buf(), Roots::new(project_root)));
            }
            let roots = &last.as_ref().expect("just set").1;
            self.matches_in(f, roots)
        })
    }

    /// `matches` with the project root already normalized (for scans over many functions).
    pub(crate) fn matches_in(&self, f: &FunctionInfo, roots: &Roots) -> bool {
        match &self.kind {
            Kind::UserCode => f
                .file
                .as_deref()
                .is_some_and(|file| roots.contains(Path::new(file))),
            Kind::File(part) => f
                .file
                .as_deref()
                .is_some_and(|file| file.contains(part.as_str())),
            Kind::Glob(segs) => {
                match_segs(segs, &split_path(&f.name))
                    || self_type_path(&f.name).is_some_and(|path| match_segs(segs, &path))
            }
        }
    }
}

impl std::fmt::Display for Pattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

fn parse_directive(text: &str, directive: &str) -> Result<Kind> {
    if directive == "usercode" {
        return Ok(Kind::UserCode);
    }
    if let Some(part) = directive.strip_prefix("file:") {
        if part.trim().is_empty() {
            return Err(invalid(
                text,
                "'@file:' needs part of a source path after the colon",
                "Use e.g. '@file:parser.rs' or '@file:src/net/'.",
            ));
        }
        if part.chars().any(char::is_control) {
            return Err(invalid(
                text,
                "control character in file part",
                "Use a plain path fragment.",
            ));
        }
        return Ok(Kind::File(part.to_string()));
    }
    Err(invalid(
        text,
        &format!("unknown directive '@{}'", directive.split(':').next().unwrap_or(directive)),
        "Known directives are '@usercode' and '@file:<path part>'; without '@' the pattern is a name glob.",
    ))
}

fn parse_glob(text: &str) -> Result<Vec<Seg>> {
    if text.contains(":::") {
        return Err(invalid(
            text,
            "':::' is not a separator",
            "Separate name segments with exactly '::', e.g. 'ns::func'.",
        ));
    }
    if text.starts_with("::") || text.ends_with("::") {
        return Err(invalid(
            text,
            "pattern starts or ends with '::'",
            "Remove it, or use '**::name' / 'ns::*' / 'ns::**' to match any prefix or suffix.",
        ));
    }
    if text.contains("***") {
        return Err(invalid(
            text,
            "'***' is not a wildcard",
            "Use '*' (within one segment) or '**' (any number of segments).",
        ));
    }
    check_chars(text)?;
    let mut segs = Vec::new();
    for seg in split_path(text) {
        if seg.is_empty() {
            return Err(invalid(
                text,
                "empty segment ('::::')",
                "Separate name segments with a single '::', e.g. 'a::b'.",
            ));
        }
        if seg == "**" {
            if segs.last() != Some(&Seg::Deep) {
                segs.push(Seg::Deep);
            }
            continue;
        }
        if seg.contains("**") {
            return Err(invalid(
                text,
                &format!("'**' must be a whole segment, not part of '{seg}'"),
                "Write e.g. 'ns::**::*name*' for any depth, or '*' inside a segment.",
            ));
        }
        let parts = seg.split('*').map(str::to_string).collect();
        segs.push(Seg::Glob {
            parts,
            generic: seg.contains('<'),
        });
    }
    Ok(segs)
}

/// Reject characters that cannot occur in a demangled symbol name, spaces outside
/// template arguments, single ':' and unbalanced '<'.
fn check_chars(text: &str) -> Result<()> {
    let b = text.as_bytes();
    let (mut depth, mut i, mut seg_start) = (0i32, 0usize, 0usize);
    while i < b.len() {
        if b[i] == b'o' {
            if let Some(j) = skip_operator(text, i) {
                i = j;
                continue;
            }
        }
        let c = text[i..].chars().next().unwrap_or(' ');
        match c {
            '<' | '(' | '[' | '{' => depth += 1,
            '>' | ')' | ']' | '}' => {
                depth -= 1;
                if depth < 0 {
                    return Err(invalid(
                        text,
                        &format!("unbalanced '{c}'"),
                        "Check the brackets of template arguments.",
                    ));
                }
            }
            ':' if b.get(i + 1) == Some(&b':') => {
                i += 2;
                if depth == 0 {
                    seg_start = i;
                }
                continue;
            }
            ':' if depth == 0 => {
                return Err(invalid(
                    text,
                    "single ':' in a name",
                    "Separate name segments with '::'.",
                ));
            }
            ' ' if depth == 0 && !text[seg_start..].starts_with("operator") => {
                return Err(invalid(
                    text,
                    "contains a space outside template arguments",
                    "Function names have no spaces; remove it (one pattern per array entry).",
                ));
            }
            '?' => {
                return Err(invalid(
                    text,
                    "'?' wildcards are not supported",
                    "Use '*' to match any characters within a segment.",
                ));
            }
            c if c.is_alphanumeric() || " _*:<>,&()[]{}~#.=!+-/%^|'$".contains(c) => {}
            c => {
                let shown = if c.is_control() {
                    format!("{:?}", c)
                } else {
                    format!("'{c}'")
                };
                return Err(invalid(
                    text,
                    &format!("character {shown} cannot appear in a function name"),
                    &format!("{SYNTAX_HELP}."),
                ));
            }
        }
        i += c.len_utf8();
    }
    if depth != 0 {
        return Err(invalid(
            text,
            "unbalanced brackets",
            "Close every '<' / '(' in template arguments.",
        ));
    }
    Ok(())
}

/// `<Self>::rest` or `<Self as Trait>::rest` as the segments of `Self` then of `rest`; None for
/// any other name.
fn self_type_path(name: &str) -> Option<Vec<&str>> {
    let inner_and_rest = name.strip_prefix('<')?;
    let b = inner_and_rest.as_bytes();
    let mut depth = 0usize;
    let mut self_end = None;
    for i in 0..b.len() {
        match b[i] {
            b'<' | b'(' | b'[' | b'{' => depth += 1,
            b'>' | b')' | b']' | b'}' if depth > 0 => depth -= 1,
            b'>' if depth == 0 => {
                let rest = inner_and_rest[i + 1..].strip_prefix("::")?;
                let self_ty = &inner_and_rest[..self_end.unwrap_or(i)];
                if self_ty.starts_with('<') || self_ty.starts_with('&') || rest.is_empty() {
                    return None; // not a path: `<&T as Trait>`, nested qualified self
                }
                let mut segs = split_path(self_ty);
                segs.extend(split_path(rest));
                return Some(segs);
            }
            b' ' if depth == 0 && self_end.is_none() && inner_and_rest[i..].starts_with(" as ") => self_end = Some(i),
            _ => {}
        }
    }
    None
}

fn match_segs(pat: &[Seg], name: &[&str]) -> bool {
    // A trailing `**` after other segments needs at least one name segment.
    match_from(pat, name, pat.len() > 1)
}

fn match_from(pat: &[Seg], name: &[&str], trailing_needs_one: bool) -> bool {
    match pat.split_first() {
        None => name.is_empty(),
        Some((Seg::Deep, [])) => !trailing_needs_one || !name.is_empty(),
        Some((Seg::Deep, rest)) => {
            (0..=name.len()).any(|k| match_from(rest, &name[k..], trailing_needs_one))
        }
        Some((seg @ Seg::Glob { .. }, rest)) => match name.split_first() {
            Some((first, tail)) => {
                seg_matches(seg, first) && match_from(rest, tail, trailing_needs_one)
            }
            None => false,
        },
    }
}

fn seg_matches(seg: &Seg, name: &str) -> bool {
    let Seg::Glob { parts, generic } = seg else {
        return true;
    };
    wildcard(parts, name) || (!generic && strip_generics(name).is_some_and(|n| wildcard(parts, n)))
}

/// `parts` joined by `*` matched against the whole of `s`.
fn wildcard(parts: &[String], s: &str) -> bool {
    match parts {
        [] => s.is_empty(),
        [only] => s == only,
        [first, middle @ .., last] => {
            if s.len() < first.len() + last.len()
                || !s.starts_with(first.as_str())
                || !s.ends_with(last.as_str())
            {
                return false;
            }
            let mut rest = &s[first.len()..s.len() - last.len()];
            for m in middle {
                match rest.find(m.as_str()) {
                    Some(i) => rest = &rest[i + m.len()..],
                    None => return false,
                }
            }
            true
        }
    }
}

/// The project root for `@usercode`, made absolute and normalized (and canonical,
/// when it exists, in case the compiler recorded symlink-resolved paths).
pub(crate) struct Roots {
    roots: Vec<PathBuf>,
}

impl Roots {
    pub(crate) fn new(project_root: &Path) -> Roots {
        let abs = if project_root.is_absolute() {
            project_root.to_path_buf()
        } else {
            std::env::current_dir()
                .map(|d| d.join(project_root))
                .unwrap_or_else(|_| project_root.to_path_buf())
        };
        let mut roots = vec![normalize_path(&abs)];
        if let Ok(canon) = std::fs::canonicalize(&abs) {
            if !roots.contains(&canon) {
                roots.push(canon);
            }
        }
        Roots { roots }
    }

    /// True if `file` is under a root and not in toolchain / dependency directories
    /// (`.cargo`, `.rustup`, `rustlib`, or `/usr`, `/rustc` when the root is `/`).
    pub(crate) fn contains(&self, file: &Path) -> bool {
        self.roots.iter().any(|root| {
            let Ok(rel) = file.strip_prefix(root) else {
                return false;
            };
            let fs_root = root.parent().is_none();
            let dependency = rel.components().enumerate().any(|(i, c)| match c {
                Component::Normal(n) => {
                    n == ".cargo"
                        || n == ".rustup"
                        || n == "rustlib"
                        || (fs_root && i == 0 && (n == "usr" || n == "rustc"))
                }
                _ => false,
            });
            !dependency
        })
    }
}

/// Lexically normalize a path: drop `.`, resolve `..` against preceding components.
pub(crate) fn normalize_path(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if matches!(out.components().next_back(), Some(Component::Normal(_))) {
                    out.pop();
                } else if !out.has_root() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
#[path = "pattern_tests.rs"]
mod tests;
