//! Native typed capture (issue 18 item 1): functions taking struct pointers and C strings
//! are hooked without JavaScript and the daemon decodes what the hook copied. What is stored
//! must equal the JavaScript serializer's output for the same calls: nested structs, chains
//! deeper than the depth, cycles, long / non-UTF-8 / page-cut strings, unions, bitfields,
//! arrays of pointers, unreadable and partly readable pointees, pointees shared or reached
//! at two depths by the native walk (fixture c_capture). One exception, by design: a call
//! whose pointees exceed the native per-call byte budget prints `<unreadable …>` for those
//! left out (cap_big), never a wrong value.
//!
//! Run: `cargo test --test capture_native -- --nocapture`.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use strobe::engine::{Engine, EngineConfig, LaunchRequest};
use strobe::store::{Event, EventType};

/// cap_* functions of the fixture, and their calls per round.
const FUNCTIONS: usize = 12;
const CALLS: usize = 21;

fn engine() -> (tempfile::TempDir, Arc<Engine>) {
    let home = tempfile::tempdir().unwrap();
    let cache_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target").join("strobe-cache");
    let engine = Engine::new(EngineConfig { home: home.path().to_path_buf(), cache_dir }).unwrap();
    (home, engine)
}

/// c_capture with `rounds` rounds of calls in each of its two passes (it waits for a line
/// before each); returns the session id.
async fn launch_capture(engine: &Arc<Engine>, rounds: u64) -> String {
    launch_fixture(engine, "c_capture", rounds).await
}

async fn launch_fixture(engine: &Arc<Engine>, fixture: &str, rounds: u64) -> String {
    let r = engine
        .launch(LaunchRequest {
            command: common::fixture(fixture).display().to_string(),
            args: vec![rounds.to_string(), "wait".into()],
            project_root: common::fixtures_src_dir().display().to_string(),
            ..Default::default()
        })
        .await
        .expect("launch c_capture");
    r.session_id
}

/// One c_capture process (`rounds` rounds, two passes of the same calls at the same
/// addresses): pass 0 traced with the JavaScript serializer, pass 1 with native capture (and
/// the tracing options `native`). Returns the events of each pass and the agent's tracing
/// settings during pass 1.
async fn run_both(engine: &Arc<Engine>, native_options: Value, rounds: usize) -> (Vec<Event>, Vec<Event>, Value) {
    run_both_on(engine, "c_capture", native_options, rounds).await
}

async fn run_both_on(engine: &Arc<Engine>, fixture: &str, native_options: Value, rounds: usize) -> (Vec<Event>, Vec<Event>, Value) {
    run_both_with(engine, (fixture, "cap_*", FUNCTIONS, CALLS), native_options, rounds).await
}

/// `run_both_on` for a fixture whose functions match `pattern`: `functions` of them, called
/// `calls` times a round.
async fn run_both_with(engine: &Arc<Engine>, (fixture, pattern, functions, calls): (&str, &str, usize, usize), native_options: Value, rounds: usize) -> (Vec<Event>, Vec<Event>, Value) {
    let id = launch_fixture(engine, fixture, rounds as u64).await;
    let patterns = [pattern.to_string()];
    let mut passes = Vec::new();
    let mut settings = Value::Null;
    for (pass, native) in [(0, false), (1, true)] {
        common::events::wait_for_stdout(engine, &id, &format!("ready {pass}"), Duration::from_secs(60)).await;
        // Every call recorded in both passes (cost sampling would thin the JS one out).
        let mut options = if native { native_options.clone() } else { json!({ "hotCallsPerSec": 0, "costShare": 0 }) };
        options["nativeCapture"] = json!(native);
        engine.configure_tracing(&id, options).await.expect("configure tracing");
        let t = engine.trace(Some(&id), &patterns, &[]).await.expect("trace");
        assert_eq!(t.hooked_functions, functions, "{t:?}");
        settings = engine.configure_tracing(&id, json!({})).await.expect("tracing settings");
        let before = common::events::trace_events(engine, &id).len();
        engine.send_stdin(&id, b"go\n").await.expect("stdin");
        common::events::wait_for_stdout(engine, &id, &format!("pass {pass} done"), Duration::from_secs(60)).await;
        // Every event of the pass is stored before the hooks go (the drain is prompt; allow load).
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while common::events::trace_events(engine, &id).len() < before + rounds * calls * 2 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if pass == 0 {
            engine.trace(Some(&id), &[], &patterns).await.expect("untrace");
        }
        passes.push(common::events::trace_events(engine, &id)[before..].to_vec());
        if pass == 1 {
            // What the native pass did, read before the process exits (it waits for a line).
            settings["after"] = engine.configure_tracing(&id, json!({})).await.expect("tracing settings after the pass");
            engine.send_stdin(&id, b"end\n").await.expect("stdin");
        }
        if pass == 0 {
            assert_eq!(settings["capture"]["plans"], json!(0), "the JS pass used no plan: {settings}");
        }
    }
    common::events::wait_for_exit(engine, &id).await;
    let native = passes.pop().unwrap();
    (passes.pop().unwrap(), native, settings)
}

/// (kind, function, arguments, return value, parent function) of each event, in order.
fn content(events: &[Event]) -> Vec<Content> {
    let by_id: std::collections::HashMap<i64, &Event> = events.iter().map(|e| (e.id, e)).collect();
    let parse = |s: &Option<String>| s.as_deref().map(|t| serde_json::from_str::<Value>(t).unwrap_or_else(|e| panic!("{t}: {e}")));
    events
        .iter()
        .map(|e| {
            let parent = e.parent_event_id.and_then(|p| by_id.get(&p)).and_then(|p| p.function_name.clone());
            (e.event_type, e.function_name.clone().unwrap(), parse(&e.arguments), parse(&e.return_value), parent)
        })
        .collect()
}

type Content = (EventType, String, Option<Value>, Option<Value>, Option<String>);

/// The native pass's cap_big enters with what the serializer read put back where they exceed
/// the byte budget by design: the first four 48,000-byte pointees fit, the fifth is left out
/// and says so.
fn put_back_the_big_pointee(js: &[Content], native: &mut [Content]) {
    for e in native.iter_mut().filter(|e| e.0 == EventType::FunctionEnter && e.1 == "cap_big") {
        let parts = e.2.as_mut().unwrap()["b"]["parts"].as_array_mut().unwrap();
        assert_eq!(parts[3]["rows"][59]["v"][99], json!(305_999), "the fourth pointee is whole");
        assert_eq!(parts[4].as_str().map(|s| s.starts_with("<unreadable 0x")), Some(true), "the fifth is left out");
        parts[4] = js.iter().find(|j| j.0 == EventType::FunctionEnter && j.1 == "cap_big").unwrap().2.as_ref().unwrap()["b"]["parts"][4].clone();
    }
}

/// Both passes' events as content (`rounds` rounds each), the native pass's cap_big put
/// back, compared event by event.
fn same_as_javascript(js_events: &[Event], native_events: &[Event], rounds: usize) -> Vec<Content> {
    same_as_javascript_of(js_events, native_events, rounds * CALLS)
}

