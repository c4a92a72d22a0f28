"""Values you can trust in frames (issue 14 items 7-10, 12): backtraces as gdb shows them
(caller frames at the line of the call, libc frames named, no frame lost or doubled), crash
summaries at the user's frame, registers and addresses that say what they are, and code
that lives in shared libraries built with -g. Fixture: tests/fixtures/c/frames_app.c."""

import json
from pathlib import Path

import pytest

from conftest import REPO, mcp_client

pytestmark = pytest.mark.anyio

SRC = REPO / "tests" / "fixtures" / "c"
APP = SRC / "frames_app.c"
LIB = SRC / "frames_lib.c"
PLUGIN = SRC / "frames_plugin.c"
LIBC_DEBUG = any(Path("/usr/lib/debug/.build-id").glob("*/*.debug"))


def line_of(marker: str, src: Path = APP) -> int:
    for i, text in enumerate(src.read_text().splitlines(), start=1):
        if marker in text:
            return i
    raise AssertionError(marker)


async def launch(c, fixtures_dir, mode, go):
    r = await c.call("debug_launch", command=str(fixtures_dir / "frames_app"), args=[mode, str(go)], projectRoot=str(SRC))
    sid = r["sessionId"]
    await c.wait_for(sid, f"ready {mode}", eventType="stdout")
    return sid


async def crash_of(c, fixtures_dir, mode, go):
    r = await c.call("debug_launch", command=str(fixtures_dir / "frames_app"), args=[mode, str(go)], projectRoot=str(SRC))
    sid = r["sessionId"]
    go.write_text("go")
    await c.wait_for(sid, "", eventType="crash", timeout=30)
    crashes = (await c.call("debug_query", sessionId=sid, eventType="crash", verbose=True))["events"]
    assert len(crashes) == 1, crashes
    return crashes[0]


def names(frames):
    return [f.get("function") for f in frames]


async def test_caller_frames_show_the_call_line_once(strobe_home, fixtures_dir, tmp_path):
    """Item 7: frame 1+ at the call's line (gdb `bt`), not the line after it; trace hooks
    and a logpoint on the stack add no frame. Item 10: addresses say static or runtime."""
    go = tmp_path / "go"
    async with mcp_client(strobe_home) as c:
        sid = await launch(c, fixtures_dir, "lib", go)
        await c.call("debug_trace", sessionId=sid, add=["inner", "outer", "main"])
        await c.call("debug_breakpoint", sessionId=sid, add=[{"file": "frames_app.c", "line": line_of("OUTER_CALL"), "message": "outer {n}"}])
        bp = (await c.call("debug_breakpoint", sessionId=sid, add=[{"function": "inner"}]))["breakpoints"][0]
        slide = int(bp["runtimeAddress"], 16) - int(bp["address"], 16)
        assert slide > 0 and slide % 4096 == 0, bp
        go.write_text("go")
        p = await c.call("debug_continue", sessionId=sid, action="inspect", timeoutMs=30000)
        assert p["status"] == "paused", p
        bt = p["backtrace"]
        assert names(bt)[:3] == ["inner", "outer", "main"], bt
        assert [f["line"] for f in bt[1:3]] == [line_of("OUTER_CALL"), line_of("MAIN_OUTER_CALL")], bt
        for f in bt[:3]:
            assert int(f["runtimeAddress"], 16) - int(f["address"], 16) == slide, f
            assert f["module"] == "frames_app", f
        # A runtime address is what debug_memory reads: the breakpoint's code bytes.
        code = await c.call("debug_memory", sessionId=sid, targets=[{"address": bp["runtimeAddress"], "size": 4, "type": "u8"}])
        assert "error" not in code["results"][0], code
        await c.call("debug_session", action="stop", sessionId=sid)


async def test_thread_start_function_at_its_call_line(strobe_home, fixtures_dir, tmp_path):
    go = tmp_path / "go"
    async with mcp_client(strobe_home) as c:
        sid = await launch(c, fixtures_dir, "thread", go)
        await c.call("debug_breakpoint", sessionId=sid, add=[{"function": "inner"}])
        go.write_text("go")
        p = await c.call("debug_continue", sessionId=sid, action="inspect", timeoutMs=30000)
        assert p["status"] == "paused", p
        bt = p["backtrace"]
        assert names(bt)[:2] == ["inner", "worker_main"], bt
        assert bt[1]["line"] == line_of("WORKER_CALL"), bt
        # The thread's start in libc is a frame too (gdb: start_thread, then clone3).
        assert len(bt) >= 3 and bt[2]["module"].startswith("libc"), bt
        if LIBC_DEBUG:
            assert bt[2]["function"] == "start_thread", bt
        await c.call("debug_session", action="stop", sessionId=sid)


