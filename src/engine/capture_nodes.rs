//! Node containers in a natively captured record (`std::map`, `std::set`, the
//! `std::unordered_` ones, Rust's `HashMap`, `HashSet`, `BTreeMap` and `BTreeSet`): the
//! decoder's half of serialize.ts `readNodes`. The hook copied every node whose link it read
//! and every control byte it scanned (capture_walk.c `cap_nodes`, `cap_table`, `cap_btree`),
//! so walking the copies takes the
//! serializer's steps; a read no copy holds is what the serializer could not read, and the
//! container prints `<unreadable …>` as it does then.

use super::Reader;
use crate::engine::capture_json as json;
use crate::engine::capture_plan::MAX_ELEMENTS;
use crate::symbols::cxx_std::{NodeLayout, NodeLinks};

/// Steps one in-order successor takes at most (serialize.ts treeSuccessor).
const TREE_HEIGHT: usize = 128;
/// Tallest Rust B-tree walked (serialize.ts readNodes: "tree too tall").
const BTREE_HEIGHT: u64 = 32;

/// A B-tree's layout in a node (NodeLinks::BTree) and the entries still to print.
struct BTreeWalk {
    len: u64,
    key_slot: u64,
    value_slot: u64,
    edges: u64,
    shown: u64,
}

impl Reader<'_> {
    /// The container at `addr`: its entries in iteration order (a map as an object keyed by
    /// each key's text when every key is a string, number or bool and none repeats, else
    /// `[[key, value], …]`; a set as an array), past MAX_ELEMENTS a count of the rest.
    pub(super) fn nodes(&mut self, addr: u64, l: &NodeLayout, depth: i64) -> Result<(), ()> {
        let v = self.view;
        let total = v.u64_at(addr + l.count, 8)?.min(0x7fff_ffff);
        let shown = total.min(MAX_ELEMENTS);
        let (mut keys, mut values) = (Vec::new(), Vec::new());
        let ((kf, _), value) = l.reads();
        let vf = value.map_or(0, |(vf, _)| vf);
        match l.links {
            NodeLinks::BTree { height, len, key_slot, value_slot, edges, .. } => {
                let (h, root) = (v.u64_at(addr + height, 8)?, v.u64_at(addr + l.first, 8)?);
                if h > BTREE_HEIGHT {
                    return Err(());
                }
                if root != 0 && shown > 0 {
                    let walk = BTreeWalk { len, key_slot, value_slot, edges, shown };
                    self.btree(l, &walk, root, h, depth, &mut keys, &mut values)?;
                }
            }
            NodeLinks::Hash { mask, size } => {
                // serialize.ts rustTable: the full slots in slot order, control bytes 256 at a time.
                let (m, ctrl) = (v.u64_at(addr + mask, 8)?, v.u64_at(addr + l.first, 8)?);
                if m > 0xffff_ffff || total > m + 1 || size == 0 {
                    return Err(());
                }
                let (buckets, mut found, mut i) = (m + 1, 0, 0);
                while i < buckets && found < shown {
                    let control = v.bytes(ctrl + i, (buckets - i).min(256))?;
                    for (j, c) in control.iter().enumerate() {
                        if found == shown {
                            break;
                        }
                        if c & 0x80 == 0 {
                            let at = ctrl.wrapping_sub((i + j as u64 + 1) * size);
                            self.take(l, at + kf, at + vf, depth, &mut keys, &mut values);
                            found += 1;
                        }
                    }
                    i += 256;
                }
            }
            NodeLinks::List { .. } | NodeLinks::Tree { .. } => {
                let mut node = v.u64_at(addr + l.first, 8)?;
                for i in 0..shown {
                    if node == 0 {
                        break;
                    }
                    let at = node + l.before;
                    self.take(l, at + kf, at + vf, depth, &mut keys, &mut values);
                    if i + 1 < shown {
                        node = self.next_node(l.links, node)?;
                    }
                }
            }
        }
        let more = total - values.len() as u64;
        entries(&mut self.out, l.is_map, &keys, &values, more);
        Ok(())
    }

    /// serialize.ts readNodes `take`: a map's key at `key_at` and value at `value_at`, or a
    /// set's element at `key_at`.
    fn take(&mut self, l: &NodeLayout, key_at: u64, value_at: u64, depth: i64, keys: &mut Vec<String>, values: &mut Vec<String>) {
        let ((_, kt), value) = l.reads();
        match value {
            Some((_, vt)) => {
                keys.push(self.value_text(key_at, kt, depth));
                values.push(self.value_text(value_at, vt, depth));
            }
            None => values.push(self.value_text(key_at, kt, depth)),
        }
    }

    /// serialize.ts btreeWalk: in key order, edge 0, entry 0, edge 1, … entry len-1, edge len
    /// (edges above height 0), while fewer than `shown` entries are taken.
    #[allow(clippy::too_many_arguments)]
    fn btree(&mut self, l: &NodeLayout, w: &BTreeWalk, node: u64, height: u64, depth: i64, keys: &mut Vec<String>, values: &mut Vec<String>) -> Result<(), ()> {
        let v = self.view;
        let len = v.u64_at(node + w.len, 2)?;
        let ((kf, _), value) = l.reads();
        let vf = value.map_or(0, |(vf, _)| vf);
        for i in 0..=len {
            if values.len() as u64 >= w.shown {
                break;
            }
            if height > 0 {
                let child = v.u64_at(node + w.edges + i * 8, 8)?;
                self.btree(l, w, child, height - 1, depth, keys, values)?;
            }
            if i < len && (values.len() as u64) < w.shown {
                self.take(l, node + kf + i * w.key_slot, node + vf + i * w.value_slot, depth, keys, values);
            }
        }
        Ok(())
    }

    /// The node after `node`: a list's next link, or libstdc++'s `_Rb_tree_increment` over
    /// the copies (the right subtree's leftmost node, else the first ancestor reached from a
    /// left child).
    fn next_node(&self, links: NodeLinks, mut node: u64) -> Result<u64, ()> {
        let v = self.view;
        let (parent, left, right) = match links {
            NodeLinks::List { next } => return v.u64_at(node + next, 8),
            NodeLinks::Tree { parent, left, right } => (parent, left, right),
            NodeLinks::Hash { .. } | NodeLinks::BTree { .. } => return Err(()),
        };
        let r = v.u64_at(node + right, 8)?;
        if r != 0 {
            node = r;
            for _ in 0..TREE_HEIGHT {
                let l = v.u64_at(node + left, 8)?;
                if l == 0 {
                    return Ok(node);
                }
                node = l;
            }
            return Err(());
        }
        let mut up = v.u64_at(node + parent, 8)?;
        for _ in 0..TREE_HEIGHT {
            if node != v.u64_at(up + right, 8)? {
                return Ok(up);
            }
            node = up;
            up = v.u64_at(node + parent, 8)?;
        }
        Err(())
    }

    /// The JSON text of the value of type `id` at `addr`.
    fn value_text(&mut self, addr: u64, id: crate::symbols::TypeId, depth: i64) -> String {
        let start = self.out.len();
        self.read(addr, id, depth);
        self.out.split_off(start)
    }
}