/// `same_as_javascript` for `calls` calls in each pass.
fn same_as_javascript_of(js_events: &[Event], native_events: &[Event], calls: usize) -> Vec<Content> {
    let (js, mut native) = (content(js_events), content(native_events));
    // Every call, enter + exit each.
    assert_eq!(js.len(), calls * 2, "{:#?}", js.iter().map(|e| &e.1).collect::<Vec<_>>());
    put_back_the_big_pointee(&js, &mut native);
    for (i, (a, b)) in js.iter().zip(&native).enumerate() {
        assert_eq!(b, a, "event {i}: native capture (left) differs from the JS serializer (right)");
    }
    assert_eq!(native.len(), js.len());
    native
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_capture_prints_what_the_javascript_serializer_prints() {
    let (_home, engine) = engine();
    let (js_events, native_events, native_settings) = run_both(&engine, json!({}), 3).await;
    assert_eq!(native_settings["capture"]["plans"], json!(FUNCTIONS), "every cap_* function has a native plan: {native_settings}");
    assert_eq!(native_settings["hookPaths"]["wrapped"].as_array().map(Vec::len), Some(FUNCTIONS), "typed capture runs in replaceFast wrappers: {native_settings}");
    // The records came through the outbox the daemon mapped (engine/outbox.rs), not Frida's channel.
    let outbox = &native_settings["after"]["outbox"];
    assert_eq!(outbox["ready"], json!(true), "{native_settings}");
    assert!(outbox["batches"].as_u64() > Some(0), "{native_settings}");
    // Kept spans were compared with the loop this CPU runs best (capture_read.h): the AVX2
    // one where the CPU has it (capture_compare checks both loops against memcmp).
    let cpu_has_avx2 = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default().lines().any(|l| l.starts_with("flags") && l.split_whitespace().any(|f| f == "avx2"));
    assert_eq!(native_settings["capture"]["avx2"], json!(cpu_has_avx2), "{native_settings}");
    let native = same_as_javascript(&js_events, &native_events, 3);

    // And the values are the real ones, not the same mistake twice.
    let enter = |f: &str| native.iter().find(|e| e.0 == EventType::FunctionEnter && e.1 == f).unwrap().2.clone().unwrap();
    let holder = &enter("cap_holder")["h"];
    assert_eq!(holder["inline_leaf"]["tag"], json!("inline"));
    assert_eq!(holder["link"]["tag"], json!("leaf-a"));
    assert_eq!(holder["links"][2].as_str().map(|s| s.starts_with("<unreadable 0x")), Some(true), "{holder}");
    assert_eq!(holder["name"], json!("name"), "a char array holding text prints as a string");
    assert_eq!(holder["shade"], json!("NEON"));
    assert_eq!(holder["level"], json!(-3));
    let graph = &enter("cap_graph")["t"];
    assert_eq!(graph["mid"]["x"], json!({ "leaf": "<struct gleaf>", "n": 7, "in": "<struct ginl>" }), "x with depth 1 left: {graph}");
    assert_eq!(graph["x"], json!({ "leaf": { "v": 71, "tag": "g-one" }, "n": 7, "in": { "q": 70 } }), "x again with depth 2 left: {graph}");
    assert_eq!(graph["again"], graph["x"], "a shared pointee");
    assert_eq!(graph["shared"], json!([{ "v": 72, "tag": "g-two" }, { "v": 72, "tag": "g-two" }, null, { "v": 71, "tag": "g-one" }]));
    let fan = &enter("cap_fan")["f"]["leaves"];
    assert_eq!(fan.as_array().map(Vec::len), Some(100), "{fan}");
    assert_eq!(fan[99], json!({ "id": 99, "tag": "t99" }), "201 pointees in one call: past the walk's first visit table");
    let list = &enter("cap_list")["head"];
    assert_eq!(list["next"]["next"]["next"], json!("<circular ref to struct node>"), "{list}");
    let chain = &enter("cap_chain")["l"];
    assert_eq!(chain["down"]["down"]["down"], json!("<struct l4>"), "depth 3 prints three structs: {chain}");
    let texts: Vec<Value> = native.iter().filter(|e| e.0 == EventType::FunctionEnter && e.1 == "cap_text").map(|e| e.2.clone().unwrap()).take(5).collect();
    assert_eq!(texts[0], json!({ "s": "hello", "t": null }));
    assert!(texts[1]["s"].as_str().unwrap().ends_with('…') && texts[1]["s"].as_str().unwrap().chars().count() == 1025, "{}", texts[1]);
    assert_eq!(texts[1]["t"], json!("caf\u{e9}"), "not UTF-8: bytes as Latin-1");
    assert_eq!(texts[2]["t"], json!("edge!"));
    assert_eq!(texts[3]["s"], json!("cut!"), "a string cut by an unreadable page keeps what could be read");
    assert!(texts[3]["t"].as_str().unwrap().starts_with("<unreadable 0x"), "{}", texts[3]);
    assert_eq!(texts[4]["s"], json!("<unreadable 0x20>"));
    let tails: Vec<Value> = native.iter().filter(|e| e.0 == EventType::FunctionEnter && e.1 == "cap_tail").map(|e| e.2.clone().unwrap()).take(2).collect();
    assert_eq!(tails[0]["t"], json!({ "a": 1, "b": -1, "c": "1152921504606846976" }), "beyond 2^53: decimal text");
    assert_eq!(tails[1]["t"]["a"], json!(11), "a struct cut by an unreadable page: {}", tails[1]);
    assert!(tails[1]["t"]["b"].as_str().unwrap().starts_with("<unreadable 0x"), "{}", tails[1]);
    // Function pointers as gdb prints them: the target's name, "+offset" inside it.
    let ops: Vec<Value> = native.iter().filter(|e| e.0 == EventType::FunctionEnter && e.1 == "cap_ops").map(|e| e.2.clone().unwrap()).take(2).collect();
    let named = |v: &Value, name: &str| v.as_str().is_some_and(|s| s.starts_with("0x") && s.ends_with(&format!(" <{name}>")));
    assert!(named(&ops[0]["o"]["cmp"], "compare_ints"), "{}", ops[0]);
    assert!(named(&ops[0]["o"]["inside"], "compare_ints+4"), "{}", ops[0]);
    assert!(named(&ops[0]["o"]["alloc"], "malloc"), "a libc function: {}", ops[0]);
    assert_eq!(ops[0]["o"]["unset"], Value::Null, "{}", ops[0]);
    assert_eq!(ops[0]["chosen"], Value::Null);
    assert!(named(&ops[1]["chosen"], "compare_ints"), "a function pointer argument: {}", ops[1]);
    // Still named once the daemon let go of the session (its modules are stored with its captures).
    let id = native_events[0].session_id.clone();
    engine.stop(&id, true).await.expect("stop, retaining the events");
    assert!(engine.session(&id).is_err(), "the daemon no longer holds the session");
    let stored = content(&common::events::trace_events(&engine, &id));
    let again = stored.iter().filter(|e| e.0 == EventType::FunctionEnter && e.1 == "cap_ops").map(|e| e.2.clone().unwrap()).nth(4).expect("a native pass cap_ops");
    assert!(named(&again["o"]["cmp"], "compare_ints") && named(&again["o"]["alloc"], "malloc"), "{again}");
    let label = native.iter().find(|e| e.0 == EventType::FunctionExit && e.1 == "cap_label").unwrap();
    assert_eq!(label.3, Some(json!("even label")), "a C string result");
    // Unreadable pointees (a PROT_NONE page, a page cut) are found without a fault, which
    // costs a signal and Frida's JavaScript exception dispatch (~100 µs): process_vm_readv
    // checks pages not known readable, where the kernel allows it (capture_walk.c cap_copy).
    let after = &native_settings["after"]["capture"];
    assert!(after["records"].as_u64().unwrap() >= 3 * CALLS as u64 * 2, "{after}");
    // Rounds 2 and 3 repeat round 1's walks (capture_walk.c cap_subtree): the unchanged ones
    // are replayed, the ones whose pointer words changed below the roots (the fixture's
    // d3.down, gx.leaf) are noticed and walked again (else round 2 would print round 1's
    // gx.leaf, and its g3 would be missing) — and the events above equal the
    // serializer's either way. Each remembered walk is replayed or walked (and recorded), so
    // round 1 recorded a third of them; a walk of rounds 2 and 3 walked again makes it more.
    // Whether that walk counts as stale depends on whether it was still remembered: 100+
    // walks (cap_fan's leaves) share 256 slots hashed by address, and in some layouts gx's
    // set overflows and its walk is walked afresh each round (walksStale 0 in 2 of 12 runs).
    let (replayed, recorded) = (after["walksReplayed"].as_u64().unwrap(), after["walksRecorded"].as_u64().unwrap());
    assert!(replayed > 0, "{after}");
    assert!(recorded > (replayed + recorded) / 3, "a changed walk of rounds 2 and 3 was walked again: {after}");
    if after["vmReadv"] == json!(true) {
        assert_eq!(after["faultsRecovered"], json!(0), "{after}");
        assert!(after["checkedReads"].as_u64().unwrap() > 0, "{after}");
    }
}

/// Code built as distributions build it (-O2): GCC's interprocedural register allocation lets
/// callers keep values in registers the callee leaves alone, so no native wrapper may stand in
/// (symbols/abi.rs), but the native capture still runs, under Interceptor.attach (which saves
/// every register), and prints what the serializer prints.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_capture_of_optimized_code_prints_what_the_javascript_serializer_prints() {
    let (_home, engine) = engine();
    let (js_events, native_events, native_settings) = run_both_on(&engine, "c_capture_O2", json!({}), 3).await;
    assert_eq!(native_settings["capture"]["plans"], json!(FUNCTIONS), "every cap_* function has a native plan: {native_settings}");
    // IPA-RA code takes register-saving wrappers, where replaceFast can patch the function
    // (some -O2 bodies are too short: those attach).
    let paths = &native_settings["hookPaths"];
    let wrapped = paths["wrapped"].as_array().map_or(0, Vec::len);
    assert!(wrapped >= 4 && wrapped as u64 + paths["attached"].as_u64().unwrap() == FUNCTIONS as u64, "{native_settings}");
    let native = same_as_javascript(&js_events, &native_events, 3);
    let enter = |f: &str| native.iter().find(|e| e.0 == EventType::FunctionEnter && e.1 == f).unwrap().2.clone().unwrap();
    assert_eq!(enter("cap_holder")["h"]["link"]["tag"], json!("leaf-a"));
    assert_eq!(enter("cap_chain")["l"]["down"]["down"]["down"], json!("<struct l4>"));
    assert!(native_settings["after"]["capture"]["records"].as_u64().unwrap() >= 3 * CALLS as u64 * 2, "{native_settings}");
}