async def test_const_pointer_type_prints_once(strobe_home, fixtures_dir, tmp_path):
    """Item 9: `const struct lib_point * const`, as gdb prints it (not `const const ...`)."""
    go = tmp_path / "go"
    async with mcp_client(strobe_home) as c:
        sid = await launch(c, fixtures_dir, "lib", go)
        await c.call("debug_breakpoint", sessionId=sid, add=[{"file": "frames_app.c", "line": line_of("APP_NORM_BODY")}])
        go.write_text("go")
        p = await c.call("debug_continue", sessionId=sid, action="inspect", timeoutMs=30000)
        assert p["status"] == "paused", p
        types = {v["name"]: v["type"] for v in p["locals"]}
        assert types["p"] == "const struct lib_point * const", types
        await c.call("debug_session", action="stop", sessionId=sid)


async def test_abort_inside_free_names_libc_frames_and_the_user_frame(strobe_home, fixtures_dir, tmp_path):
    """Items 7-9: a double free aborts inside free(): libc frames are named from their ELF
    symbols, the summary is the user's frame that called free, xmm registers are readable."""
    async with mcp_client(strobe_home) as c:
        await c.call("debug_trace", add=["release_twice"])
        crash = await crash_of(c, fixtures_dir, "doublefree", tmp_path / "go")
        assert crash["signal"] == "SIGABRT", crash
        assert crash["function"] == "release_twice" and crash["line"] == line_of("DOUBLE_FREE"), crash
        assert "in its call to free" in crash["text"], crash["text"]
        fns = names(crash["backtrace"])
        for libc in ["abort", "free"]:
            assert libc in fns, fns
        if LIBC_DEBUG:
            assert fns[0] == "__pthread_kill_implementation", fns
        assert fns.index("free") == fns.index("release_twice") - 1, fns
        assert fns[fns.index("release_twice") + 1] == "main", fns
        user = [f for f in crash["backtrace"] if f.get("file")]
        assert [f["line"] for f in user] == [line_of("DOUBLE_FREE"), line_of("MAIN_RELEASE_CALL")], user
        xmm0 = crash["registers"]["xmm0"]
        assert len(xmm0["bytes"]) == 32 and len(xmm0["doubles"]) == 2, xmm0


async def test_crash_through_libc_keeps_every_frame(strobe_home, fixtures_dir, tmp_path):
    """Item 7: a comparator called by qsort crashes: the libc frames between it and the
    caller are named, and every user frame is at its call line."""
    async with mcp_client(strobe_home) as c:
        crash = await crash_of(c, fixtures_dir, "libccrash", tmp_path / "go")
        assert crash["function"] == "crash_compare" and crash["line"] == line_of("COMPARE_CRASH"), crash
        fns = names(crash["backtrace"])
        assert fns[0] == "crash_compare", fns
        assert any(f in ("qsort", "qsort_r", "__qsort_r") for f in fns), fns
        assert None not in fns[: fns.index("main") + 1], fns
        user = [f for f in crash["backtrace"] if f.get("file")]
        assert [(f["function"], f["line"]) for f in user] == [
            ("crash_compare", line_of("COMPARE_CRASH")),
            ("sort_values", line_of("QSORT_CALL")),
            ("main", line_of("MAIN_SORT_CALL")),
        ], user


