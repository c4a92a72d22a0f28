"""Stops you can trust (issue 15): each test drives a real fixture through the real MCP client
and fails on the code before the fix it names."""

import re

import pytest

from conftest import REPO, mcp_client, _sleep
from test_breakpoints import local

pytestmark = pytest.mark.anyio

C_SRC = REPO / "tests" / "fixtures" / "c" / "stops.c"
CPP_SRC = REPO / "tests" / "fixtures" / "cpp" / "methods.cpp"


def line_of(marker: str, src=C_SRC) -> int:
    for i, text in enumerate(src.read_text().splitlines(), start=1):
        if marker in text:
            return i
    raise AssertionError(marker)


async def launch(c, fixtures_dir, tmp_path, mode, *extra, binary="stops", src=C_SRC):
    go = tmp_path / f"go-{mode}"
    args = [mode, str(go), *extra] if binary == "stops" else [str(go)]
    r = await c.call("debug_launch", command=str(fixtures_dir / binary), args=args, projectRoot=str(src.parent))
    sid = r["sessionId"]
    await c.wait_for(sid, "ready", eventType="stdout")
    return sid, go


async def stdout_lines(c, sid):
    r = await c.call("debug_query", sessionId=sid, eventType="stdout", limit=500, verbose=True)
    return [e.get("text") or "" for e in r["events"]]


async def paused(c, sid, timeout_ms=30000):
    p = await c.call("debug_continue", sessionId=sid, action="inspect", timeoutMs=timeout_ms)
    assert p["status"] == "paused", p
    return p


async def run_to(c, fixtures_dir, tmp_path, points, mode, *extra, **launch_args):
    """Launch, set `points`, let the program go and wait for its first pause: (sid, pause)."""
    sid, go = await launch(c, fixtures_dir, tmp_path, mode, *extra, **launch_args)
    await c.call("debug_breakpoint", sessionId=sid, add=points)
    go.write_text("go")
    return sid, await paused(c, sid)


# --- item 7: stop while paused ends the program where it stands -------------------------------

async def test_stop_while_paused_lets_nothing_run(strobe_home, fixtures_dir, tmp_path):
    async with mcp_client(strobe_home) as c:
        sid, p = await run_to(c, fixtures_dir, tmp_path, [{"file": "stops.c", "line": line_of("WHILE_BODY"), "hitCount": 3}],
                              "loop", "40")
        assert local(p, "counter") == 2, p
        # The program printed counter=1 and counter=2; give stdout time to arrive.
        await c.wait_for(sid, "counter=2", eventType="stdout")
        await c.call("debug_session", action="stop", sessionId=sid, retain=True)
        out = "\n".join(await stdout_lines(c, sid))
        counters = [int(n) for n in re.findall(r"counter=(\d+)", out)]
        # Before the fix, the unloading agent released the paused thread: "Done, counter=40".
        assert "Done" not in out, out
        assert max(counters) == 2, out


# --- item 4: a paused thread is always reported ------------------------------------------------

async def test_pause_right_after_install_is_reported(strobe_home, fixtures_dir, tmp_path):
    async with mcp_client(strobe_home) as c:
        sid, go = await launch(c, fixtures_dir, tmp_path, "threads")
        go.write_text("go")
        await _sleep(0.3)  # four threads spinning through spin_step
        # They hit it before the agent's reply reaches the daemon.
        await c.call("debug_breakpoint", sessionId=sid, add=[{"file": "stops.c", "line": line_of("SPIN_BODY")}])
        p = await paused(c, sid, timeout_ms=10000)
        assert p["function"] == "spin_step"
        st = await c.call("debug_session", action="status", sessionId=sid)
        assert st["status"] == "paused" and len(st["pausedThreads"]) >= 1, st
        pauses = await c.call("debug_query", sessionId=sid, eventType="pause", limit=50, verbose=True)
        # Every pause recorded is a thread the status lists (none lost).
        listed = {t["threadId"] for t in st["pausedThreads"]}
        assert {e["threadId"] for e in pauses["events"]} <= listed, (pauses, st)
        # continue resumes them all and returns at the next pause.
        again = await c.call("debug_continue", sessionId=sid, action="continue", timeoutMs=10000)
        assert again["status"] == "paused", again
        await c.call("debug_session", action="stop", sessionId=sid)


