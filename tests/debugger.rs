//! The active debugger against real processes: breakpoints, logpoints, pause/resume, stepping
//! and locals, driven as CI scenarios (`strobe run x.lua`) through the Lua primitives
//! (`session:breakpoint{}`, `session:continue{}`, `session:locals{}`, `session:set_local{}`).
//! Fixtures: `tests/fixtures/c/debugee.c` (built at -O0 and -O2) and `rust/debugee.rs`; each
//! waits for a line on stdin after printing "ready", so breakpoints are set before it runs.

mod common;

use std::process::Command;

use common::{fixtures_dir, line_of};

const C: &str = "c/debugee.c";

/// Lua helpers every scenario starts with.
const PRELUDE: &str = r#"
local FIX, REPO = arg[1], arg[2]
local function launch(bin, mode)
  local s = strobe.launch{command = FIX .. "/" .. bin, args = {mode}, projectRoot = REPO}
  assert(s:wait_for{eventType = "stdout", text = "ready", timeoutMs = 30000}, "the fixture never printed 'ready'")
  return s
end
local function show(v) return strobe.json.encode(v) end
local function paused(c, what)
  assert(c.status == "paused", what .. ": expected a pause, got " .. show(c))
  return c
end
local function local_of(s, name, tid)
  local r = s:locals{threadId = tid}
  for _, v in ipairs(r.locals) do
    if v.name == name then
      assert(v.value ~= nil, name .. " has no value: " .. show(v))
      return v.value, v
    end
  end
  error("no local '" .. name .. "' in " .. show(r))
end
local function output(s)
  local t = {}
  for _, e in ipairs(s:query{eventType = "stdout", limit = 500}.events) do t[#t + 1] = e.text end
  return table.concat(t)
end
local function run_to_exit(s)
  for _ = 1, 50 do
    local c = s:continue{timeoutMs = 30000}
    if c.status == "exited" then return c end
  end
  error("the target never exited")
end
local function wait_exit(s)
  for _ = 1, 600 do
    if not s:is_running() then return end
    strobe.sleep(50)
  end
  error("the target never exited")
end
"#;

/// Run a scenario with `strobe run`; a Lua `assert`/`error` fails the test with its message.
fn scenario(name: &str, body: &str) {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join(format!("{name}.lua"));
    std::fs::write(&script, format!("{PRELUDE}\n{body}\nprint('SCENARIO OK')\n")).unwrap();
    let repo = env!("CARGO_MANIFEST_DIR");
    let out = Command::new(env!("CARGO_BIN_EXE_strobe"))
        .arg("run")
        .arg(&script)
        .arg(fixtures_dir())
        .arg(repo)
        .env("STROBE_HOME", dir.path().join("home"))
        .env("STROBE_CACHE_DIR", format!("{repo}/target/strobe-cache"))
        .output()
        .expect("run strobe");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stdout.contains("SCENARIO OK"), "scenario {name} failed:\n{stdout}\n{stderr}");
}