/// The same source compiled as C++: C++ units get native plans too (they print through the
/// same DWARF types), under Interceptor.attach: this program links no libgcc_s (it needs no
/// libstdc++), so there is no unwinder to tell about the wrapper frames, and a C++ function
/// is wrapped only once one knows them (agent/src/wrapper_unwind.ts; tracing_wrappers.rs
/// throws through wrapped C++ functions).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_capture_of_cxx_code_prints_what_the_javascript_serializer_prints() {
    let (_home, engine) = engine();
    let (js_events, native_events, native_settings) = run_both_on(&engine, "cxx_capture", json!({}), 3).await;
    assert_eq!(native_settings["capture"]["plans"], json!(FUNCTIONS), "every cap_* function has a native plan: {native_settings}");
    assert_eq!(native_settings["hookPaths"]["wrapped"].as_array().map(Vec::len), Some(0), "no unwinder, no C++ wrapper: {native_settings}");
    assert_eq!(native_settings["hookPaths"]["unwind"]["unwinder"], json!(false), "{native_settings}");
    let native = same_as_javascript(&js_events, &native_events, 3);
    let enter = |f: &str| native.iter().find(|e| e.0 == EventType::FunctionEnter && e.1 == f).unwrap().2.clone().unwrap();
    assert_eq!(enter("cap_holder")["h"]["link"]["tag"], json!("leaf-a"));
    assert_eq!(enter("cap_list")["head"]["next"]["next"]["next"], json!("<circular ref to struct node>"));
}