# --- item 1: a line with several addresses is one stop -----------------------------------------

async def test_multi_address_line_counts_logs_and_steps_per_execution(strobe_home, fixtures_dir, tmp_path):
    header = line_of("WHILE_HEADER")
    async with mcp_client(strobe_home) as c:
        sid, go = await launch(c, fixtures_dir, tmp_path, "loop", "3")
        bp = await c.call("debug_breakpoint", sessionId=sid, add=[{"file": "stops.c", "line": header}])
        assert len(bp["breakpoints"][0]["addresses"]) >= 2, bp  # the fixture's premise
        await c.call("debug_breakpoint", sessionId=sid, add=[{"file": "stops.c", "line": header, "message": "i={i}"}])
        go.write_text("go")
        first = await paused(c, sid)
        assert first["line"] == header and local(first, "i") == 0
        # A step from the header goes to the body, not to the header's other address.
        step = await c.call("debug_continue", sessionId=sid, action="step-over", timeoutMs=30000)
        assert step["status"] == "paused" and step["reason"] == "step", step
        assert step["line"] == line_of("WHILE_BODY"), step
        # The next stop at the header is its second execution (i == 1).
        nxt = await c.call("debug_continue", sessionId=sid, action="continue", timeoutMs=30000)
        assert nxt["line"] == header and local(nxt, "i") == 1, nxt
        await c.call("debug_breakpoint", sessionId=sid, remove=[bp["breakpoints"][0]["id"]])
        done = await c.call("debug_continue", sessionId=sid, action="continue", timeoutMs=30000)
        assert done["status"] == "exited", done
        logs = await c.call("debug_query", sessionId=sid, eventType="logpoint", verbose=True)
        messages = [e.get("logpointMessage") or e.get("text") for e in logs["events"]]
        # Four executions of the header: i = 0, 1, 2 and the final test with i = 3.
        assert messages == ["i=0", "i=1", "i=2", "i=3"], messages


async def test_hit_count_counts_executions_of_the_line(strobe_home, fixtures_dir, tmp_path):
    async with mcp_client(strobe_home) as c:
        sid, p = await run_to(c, fixtures_dir, tmp_path, [{"file": "stops.c", "line": line_of("WHILE_HEADER"), "hitCount": 2}],
                              "loop", "5")
        # The second execution of the header is the test after the first iteration.
        assert local(p, "i") == 1 and local(p, "counter") == 1, p
        await c.call("debug_session", action="stop", sessionId=sid)


# --- item 3: step-out lands in the caller ------------------------------------------------------

async def test_step_out_of_a_cpp_method_lands_in_its_caller(strobe_home, fixtures_dir, tmp_path):
    async with mcp_client(strobe_home) as c:
        sid, p = await run_to(c, fixtures_dir, tmp_path, [{"file": "methods.cpp", "line": line_of("ADD_BODY", CPP_SRC)}],
                              "methods", binary="cpp_methods", src=CPP_SRC)
        assert "add" in p["function"], p
        out = await c.call("debug_continue", sessionId=sid, action="step-out", timeoutMs=30000)
        assert out["status"] == "paused" and out["reason"] == "step", out
        assert out["function"] == "main" and out["line"] == line_of("MAIN_AFTER_ADD", CPP_SRC), out
        assert not any("no debug info" in w for w in out["warnings"]), out
        await c.call("debug_session", action="stop", sessionId=sid)


async def test_step_out_of_a_tiny_optimized_cpp_method(strobe_home, fixtures_dir, tmp_path):
    async with mcp_client(strobe_home) as c:
        # At -O2 add() is shorter than an inline hook's patch: before the fix Frida refused it
        # ("unable to intercept instruction"); now a hardware breakpoint takes over.
        sid, p = await run_to(c, fixtures_dir, tmp_path, [{"function": "Accumulator::add"}],
                              "methods", binary="cpp_methods_O2", src=CPP_SRC)
        assert p["function"] == "Accumulator::add", p
        out = await c.call("debug_continue", sessionId=sid, action="step-out", timeoutMs=30000)
        assert out["status"] == "paused" and out["reason"] == "step", out
        assert out["function"] == "main" and out["line"] == line_of("MAIN_AFTER_ADD", CPP_SRC), out
        await c.call("debug_session", action="stop", sessionId=sid)