/// A map's or set's entries (JSON texts) as serialize.ts `readNodes` prints them, `more`
/// entries not shown. A map keyed by strings, numbers or bools, none repeated, is an object
/// whose keys come in JavaScript's property order: array indices first, ascending, then the
/// rest in insertion order.
pub(super) fn entries(out: &mut String, is_map: bool, keys: &[String], values: &[String], more: u64) {
    let rest = format!("<{more} more>");
    if !is_map {
        out.push('[');
        for (i, v) in values.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(v);
        }
        if more > 0 {
            if !values.is_empty() {
                out.push(',');
            }
            json::string(out, &[&rest]);
        }
        out.push(']');
        return;
    }
    let named: Option<Vec<String>> = keys.iter().map(|k| key_text(k)).collect();
    if let Some(names) = named.filter(|n| n.iter().enumerate().all(|(i, a)| !n[..i].contains(a))) {
        let mut order: Vec<usize> = (0..names.len()).collect();
        // A stable sort: indices ascending, everything else after them in its own order.
        order.sort_by_key(|&i| array_index(&names[i]).map_or((1, 0), |n| (0, n)));
        out.push('{');
        for (n, &i) in order.iter().enumerate() {
            if n > 0 {
                out.push(',');
            }
            out.push_str(&names[i]);
            out.push(':');
            out.push_str(&values[i]);
        }
        if more > 0 {
            if !order.is_empty() {
                out.push(',');
            }
            json::key(out, &rest);
            json::string(out, &["…"]);
        }
        out.push('}');
        return;
    }
    out.push('[');
    for (i, (k, v)) in keys.iter().zip(values).enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push('[');
        out.push_str(k);
        out.push(',');
        out.push_str(v);
        out.push(']');
    }
    if more > 0 {
        if !keys.is_empty() {
            out.push(',');
        }
        json::string(out, &[&rest]);
    }
    out.push(']');
}

