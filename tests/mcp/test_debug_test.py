"""debug_test through the official MCP SDK against real test frameworks: fixture projects
in tests/fixtures/test_projects/ (passing, failing, skipped and hanging tests; empty and
non-compiling variants), their toolchains from tests/setup/toolchains.sh. Checks the
summary counts, each failure's name, file:line, message, suggested traces and rerun
command, progress while running, the stuck report with backtraces, noTests, the bad-input
errors, a broken adapter, and the full TDD loop (suite → traced rerun → debug_query)."""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, _sleep, mcp_client

pytestmark = pytest.mark.anyio

PROJECTS = REPO / "tests" / "fixtures" / "test_projects"
# Fixture builds go under target/, never into the source tree or the home directory.
BUILD = REPO / "target" / "test-projects"


def cargo_env():
    return {"CARGO_TARGET_DIR": str(BUILD / "cargo-target")}


async def wait_done(c, run_id, timeout=240.0, on_progress=None):
    """Poll debug_test status until the run completes; return the completed answer."""
    deadline = time.monotonic() + timeout
    while True:
        st = await c.call("debug_test", action="status", testRunId=run_id)
        if st["status"] == "completed":
            return st
        assert st["status"] == "running", st
        if on_progress:
            on_progress(st["progress"])
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} not completed within {timeout}s: {st}")
        await _sleep(0.3)


async def run_to_end(c, timeout=240.0, **args):
    started = await c.call("debug_test", action="run", **args)
    assert started["status"] == "running" and started["testRunId"], started
    done = await wait_done(c, started["testRunId"], timeout)
    return started, done["result"], done


def by_name(result):
    return {f["name"]: f for f in result["failures"]}


# ---------------------------------------------------------------- cargo

async def test_cargo_suite_failures_traces_and_rerun(strobe_home):
    async with mcp_client(strobe_home) as c:
        started, r, _ = await run_to_end(c, projectRoot=str(PROJECTS / "cargo"), env=cargo_env())
        assert started["framework"] == "cargo"
        s = r["summary"]
        # passed: round prices, the (not hanging) warehouse test, the integration test
        assert (s["passed"], s["failed"], s["skipped"]) == (3, 3, 1), r
        assert s["durationMs"] > 0
        assert r["project"]["language"] == "rust" and r["project"]["buildSystem"] == "cargo"
        assert "tests/checkout.rs" in r["project"]["testFiles"]
        f = by_name(r)
        odd = f["tests::discounts_odd_prices"]
        assert (odd["file"], odd["line"]) == ("src/lib.rs", 24), odd
        assert "left: 1809" in odd["message"] and "10% off 19.99" in odd["message"], odd
        assert "stack backtrace" not in odd["message"]
        # The assertion is in the test itself: the functions its body calls are suggested.
        assert odd["suggestedTraces"] == ["shop::**::total"], odd
        assert odd["rerunCommand"] == "cargo test -- tests::discounts_odd_prices --exact"
        big = f["tests::survives_big_discounts"]
        assert (big["file"], big["line"]) == ("src/lib.rs", 4), big
        assert big["message"] == "attempt to subtract with overflow"
        assert big["stack"][0] == "shop::pricing::discount (src/lib.rs:4)", big["stack"]
        assert big["suggestedTraces"][:2] == ["shop::pricing::discount", "shop::pricing::*"], big
        assert any("overflow" in h for h in big.get("suggestions", [])), big
        # A generic method's frame: RUSTC_BOOTSTRAP builds name it by its self type in
        # brackets (v0); it is the project's code, suggested for every instantiation.
        slots = f["reuses_freed_slots"]
        assert (slots["file"], slots["line"], slots["message"]) == ("src/lib.rs", 73, "slot already empty"), slots
        assert slots["stack"][0] == "<shop::cart::Slots<u32>>::take (src/lib.rs:73)", slots["stack"]
        assert slots["suggestedTraces"][:2] == ["shop::cart::Slots::take", "shop::cart::Slots::*"], slots


