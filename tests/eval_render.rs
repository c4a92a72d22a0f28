//! debug_eval's value renderer (`strobe::eval::render`) against live fixture processes:
//! `cpp_containers` (libstdc++ containers, C++ scalars, bases, bitfields, cycles) and
//! `rust_values` (Rust enums, Option, Result, String, Vec, Box, HashMap, &str, slices).
//! Each fixture stops itself (SIGSTOP) once its globals are set; we read them from outside
//! with process_vm_readv, as the daemon does at a pause. Expectations follow gdb 13.

mod common;

use std::process::{Child, Command};
use std::sync::Arc;

use serde_json::{json, Value};
use strobe::eval::{render, Memory, ProcessMemory, RenderOptions};
use strobe::symbols::{DebugInfo, SymbolIndex};

/// A fixture process stopped by its own SIGSTOP; killed on drop.
struct Stopped {
    child: Child,
    info: Arc<DebugInfo>,
    slide: u64,
}

impl Stopped {
    fn launch(name: &str) -> Stopped {
        let path = common::fixture(name);
        let index = SymbolIndex::load(&path).expect("symbols");
        let info = DebugInfo::of(&index).expect("debug info");
        let child = Command::new(&path).spawn().expect("spawn fixture");
        let pid = child.id() as libc::pid_t;
        let mut status = 0;
        // SAFETY: waiting on our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WUNTRACED) };
        assert!(r == pid && libc::WIFSTOPPED(status), "{name} did not stop itself (status {status:#x})");
        let slide = load_base(child.id(), &path) - index.image_base;
        Stopped { child, info, slide }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Render global `name` with `opts`.
    fn render_with(&self, name: &str, opts: &RenderOptions) -> Value {
        let g = self.info.global(name).unwrap_or_else(|| panic!("no global {name}"));
        let ty = g.ty.unwrap_or_else(|| panic!("{name} has no type"));
        let size = self.info.ty(ty).size as usize;
        let mem = ProcessMemory::new(self.pid());
        let bytes = mem.read_vec(g.address + self.slide, size).unwrap_or_else(|e| panic!("read {name}: {e}"));
        render(&self.info, ty, &bytes, Some(g.address + self.slide), &mem, opts)
    }

    fn render(&self, name: &str) -> Value {
        self.render_with(name, &RenderOptions::default())
    }

    /// The runtime address of global `name`, as the renderer prints addresses.
    fn addr(&self, name: &str) -> String {
        format!("0x{:x}", self.info.global(name).expect("global").address + self.slide)
    }

    /// What gdb prints for `expr` in this process (`print expr`, the text after "= ").
    fn gdb(&self, expr: &str) -> String {
        let out = Command::new("gdb")
            .args(["-nx", "-batch", "-p", &self.pid().to_string(), "-ex", &format!("print {expr}")])
            .output()
            .expect("run gdb");
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text.lines().rev().find(|l| l.starts_with('$')).unwrap_or_else(|| panic!("gdb printed nothing for {expr}: {text}"));
        line.split_once("= ").map(|(_, v)| v.to_string()).unwrap_or_default()
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where `path` is mapped in `pid` (its mapping at file offset 0).
fn load_base(pid: u32, path: &std::path::Path) -> u64 {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).expect("maps");
    let canon = std::fs::canonicalize(path).expect("canonical path");
    let line = maps
        .lines()
        .find(|l| l.ends_with(canon.to_str().unwrap()) && l.split_whitespace().nth(2) == Some("00000000"))
        .unwrap_or_else(|| panic!("{} not mapped:\n{maps}", canon.display()));
    u64::from_str_radix(line.split('-').next().unwrap(), 16).unwrap()
}

fn opts(depth: u32, max_elements: usize, max_string: usize) -> RenderOptions {
    RenderOptions { depth, max_elements, max_string, ..RenderOptions::default() }
}

/// `{"@": "0x…", fields…}` with the pointer checked to be a non-null address and removed.
fn pointee(mut v: Value) -> Value {
    let at = v.as_object_mut().and_then(|o| o.shift_remove("@")).unwrap_or_else(|| panic!("no \"@\" in {v}"));
    let at = at.as_str().unwrap_or_default().to_string();
    assert!(at.starts_with("0x") && at != "0x0", "pointer {at}");
    v
}

#[test]
fn cpp_scalars_enums_and_bitfields_match_gdb() {
    let p = Stopped::launch("cpp_containers");
    assert_eq!(p.render("g_int"), json!(-7));
    assert_eq!(p.gdb("g_int"), "-7");
    assert_eq!(p.render("g_u64_big"), json!("18446744073709551615"), "beyond 2^53: exact decimal text");
    assert_eq!(p.gdb("g_u64_big"), "18446744073709551615");
    assert_eq!(p.render("g_i64_min"), json!("-9223372036854775808"));
    assert_eq!(p.render("g_bool"), json!(true));
    assert_eq!(p.render("g_char"), json!("A"));
    assert_eq!(p.render("g_char_nul"), json!(0), "an unprintable char is its code");
    // unsigned char is a byte (uint8_t, flags, states): its number, which gdb prints first.
    assert_eq!(p.render("g_uchar_flags"), json!(34));
    assert_eq!(p.gdb("g_uchar_flags"), "34 '\"'");
    assert_eq!(p.render("g_float"), json!(1.5));
    assert_eq!(p.render("g_double"), json!(-2.25));
    assert_eq!(p.gdb("g_double"), "-2.25");
    assert_eq!(p.render("g_nan"), json!("nan"));
    assert_eq!(p.render("g_inf"), json!("inf"));
    assert_eq!(p.render("g_ldouble"), json!(3.5), "x87 long double");
    assert_eq!(p.gdb("g_ldouble"), "3.5");
    assert_eq!(p.render("g_color"), json!("BLUE"));
    assert_eq!(p.render("g_color_bad"), json!("(Color)7"));
    assert_eq!(p.render("g_small"), json!("B"), "one-byte enum class");
    assert_eq!(p.render("g_flags"), json!({"ready": 1, "mode": 5, "level": -3}));
    assert_eq!(p.gdb("g_flags"), "{ready = 1, mode = 5, level = -3}");
    assert_eq!(p.render("g_ints"), json!([1, 2, 3, 4, 5]));
    assert_eq!(p.render("g_cstr"), json!("hello"));
    assert_eq!(p.render("g_named"), json!({"name": "widget", "raw": [1, 2, 3, 250]}), "char arrays of text are strings");
    assert_eq!(p.gdb("g_named.name"), "\"widget\\000\\000\\000\\000\\000\\000\\000\\000\\000\"");
    assert_eq!(p.render("g_text"), json!("ab\tc"));
    assert_eq!(p.render("g_null_str"), json!("0x0"));
    // A function pointer names its target, as gdb does (`0x… <compare_ints(int, int)>`;
    // the name without its parameter types, as traces name functions).
    let gdb_text = |expr: &str| p.gdb(expr).replace("(int (*)(int, int)) ", "").replace("(int, int)", "");
    let callback = p.render("g_callback");
    assert!(callback.as_str().is_some_and(|c| c.ends_with(" <compare_ints>")), "{callback}");
    assert_eq!(callback, json!(gdb_text("g_callback")));
    assert_eq!(p.render("g_callback_mid"), json!(gdb_text("g_callback_mid")), "inside a function: <name+offset>");
    assert_eq!(p.render("g_ops")["cmp"], callback, "a struct's callback member");
}

#[test]
fn hex_format_shows_integer_bits() {
    let p = Stopped::launch("cpp_containers");
    let hex = RenderOptions { hex: true, ..RenderOptions::default() };
    assert_eq!(p.render_with("g_int", &hex), json!(p.gdb("/x g_int")));
    assert_eq!(p.render_with("g_int", &hex), json!("0xfffffff9"));
    assert_eq!(p.render_with("g_point", &hex), json!({"x": "0x3", "y": "0xfffffffc"}));
    assert_eq!(p.render_with("g_color", &hex), json!("BLUE"), "enumerators keep their names");
}

#[test]
fn cpp_structs_bases_and_pointers() {
    let p = Stopped::launch("cpp_containers");
    assert_eq!(p.render("g_point"), json!({"x": 3, "y": -4}));
    assert_eq!(p.render("g_derived"), json!({"<base struct Base>": {"id": 7}, "weight": 0.5, "label": "derived"}));
    let holder = p.render("g_holder");
    let pointee_addr = p.addr("g_pointee");
    assert_eq!(
        holder,
        json!({
            "p": {"@": p.addr("g_point"), "x": 3, "y": -4},
            "n": pointee_addr,
            "opaque": pointee_addr,
            "bad": "<unreadable 0x10>",
        })
    );
    let keys: Vec<&String> = holder["p"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["@", "x", "y"], "the pointer comes first, then fields in declaration order");
    let mem = ProcessMemory::new(p.pid());
    let point = p.info.global("g_point").unwrap().ty.unwrap();
    assert_eq!(strobe::eval::render_at(&p.info, point, 0x10, &mem, &RenderOptions::default()), json!("<unreadable 0x10>"));
}

#[test]
fn references_show_what_they_refer_to() {
    let p = Stopped::launch("cpp_containers");
    assert_eq!(p.render("g_ref"), json!({"@": p.addr("g_pointee"), "*": 99}));
    assert_eq!(p.render("g_str_ref"), json!({"@": p.addr("g_short"), "*": "hi"}));
    assert_eq!(p.render_with("g_ref", &opts(0, 100, 1024)), json!(p.addr("g_pointee")), "no depth left: the address");
    let r = Stopped::launch("rust_values");
    assert_eq!(r.render("values::ANSWER_REF"), json!({"@": r.addr("values::ANSWER"), "*": 42}));
}

#[test]
fn cycles_and_the_depth_budget() {
    let p = Stopped::launch("cpp_containers");
    let (a, b) = (p.addr("g_node_a"), p.addr("g_node_b"));
    assert_eq!(
        p.render_with("g_node_a", &opts(5, 100, 1024)),
        json!({"value": 1, "next": {"@": b, "value": 2, "next": "<circular ref to struct Node>"}})
    );
    assert_eq!(p.render_with("g_node_a", &opts(2, 100, 1024)), json!({"value": 1, "next": {"@": b, "value": 2, "next": a}}));
    assert_eq!(p.render_with("g_node_a", &opts(1, 100, 1024)), json!({"value": 1, "next": b}));
    assert_eq!(p.render_with("g_node_a", &opts(0, 100, 1024)), json!("<struct Node>"));
    assert_eq!(p.render_with("g_derived", &opts(1, 100, 1024))["<base struct Base>"], json!("<struct Base>"));
}

#[test]
fn element_and_string_caps() {
    let p = Stopped::launch("cpp_containers");
    assert_eq!(p.render_with("g_ints", &opts(2, 2, 1024)), json!([1, 2, "<3 more>"]));
    assert_eq!(p.render_with("g_vec_big", &opts(2, 3, 1024)), json!([7, 7, 7, "<147 more>"]));
    let big = p.render("g_vec_big");
    assert_eq!((big.as_array().unwrap().len(), &big[100]), (101, &json!("<50 more>")));
    assert_eq!(p.render_with("g_long", &opts(2, 100, 5)), json!("a str…"));
    assert_eq!(p.render_with("g_cstr", &opts(2, 100, 3)), json!("hel…"));
    assert_eq!(p.render_with("g_map", &opts(2, 2, 1024)), json!({"one": 1, "three": 3, "<1 more>": "…"}));
}

#[test]
fn libstdcxx_pretty_printers() {
    let p = Stopped::launch("cpp_containers");
    assert_eq!(p.render("g_short"), json!("hi"));
    assert_eq!(p.render("g_long"), json!("a string that is longer than fifteen chars"));
    assert_eq!(p.render("g_empty"), json!(""));
    assert_eq!(p.render("g_vec"), json!([1, 2, 3]));
    assert_eq!(p.render("g_vec_str"), json!(["x", "yz"]));
    assert_eq!(p.render("g_vec_empty"), json!([]));
    assert_eq!(p.render("g_vec_bool"), json!([true, false, true, true, false, false, false, false, true]));
    assert_eq!(p.render("g_arr"), json!([10, 20, 30, 40]));
    assert_eq!(p.render("g_span"), json!([4, 5, 6]));
    assert_eq!(p.render("g_span_fixed"), json!([4, 5, 6]), "static extent: the count is a template value");
    assert_eq!(p.render("g_multiset"), json!([1, 2, 2]));
    assert_eq!(p.render("g_list"), json!([3, 1, 2]));
    assert_eq!(p.render("g_view"), json!("viewed text"));
    assert_eq!(p.render("g_atomic"), json!(12));
    assert_eq!(p.render("g_atomic_flag"), json!(true));
    assert_eq!(p.render("g_list_str"), json!(["p", "q"]));
    assert_eq!(p.render("g_map"), json!({"one": 1, "three": 3, "two": 2}));
    let map = p.render("g_map");
    let keys: Vec<&String> = map.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["one", "three", "two"], "in key order");
    assert_eq!(p.render("g_set"), json!([1, 3, 5]));
    assert_eq!(p.render("g_multimap"), json!([[1, "a"], [1, "b"], [2, "c"]]), "repeated keys: [key, value] pairs");
    assert_eq!(p.render("g_map_ptr"), json!([[{"@": p.addr("g_point"), "x": 3, "y": -4}, 1]]), "struct keys: pairs");
    assert_eq!(p.render("g_umap"), json!({"7": "seven"}));
    assert_eq!(p.render("g_uset"), json!(["only"]));
    assert_eq!(p.render("g_opt_some"), json!(42));
    assert_eq!(p.render("g_opt_none"), json!(null));
    assert_eq!(pointee(p.render("g_uptr")), json!({"x": 1, "y": 2}));
    assert_eq!(p.render("g_uptr_null"), json!("0x0"));
    assert_eq!(pointee(p.render("g_sptr")), json!({"@use_count": 2, "x": 3, "y": 4}));
    assert_eq!(p.render("g_sptr")["@"], p.render("g_sptr2")["@"]);
}

#[test]
fn a_lookalike_of_a_std_container_prints_as_its_plain_struct() {
    let p = Stopped::launch("cpp_containers");
    assert_eq!(p.render("g_fake_vec"), json!({"first": p.addr("g_span_data"), "count": 3}));
}

#[test]
fn rust_std_values_and_enums() {
    let p = Stopped::launch("rust_values");
    let r = |n: &str| p.render(&format!("values::{n}"));
    assert_eq!(r("NAME"), json!("hello"));
    assert_eq!(r("EMPTY_NAME"), json!(""));
    assert_eq!(r("GREETING"), json!("hi there"));
    assert_eq!(r("SLICE"), json!([7, 8, 9]));
    assert_eq!(r("NUMS"), json!([1, 2, 3]));
    assert_eq!(r("WORDS"), json!(["a", "bc"]));
    assert_eq!(r("BIG").as_array().unwrap().last(), Some(&json!("<50 more>")));
    assert_eq!(r("SOME"), json!(5));
    assert_eq!(r("NONE"), json!(null));
    assert_eq!(r("OK"), json!({"Ok": 3}));
    assert_eq!(r("ERR"), json!({"Err": "bad"}));
    assert_eq!(r("CIRCLE"), json!({"Circle": 1.5}));
    assert_eq!(r("RECT"), json!({"Rect": {"w": 3, "h": 4}}));
    assert_eq!(r("EMPTY"), json!("Empty"));
    assert_eq!(r("TUPLE"), json!([1, "one"]));
    assert_eq!(r("UNIT_OK"), json!({"Ok": null}), "() is null");
    assert_eq!(r("LETTER"), json!("é"));
    assert_eq!(r("HUGE"), json!("18446744073709551615"));
}

/// Issue 14 item 3: a one-byte fieldless enum read as 4 bytes showed as 993281.
#[test]
fn rust_fieldless_enum_decodes_by_its_real_size() {
    let p = Stopped::launch("rust_values");
    assert_eq!(p.render("values::FIELDLESS"), json!("Gamma"));
    assert_eq!(p.render("values::FIELDLESS_ARR"), json!(["Alpha", "Beta", "Gamma"]));
    assert_eq!(p.gdb("values::FIELDLESS"), "values::Fieldless::Gamma");
}

#[test]
fn rust_niche_encoded_enums() {
    let p = Stopped::launch("rust_values");
    let r = |n: &str| p.render(&format!("values::{n}"));
    assert_eq!(r("NICHE_FLAG"), json!({"Flag": true}));
    assert_eq!(r("NICHE_OTHER"), json!("Other"));
    assert_eq!(r("NICHE_THIRD"), json!("Third"));
    assert_eq!(r("OPT_REF"), json!({"@": p.addr("values::ORIGIN"), "x": 0, "y": -1}));
    assert_eq!(r("OPT_REF_NONE"), json!(null));
    assert_eq!(r("OPT_NZ"), json!(17));
    assert_eq!(r("OPT_NZ_NONE"), json!(null));
    assert_eq!(pointee(r("OPT_BOX")), json!({"x": 5, "y": 6}), "Option<Box<T>>: Some(box) → the box");
    assert_eq!(r("BOXES").as_array().map(|a| a.len()), Some(1));
    assert_eq!(pointee(r("BOXES")[0].clone()), json!({"x": 7, "y": 8}));
}

#[test]
fn rust_rc_and_arc_show_their_value_and_owners() {
    let p = Stopped::launch("rust_values");
    assert_eq!(pointee(p.render("values::SHARED")), json!({"@strong": 2, "x": 9, "y": 10}));
    assert_eq!(p.render("values::SHARED")["@"], p.render("values::SHARED_TOO")["@"]);
    assert_eq!(pointee(p.render("values::COUNTED")), json!({"@strong": 1, "*": 11}));
}

#[test]
fn rust_cells_and_atomics_show_what_they_hold() {
    let p = Stopped::launch("rust_values");
    assert_eq!(p.render("values::HITS"), json!(4));
    assert_eq!(p.render("values::CELL"), json!(-2));
    assert_eq!(p.render("values::REFCELL"), json!({"borrow": 0, "value": [8]}));
}

#[test]
fn rust_btree_map_in_key_order() {
    let p = Stopped::launch("rust_values");
    assert_eq!(p.render("values::TREE"), json!({"1": "one", "2": "two"}));
    let big = p.render("values::BIG_TREE");
    let expected: serde_json::Map<String, Value> = (0..40u32).map(|i| (i.to_string(), json!(i * i))).collect();
    assert_eq!(big, Value::Object(expected.clone()), "a tree of internal nodes (height > 0)");
    let keys: Vec<&String> = big.as_object().unwrap().keys().collect();
    assert_eq!(keys, expected.keys().collect::<Vec<_>>(), "in key order");
    assert_eq!(p.render("values::BTREE_SET"), json!(["a", "b"]));
}

#[test]
fn rust_hash_map_and_set_entries() {
    let p = Stopped::launch("rust_values");
    assert_eq!(p.render("values::MAP"), json!({"1": "one", "2": "two", "3": "three"}));
    assert_eq!(p.render("values::SET"), json!(["only"]));
    let capped = p.render_with("values::MAP", &opts(2, 1, 1024));
    assert_eq!(capped.as_object().map(|o| o.len()), Some(2), "one entry and \"<2 more>\": {capped}");
    assert_eq!(capped["<2 more>"], json!("…"));
}

/// Uninitialized or corrupt memory (a local before its constructor ran) must render as
/// something — never panic, never loop: every type of both fixtures over garbage bytes.
#[test]
fn garbage_bytes_never_panic() {
    for (fixture, prefix) in [("cpp_containers", "g_"), ("rust_values", "values::")] {
        let p = Stopped::launch(fixture);
        let mem = ProcessMemory::new(p.pid());
        let names: Vec<String> = p.info.global_names().filter(|n| n.starts_with(prefix)).map(String::from).collect();
        for name in names {
            let Some(ty) = p.info.global(&name).and_then(|g| g.ty) else { continue };
            let size = p.info.ty(ty).size as usize;
            for fill in [0x00u8, 0xff, 0x41, 0x10, 0x55] {
                let mut bytes: Vec<u8> = (0..size).map(|i| fill.wrapping_add((i as u8).wrapping_mul(37))).collect();
                if fill == 0x10 {
                    bytes.iter_mut().for_each(|b| *b = 0x10);
                }
                for address in [None, Some(u64::MAX - 3)] {
                    let v = render(&p.info, ty, &bytes, address, &mem, &RenderOptions::default());
                    assert!(!v.to_string().is_empty(), "{name}");
                }
            }
        }
    }
}