/// A key's JSON text as an object key: a string as it is; a number or bool as its text in a
/// string (JavaScript's `String(k)`: the same digits JSON prints); anything else has none.
fn key_text(k: &str) -> Option<String> {
    match k.as_bytes().first()? {
        b'"' => Some(k.to_string()),
        b'-' | b'0'..=b'9' => Some(format!("\"{k}\"")),
        _ if k == "true" || k == "false" => Some(format!("\"{k}\"")),
        _ => None,
    }
}

/// The array index a quoted key names (JavaScript orders those first): a canonical decimal
/// below 2^32 - 1.
fn array_index(quoted: &str) -> Option<u64> {
    let s = quoted.strip_prefix('"')?.strip_suffix('"')?;
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) || (s.len() > 1 && s.starts_with('0')) || s.len() > 10 {
        return None;
    }
    s.parse::<u64>().ok().filter(|&n| n < u32::MAX as u64)
}

#[cfg(test)]
mod tests {
    use super::entries;

    fn texts(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn printed(is_map: bool, keys: &[&str], values: &[&str], more: u64) -> String {
        let mut out = String::new();
        entries(&mut out, is_map, &texts(keys), &texts(values), more);
        out
    }

    #[test]
    fn entries_print_as_javascript_prints_the_serializers_object() {
        // JSON.stringify orders integer-like keys first: {"0":…,"1":…,"-1":…}.
        assert_eq!(printed(true, &["-1", "0", "1"], &["\"a\"", "\"b\"", "\"c\""], 0), r#"{"0":"b","1":"c","-1":"a"}"#);
        assert_eq!(printed(true, &["\"two\"", "\"one\""], &["2", "1"], 3), r#"{"two":2,"one":1,"<3 more>":"…"}"#);
        // A repeated key (a multimap), or a key that is no string, number or bool: pairs.
        assert_eq!(printed(true, &["1", "1"], &["10", "11"], 0), "[[1,10],[1,11]]");
        assert_eq!(printed(true, &["1", "\"1\""], &["10", "11"], 1), r#"[[1,10],["1",11],"<1 more>"]"#);
        assert_eq!(printed(true, &["{\"a\":1}"], &["2"], 0), r#"[[{"a":1},2]]"#);
        assert_eq!(printed(false, &[], &["1", "2"], 98), r#"[1,2,"<98 more>"]"#);
        assert_eq!(printed(false, &[], &[], 0), "[]");
        assert_eq!(printed(true, &[], &[], 0), "{}");
        // Leading zeros, 2^32 - 1 and beyond are not array indices: insertion order.
        assert_eq!(printed(true, &["\"01\"", "4294967295", "7"], &["1", "2", "3"], 0), r#"{"7":3,"01":1,"4294967295":2}"#);
    }
}