async def test_cargo_compile_errors_and_no_tests(strobe_home):
    async with mcp_client(strobe_home) as c:
        _, r, _ = await run_to_end(c, projectRoot=str(PROJECTS / "cargo_broken"), env=cargo_env())
        assert r["phase"] == "compiling", r
        [err] = r["compileErrors"]
        assert (err["file"], err["line"], err["code"]) == ("src/lib.rs", 2, "E0308"), err
        assert "mismatched types" in err["message"]
        assert "does not compile" in r["hint"]
        assert not r.get("noTests")

        _, r, _ = await run_to_end(c, projectRoot=str(PROJECTS / "cargo_empty"), env=cargo_env())
        assert r["noTests"] is True and r["summary"]["passed"] == 0, r
        assert "#[test]" in r["hint"]


async def test_cargo_progress_stuck_report_and_kill(strobe_home):
    async with mcp_client(strobe_home) as c:
        env = dict(cargo_env(), STROBE_FIXTURE_HANG="1")
        started = await c.call("debug_test", projectRoot=str(PROJECTS / "cargo"), env=env)
        run_id = started["testRunId"]
        deadline = time.monotonic() + 240
        progress = None
        while time.monotonic() < deadline:
            st = await c.call("debug_test", action="status", testRunId=run_id)
            assert st["status"] == "running", st
            progress = st["progress"]
            if progress.get("stuck"):
                break
            await _sleep(0.5)
        assert progress and progress.get("stuck"), progress
        assert progress["currentTest"] == "tests::waits_for_the_warehouse", progress
        assert progress["currentTestElapsedMs"] > 0 and progress["phase"] == "running"
        assert progress["passed"] >= 1 and progress["failed"] == 2
        assert any(w["kind"] == "deadlock" for w in progress["warnings"]), progress
        [stuck] = progress["stuck"]
        frames = [fr for t in stuck["threads"] for fr in t["frames"]]
        assert any("shop::tests::waits_for_the_warehouse" in fr for fr in frames), stuck
        assert len(stuck["threads"]) >= 2  # libtest's main thread and the test's thread

        killed = await c.call("debug_test", action="kill", testRunId=run_id)
        assert killed["status"] in ("stopping", "completed")
        done = await wait_done(c, run_id, timeout=60)
        r = done["result"]
        assert r.get("killed") is True and r["summary"].get("stuck") == 1, r
        assert r["stuck"][0]["test"] == "tests::waits_for_the_warehouse"
        assert r["summary"]["failed"] == 2


async def test_tdd_loop_suite_then_traced_rerun_then_query(strobe_home):
    """Run the suite, take the failure's suggested traces, rerun that one test under Frida,
    find the culprit's arguments with debug_query."""
    async with mcp_client(strobe_home) as c:
        _, r, _ = await run_to_end(c, projectRoot=str(PROJECTS / "cargo"), env=cargo_env())
        failure = by_name(r)["tests::survives_big_discounts"]
        traced, r2, done = await run_to_end(
            c, projectRoot=str(PROJECTS / "cargo"), env=cargo_env(), test=failure["name"],
            tracePatterns=failure["suggestedTraces"])
        sid = traced["sessionId"]
        assert sid and done["sessionId"] == sid
        assert traced["hookedFunctions"] >= 2, traced
        assert (r2["summary"]["failed"], r2["summary"]["passed"]) == (1, 0), r2
        # The panic unwinds through the traced functions to the harness, as untraced
        # (agent/src/unwinding.ts; it used to abort the process): the real message and line.
        failed = r2["failures"][0]
        assert failed["name"] == "tests::survives_big_discounts"
        assert (failed["message"], failed["line"]) == ("attempt to subtract with overflow", 4), failed
        # The calls the panic left, in the result itself: no query needed for the culprit.
        unwound = [(u["function"], u["arguments"]) for u in r2["unwoundCalls"]]
        assert unwound[0] == ("shop::pricing::discount", {"price_cents": 500, "percent": 150}), unwound
        q = await c.call("debug_query", sessionId=sid, eventType="function_enter", verbose=True,
                         function={"equals": "shop::pricing::discount"}, limit=50)
        args = [e["arguments"] for e in q["events"]]
        assert {"price_cents": 500, "percent": 150} in args, args