async def test_step_out_from_a_line_breakpoint_in_an_interpreter(strobe_home, fixtures_dir, tmp_path):
    async with mcp_client(strobe_home) as c:
        sid, p = await run_to(c, fixtures_dir, tmp_path, [{"file": "stops.c", "line": line_of("OP_ADD_PUSH")}], "interp")
        assert p["function"] == "op_add", p
        out = await c.call("debug_continue", sessionId=sid, action="step-out", timeoutMs=30000)
        assert out["status"] == "paused" and out["reason"] == "step", out
        assert out["function"] == "run" and out["line"] == line_of("RUN_AFTER_ADD"), out
        await c.call("debug_session", action="stop", sessionId=sid)


# --- item 8: conditions and templates in a function with double parameters ---------------------

async def test_conditions_and_logpoints_with_double_parameters(strobe_home, fixtures_dir, tmp_path):
    async with mcp_client(strobe_home) as c:
        sid, go = await launch(c, fixtures_dir, tmp_path, "floats", "6")
        await c.call("debug_breakpoint", sessionId=sid, add=[
            {"function": "scale", "message": "i={i} x={x} factor={factor} t={threadId} hit={hit}"},
            {"function": "scale", "condition": "i == 4"},
        ])
        go.write_text("go")
        p = await paused(c, sid)
        assert p["breakpointId"] == "bp-2" and local(p, "i") == 4, p
        # Hits per point (item 11): the logpoint ran 5 times, the breakpoint's condition held once.
        st = await c.call("debug_session", action="status", sessionId=sid)
        assert st["logpoints"][0]["hits"] == 5 and st["breakpoints"][0]["hits"] == 1, st
        reply = await c.call("debug_breakpoint", sessionId=sid, add=[{"function": "main", "message": "never"}])
        assert [lp["hits"] for lp in reply["logpoints"]] == [5, 0], reply
        await c.call("debug_continue", sessionId=sid, action="continue", timeoutMs=30000)
        errors = await c.call("debug_query", sessionId=sid, eventType="condition_error")
        assert errors["totalCount"] == 0, errors
        logs = await c.call("debug_query", sessionId=sid, eventType="logpoint", verbose=True)
        messages = [e.get("logpointMessage") or e.get("text") for e in logs["events"]]
        assert len(messages) == 6, messages
        tid = logs["events"][0]["threadId"]
        for n, m in enumerate(messages):
            # Before the fix every placeholder showed the double parameters' error.
            assert m.startswith(f"i={n} x=") and m.endswith(f" t={tid} hit={n + 1}"), messages


# --- item 5: one representation of how a process ended -----------------------------------------

async def test_a_signal_death_reads_the_same_everywhere(strobe_home, fixtures_dir):
    async with mcp_client(strobe_home) as c:
        r = await c.call("debug_launch", command=str(fixtures_dir / "crash"), args=["abort"],
                         projectRoot=str(REPO / "tests" / "fixtures" / "c"))
        sid = r["sessionId"]
        end = await c.call("debug_continue", sessionId=sid, action="continue", timeoutMs=30000)
        assert end["status"] == "exited", end
        # Before the fix: exitCode null, signal null.
        assert end.get("signal") == "SIGABRT" and end.get("exitCode") is None, end
        st = await c.wait_status(sid, "exited")
        assert st.get("signal") == "SIGABRT" and st.get("exitCode") is None, st
        await c.call("debug_session", action="stop", sessionId=sid, retain=True)
        listed = [s for s in (await c.call("debug_session", action="list"))["sessions"] if s["sessionId"] == sid]
        # Before the fix: exitCode -6.
        assert listed[0].get("signal") == "SIGABRT" and listed[0].get("exitCode") is None, listed
        st = await c.call("debug_session", action="status", sessionId=sid)
        assert st.get("signal") == "SIGABRT" and st.get("exitCode") is None, st