/// Where process_vm_readv is refused (a seccomp filter; here the tracing option
/// `checkedReads: false`), every pointee is read with the safe copy and an unreadable one
/// faults: the agent resumes the copy (capture_walk.c strobe_safe_copy, capture.ts), the
/// target lives on, and what is stored is still what the serializer prints.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_capture_through_std_string_prints_what_the_javascript_serializer_prints() {
    let (_home, engine) = engine();
    let (js_events, native_events, native_settings) = run_both_with(&engine, ("cxx_strings", "cap_*", 12, 14), json!({}), 3).await;
    assert_eq!(native_settings["capture"]["plans"], json!(12), "std::string, std::optional and node containers no longer keep the serializer: {native_settings}");
    let native = same_as_javascript_of(&js_events, &native_events, 3 * 14);
    let enters = |f: &str| native.iter().filter(|e| e.0 == EventType::FunctionEnter && e.1 == f).map(|e| e.2.clone().unwrap()).collect::<Vec<_>>();
    let people = enters("cap_person");
    assert_eq!(people[0]["p"]["name"], json!("Annabelle Longname-Smith"), "a heap string");
    assert_eq!(people[2]["p"]["name"], json!("Ann"), "changed to a short one (in the object's own buffer) in round 1");
    assert_eq!(people[1]["p"]["name"], json!("Bob Groß ✓"));
    assert_eq!(people[1]["p"]["note"], json!(""));
    assert_eq!(people[1]["p"]["buddy"]["note"], json!(format!("{}…", "x".repeat(1024))));
    assert_eq!((&people[0]["p"]["score"], &people[1]["p"]["score"], &people[1]["p"]["nick"]), (&json!(7), &json!(null), &json!("bobby")));
    assert_eq!((&people[0]["p"]["nick"], &people[2]["p"]["nick"]), (&json!("annie, a nickname past the short buffer"), &json!(null)), "engaged, then not, by round");
    // Node containers as their entries, in iteration order, as debug_eval prints them (gdb:
    // `std::map with 3 elements = {["one"] = 1, ["three"] = 3, ["two"] = 2}`).
    let keyed = &enters("cap_keyed")[1];
    assert_eq!(keyed["ranks"], json!({ "one": 1, "three": 4, "two": 2 }), "{keyed}");
    let seen = keyed["seen"].as_array().expect("a set is an array");
    assert_eq!((seen.len(), &seen[0], &seen[99], &seen[100]), (101, &json!(0), &json!(99), &json!("<3 more>")), "sorted, the first 100");
    assert_eq!(keyed["pairs"], json!([[1, 10], [1, 11], [2, 20]]), "keys repeat: pairs");
    assert_eq!(keyed["names"], json!({ "7": "seven" }), "behind a pointer");
    // Walked natively too: int keys below 0 come after the others, as JavaScript orders an
    // object's keys (gdb: `std::map with 3 elements = {[-1] = 0x…, [0] = 0x0, [5] = 0x…}`);
    // values that point to structs, followed; a set inside a map; an unordered_set.
    let registry = &enters("cap_registry")[2];
    let by_id = registry["reg"]["by_id"].as_object().expect("a map keyed by numbers is an object");
    assert_eq!(by_id.keys().collect::<Vec<_>>(), ["0", "5", "-1"], "{registry}");
    assert_eq!((&by_id["0"], &by_id["5"]["name"], &by_id["-1"]["buddy"]["name"]), (&json!(null), &json!("Bob Groß ✓"), &json!("Bob Groß ✓")));
    let mut tags: Vec<&str> = registry["reg"]["tags"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    tags.sort_unstable();
    assert_eq!(tags, ["blue", "green", "red"]);
    assert_eq!(registry["reg"]["groups"], json!({ "none": [], "odd": [1, 3, 5] }));
    let moving: Vec<Value> = enters("cap_registry").iter().map(|a| a["moving"].clone()).collect();
    assert_eq!(moving, [json!({ "0": 0, "3": 9, "-2": 0 }), json!({ "0": 0, "1": 10, "3": 9, "-2": -1 }), json!({ "0": 0, "1": 10, "2": 20, "3": 9, "-2": -2 })], "a node more each round");
    let team = &enters("cap_team")[0]["t"];
    assert_eq!(team["members"][1]["name"], json!("Bob Groß ✓"), "{team}");
    assert_eq!(team["motto"], json!("ship it"));
    let picked: Vec<Value> = native.iter().filter(|e| e.0 == EventType::FunctionExit && e.1 == "cap_pick[abi:cxx11]").map(|e| e.3.clone().unwrap()).collect();
    assert_eq!(picked[..2], [json!("the team with a title longer than fifteen"), json!("Bob Groß ✓")], "a std::string * result");
    // Not trivial for calls: by the address of the caller's copy, and through the hidden
    // result pointer (the parameters after them in the registers they really take).
    assert_eq!(enters("cap_greet")[1], json!({ "name": "Bob Groß ✓", "times": 1 }), "a std::string by value");
    let greeted: Vec<Value> = native.iter().filter(|e| e.0 == EventType::FunctionExit && e.1 == "cap_greet").map(|e| e.3.clone().unwrap()).collect();
    assert_eq!(greeted[..2], [json!("Bob Groß ✓"), json!("Bob Groß ✓!")], "a std::string returned");
    assert_eq!(enters("cap_tally")[2], json!({ "t": { "count": 12, "label": "tally" }, "k": 2 }), "a class with a destructor by value");
    // An empty class takes no register (gdb: `by = ..., p = ..., k = 1`).
    let ranked = &enters("cap_rank")[1];
    assert_eq!((&ranked["by"], &ranked["p"]["name"], &ranked["k"]), (&json!({}), &json!("Bob Groß ✓"), &json!(1)), "{ranked}");
    // std::vector as its elements (gdb: `std::vector of length 150, capacity 150 = {2, 7, …}`):
    // the first 100 and a count, a new length each round.
    let lists = enters("cap_list");
    assert_eq!((&lists[2]["people"][0]["name"], &lists[2]["words"]), (&json!("Bob Groß ✓"), &json!(["x", "yz"])), "{}", lists[2]);
    let nums: Vec<&Value> = lists.iter().map(|l| &l["nums"]).collect();
    assert_eq!((nums[2].as_array().map(Vec::len), &nums[2][0], &nums[2][99], &nums[2][100]), (Some(101), &json!(2), &json!(7), &json!("<50 more>")));
    assert_eq!((&nums[0][100], &nums[1][100]), (&json!("<48 more>"), &json!("<49 more>")), "each round's length");
    // std::unique_ptr / shared_ptr as what they point to (gdb: `{get() = 0x…}`).
    let owned = enters("cap_owned");
    assert_eq!((&owned[0]["u"]["name"], &owned[1]["u"], &owned[0]["s"]["name"]), (&json!("Bob Groß ✓"), &json!(null), &json!("Annabelle Longname-Smith")), "{}", owned[0]);
    assert_eq!((&owned[2]["h"]["one"]["age"], &owned[2]["h"]["two"]["age"], &owned[2]["h"]["n"]), (&json!(44), &json!(31), &json!(2)), "{}", owned[2]);
    // A std::string_view as its text (gdb: `v = "Bob Groß ✓"`).
    assert_eq!(enters("cap_view")[1], json!({ "v": "Bob Groß ✓", "n": 1 }));
}

/// A node container an argument refers to (a std::map's, std::unordered_map's and std::list's
/// first nodes) is a
/// remembered walk like a struct's pointee: while it is unchanged it travels as a reference,
/// a changed value as the words changed since, a node freed and another allocated in its
/// place (same address, other links and key) sends it walked again — and every call prints
/// what the serializer prints; so are the same containers in a struct an argument points to
/// (walked after that struct's walk, whose room they exceed). Before, each record carried
/// every node: ~10 KB an enter here, which filled the ring (the cxx_nodes bench lost more
/// than half its records).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_containers_travel_as_references_and_decode_the_same() {
    let (_home, engine) = engine();
    let rounds = 4;
    let (js_events, native_events, native_settings) = run_both_with(&engine, ("cxx_strings", "stock_*", 2, 20), json!({}), rounds).await;
    let native = same_as_javascript_of(&js_events, &native_events, rounds * 20);
    let enters = |f: &str| native.iter().filter(|e| e.0 == EventType::FunctionEnter && e.1 == f).map(|e| e.2.clone().unwrap()).collect::<Vec<Value>>();
    let takes = enters("stock_take");
    let stock = takes[4]["stock"].as_object().expect("a map keyed by text is an object");
    assert_eq!((stock.len() >= 100, &takes[2]["stock"]["item007"], &stock["item007"]), (true, &json!(7), &json!(8)), "{}", takes[4]);
    assert_eq!((takes[5]["orders"].get("0"), takes[6]["orders"].get("0"), &takes[6]["orders"]["100"]), (Some(&json!(0)), None, &json!(0)), "one taken, one placed in the first round: {}", takes[6]);
    // A std::list as its elements, in order (gdb: `std::__cxx11::list = {[0] = 1, …, [29] = 100}`).
    let queue = takes[6]["queue"].as_array().unwrap_or_else(|| panic!("a list is an array: {}", takes[6]));
    assert_eq!((queue.len(), &queue[0], &queue[29]), (30, &json!(1), &json!(100)), "the front taken, one more at the back");
    // The same containers in a struct behind a pointer: remembered on their own too, after
    // that struct's walk (too many nodes for its room).
    let audits = enters("stock_audit");
    assert_eq!(audits[6]["till"]["shop"]["queue"], takes[6]["queue"], "{}", audits[6]);
    assert_eq!(audits[39]["till"]["shop"]["stock"], takes[39]["stock"]);
    assert_eq!(takes[39]["stock"].get("item006"), None, "erased in the last round");
    let after = &native_settings["after"]["capture"];
    let per_record = after["payloadBytes"].as_u64().unwrap() / after["records"].as_u64().unwrap().max(1);
    assert!(per_record < 2200, "containers sent whole each call: ~5 KB a record (enters and exits); 3.4 KB when the ones behind a pointer are not remembered: {per_record} B ({after})");
}