async def test_traced_rerun_of_a_panic_in_a_generic_method(strobe_home):
    """The suggested traces of a panic in a generic method hook it (v0 names), the panic
    unwinds through it as untraced, and its exit says it was unwound; the put that returned
    the wrong slot is in the timeline."""
    async with mcp_client(strobe_home) as c:
        _, r, _ = await run_to_end(c, projectRoot=str(PROJECTS / "cargo"), env=cargo_env(), test="reuses_freed_slots")
        [failure] = r["failures"]
        traced, r2, _ = await run_to_end(
            c, projectRoot=str(PROJECTS / "cargo"), env=cargo_env(), test=failure["name"],
            tracePatterns=failure["suggestedTraces"])
        assert traced["hookedFunctions"] >= 2, traced
        [failed] = r2["failures"]
        assert (failed["message"], failed["line"]) == ("slot already empty", 73), failed
        # The panic's backtrace goes past the traced frames (agent/src/unwinding.ts: the real
        # return addresses are back while std's panic hook prints it), as untraced.
        assert failed["stack"] == failure["stack"], (failed["stack"], failure["stack"])
        assert len(failed["stack"]) >= 2, failed
        [take] = r2["unwoundCalls"]
        assert take["function"] == "<shop::cart::Slots<u32>>::take" and take["arguments"]["slot"] == 1, take
        sid = traced["sessionId"]
        q = await c.call("debug_query", sessionId=sid, eventType="function_exit", verbose=True, limit=50,
                         function={"contains": "Slots<u32>>::"})
        exits = [(e["function"].rsplit("::", 1)[1], e["returnValue"], e.get("unwound")) for e in q["events"]]
        # new, put → 0, put → 1, take → 10, put → 1 (the bug: slot 0 was reused), take → 20,
        # and the take that panicked.
        assert exits[-1] == ("take", None, True), exits
        assert [x for x in exits if x[0] == "put"] == [("put", 0, None), ("put", 1, None), ("put", 1, None)], exits
        summary = await c.call("debug_query", sessionId=sid, eventType="function_exit", limit=50,
                               function={"contains": "::take"})
        assert summary["events"][-1]["returnType"] == "unwound", summary


async def run_stuck(c, **args):
    """A run with the hanging test enabled and killOnStuck: the completed result."""
    env = dict(args.pop("env", {}), STROBE_FIXTURE_HANG="1")
    _, r, _ = await run_to_end(c, env=env, killOnStuck=True, **args)
    assert r.get("killed") is True and r["summary"].get("stuck") == 1, r
    [stuck] = r["stuck"]
    assert stuck["killed"] is True and stuck["kind"] == "deadlock", stuck
    assert stuck["silentMs"] >= 8000 - 600, stuck
    return r, stuck


def frames_of(stuck, key="threads"):
    return [fr for t in stuck.get(key, []) for fr in t["frames"]]


# ---------------------------------------------------------------- Python