#[test]
fn breakpoint_at_function_entry_pauses_and_resumes() {
    scenario(
        "function_entry",
        r#"
local s = launch("c_debugee", "calls")
local r = s:breakpoint{add = {{["function"] = "bump"}}}
assert(r.breakpoints[1]["function"] == "bump" and r.breakpoints[1].address, show(r))
s:stdin("go\n")
local c = paused(s:wait_pause{timeoutMs = 30000}, "first call")
assert(c["function"] == "bump" and c.breakpointId == r.breakpoints[1].id, show(c))
assert(local_of(s, "by") == 1, "by should be 1 on the first call")
assert(#s:paused() == 1 and s:paused()[1].backtrace[2]["function"] == "main", show(s:paused()))
s:breakpoint{remove = {r.breakpoints[1].id}} -- resumes the paused thread first
wait_exit(s)
assert(output(s):find("counter=55", 1, true), output(s))
"#,
    );
}

#[test]
fn line_breakpoint_reads_a_local() {
    let line = line_of(C, "BUMP_BODY");
    scenario(
        "line",
        &format!(
            r#"
local s = launch("c_debugee", "calls")
local r = s:breakpoint{{add = {{{{file = "debugee.c", line = {line}}}}}}}
assert(r.breakpoints[1].line == {line}, show(r))
s:stdin("go\n")
local c = paused(s:wait_pause{{timeoutMs = 30000}}, "line hit")
assert(c.line == {line} and c["function"] == "bump", show(c))
assert(local_of(s, "by") == 1)
c = paused(s:continue{{timeoutMs = 30000}}, "second hit")
assert(local_of(s, "by") == 2)
s:breakpoint{{remove = {{r.breakpoints[1].id}}}}
wait_exit(s)
assert(output(s):find("counter=55", 1, true), output(s))
"#
        ),
    );
}

#[test]
fn conditional_breakpoint_pauses_only_when_true() {
    scenario(
        "condition",
        r#"
local s = launch("c_debugee", "calls")
s:breakpoint{add = {{["function"] = "bump", condition = "args[0] > 5"}}}
s:stdin("go\n")
local seen = {}
local c = s:wait_pause{timeoutMs = 30000}
while c.status == "paused" do
  seen[#seen + 1] = local_of(s, "by", c.threadId)
  c = s:continue{timeoutMs = 30000}
end
assert(c.status == "exited", show(c))
assert(show(seen) == "[6,7,8,9,10]", "paused for " .. show(seen))
"#,
    );
}

#[test]
fn condition_errors_become_events_and_do_not_pause() {
    scenario(
        "condition_error",
        r#"
local s = launch("c_debugee", "calls")
s:breakpoint{add = {{["function"] = "bump", condition = "js:no_such_name.x > 1"}}}
s:stdin("go\n")
wait_exit(s)
local q = s:query{eventType = "condition_error"}
assert(q.totalCount >= 1 and q.events[1].text:find("no_such_name", 1, true), show(q))
assert(s:query{eventType = "pause"}.totalCount == 0)
"#,
    );
}

#[test]
fn hit_count_pauses_on_the_nth_call_only() {
    scenario(
        "hit_count",
        r#"
local s = launch("c_debugee", "calls")
s:breakpoint{add = {{["function"] = "bump", hitCount = 3}}}
s:stdin("go\n")
paused(s:wait_pause{timeoutMs = 30000}, "third call")
assert(local_of(s, "by") == 3)
run_to_exit(s)
assert(s:query{eventType = "pause"}.totalCount == 1)
"#,
    );
}

#[test]
fn logpoint_logs_without_pausing() {
    let line = line_of(C, "BUMP_BODY");
    scenario(
        "logpoint",
        &format!(
            r#"
local s = launch("c_debugee", "calls")
local r = s:breakpoint{{add = {{{{file = "debugee.c", line = {line}, message = "by={{by}} first={{args[0]}}"}}}}}}
assert(#r.logpoints == 1 and #r.breakpoints == 0, show(r))
s:stdin("go\n")
wait_exit(s) -- nobody continues: a logpoint never pauses
local q = s:query{{eventType = "logpoint", limit = 50}}
assert(q.totalCount == 10, show(q))
assert(q.events[1].logpointMessage == "by=1 first=1" and q.events[10].logpointMessage == "by=10 first=10", show(q.events[1]))
assert(output(s):find("counter=55", 1, true), output(s))
-- The agent reports the hit counts as the process exits: they stay readable after it.
local st = s:debug_state()
assert(st.logpoints[1].hits == 10, show(st))
"#
        ),
    );
}

#[test]
fn step_over_goes_to_the_next_line() {
    let first = line_of(C, "COMPUTE_FIRST");
    let call = line_of(C, "COMPUTE_CALL");
    let after = line_of(C, "COMPUTE_AFTER");
    scenario(
        "step_over",
        &format!(
            r#"
local s = launch("c_debugee", "compute")
s:breakpoint{{add = {{{{file = "debugee.c", line = {first}}}}}}}
s:stdin("go\n")
paused(s:wait_pause{{timeoutMs = 30000}}, "first line")
local c = paused(s:continue{{action = "step-over", timeoutMs = 30000}}, "step 1")
assert(c.line == {call} and c["function"] == "compute" and c.reason == "step", show(c))
c = paused(s:continue{{action = "step-over", timeoutMs = 30000}}, "step 2 (over the call)")
assert(c.line == {after} and c["function"] == "compute", show(c))
assert(local_of(s, "sq") == 16)
run_to_exit(s)
assert(output(s):find("compute=20", 1, true), output(s))
"#
        ),
    );
}

#[test]
fn step_into_enters_the_callee() {
    let call = line_of(C, "COMPUTE_CALL");
    scenario(
        "step_into",
        &format!(
            r#"
local s = launch("c_debugee", "compute")
s:breakpoint{{add = {{{{file = "debugee.c", line = {call}}}}}}}
s:stdin("go\n")
paused(s:wait_pause{{timeoutMs = 30000}}, "call line")
local c = paused(s:continue{{action = "step-into", timeoutMs = 30000}}, "step into")
assert(c["function"] == "square", show(c))
assert(local_of(s, "x") == 4)
run_to_exit(s)
assert(output(s):find("compute=20", 1, true), output(s))
"#
        ),
    );
}

#[test]
fn step_out_returns_to_the_caller() {
    let body = line_of(C, "SQUARE_BODY");
    // The caller's next line: the rest of the call's line (storing the result) runs first.
    let call = line_of(C, "COMPUTE_AFTER");
    scenario(
        "step_out",
        &format!(
            r#"
local s = launch("c_debugee", "compute")
s:breakpoint{{add = {{{{file = "debugee.c", line = {body}}}}}}}
s:stdin("go\n")
paused(s:wait_pause{{timeoutMs = 30000}}, "in square")
local c = paused(s:continue{{action = "step-out", timeoutMs = 30000}}, "step out")
assert(c["function"] == "compute" and c.line == {call}, show(c))
run_to_exit(s)
assert(output(s):find("compute=20", 1, true), output(s))
"#
        ),
    );
}

#[test]
fn global_written_while_paused_is_seen_after_continue() {
    // Globals are written with session:write (debug_memory, src/lua/memory.rs); here, while paused.
    scenario(
        "write_global",
        r#"
local s = launch("c_debugee", "calls")
local r = s:breakpoint{add = {{["function"] = "bump", hitCount = 5}}}
s:stdin("go\n")
paused(s:wait_pause{timeoutMs = 30000}, "fifth call")
local w = s:write{targets = {{variable = "g_counter", value = 1000}}}
assert(w.results[1].previousValue == 10 and w.results[1].newValue == 1000, show(w))
run_to_exit(s)
assert(output(s):find("counter=1045", 1, true), output(s))
"#,
    );
}

#[test]
fn written_local_changes_the_execution() {
    let call = line_of(C, "COMPUTE_CALL");
    scenario(
        "write_local",
        &format!(
            r#"
local s = launch("c_debugee", "compute")
s:breakpoint{{add = {{{{file = "debugee.c", line = {call}}}}}}}
s:stdin("go\n")
paused(s:wait_pause{{timeoutMs = 30000}}, "call line")
assert(local_of(s, "base") == 4)
local w = s:set_local{{name = "base", value = 10}}
assert(w.previousValue == 4 and w.newValue == 10, show(w))
paused(s:continue{{action = "step-over", timeoutMs = 30000}}, "after the call")
assert(local_of(s, "sq") == 100)
run_to_exit(s)
assert(output(s):find("compute=110", 1, true), output(s))
"#
        ),
    );
}

#[test]
fn two_threads_pause_independently() {
    scenario(
        "threads",
        r#"
local s = launch("c_debugee", "threads")
local r = s:breakpoint{add = {{["function"] = "bump"}}}
s:stdin("go\n")
local threads = {}
for _ = 1, 600 do
  threads = s:paused()
  if #threads == 2 then break end
  strobe.sleep(50)
end
assert(#threads == 2, "both workers should be paused: " .. show(threads))
assert(s:status().status == "running")
local a, b = threads[1].threadId, threads[2].threadId
-- Resume only A: it pauses again at its next call, B stays where it was.
local c = paused(s:continue{threadId = a, timeoutMs = 30000}, "A again")
assert(c.threadId == a, show(c))
local still = {}
for _, t in ipairs(s:paused()) do still[t.threadId] = true end
assert(still[a] and still[b], show(s:paused()))
s:breakpoint{remove = {r.breakpoints[1].id}}
wait_exit(s)
assert(output(s):find("counter=303", 1, true), output(s))
"#,
    );
}

#[test]
fn breakpoint_and_trace_coexist_on_one_function() {
    scenario(
        "coexist",
        r#"
local s = launch("c_debugee", "calls")
s:trace{add = {"bump"}}
s:breakpoint{add = {{["function"] = "bump", hitCount = 5}}}
s:stdin("go\n")
paused(s:wait_pause{timeoutMs = 30000}, "fifth call")
run_to_exit(s)
local enters = s:query{eventType = "function_enter", ["function"] = {equals = "bump"}}.totalCount
assert(enters == 10, "trace events: " .. enters)
assert(s:query{eventType = "pause"}.totalCount == 1)
"#,
    );
}

#[test]
fn optimized_build_reads_register_locals_and_hooks_lines() {
    let after = line_of(C, "COMPUTE_AFTER");
    scenario(
        "o2",
        &format!(
            r#"
local s = launch("c_debugee_O2", "compute")
local r = s:breakpoint{{add = {{{{file = "debugee.c", line = {after}}}}}}}
s:stdin("go\n")
paused(s:wait_pause{{timeoutMs = 30000}}, "after the call (-O2)")
local base, v = local_of(s, "base")
assert(base == 4, show(v))
local locals = s:locals().locals
local kinds = {{}}
for _, l in ipairs(locals) do kinds[#kinds + 1] = l.name .. ":" .. l.location end
assert(show(kinds):find("register", 1, true), "at -O2 some local should live in a register: " .. show(kinds))
run_to_exit(s)
assert(output(s):find("compute=20", 1, true), output(s))
"#
        ),
    );
}

#[test]
fn rust_line_breakpoint_locals_and_step() {
    let body = line_of("rust/debugee.rs", "SCALE_BODY");
    scenario(
        "rust",
        &format!(
            r#"
local s = launch("rust_debugee", "")
s:breakpoint{{add = {{{{file = "debugee.rs", line = {body}}}}}}}
s:stdin("go\n")
local c = paused(s:wait_pause{{timeoutMs = 30000}}, "scale")
assert(c.line == {body} and c["function"]:find("scale", 1, true), show(c))
assert(local_of(s, "value") == 1 and local_of(s, "factor") == 3)
c = paused(s:continue{{action = "step-over", timeoutMs = 30000}}, "next line")
assert(c.line == {body} + 1, show(c))
assert(local_of(s, "scaled") == 3)
s:breakpoint{{remove = {{"bp-1"}}}}
run_to_exit(s)
assert(output(s):find("total=21", 1, true), output(s))
"#
        ),
    );
}

#[test]
fn bad_requests_get_clear_errors() {
    scenario(
        "errors",
        r#"
local s = launch("c_debugee", "calls")
local function err(f)
  local ok, e = pcall(f)
  assert(not ok, "should have failed")
  return tostring(e)
end
assert(err(function() s:breakpoint{add = {{file = "debugee.c", line = 9999}}} end):find("NO_CODE_AT_LINE", 1, true))
assert(err(function() s:breakpoint{add = {{file = "nope.c", line = 3}}} end):find("VALIDATION_ERROR", 1, true))
assert(err(function() s:breakpoint{add = {{["function"] = "bump", file = "debugee.c", line = 14}}} end):find("not both", 1, true))
assert(err(function() s:breakpoint{add = {{["function"] = "bump", condition = "args[0] >"}}} end):find("EVAL_ERROR", 1, true))
assert(err(function() s:breakpoint{add = {{["function"] = "bump", condition = "no_such_name > 1"}}} end):find("no variable 'no_such_name'", 1, true))
assert(err(function() s:breakpoint{add = {{["function"] = "bump", condition = "js:args[0] >"}}} end):find("not a valid JavaScript", 1, true))
assert(err(function() s:breakpoint{remove = {"bp-77"}} end):find("bp-77", 1, true))
assert(err(function() s:locals() end):find("No thread is paused", 1, true))
assert(err(function() s:continue{action = "step-over"} end):find("No thread is paused", 1, true))
s:stdin("go\n")
wait_exit(s)
assert(output(s):find("counter=55", 1, true), "bad requests must not disturb the target: " .. output(s))
"#,
    );
}

#[test]
fn a_script_stages_breakpoints_for_its_own_launches() {
    scenario(
        "staged",
        r#"
local staged = strobe.stage_breakpoints{add = {{["function"] = "compute"}}}
assert(#staged == 1 and staged[1].id == "staged-1", show(staged))
assert(#strobe.staged().breakpoints == 1, show(strobe.staged()))
local s, info = strobe.launch{command = FIX .. "/quick", projectRoot = REPO, stopOnEntry = true}
assert(#info.breakpoints == 2 and info.breakpoints[1].origin == "stopOnEntry", show(info))
assert(info.breakpoints[2].stagedId == "staged-1" and info.breakpoints[2]["function"] == "compute", show(info))
local c = paused(s:wait_pause{timeoutMs = 30000}, "entry")
assert(c["function"] == "main" and output(s) == "", show(c))
c = paused(s:continue{timeoutMs = 30000}, "compute")
assert(c["function"] == "compute" and local_of(s, "a") == 20 and output(s) == "", show(c))
run_to_exit(s)
assert(output(s):find("quick done", 1, true), output(s))
strobe.stage_breakpoints{clear = true}
assert(#strobe.staged().breakpoints == 0, show(strobe.staged()))
"#,
    );
}