/// An argument struct at a new address each call is sent whole and not kept: keeping it
/// made the daemon store a span row per call that no record ever referred to (the cxx_nodes
/// bench's key strings: 40,011 span rows, the store's writer 5 µs a typed row). It is kept
/// from its second call on (the SQLite bench's cursors and rows).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_at_new_addresses_leave_no_stored_span() {
    let (home, engine) = engine();
    let rounds = 4;
    let (js_events, native_events, _) = run_both_with(&engine, ("cxx_strings", "note_*", 1, 10), json!({}), rounds).await;
    let native = same_as_javascript_of(&js_events, &native_events, rounds * 10);
    let last = native.iter().rev().find(|e| e.0 == EventType::FunctionEnter).and_then(|e| e.2.clone()).unwrap();
    assert_eq!(last["note"], json!({ "id": 39, "text": "note 39" }));
    let db = rusqlite::Connection::open(home.path().join("strobe.db")).unwrap();
    let spans: i64 = db.query_row("SELECT count(*) FROM capture_spans", [], |r| r.get(0)).unwrap();
    assert_eq!(spans, 0, "a span stored for an argument no later call had");
}

/// rust_captured's functions and their calls per round.
const RUST_FUNCTIONS: usize = 26;
const RUST_CALLS: usize = 30;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_capture_of_rust_code_prints_what_the_javascript_serializer_prints() {
    let (_home, engine) = engine();
    let fixture = ("rust_captured", "captured::cap_*", RUST_FUNCTIONS, RUST_CALLS);
    let (js_events, native_events, native_settings) = run_both_with(&engine, fixture, json!({}), 3).await;
    // One plan per function: no two take the same types (and `&str`, slices: two registers);
    // hash tables and B-trees included (capture_walk.c cap_table, cap_btree).
    assert_eq!(native_settings["capture"]["plans"], json!(RUST_FUNCTIONS), "every cap_* function has a native plan: {native_settings}");
    let after = &native_settings["after"]["capture"];
    assert!(after["records"].as_u64().unwrap() >= 3 * RUST_CALLS as u64 * 2, "the native hook recorded them: {after}");
    // The root's walk from `parent` is remembered in round 0 and replayed after; its slot's
    // change of variant in rounds 1 and 2 sends it back to the walk (stale).
    assert!(after["walksReplayed"].as_u64().unwrap() > 0 && after["walksStale"].as_u64().unwrap() > 0, "{after}");
    let native = same_as_javascript_of(&js_events, &native_events, 3 * RUST_CALLS);

    // And they are the program's values.
    let enters = |f: &str| native.iter().filter(|e| e.0 == EventType::FunctionEnter && e.1 == f).map(|e| e.2.clone().unwrap()).collect::<Vec<_>>();
    let first = &enters("captured::cap_item")[0]["it"];
    assert_eq!(first["name"], json!("first"));
    assert_eq!(first["note"], json!("a note"));
    assert_eq!(first["nums"], json!([0, 1, 2]));
    assert_eq!(first["leaves"], json!([{ "id": 1, "tag": "one" }, { "id": 2, "tag": "two" }]));
    assert_eq!(first["words"], json!(["alpha", "béta", ""]));
    assert_eq!((&first["shorts"], &first["empty"], &first["none"]), (&json!([7, 8, 9]), &json!(""), &json!([])));
    assert_eq!((&first["shape"], &first["count"]), (&json!("Dot"), &json!(0)), "round 0: Dot, Some(0)");
    assert_eq!(first["parent"]["name"], json!("root"), "Option<&Item> followed: {first}");
    assert_eq!(first["parent"]["parent"], json!(null), "None of a niche-encoded Option");
    assert_eq!(first["res"], json!({ "Ok": 0 }));
    assert_eq!(first["me"], json!("<circular ref to Item>"), "{first}");
    let second = enters("captured::cap_item");
    assert_eq!((&second[1]["it"]["res"], &second[3]["it"]["res"]), (&json!({ "Err": "bad 0" }), &json!({ "Ok": 1 })), "Result both ways, round by round");
    let slots: Vec<Value> = enters("captured::cap_item").iter().step_by(2).map(|a| a["it"]["parent"]["slot"].clone()).collect();
    // (Pair at depth 1: its fields at depth 0, the reference not followed.)
    assert_eq!(slots, vec![json!("Empty"), json!({ "Name": "n1" }), json!({ "Pair": { "__0": 2, "__1": "<Leaf>" } })], "a variant changed below the arguments, round by round");
    let shapes: Vec<Value> = enters("captured::cap_shape").iter().step_by(2).map(|a| a["s"].clone()).collect();
    assert_eq!(shapes, vec![json!("Dot"), json!({ "Circle": 1 }), json!({ "Rect": { "w": 2, "h": 2 } })], "each variant as its round set it");
    let texts = &enters("captured::cap_texts")[0]["t"];
    assert_eq!(texts["long"], json!(format!("{}…", "x".repeat(1024))));
    assert_eq!(texts["multi"], json!("grüße ✓ 日本"));
    let cut = texts["cut"].as_str().unwrap();
    assert!(cut.starts_with("aÃ©") && cut.ends_with('…'), "cut inside a UTF-8 sequence at 1,024 bytes: bytes as Latin-1, as the serializer: {cut}");
    assert_eq!(texts["nul"], json!("a\u{0}b"), "an embedded NUL is text in a Rust string");
    assert_eq!(texts["many"].as_array().map(Vec::len), Some(101), "100 elements and a count of the rest: {}", texts["many"]);
    assert_eq!(texts["many"][100], json!("<50 more>"));
    assert_eq!(enters("captured::cap_name")[0]["s"], json!("second-é"));
    // `&str` and slices travel in two registers each.
    assert_eq!(enters("captured::cap_str")[1], json!({ "s": "second-é", "n": 1 }));
    let slices = enters("captured::cap_slice");
    assert_eq!(slices[0], json!({ "v": [{ "id": 1, "tag": "one" }, { "id": 2, "tag": "two" }], "tag": "grüße ✓ 日本" }));
    assert_eq!(slices[1]["v"], json!([{ "id": 2, "tag": "two" }]), "a subslice");
    assert_eq!(enters("captured::cap_shorts")[0], json!({ "xs": [] }));
    // Small values by value in one register, and returned in rax.
    let maybe = enters("captured::cap_maybe");
    assert_eq!(maybe[..2], [json!({ "o": { "id": 77, "tag": "lone" }, "k": "Small" }), json!({ "o": null, "k": "Large" })]);
    let found: Vec<Value> = native.iter().filter(|e| e.0 == EventType::FunctionExit && e.1 == "captured::cap_find").map(|e| e.3.clone().unwrap()).collect();
    assert_eq!(found, vec![json!({ "id": 1, "tag": "one" }), json!({ "id": 2, "tag": "two" }), json!(null)], "Some(&leaf), then None");
    assert_eq!(enters("captured::cap_opt")[..2], [json!({ "o": { "id": 77, "tag": "lone" } }), json!({ "o": null })]);
    let picked = native.iter().find(|e| e.0 == EventType::FunctionExit && e.1 == "captured::cap_pick").unwrap();
    assert_eq!(picked.3.as_ref().unwrap()["name"], json!("first"), "a returned reference, followed");
    // Past 16 bytes, by address: parameters, and results through the hidden pointer in rax.
    assert_eq!(enters("captured::cap_owned")[2], json!({ "s": "owned-2", "v": [0, 1] }));
    let exits = |f: &str| native.iter().filter(|e| e.0 == EventType::FunctionExit && e.1 == f).map(|e| e.3.clone().unwrap()).collect::<Vec<_>>();
    assert_eq!(exits("captured::cap_make")[1], json!({ "id": 1, "tag": "made-1" }), "a struct returned through a hidden pointer");
    assert_eq!(exits("captured::cap_label")[0], json!("lone#77"), "a String returned");
    // Pairs in two registers: `Option<u32>` (4-byte halves), a slice returned in rax and rdx.
    let halves: Vec<Value> = enters("captured::cap_half").iter().map(|a| a["n"].clone()).collect();
    assert_eq!(halves[..3], [json!(10), json!(null), json!(12)], "Some, None, Some by round");
    assert_eq!(exits("captured::cap_half")[..3], [json!(5), json!(null), json!(6)]);
    assert_eq!(exits("captured::cap_window")[..3], [json!([{ "id": 1, "tag": "one" }, { "id": 2, "tag": "two" }]), json!([{ "id": 2, "tag": "two" }]), json!([])]);
    assert_eq!(enters("captured::cap_count")[0]["arg2"], json!("<zero-sized>"), "a zero-sized parameter (unnamed in DWARF) prints the serializer's reason");
    assert_eq!(enters("captured::cap_count")[0]["min"], json!(5));
    // `()` (unnamed in DWARF) before other parameters takes no register (gdb: `n = 1, tag =
    // "grüße ✓ 日本"`).
    assert_eq!(enters("captured::cap_unit")[1], json!({ "arg0": "<zero-sized>", "n": 1, "tag": "grüße ✓ 日本" }));
    // A HashMap and B-trees as their entries, as debug_eval prints them (gdb: `HashMap(size=1)
    // = {["one"] = 1}`), a B-tree in key order through its internal nodes.
    let table = &enters("captured::cap_table")[0];
    assert_eq!(table["m"], json!({ "one": 1 }));
    assert_eq!(table["sorted"], json!({ "1": "one", "2": "two", "3": "three" }));
    let seen = table["seen"].as_array().expect("a set is an array");
    assert_eq!((seen.len(), &seen[0], &seen[99], &seen[100]), (101, &json!(0), &json!(99), &json!("<50 more>")), "{table}");
    // Walked natively: the entries of the first 100 full slots of 130 (a JSON object lists
    // number keys in order), each value's text followed, and the count of the rest; a set
    // as an array; a B-tree with internal nodes in key order, every key's and value's text.
    let hashed = &enters("captured::cap_indexes")[1];
    let index = hashed["index"].as_object().expect("a map keyed by numbers is an object");
    assert_eq!((index.len(), &index["<30 more>"]), (101, &json!("…")), "{hashed}");
    assert!(index.iter().filter(|(k, _)| !k.starts_with('<')).all(|(k, v)| v["tag"] == json!(format!("leaf-{k}")) && v["id"].to_string() == *k), "{hashed}");
    let mut tags: Vec<&str> = hashed["tags"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    tags.sort_unstable();
    assert_eq!(tags, ["blue", "green", "red"]);
    let names = hashed["names"].as_object().expect("a map keyed by strings is an object");
    assert_eq!(names.keys().collect::<Vec<_>>(), (0..40).map(|i| format!("name-{i:02}")).collect::<Vec<_>>().iter().collect::<Vec<_>>());
    assert_eq!((&names["name-00"], &names["name-39"]["tag"]), (&json!({ "id": 0, "tag": "leaf-0" }), &json!("leaf-39")));
    let slots = &hashed["slots"];
    assert_eq!((&slots["0"], &slots["1"], &slots["28"]), (&json!("Empty"), &json!({ "Name": "slot-1" }), &json!({ "Name": "slot-28" })), "{slots}");
    assert_eq!(slots["2"]["Pair"]["__1"], json!({ "id": 77, "tag": "lone" }), "a reference in the chosen variant, followed: {slots}");
    assert_eq!(enters("captured::cap_tuple")[1], json!({ "t": [8, "pair", -1] }), "a tuple as an array");
    // An Rc / Arc as debug_eval prints it: its owners, then the value at the default depth
    // (gdb with Rust's printers: `Rc(strong=2, weak=0) = {id: 5, tag: "rc"}`).
    let shared = &enters("captured::cap_shared")[0];
    assert_eq!(shared["one"], json!({ "@strong": 2, "id": 5, "tag": "rc" }), "an Rc: {shared}");
    assert_eq!(shared["all"], json!({ "@strong": 1, "id": 6, "tag": "arc" }), "an Arc: {shared}");
    let shared = enters("captured::cap_shared");
    assert_eq!((&shared[1]["hits"], &shared[1]["total"]), (&json!(1), &json!(10)), "a Cell and an atomic as what they hold, as of the second call");
    // A u128 in two registers, as decimal text past 2^53 (gdb: `u = 1180591620717411303425,
    // i = -8, tag = "wide"`).
    assert_eq!(enters("captured::cap_wide")[1], json!({ "u": "1180591620717411303425", "i": -8, "tag": "wide" }));
}

/// A closure's environment pointer takes rdi without a DWARF entry: its listed parameters
/// follow, in the registers the serializer's recipe names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_capture_of_rust_closures_prints_what_the_javascript_serializer_prints() {
    let (_home, engine) = engine();
    let fixture = ("rust_captured", "captured::cap_count::**", 1, 3);
    let (js_events, native_events, native_settings) = run_both_with(&engine, fixture, json!({}), 3).await;
    assert_eq!(native_settings["capture"]["plans"], json!(1), "the closure has a native plan: {native_settings}");
    let native = same_as_javascript_of(&js_events, &native_events, 3 * 3);
    let names: Vec<Value> = native.iter().filter(|e| e.0 == EventType::FunctionEnter).map(|e| e.2.clone().unwrap()["it"]["name"].clone()).collect();
    assert_eq!(names[..3], [json!("first"), json!("second-é"), json!("third")], "each item in turn, past the environment pointer");
}