def python_project(tmp_path, name):
    """A copy of a Python fixture whose .venv is the test environment (it has pytest)."""
    dst = tmp_path / name
    shutil.copytree(PROJECTS / name, dst)
    (dst / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    return dst


async def test_pytest_junit_results_and_python_stacks_when_stuck(strobe_home, tmp_path):
    project = python_project(tmp_path, "pytest")
    async with mcp_client(strobe_home) as c:
        started, r, _ = await run_to_end(c, projectRoot=str(project))
        assert started["framework"] == "pytest"
        s = r["summary"]
        assert (s["passed"], s["failed"], s["skipped"]) == (2, 2, 1), r
        assert r["project"] == {"language": "python", "buildSystem": "pip", "testFiles": ["tests/test_cart.py"]}
        f = by_name(r)
        ship = f["tests/test_cart.py::test_free_shipping_from_fifty"]
        assert (ship["file"], ship["line"]) == ("tests/test_cart.py", 14), ship
        assert ship["message"].startswith("assert 5 == 0"), ship
        assert ship["rerunCommand"] == ".venv/bin/python -m pytest 'tests/test_cart.py::test_free_shipping_from_fifty'"
        coupon = f["tests/test_cart.py::test_expired_coupon_keeps_price"]
        # Where it failed: the innermost project frame, in the code under test.
        assert (coupon["file"], coupon["line"], coupon["message"]) == ("cart.py", 6, "KeyError: 'SPRING'"), coupon
        assert coupon["stack"] == ["apply_coupon (cart.py:6)", "test_expired_coupon_keeps_price (tests/test_cart.py:18)"]
        # Python functions cannot be traced yet: no patterns, and the suggestion says so.
        assert coupon["suggestedTraces"] == [] and "cannot be traced" in coupon["suggestions"][0]

        # One test by name (pytest -k).
        _, one, _ = await run_to_end(c, projectRoot=str(project), test="test_half_price")
        assert (one["summary"]["passed"], one["summary"]["failed"]) == (1, 0), one

        r, stuck = await run_stuck(c, projectRoot=str(project))
        assert stuck["test"] == "tests/test_cart.py::test_waits_for_inventory_lock", stuck
        # pytest still wrote its report when stopped: the other tests are counted.
        assert (r["summary"]["passed"], r["summary"]["failed"], r["summary"]["skipped"]) == (1, 2, 1), r
        py_frames = frames_of(stuck, "languageStacks")
        assert any(fr.startswith("test_waits_for_inventory_lock (") and "test_cart.py:28" in fr for fr in py_frames), stuck
        assert any("futex" in fr or "pthread" in fr or "sem_" in fr for fr in frames_of(stuck)), stuck


async def test_pytest_uv_project_and_no_tests(strobe_home, tmp_path):
    uv = python_project(tmp_path, "pytest_uv")
    empty = python_project(tmp_path, "pytest_empty")
    async with mcp_client(strobe_home) as c:
        _, r, _ = await run_to_end(c, projectRoot=str(uv))
        assert r["framework"] == "pytest" and r["project"]["buildSystem"] == "uv", r
        assert r["summary"]["passed"] == 1, r  # ran with the project's .venv
        _, r, _ = await run_to_end(c, projectRoot=str(empty))
        assert r["noTests"] is True and "no tests" in r["hint"], r


async def test_unittest_json_runner_results_and_stuck(strobe_home):
    root = PROJECTS / "unittest"
    async with mcp_client(strobe_home) as c:
        started, r, _ = await run_to_end(c, projectRoot=str(root))
        assert started["framework"] == "unittest"
        s = r["summary"]
        assert (s["passed"], s["failed"], s["skipped"]) == (2, 2, 1), r
        f = by_name(r)
        rm = f["tests.test_inventory.InventoryTest.test_remove_all"]
        assert (rm["file"], rm["line"], rm["message"]) == ("inventory.py", 11, "ValueError: only 1 of pear left"), rm
        assert rm["stack"] == ["remove (inventory.py:11)", "test_remove_all (tests/test_inventory.py:18)"]
        cnt = f["tests.test_inventory.InventoryTest.test_count_after_remove"]
        assert (cnt["file"], cnt["line"], cnt["message"]) == ("tests/test_inventory.py", 24, "AssertionError: 3 != 2"), cnt
        assert cnt["rerunCommand"] == "python3 -m unittest tests.test_inventory.InventoryTest.test_count_after_remove"

        r, stuck = await run_stuck(c, projectRoot=str(root))
        assert stuck["test"] == "tests.test_inventory.InventoryTest.test_waits_for_restock", stuck
        assert any("test_waits_for_restock (" in fr for fr in frames_of(stuck, "languageStacks")), stuck


# ---------------------------------------------------------------- C++

CPP = {
    "gtest": ("gtest_calc", "Calc.FactorialOfFive", "Calc.RoundsHalfUp", "Calc.WaitsForLock",
              "Expected equality of these values:\n  got\n    Which is: 24\n  120", 13, 16),
    "catch2": ("catch2_calc", "factorial of five", "rounds half up", "waits for lock",
               "CHECK(got == 120) with expansion: 24 == 120", 14, 17),
}


@pytest.mark.parametrize("framework", sorted(CPP))
async def test_cpp_frameworks_results_traces_and_stuck(strobe_home, fixtures_dir, framework):
    binary, fact, rounds, hang, fact_msg, fact_line, rounds_line = CPP[framework]
    command = str(fixtures_dir / "test_projects" / binary)
    root = PROJECTS / "cpp"
    async with mcp_client(strobe_home) as c:
        started, r, _ = await run_to_end(c, projectRoot=str(root), command=command)
        assert started["framework"] == framework  # detected from the binary
        s = r["summary"]
        assert (s["passed"], s["failed"], s["skipped"]) == (2, 2, 1), r
        assert r["project"]["buildSystem"] == "cmake" and r["project"]["language"] == "cpp"
        f = by_name(r)
        assert (f[fact]["file"], f[fact]["line"]) == (f"tests/calc_{framework}.cpp", fact_line), f[fact]
        assert f[fact]["message"] == fact_msg
        assert f[fact]["suggestedTraces"] == ["calc::factorial"], f[fact]
        assert (f[rounds]["line"], f[rounds]["suggestedTraces"]) == (rounds_line, ["calc::divide"]), f[rounds]
        assert f[fact]["rerunCommand"].startswith(command)

        r, stuck = await run_stuck(c, projectRoot=str(root), command=command)
        assert stuck["test"] == hang, stuck
        assert any("calc_" + framework + ".cpp:" in fr and "wait" not in fr.split(" at ")[0].lower()
                   or "WaitsForLock" in fr for fr in frames_of(stuck)), stuck
        assert any("condition_variable" in fr or "pthread_cond_wait" in fr for fr in frames_of(stuck)), stuck

        if framework == "gtest":
            # Traced rerun of one test: the culprit's argument and result.
            traced, r2, _ = await run_to_end(c, projectRoot=str(root), command=command, test=fact,
                                             tracePatterns=f[fact]["suggestedTraces"])
            assert r2["summary"]["failed"] == 1 and r2["summary"]["passed"] == 0, r2
            sid = traced["sessionId"]
            enter = await c.call("debug_query", sessionId=sid, eventType="function_enter",
                                 verbose=True, function={"equals": "calc::factorial"})
            exit_ = await c.call("debug_query", sessionId=sid, eventType="function_exit",
                                 verbose=True, function={"equals": "calc::factorial"})
            assert [e["arguments"]["n"] for e in enter["events"]] == [5], enter
            assert [e["returnValue"] for e in exit_["events"]] == [24], exit_


# ---------------------------------------------------------------- Go

def go_env():
    # Go's build cache and module path under target/, never in the home directory.
    return {"GOCACHE": str(BUILD / "gocache"), "GOPATH": str(BUILD / "gopath"), "GOFLAGS": "-modcacherw"}


async def test_go_json_events_goroutine_dump_and_no_tests(strobe_home):
    root = PROJECTS / "go"
    async with mcp_client(strobe_home) as c:
        started, r, _ = await run_to_end(c, projectRoot=str(root), env=go_env())
        assert started["framework"] == "go"
        s = r["summary"]
        assert (s["passed"], s["failed"], s["skipped"]) == (2, 1, 1), r
        [odd] = r["failures"]
        assert (odd["name"], odd["file"], odd["line"]) == ("TestOddPrices", "cart_test.go", 18), odd
        assert odd["message"] == "Total = 1809, want 1800"
        assert odd["rerunCommand"] == "go test -run '^TestOddPrices$' example.com/shop"
        assert r["project"] == {"language": "go", "buildSystem": "go", "testFiles": ["cart_test.go"]}

        r, stuck = await run_stuck(c, projectRoot=str(root), env=go_env())
        assert stuck["test"] == "TestWaitsForWarehouse", stuck
        # SIGQUIT before stopping: the runtime's dump of every goroutine.
        assert any("example.com/shop.TestWaitsForWarehouse at " in fr and "cart_test.go:31" in fr
                   for fr in frames_of(stuck, "languageStacks")), stuck

        _, r, _ = await run_to_end(c, projectRoot=str(PROJECTS / "go_empty"), env=go_env())
        assert r["noTests"] is True and "TestXxx" in r["hint"], r


# ---------------------------------------------------------------- JavaScript

def node_project(tmp_path, name):
    """A copy of a JavaScript fixture whose node_modules are the ones toolchains.sh installed."""
    node_modules = BUILD / "node" / "node_modules"
    assert (node_modules / ".bin" / name).exists(), "run tests/setup/toolchains.sh"
    project = tmp_path / name
    shutil.copytree(PROJECTS / name, project)
    (project / "node_modules").symlink_to(node_modules, target_is_directory=True)
    return project


JS = {
    # framework: (stack of the coupon failure, (file, line) of the cents failure, text in its message, rerun)
    "jest": (["applyCoupon (cart.js:3)", "Object.applyCoupon (cart.test.js:8)"], ("cart.test.js", 11),
             "Received: 4.995", 'npx jest -t "cart rounds to cents"'),
    "mocha": (["applyCoupon (cart.js:3)", "Context.<anonymous> (test/cart.test.js:9)"], ("test/cart.test.js", 12),
              "4.995 !== 5", 'npx mocha --grep "cart rounds to cents"'),
    "vitest": (["applyCoupon (cart.js:3)", "<anonymous> (cart.test.js:9)"], ("cart.test.js", 12),
               "expected 4.995 to be 5", 'npx vitest run -t "cart rounds to cents"'),
    "bun": (["applyCoupon (cart.js:3)", "<anonymous> (cart.test.js:9)"], ("cart.test.js", 12),
            "Received: 4.995", 'bun test --test-name-pattern "cart rounds to cents"'),
    "deno": (["applyCoupon (cart.js:3)", "<anonymous> (cart_test.js:7)"], ("cart_test.js", 11),
             "4.995 !== 5", 'deno test -A --filter "cart rounds to cents"'),
}


@pytest.mark.parametrize("framework", sorted(JS))
async def test_javascript_json_reports_and_stuck(strobe_home, tmp_path, framework):
    coupon_stack, cents_at, cents_text, cents_rerun = JS[framework]
    project = node_project(tmp_path, framework)
    # Bun and Deno keep caches under the home directory unless told otherwise.
    env = {"DENO_DIR": str(tmp_path / "deno-dir"), "BUN_INSTALL": str(tmp_path / "bun-home")}
    async with mcp_client(strobe_home) as c:
        started, r, _ = await run_to_end(c, projectRoot=str(project), env=env)
        assert started["framework"] == framework
        assert r["project"]["testFiles"] == [cents_at[0]], r["project"]
        s = r["summary"]
        assert (s["passed"], s["failed"], s["skipped"]) == (2, 2, 1), r
        f = by_name(r)
        coupon = f["cart keeps the price for an expired coupon"]
        assert (coupon["file"], coupon["line"], coupon["message"]) == ("cart.js", 3, "unknown coupon SPRING"), coupon
        assert coupon["stack"] == coupon_stack
        cents = f["cart rounds to cents"]
        assert (cents["file"], cents["line"]) == cents_at and cents_text in cents["message"], cents
        assert cents["rerunCommand"] == cents_rerun
        await run_stuck(c, projectRoot=str(project), env=env)


# ---------------------------------------------------------------- bad input

async def test_bad_input_gets_spec_errors(strobe_home, tmp_path):
    async with mcp_client(strobe_home) as c:
        e = await c.error("debug_test", action="run")
        assert e.code == "VALIDATION_ERROR" and "projectRoot" in e.message
        e = await c.error("debug_test", projectRoot=str(tmp_path / "nope"))
        assert e.code == "VALIDATION_ERROR" and "not a directory" in e.message
        e = await c.error("debug_test", projectRoot=str(PROJECTS / "cargo"), framework="nosuch")
        assert e.code == "VALIDATION_ERROR" and "cargo" in e.message and "pytest" in e.message
        e = await c.error("debug_test", projectRoot=str(PROJECTS / "cpp"), framework="gtest")
        assert e.code == "VALIDATION_ERROR" and "'command'" in e.message
        e = await c.error("debug_test", projectRoot=str(tmp_path))
        assert e.code == "VALIDATION_ERROR" and "No test framework detected" in e.message
        e = await c.error("debug_test", action="status", testRunId="test-unknown")
        assert e.code == "TEST_RUN_NOT_FOUND" and "testRunId" in e.message
        e = await c.error("debug_test", action="status")
        assert e.code == "VALIDATION_ERROR" and "testRunId" in e.message


CUSTOM_ADAPTER = """-- a user adapter: any directory with a 'custom.txt' runs 'true'
return {
  name = "custom", language = "text",
  detect = function(root) return strobe.fs.exists(root .. "/custom.txt") and 99 or 0 end,
  suite_command = function(ctx) return { cmd = { "sh", "-c", "echo ok" } } end,
  parse_output = function(stdout) return { summary = { passed = %d, failed = 0, skipped = 0 }, failures = {} } end,
}
"""


async def test_broken_adapter_keeps_last_good_version(strobe_home, tmp_path):
    adapters = strobe_home / "adapters"
    adapters.mkdir()
    (adapters / "custom.lua").write_text(CUSTOM_ADAPTER % 7)
    project = tmp_path / "proj"
    project.mkdir()
    (project / "custom.txt").write_text("x")
    async with mcp_client(strobe_home) as c:
        started, r, _ = await run_to_end(c, projectRoot=str(project))
        assert started["framework"] == "custom" and r["summary"]["passed"] == 7
        (adapters / "custom.lua").write_text("return {\n  name = 'custom',\n  detect = function( end,\n}\n")
        deadline = time.monotonic() + 30
        while True:
            started = await c.call("debug_test", projectRoot=str(project))
            if started.get("scriptErrors") or time.monotonic() > deadline:
                break
            await _sleep(0.3)
        [err] = started["scriptErrors"]
        assert err["file"].endswith("adapters/custom.lua") and err["line"] == 3, err
        assert "last good version" in err["message"]
        r = (await wait_done(c, started["testRunId"]))["result"]
        assert r["summary"]["passed"] == 7


# ---------------------------------------------------------------- waiting in one call

async def test_run_with_wait_answers_the_result_in_one_call_with_progress(strobe_home):
    """waitMs turns run-then-poll into one call; each finished test is a progress notification."""
    import json
    notes = []

    async def on_progress(progress, total, message):
        notes.append((progress, message))

    async with mcp_client(strobe_home) as c:
        raw = await c.session.call_tool(
            "debug_test",
            {"projectRoot": str(PROJECTS / "cargo"), "env": cargo_env(), "waitMs": 240000},
            progress_callback=on_progress,
        )
        assert not raw.is_error, raw
        done = json.loads(raw.content[0].text)
        assert done["status"] == "completed", done
        s = done["result"]["summary"]
        assert s["failed"] >= 1 and s["passed"] >= 1, s
        assert notes, "no progress notification while waiting"
        values = [p for p, _ in notes]
        assert values == sorted(values) and len(set(values)) == len(values), values
        assert any("passed" in (m or "") for _, m in notes), notes

        # status with a short wait on a finished run answers at once, the same result
        again = await c.call("debug_test", action="status", testRunId=done["testRunId"], waitMs=5000)
        assert again["status"] == "completed" and again["result"]["summary"] == s