async def test_code_in_a_shared_library_is_traced_broken_on_and_read(strobe_home, fixtures_dir, tmp_path):
    """Item 12: the program's logic lives in libframes.so (built with -g, linked normally):
    its functions are traced and broken on, its globals read, and backtraces pass through it."""
    go = tmp_path / "go"
    async with mcp_client(strobe_home) as c:
        sid = await launch(c, fixtures_dir, "lib", go)
        t = await c.call("debug_trace", sessionId=sid, add=["lib_add", "lib_shift"])
        assert t["hookedFunctions"] == 2, t
        bp = (await c.call("debug_breakpoint", sessionId=sid, add=[{"function": "lib_leaf"}]))["breakpoints"][0]
        assert bp["module"] == "libframes.so" and bp["file"].endswith("frames_lib.c"), bp
        # Static addresses are the library's own (module-relative), the runtime one its mapping.
        assert int(bp["address"], 16) < 0x10000 < int(bp["runtimeAddress"], 16), bp
        go.write_text("go")
        p = await c.call("debug_continue", sessionId=sid, action="inspect", timeoutMs=30000)
        assert p["status"] == "paused" and p["function"] == "lib_leaf", p
        assert [v["value"] for v in p["locals"] if v["name"] == "n"] == [7], p["locals"]
        bt = p["backtrace"]
        assert [(f["function"], f["line"]) for f in bt[:3]] == [
            ("lib_leaf", line_of("lib_leaf(int n)", LIB)),
            ("lib_entry", line_of("LIB_ENTRY_CALL", LIB)),
            ("main", line_of("MAIN_LIB_CALL")),
        ], bt
        assert [f["module"] for f in bt[:3]] == ["libframes.so", "libframes.so", "frames_app"], bt
        m = await c.call("debug_memory", sessionId=sid, targets=[{"variable": "lib_total"}, {"variable": "lib_origin.x"}])
        assert [r["value"] for r in m["results"]] == [20, 3], m
        done = await c.call("debug_continue", sessionId=sid, action="continue", timeoutMs=30000)
        assert done["status"] == "exited", done
        enters = (await c.call("debug_query", sessionId=sid, eventType="function_enter", verbose=True))["events"]
        assert [e["function"] for e in enters] == ["lib_add", "lib_add", "lib_shift"], enters
        assert all(e["sourceFile"].endswith("frames_lib.c") for e in enters), enters
        # Typed arguments from the library's own DWARF: the struct behind the pointer, by name.
        shift = enters[2]["arguments"]
        assert shift["by"] == 5 and json.dumps(shift["p"]).count('"x": 1') == 1, shift


async def test_breakpoint_in_a_library_loaded_later_is_pending_then_pauses(strobe_home, fixtures_dir, tmp_path):
    """Items 12 and issue 13 §1: a breakpoint in a plugin not loaded yet is pending; when
    dlopen loads it, it resolves before the program calls in, and pauses there."""
    go = tmp_path / "go"
    async with mcp_client(strobe_home) as c:
        sid = await launch(c, fixtures_dir, "dlopen", go)
        bp = (await c.call("debug_breakpoint", sessionId=sid, add=[{"function": "plugin_run"}]))["breakpoints"][0]
        assert bp.get("pending") is True and bp["hook"] == "pending" and "address" not in bp, bp
        await c.call("debug_trace", sessionId=sid, add=["plugin_run"])
        go.write_text("go")
        p = await c.call("debug_continue", sessionId=sid, action="inspect", timeoutMs=30000)
        assert p["status"] == "paused" and p["function"] == "plugin_run", p
        assert p["file"].endswith("frames_plugin.c"), p
        assert [f["function"] for f in p["backtrace"][:3]] == ["plugin_run", "run_plugin", "main"], p["backtrace"]
        st = await c.call("debug_session", action="status", sessionId=sid)
        resolved = st["breakpoints"][0]
        assert resolved["hook"] in ("inline", "hardware") and resolved["module"] == "libframes_plugin.so", resolved
        m = await c.call("debug_memory", sessionId=sid, targets=[{"variable": "plugin_calls"}])
        assert m["results"][0]["value"] == 0, m
        done = await c.call("debug_continue", sessionId=sid, action="continue", timeoutMs=30000)
        assert done["status"] == "exited", done
        await c.wait_for(sid, "plugin_run=10", eventType="stdout")
        exits = (await c.call("debug_query", sessionId=sid, eventType="function_exit", verbose=True))["events"]
        assert [e["function"] for e in exits] == ["plugin_run"], exits