/// c_by_value's functions and calls per round: cap_make, cap_small, cap_sum, cap_pick,
/// cap_tag, cap_scale, cap_mix, cap_seven, cap_wide, cap_note, cap_many, cap_lots,
/// cap_wider, cap_vadd, cap_mixd, cap_odd, cap_names, cap_anon.
const BY_VALUE_FUNCTIONS: usize = 18;

/// Structs by value in one or two registers, struct results (in rax, rax and rdx, or
/// through the hidden pointer rax holds at exit), floats in xmm registers and values on the
/// stack get native plans, and print what the serializer prints.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_capture_of_structs_by_value_prints_what_the_javascript_serializer_prints() {
    let (_home, engine) = engine();
    let fixture = ("c_by_value", "cap_*", BY_VALUE_FUNCTIONS, BY_VALUE_FUNCTIONS);
    let (js_events, native_events, native_settings) = run_both_with(&engine, fixture, json!({}), 3).await;
    assert_eq!(native_settings["capture"]["plans"], json!(BY_VALUE_FUNCTIONS), "every cap_* function has a native plan: {native_settings}");
    let native = same_as_javascript_of(&js_events, &native_events, 3 * BY_VALUE_FUNCTIONS);
    let enters = |f: &str| native.iter().filter(|e| e.0 == EventType::FunctionEnter && e.1 == f).map(|e| e.2.clone().unwrap()).collect::<Vec<_>>();
    let exits = |f: &str| native.iter().filter(|e| e.0 == EventType::FunctionExit && e.1 == f).map(|e| e.3.clone().unwrap()).collect::<Vec<_>>();
    let made = exits("cap_make");
    assert_eq!(made[1], json!({ "id": 1, "name": "beta-é", "leaf": { "id": 2, "tag": "leaf-two" }, "vals": [1, 2, -1] }), "a 40-byte result through the hidden pointer");
    assert_eq!(enters("cap_make")[2], json!({ "seed": 2, "name": "" }), "the hidden pointer took rdi: seed is in rsi");
    assert_eq!(enters("cap_small")[2], json!({ "s": { "a": 2, "b": -2, "c": "c" }, "t": { "label": "alpha", "n": 2000 } }), "8 and 16 bytes in registers");
    assert_eq!(exits("cap_small")[2], json!({ "a": 2002, "b": -3, "c": "d" }), "an 8-byte struct in rax");
    assert_eq!(enters("cap_sum")[0]["l"], json!({ "id": 2, "tag": "leaf-two" }));
    assert_eq!(exits("cap_pick")[1], json!({ "id": 2, "tag": "leaf-two" }), "{:?}", exits("cap_pick"));
    assert_eq!(exits("cap_tag")[..2], [json!({ "label": "leaf-one", "n": 0 }), json!({ "label": "leaf-two", "n": -7 })], "16 bytes in rax and rdx");
    assert_eq!(enters("cap_scale")[2], json!({ "x": 3, "k": 3, "f": 0.5 }), "doubles and floats in xmm0 and xmm1");
    assert_eq!(exits("cap_scale")[2], json!(9.5), "a double result in xmm0");
    assert_eq!(enters("cap_mix")[1], json!({ "l": { "id": 2, "tag": "leaf-two" }, "a": -1.5 }));
    assert_eq!(exits("cap_mix")[1], json!(-3), "a float result");
    let seven = &enters("cap_seven")[1];
    assert_eq!((&seven["f"], &seven["g"], &seven["h"], &seven["x"]), (&json!(1), &json!({ "id": 1, "tag": "leaf-one" }), &json!("beta-é"), &json!(1.5)), "on the stack: {seven}");
    assert_eq!(enters("cap_wide")[2], json!({ "b": { "id": 2, "name": "", "leaf": { "id": 1, "tag": "leaf-one" }, "vals": [2, 4, -2] }, "k": 102 }), "a struct passed in memory");
    assert_eq!(enters("cap_note")[1], json!({ "l": { "id": 2, "tag": "leaf-two" }, "fmt": "round %d of %s" }), "a variadic function's declared parameters");
    assert_eq!(exits("cap_wider")[1], json!("<long double in an x87 register (not captured)>"), "an x87 result says why it is missing");
    // Structs of floats: in two xmm registers, in an xmm and an integer register, two floats
    // in one xmm register; as parameters and results.
    assert_eq!(enters("cap_vadd")[1], json!({ "a": { "x": 2, "y": -2 }, "b": { "x": 0.5, "y": 4 }, "l": { "id": 2, "tag": "leaf-two" } }));
    assert_eq!(exits("cap_vadd")[1], json!({ "x": 4.5, "y": 2 }));
    assert_eq!(enters("cap_mixd")[2], json!({ "m": { "w": 2.5, "id": 102 }, "p": { "a": 0.5, "b": -3 }, "f": 1.5 }));
    assert_eq!(exits("cap_mixd")[2], json!({ "w": 2.75, "id": 99 }));
    // A packed struct on the stack, a union of a double and a long in rdi, bitfields in rsi
    // (gdb: `p = {c = 112 'p', i = 123457, s = -3}, u = {d = 3, l = 4613937818241073152},
    // b = {a = 5, b = 17, c = -19}, k = 1`).
    let odd = json!({ "p": { "c": "p", "i": 123457, "s": -3 }, "u": { "d": 3, "l": "4613937818241073152" }, "b": { "a": 5, "b": 17, "c": -19 }, "k": 1 });
    assert_eq!(enters("cap_odd")[1], odd);
    // char arrays: text as strings (gdb: `name = "hellp\000…"`, `full = "abcd"`, `utf =
    // "Groß\000…"`, `big = 'x' <repeats 1100 times>`), binary data element by element.
    let names = &enters("cap_names")[1]["n"];
    let big = format!("{}…", "x".repeat(1024));
    let expected = json!({ "name": "hellp", "full": "abcd", "mac": [0, 26, 43, 60, 77, 94], "ctl": ["a", 1, "b", 0], "utf": "Groß", "empty": "", "big": big });
    assert_eq!(names, &expected);
    // An anonymous union and struct: their members as the struct's (gdb: `{kind = 7, {i = 0,
    // d = 2.5}, {x = 3, y = 5}}`); under one `<anonymous>` key the union was lost.
    assert_eq!(enters("cap_anon")[1], json!({ "a": { "kind": 7, "i": 0, "d": 2.5, "x": 3, "y": 5 } }));
    let many = &enters("cap_many")[1];
    assert_eq!((&many["g"], &many["h"], &many["i"], &many["j"], &many["k"], &many["l"]), (&json!(8), &json!({ "id": 2, "tag": "leaf-two" }), &json!("beta-é"), &json!(10), &json!(11), &json!(12)), "twelve parameters, six on the stack: {many}");
    let lots = &enters("cap_lots")[1];
    assert_eq!(lots.as_object().unwrap().len(), 34, "every parameter is in the event: {lots}");
    assert_eq!((&lots["p1"], &lots["p31"], &lots["p32"]), (&json!(1), &json!(32), &json!({ "id": 2, "tag": "leaf-two" })), "the first 32 have values: {lots}");
    assert_eq!((&lots["p33"], &lots["p34"]), (&json!("<parameter 33 of 34: only the first 32 are captured>"), &json!("<parameter 34 of 34: only the first 32 are captured>")), "the rest say why they have none");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_capture_recovers_faulting_reads_without_checked_reads() {
    let (_home, engine) = engine();
    let (js_events, native_events, native_settings) = run_both(&engine, json!({ "checkedReads": false }), 3).await;
    let after = &native_settings["after"]["capture"];
    assert_eq!(after["vmReadv"], json!(false), "{after}");
    assert_eq!(after["checkedReads"], json!(0), "{after}");
    assert!(after["faultsRecovered"].as_u64().unwrap() > 0, "unreadable pointees faulted and were recovered: {after}");
    same_as_javascript(&js_events, &native_events, 3);
}

