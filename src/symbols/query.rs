//! Queries over a loaded [`SymbolIndex`]: pattern matching, "did you mean" names,
//! and address lookup.

use std::collections::HashSet;
use std::path::Path;

use super::demangle::split_path;
use super::pattern::Roots;
use super::{FunctionInfo, Pattern, SymbolIndex};

impl SymbolIndex {
    /// Functions matching `pattern`, one per address (the first by name order when
    /// several names share an address), in address order.
    pub fn matching(&self, pattern: &Pattern, project_root: &Path) -> Vec<&FunctionInfo> {
        let roots = Roots::new(project_root);
        let mut seen = HashSet::new();
        self.functions
            .iter()
            .filter(|f| pattern.matches_in(f, &roots) && seen.insert(f.address))
            .collect()
    }

    /// Up to `n` distinct function names close to `text` (a name or glob that matched
    /// nothing), best first: names ending with it, names containing it, then names
    /// whose trailing segments are within a small edit distance. Case-insensitive.
    pub fn closest_names(&self, text: &str, n: usize) -> Vec<String> {
        if n == 0 || text.starts_with('@') {
            return Vec::new();
        }
        let cleaned = text.replace('*', "");
        let query_segs: Vec<&str> = split_path(&cleaned)
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect();
        if query_segs.is_empty() {
            return Vec::new();
        }
        let query = query_segs.join("::").to_lowercase();
        let max_distance = (query.chars().count() / 3).max(1);

        let mut seen = HashSet::new();
        let mut scored: Vec<(u8, usize, &str)> = Vec::new();
        for f in &self.functions {
            let name = f.name.as_str();
            if !seen.insert(name) {
                continue;
            }
            let segs = split_path(name);
            let tail = if segs.len() > query_segs.len() {
                let start = segs[segs.len() - query_segs.len()];
                &name[start.as_ptr() as usize - name.as_ptr() as usize..]
            } else {
                name
            };
            let tail = tail.to_lowercase();
            let lower = name.to_lowercase();
            let score = if tail == query {
                Some((0, 0))
            } else if lower.contains(&query) {
                Some((1, lower.len() - query.len()))
            } else {
                levenshtein_within(&query, &tail, max_distance).map(|d| (2, d))
            };
            if let Some((class, d)) = score {
                scored.push((class, d, name));
            }
        }
        scored.sort_by(|a, b| (a.0, a.1, a.2.len(), a.2).cmp(&(b.0, b.1, b.2.len(), b.2)));
        scored
            .into_iter()
            .take(n)
            .map(|(_, _, name)| name.to_string())
            .collect()
    }

    /// The function whose code contains `address` (static, pre-slide), if any.
    pub fn function_at(&self, address: u64) -> Option<&FunctionInfo> {
        let end = self.functions.partition_point(|f| f.address <= address);
        self.functions[..end]
            .iter()
            .rev()
            .take(8)
            .find(|f| address < f.address + f.size.max(1))
    }
}

/// Edit distance between `a` and `b` if it is at most `max`.
fn levenshtein_within(a: &str, b: &str, max: usize) -> Option<usize> {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    if a.len().abs_diff(b.len()) > max {
        return None;
    }
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        let mut row_min = cur[0];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
            row_min = row_min.min(cur[j + 1]);
        }
        if row_min > max {
            return None;
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    let d = prev[b.len()];
    (d <= max).then_some(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn index(names: &[(&str, u64, &str)]) -> SymbolIndex {
        let mut functions: Vec<FunctionInfo> = names
            .iter()
            .map(|&(name, address, file)| FunctionInfo {
                name: name.into(),
                raw_name: name.into(),
                address,
                size: 0x10,
                file: Some(file.into()),
                line: Some(1),
            })
            .collect();
        functions.sort_by_key(|f| f.address);
        SymbolIndex {
            binary: PathBuf::from("/bin/x"),
            image_base: 0,
            functions,
        }
    }

    fn sample() -> SymbolIndex {
        index(&[
            ("sample::engine::physics::step", 0x100, "/p/sample.rs"),
            ("sample::engine::tick", 0x200, "/p/sample.rs"),
            ("sample::parser::parse_line", 0x300, "/p/sample.rs"),
            ("sample::parser::parse_line_alias", 0x300, "/p/sample.rs"),
            (
                "core::fmt::write",
                0x400,
                "/rustc/x/library/core/src/fmt/mod.rs",
            ),
            ("compute_sum", 0x500, "/p/math.c"),
        ])
    }

    #[test]
    fn matching_dedups_by_address_and_uses_root() {
        let idx = sample();
        let all = idx.matching(&Pattern::parse("**").unwrap(), Path::new("/p"));
        assert_eq!(all.len(), 5, "two names share 0x300");
        let user = idx.matching(&Pattern::parse("@usercode").unwrap(), Path::new("/p"));
        assert_eq!(user.len(), 4);
        assert!(user.iter().all(|f| !f.name.starts_with("core::")));
        let steps = idx.matching(&Pattern::parse("**::step").unwrap(), Path::new("/p"));
        assert_eq!(steps.iter().map(|f| f.address).collect::<Vec<_>>(), [0x100]);
    }

    #[test]
    fn closest_names_suggests_typos_and_tails() {
        let idx = sample();
        assert_eq!(
            idx.closest_names("engine::physics::step", 1),
            ["sample::engine::physics::step"]
        );
        assert_eq!(
            idx.closest_names("engine::physics::stpe", 1),
            ["sample::engine::physics::step"]
        );
        assert_eq!(idx.closest_names("compute_sun", 3), ["compute_sum"]);
        let parse = idx.closest_names("parse*", 5);
        assert_eq!(
            parse,
            [
                "sample::parser::parse_line",
                "sample::parser::parse_line_alias"
            ]
        );
        assert!(idx.closest_names("zzzzzzzz", 3).is_empty());
        assert!(idx.closest_names("@usercode", 3).is_empty());
        assert_eq!(idx.closest_names("**::tick", 2), ["sample::engine::tick"]);
        assert_eq!(idx.closest_names("step", 10).len(), 1);
    }

    #[test]
    fn function_at_finds_containing_function() {
        let idx = sample();
        assert_eq!(idx.function_at(0x105).map(|f| f.address), Some(0x100));
        assert_eq!(idx.function_at(0x110), None);
        assert_eq!(idx.function_at(0x50), None);
    }

    #[test]
    fn levenshtein_bounds() {
        assert_eq!(levenshtein_within("kitten", "sitting", 3), Some(3));
        assert_eq!(levenshtein_within("kitten", "sitting", 2), None);
        assert_eq!(levenshtein_within("", "ab", 2), Some(2));
    }
}