# --- item 9: a stack overflow is a crash with a summarised deep backtrace ------------------------

async def test_stack_overflow_is_a_crash_with_a_summarised_backtrace(strobe_home, fixtures_dir, tmp_path):
    async with mcp_client(strobe_home) as c:
        sid, go = await launch(c, fixtures_dir, tmp_path, "recurse")
        go.write_text("go")
        st = await c.wait_status(sid, "exited", timeout=60)
        assert st.get("signal") == "SIGSEGV", st
        crashes = await c.call("debug_query", sessionId=sid, eventType="crash", verbose=True)
        # Before the fix: no crash event at all (the kernel found no room for the handler).
        assert crashes["totalCount"] == 1, crashes
        assert_summarised_overflow(crashes["events"][0])


def assert_summarised_overflow(crash):
    """`recurse`'s overflow: the crash in recurse, its backtrace folded and cut, down to main."""
    assert "stack overflow" in crash["text"] and crash["function"] == "recurse", crash
    bt = crash["backtrace"]
    assert len(bt) < 20, bt  # summarised, not tens of thousands of frames
    recursion = [f for f in bt if f.get("function") == "recurse" and f.get("repeated", 1) > 1]
    assert recursion and sum(f["repeated"] for f in recursion) >= 40, bt
    assert any(f.get("omittedFrames", 0) > 1000 for f in bt), bt
    # main, then possibly libc's start frames (gdb shows __libc_start_call_main below main too).
    assert "main" in [f.get("function") for f in bt[-3:]], bt


async def test_stack_overflow_in_a_traced_recursion_is_summarised_too(strobe_home, fixtures_dir, tmp_path):
    """The recursion traced: the stack runs out inside the trace hook's code, which keeps no
    frame pointer and which Frida hides from its range lists. The walk starts at the first
    frame record above sp and steps over the hook's frames (before: one anonymous frame,
    "1 frames deep")."""
    async with mcp_client(strobe_home) as c:
        sid, go = await launch(c, fixtures_dir, tmp_path, "recurse")
        await c.call("debug_trace", sessionId=sid, add=["recurse"])
        go.write_text("go")
        st = await c.wait_status(sid, "exited", timeout=60)
        assert st.get("signal") == "SIGSEGV", st
        crash = (await c.call("debug_query", sessionId=sid, eventType="crash", verbose=True))["events"][0]
        assert_summarised_overflow(crash)
        bt = crash["backtrace"]
        # No anonymous frame between the crash and main (the hook's own are left out).
        assert all(f.get("function") for f in bt[1:] if not f.get("omittedFrames")), bt


# --- item 6: ids follow time, so a cursor reads the timeline in order ---------------------------

async def test_output_ids_follow_the_trace_events_before_it(strobe_home, fixtures_dir, tmp_path):
    async with mcp_client(strobe_home) as c:
        sid, go = await launch(c, fixtures_dir, tmp_path, "floats", "6")
        await c.call("debug_trace", sessionId=sid, add=["scale"])
        go.write_text("go")
        await c.wait_status(sid, "exited")
        everything = await c.call("debug_query", sessionId=sid, limit=500, verbose=True)
        events = everything["events"]
        kinds = [e["eventType"] for e in events]
        assert kinds.count("function_enter") == 6 and "stdout" in kinds, kinds
        ids = [e["eventId"] for e in events]
        # Chronological order and id order agree (before: the last line's id came before
        # the calls that preceded it).
        assert ids == sorted(ids), list(zip(ids, kinds))
        # Following the cursor two at a time reads the same timeline.
        walked, cursor = [], 0
        while True:
            page = await c.call("debug_query", sessionId=sid, limit=2, afterEventId=cursor, verbose=True)
            if not page["events"]:
                break
            walked += [e["eventId"] for e in page["events"]]
            cursor = page["lastEventId"]
        assert walked == ids, (walked, ids)