/// The walk from a pointee that did not change since this thread last sent it travels as a
/// 12-byte reference to what was sent, one where a few words changed as those words
/// (capture_walk.c cap_same, cap_diff), and the daemon puts the blocks back before decoding
/// (src/engine/capture_spans.rs). Over 8 rounds the fixture's remembered pointees stay the
/// same or change a byte of a string or a counter (g2tag, hub.pad): what is stored is still
/// what the serializer prints, call for call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unchanged_pointees_travel_as_references_and_decode_the_same() {
    let (_home, engine) = engine();
    let (js_events, native_events, native_settings) = run_both(&engine, json!({}), 8).await;
    same_as_javascript(&js_events, &native_events, 8);
    let after = &native_settings["after"]["capture"];
    assert!(after["walksUnchanged"].as_u64().unwrap() > 0, "{after}");
    assert!(after["walksDelta"].as_u64().unwrap() > 0, "{after}");
}

/// A record lost in a full ring may have carried a span that later references name: the
/// walk then sends every span whole again (capture_walk.c strobe_cap_forget), so no stored
/// event misses blocks. A 1,024-slot ring drained every millisecond loses records all through
/// 100 quick rounds, between ones it stores (checked: with the spans of lost records still
/// referred to, stored events print `<unreadable …>` where the serializer printed values); every native event stored must still be one
/// the serializer printed (pass 1, the same calls at the same addresses).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn references_never_name_a_span_whose_record_was_lost() {
    let (_home, engine) = engine();
    let rounds = 100;
    let id = launch_capture(&engine, rounds as u64).await;
    let patterns = ["cap_*".to_string()];
    let mut passes = Vec::new();
    for pass in 0..2 {
        common::events::wait_for_stdout(&engine, &id, &format!("ready {pass}"), Duration::from_secs(60)).await;
        let options = if pass == 0 {
            json!({ "nativeCapture": true, "ringRecords": 1024, "drainIntervalMs": 1, "hotCallsPerSec": 0, "costShare": 0 })
        } else {
            json!({ "nativeCapture": false })
        };
        engine.configure_tracing(&id, options).await.expect("configure tracing");
        engine.trace(Some(&id), &patterns, &[]).await.expect("trace");
        let before = common::events::trace_events(&engine, &id).len();
        engine.send_stdin(&id, b"go\n").await.expect("stdin");
        common::events::wait_for_stdout(&engine, &id, &format!("pass {pass} done"), Duration::from_secs(60)).await;
        let want = |n: usize| if pass == 0 { n > before && engine.status(&id).unwrap().events_lost + (n - before) as u64 >= (rounds * CALLS * 2) as u64 } else { n >= before + rounds * CALLS * 2 };
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while !want(common::events::trace_events(&engine, &id).len()) && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if pass == 0 {
            engine.trace(Some(&id), &[], &patterns).await.expect("untrace");
        }
        passes.push(common::events::trace_events(&engine, &id)[before..].to_vec());
    }
    let lost = engine.status(&id).expect("status").events_lost;
    let capture = engine.configure_tracing(&id, json!({})).await.expect("settings")["capture"].clone();
    engine.send_stdin(&id, b"end\n").await.expect("stdin");
    common::events::wait_for_exit(&engine, &id).await;
    let js = content(&passes[1]);
    let mut native = content(&passes[0]);
    assert!(lost > 0, "the small ring lost records");
    assert!(capture["walksUnchanged"].as_u64().unwrap() > 0, "references were sent between the losses: {capture}");
    assert!(native.len() >= 2 * CALLS, "some records were stored: {}", native.len());
    put_back_the_big_pointee(&js, &mut native);
    let printed: std::collections::HashSet<String> = js.iter().map(|j| format!("{:?}", (j.0, &j.1, &j.2, &j.3))).collect();
    for (i, e) in native.iter().enumerate() {
        let same = printed.contains(&format!("{:?}", (e.0, &e.1, &e.2, &e.3)));
        assert!(same, "stored native event {i} of {} is no event the serializer printed: {e:?}", native.len());
    }
}