async def test_breakpoints_staged_before_launch_in_libraries(strobe_home, fixtures_dir, tmp_path):
    """Issue 13 §1: staged breakpoints in a library the program is linked with resolve at
    launch; one in a plugin loaded later with dlopen is pending, then pauses."""
    async with mcp_client(strobe_home) as c:
        await c.call("debug_breakpoint", add=[{"function": "lib_entry"}])
        go = tmp_path / "go"
        r = await c.call("debug_launch", command=str(fixtures_dir / "frames_app"), args=["lib", str(go)], projectRoot=str(SRC))
        [bp] = r["breakpoints"]
        assert bp["function"] == "lib_entry" and bp["module"] == "libframes.so" and not bp.get("pending"), r
        go.write_text("go")
        p = await c.call("debug_continue", sessionId=r["sessionId"], action="inspect", timeoutMs=30000)
        assert p["status"] == "paused" and p["function"] == "lib_entry", p
        await c.call("debug_session", action="stop", sessionId=r["sessionId"])

        await c.call("debug_breakpoint", add=[{"function": "plugin_run"}])
        go = tmp_path / "go2"
        r = await c.call("debug_launch", command=str(fixtures_dir / "frames_app"), args=["dlopen", str(go)], projectRoot=str(SRC))
        by_fn = {b["function"]: b for b in r["breakpoints"]}
        assert by_fn["plugin_run"].get("pending") is True, r
        go.write_text("go")
        p = await c.call("debug_continue", sessionId=r["sessionId"], action="inspect", timeoutMs=30000)
        # The staged lib_entry breakpoint applies to this launch too: continue past it.
        while p["status"] == "paused" and p["function"] != "plugin_run":
            p = await c.call("debug_continue", sessionId=r["sessionId"], action="continue", timeoutMs=30000)
        assert p["status"] == "paused" and p["function"] == "plugin_run", p
        await c.call("debug_session", action="stop", sessionId=r["sessionId"])


async def test_abort_inside_free_called_from_a_library_is_reported_there(strobe_home, fixtures_dir, tmp_path):
    """Item 8: the double free happens in libframes.so's code: the summary names that frame
    (not main, its caller), and the backtrace reaches main through it."""
    async with mcp_client(strobe_home) as c:
        crash = await crash_of(c, fixtures_dir, "libdoublefree", tmp_path / "go")
        assert crash["function"] == "lib_release_twice" and crash["line"] == line_of("LIB_DOUBLE_FREE", LIB), crash
        assert crash["sourceFile"].endswith("frames_lib.c"), crash
        fns = names(crash["backtrace"])
        # Frames under an abort are partly recovered from the stack ("guessed"): a stale return
        # address may sit between free and its caller, so free need only come before it.
        assert "free" in fns[: fns.index("lib_release_twice")], fns
        assert fns[fns.index("lib_release_twice") + 1] == "main", fns


def gdb_backtrace(program, args, location):
    """(function, file name, line) of each frame gdb's `bt` shows at `location`."""
    import re
    import shutil
    import subprocess

    gdb = shutil.which("gdb")
    if gdb is None:
        pytest.skip("gdb is not installed")
    out = subprocess.run(
        [gdb, "-q", "-batch", "-nx", "-ex", "set debuginfod enabled off", "-ex", "set breakpoint pending on", "-ex", f"break {location}", "-ex", "run", "-ex", "bt", "--args", str(program), *args],
        capture_output=True, text=True, timeout=120,
    ).stdout
    frames = re.findall(r"^#\d+\s+(?:0x[0-9a-f]+ in )?(\S+) \(.*\) at (\S+):(\d+)$", out, re.M)
    return [(f, Path(file).name, int(line)) for f, file, line in frames]


async def test_backtrace_matches_gdb(strobe_home, fixtures_dir, tmp_path):
    """Item 7, against the reference: every frame with source that gdb's `bt` shows at a
    line inside the shared library, Strobe shows with the same function, file and line."""
    go = tmp_path / "go"
    go.write_text("go")
    where = f"frames_lib.c:{line_of('LIB_LEAF_BODY', LIB)}"
    expected = gdb_backtrace(fixtures_dir / "frames_app", ["lib", str(go)], where)
    assert [f[0] for f in expected] == ["lib_leaf", "lib_entry", "main"], expected
    go.unlink()
    async with mcp_client(strobe_home) as c:
        sid = await launch(c, fixtures_dir, "lib", go)
        await c.call("debug_breakpoint", sessionId=sid, add=[{"file": "frames_lib.c", "line": line_of("LIB_LEAF_BODY", LIB)}])
        go.write_text("go")
        p = await c.call("debug_continue", sessionId=sid, action="inspect", timeoutMs=30000)
        assert p["status"] == "paused", p
        got = [(f["function"], Path(f["file"]).name, f["line"]) for f in p["backtrace"] if f.get("file")]
        assert got == expected, (got, expected)
        await c.call("debug_session", action="stop", sessionId=sid)


