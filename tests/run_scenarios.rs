//! `strobe run` on the examples' CI scenarios and the README's plain script, as CI
//! would run them: real builds, real Frida sessions, exit codes and printed output.
//! The tests take turns (`CHECKOUT`) because they all build `examples/checkout/checkout`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

static CHECKOUT: Mutex<()> = Mutex::new(());

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn strobe_run(home: &Path, args: &[&str]) -> (Option<i32>, String) {
    let out: Output = Command::new(env!("CARGO_BIN_EXE_strobe"))
        .arg("run")
        .args(args)
        .current_dir(repo())
        .env("STROBE_HOME", home)
        .env("STROBE_CACHE_DIR", repo().join("target").join("strobe-cache"))
        .env("STROBE_LOG", "warn")
        .output()
        .expect("run strobe");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code(), text)
}

#[test]
fn examples_scenarios_pass_and_fail_with_exit_codes() {
    let _turn = CHECKOUT.lock().unwrap_or_else(|e| e.into_inner());
    let home = tempfile::tempdir().unwrap();

    // A passing scenario: one line per step, the closing count, exit status 0.
    let (code, out) = strobe_run(home.path(), &["examples/checkout/smoke.lua"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("  ok    1  exec cc"), "{out}");
    assert!(out.lines().any(|l| l == "8 passed, 0 failed, 0 skipped"), "{out}");

    // The scenario that catches the real bug: it fails at the output assertion, skips
    // the rest, and prints the output and traced calls that explain the failure.
    let (code, out) = strobe_run(home.path(), &["examples/checkout/bulk_discount.lua"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("FAIL  7  output contains \"order 2: total 40.00\""), "{out}");
    assert!(out.contains("order 2: total 37.30"), "the failure shows the wrong total:\n{out}");
    assert!(out.contains("apply_discount"), "the failure shows the traced calls:\n{out}");
    assert!(out.lines().any(|l| l == "6 passed, 1 failed, 1 skipped"), "{out}");

    // A step kind added by the user (in $STROBE_HOME/scripts/scenario) is usable at once.
    let steps = home.path().join("scripts").join("scenario");
    std::fs::create_dir_all(&steps).unwrap();
    std::fs::write(
        steps.join("expect_sum.lua"),
        "return { name = 'expect_sum', describe = function(a) return 'sum is ' .. a.total end,\n\
         run = function(ctx, a) assert(a.a + a.b == a.total, 'wrong sum') end }\n",
    )
    .unwrap();
    let scenario = home.path().join("custom.lua");
    std::fs::write(
        &scenario,
        "return { name = 'custom steps', steps = { { 'expect_sum', a = 1, b = 2, total = 3 },\n\
         { 'expect_sum', a = 1, b = 2, total = 4 }, { 'no_such_step' } } }\n",
    )
    .unwrap();
    let (code, out) = strobe_run(home.path(), &[scenario.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("ok    1  sum is 3"), "{out}");
    assert!(out.contains("FAIL  2  sum is 4") && out.contains("wrong sum"), "{out}");
    assert!(out.lines().any(|l| l == "1 passed, 1 failed, 1 skipped"), "{out}");
}

#[test]
fn readme_plain_script_still_runs() {
    let _turn = CHECKOUT.lock().unwrap_or_else(|e| e.into_inner());
    let home = tempfile::tempdir().unwrap();
    let (code, out) = strobe_run(home.path(), &["examples/checkout/investigate.lua"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("FOUND: order_total calls apply_discount"), "{out}");
}

/// The non-session parts of the Lua API, exercised by a plain script: a failed
/// `assert` makes `strobe run` exit non-zero.
#[test]
fn lua_api_spawn_fs_regex_time_from_a_script() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().display().to_string();
    let script = home.path().join("api.lua");
    std::fs::write(
        &script,
        format!(
            r#"
local dir = "{dir}"
-- subprocess with line-by-line streaming, both streams, stdin
local p = strobe.spawn{{ cmd = {{ "sh", "-c", "echo one; echo two >&2; read x; echo got $x; exit 3" }}, stdin = true }}
local first, stream = p:read_line(10000)
assert(first == "one" and stream == "stdout", tostring(first))
p:write("hello\n")
local rest = {{}}
for line, s in p:lines() do rest[#rest + 1] = s .. ":" .. line end
table.sort(rest)
assert(table.concat(rest, ",") == "stderr:two,stdout:got hello", table.concat(rest, ","))
local st = p:wait()
assert(st.status == 3 and not st.ok, strobe.inspect(st))
-- a slow process: read_line times out, kill ends it, a closed handle says so
local slow = strobe.spawn{{ cmd = {{ "sleep", "30" }} }}
local none, why = slow:read_line(100)
assert(none == nil and why == "timeout")
assert(slow:kill().signal == 9)
slow:close()
local ok, err = pcall(function() return slow:wait() end)
assert(not ok and tostring(err):find("was closed"), tostring(err))
-- file system
strobe.fs.write(dir .. "/a/b.txt", "x\n")
strobe.fs.write(dir .. "/a/b.txt", "y\n", {{ append = true }})
assert(strobe.fs.read(dir .. "/a/b.txt") == "x\ny\n")
assert(strobe.fs.exists(dir .. "/a") and strobe.fs.is_dir(dir .. "/a"))
assert(#strobe.fs.glob(dir .. "/**/*.txt") == 1)
assert(strobe.fs.list(dir .. "/a")[1] == "b.txt")
local ok2, e2 = pcall(strobe.fs.read, dir .. "/missing")
assert(not ok2 and tostring(e2):find("VALIDATION_ERROR"), tostring(e2))
-- regex
local re = strobe.regex.new([[test (?P<name>\w+) \.\.\. (ok|FAILED)]])
local c = re:captures("test parse_args ... FAILED")
assert(c.name == "parse_args" and c[2] == "FAILED")
assert(#re:find_all("test a ... ok\ntest b ... ok") == 2)
local s, e = re:find("xx test q ... ok")
assert(s == 4 and e == 16, tostring(s) .. " " .. tostring(e))
assert(not pcall(strobe.regex.new, "("))
-- time
assert(strobe.time.format(0, "%Y") == "1970" or strobe.time.format(0, "%Y") == "1969")
local t0 = strobe.time.monotonic_ms(); strobe.sleep(20); assert(strobe.time.monotonic_ms() - t0 >= 15)
print("api ok")
"#
        ),
    )
    .unwrap();
    let (code, out) = strobe_run(home.path(), &[script.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("api ok"), "{out}");
}