/// A process that exits with many typed records still in its ring sends them all: a typed
/// record takes several ring slots, so a drain batch (counted in slots) holds fewer records
/// than its size, and the drain must not take that for an empty ring. Stored + lost = every
/// enter and exit (with this ring, nothing is lost).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_records_left_in_the_ring_at_exit_all_arrive() {
    let (_home, engine) = engine();
    let rounds = 40;
    let id = launch_capture(&engine, rounds).await;
    common::events::wait_for_stdout(&engine, &id, "ready 0", Duration::from_secs(60)).await;
    // Drained once a second: the passes end long before, their records wait in the ring.
    let options = json!({ "nativeCapture": true, "ringRecords": 1 << 20, "drainIntervalMs": 1000, "hotCallsPerSec": 0 });
    engine.configure_tracing(&id, options).await.expect("configure tracing");
    engine.trace(Some(&id), &["cap_*".to_string()], &[]).await.expect("trace");
    for pass in 0..2 {
        if pass == 1 {
            common::events::wait_for_stdout(&engine, &id, "ready 1", Duration::from_secs(60)).await;
        }
        engine.send_stdin(&id, b"go\n").await.expect("stdin");
    }
    common::events::wait_for_stdout(&engine, &id, "pass 1 done", Duration::from_secs(60)).await;
    engine.send_stdin(&id, b"end\n").await.expect("stdin");
    common::events::wait_for_exit(&engine, &id).await;
    let stored = common::events::trace_events(&engine, &id).len() as u64;
    let lost = engine.status(&id).expect("status").events_lost;
    assert_eq!((stored, lost), (2 * 2 * rounds * CALLS as u64, 0), "stored and lost of {rounds} rounds × 2 passes");
}

/// The walk from each pointee of an argument is remembered and replayed on later calls
/// (capture_walk.c cap_subtree) only while every pointer word it read is unchanged. Here
/// only cap_graph is traced (its few walks stay remembered), and the fixture changes, from
/// one round to the next, which struct gx.leaf points to (g3 is reached by no other
/// pointer: a stale replay would leave it out and print `<unreadable …>`), the bytes of a
/// string at the same address, and the values of remembered structs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_walk_notices_changed_pointers_below_the_arguments() {
    let (_home, engine) = engine();
    let id = launch_capture(&engine, 3).await;
    common::events::wait_for_stdout(&engine, &id, "ready 0", Duration::from_secs(60)).await;
    engine.configure_tracing(&id, json!({ "nativeCapture": true, "hotCallsPerSec": 0, "costShare": 0 })).await.expect("configure tracing");
    engine.trace(Some(&id), &["cap_graph".to_string()], &[]).await.expect("trace");
    engine.send_stdin(&id, b"go\n").await.expect("stdin");
    common::events::wait_for_stdout(&engine, &id, "pass 0 done", Duration::from_secs(60)).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while common::events::trace_events(&engine, &id).len() < 6 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let after = engine.configure_tracing(&id, json!({})).await.expect("settings")["capture"].clone();
    let graphs: Vec<Value> = content(&common::events::trace_events(&engine, &id))
        .into_iter()
        .filter(|e| e.0 == EventType::FunctionEnter)
        .map(|e| e.2.unwrap()["t"].clone())
        .collect();
    assert_eq!(graphs.len(), 3, "{graphs:?}");
    let leaf = |v: i64, tag: &str| json!({ "v": v, "tag": tag });
    for (round, g) in graphs.iter().enumerate() {
        let odd = round % 2 == 1;
        assert_eq!(g["x"]["leaf"], if odd { leaf(73, "g-three") } else { leaf(71, "g-one") }, "round {round}: {g}");
        assert_eq!(g["again"], g["x"], "round {round}");
        assert_eq!(g["shared"][0], leaf(72, ["g-two", "g-twW", "g-tw"][round]), "round {round}: {g}");
        assert!(g["mid"]["bad"].as_str().unwrap().starts_with("<unreadable 0x"), "round {round}: {g}");
        // One copy of the hub serves both sub-walks that reach it (capture_walk.c
        // cap_big_find); its pointer word is read from that copy.
        assert_eq!(g["hub"]["leaf"], if round == 2 { leaf(73, "g-three") } else { leaf(71, "g-one") }, "round {round}: {g}");
        assert_eq!(g["hub"]["pad"][0], json!(round), "round {round}: {g}");
        assert_eq!(g["mid"]["hub"]["leaf"], json!("<struct gleaf>"), "round {round}: {g}");
    }
    assert!(after["walksReplayed"].as_u64().unwrap() > 0, "{after}");
    assert!(after["walksStale"].as_u64().unwrap() > 0, "{after}");
    for line in [&b"go\n"[..], b"end\n"] {
        engine.send_stdin(&id, line).await.expect("stdin");
    }
    common::events::wait_for_exit(&engine, &id).await;
}