@pytest.mark.parametrize("at_exit", [False, True])
@pytest.mark.parametrize("stop", ["line", "entry"])
async def test_backtrace_through_traced_callers_matches_gdb(strobe_home, fixtures_dir, tmp_path, at_exit, stop):
    """A stop under two traced callers (lj_leaf <- lj_mid <- lj_run <- main; native hooks, or
    with argumentsAtExit JavaScript hooks on Interceptor.attach, whose leave trampoline
    replaces each traced call's return address), inside lj_leaf or at its first instruction:
    the backtrace goes on past them to main, as gdb's does untraced. At the entry it used to
    end at lj_run."""
    src = SRC / "longjmp.c"
    where = f"longjmp.c:{line_of('x % 5 == 2', src)}"
    go = tmp_path / "go"
    go.write_text("go")
    expected = gdb_backtrace(fixtures_dir / "c_longjmp", ["50", str(go)], where)
    go.unlink()
    assert [f[0] for f in expected] == ["lj_leaf", "lj_mid", "lj_run", "main"], expected
    async with mcp_client(strobe_home) as c:
        r = await c.call("debug_launch", command=str(fixtures_dir / "c_longjmp"), args=["50", str(go)], projectRoot=str(SRC))
        sid = r["sessionId"]
        await c.wait_for(sid, "ready", eventType="stdout")
        t = await c.call("debug_trace", sessionId=sid, add=["lj_mid", "lj_run"], argumentsAtExit=at_exit)
        assert t["hookedFunctions"] == 2, t
        point = {"file": "longjmp.c", "line": expected[0][2]} if stop == "line" else {"function": "lj_leaf"}
        await c.call("debug_breakpoint", sessionId=sid, add=[point])
        go.write_text("go")
        p = await c.call("debug_continue", sessionId=sid, action="inspect", timeoutMs=30000)
        assert p["status"] == "paused", p
        # The same frames in the pause's answer and in the session's status.
        st = await c.call("debug_session", action="status", sessionId=sid)
        for frames in (p["backtrace"], st["pausedThreads"][0]["backtrace"]):
            got = [(f["function"], Path(f["file"]).name, f["line"]) for f in frames if f.get("file")]
            assert got[1:] == expected[1:] and got[0][0] == "lj_leaf", (stop, got, expected)
        await c.call("debug_session", action="stop", sessionId=sid)


async def test_library_code_of_a_program_without_debug_info(strobe_home, fixtures_dir, tmp_path):
    """Item 12: only the library was built with -g (the executable is stripped): its
    functions are still traced and broken on."""
    go = tmp_path / "go"
    async with mcp_client(strobe_home) as c:
        r = await c.call("debug_launch", command=str(fixtures_dir / "frames_app_nodebug"), args=["lib", str(go)], projectRoot=str(SRC))
        sid = r["sessionId"]
        await c.wait_for(sid, "ready lib", eventType="stdout")
        t = await c.call("debug_trace", sessionId=sid, add=["lib_add"])
        assert t["hookedFunctions"] == 1, t
        await c.call("debug_breakpoint", sessionId=sid, add=[{"file": "frames_lib.c", "line": line_of("LIB_LEAF_BODY", LIB)}])
        go.write_text("go")
        p = await c.call("debug_continue", sessionId=sid, action="inspect", timeoutMs=30000)
        assert p["status"] == "paused" and p["function"] == "lib_leaf", p
        assert names(p["backtrace"])[:2] == ["lib_leaf", "lib_entry"], p["backtrace"]
        m = await c.call("debug_memory", sessionId=sid, targets=[{"variable": "lib_total"}])
        assert m["results"][0]["value"] == 20, m
        await c.call("debug_session", action="stop", sessionId=sid)
