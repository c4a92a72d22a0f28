"""Stops in place before the program runs (issue 13 §1), staging scoped to the connection
(issue 16 §4), and all-or-nothing breakpoint calls (issue 15 items 2 and 10), through a
real MCP client against `quick`, a fixture that is over in milliseconds."""

import os

import pytest

from conftest import REPO, mcp_client, pid_alive, _sleep

pytestmark = pytest.mark.anyio

SRC = REPO / "tests" / "fixtures" / "c"
QUICK_C = (SRC / "quick.c").read_text().splitlines()


def line_of(marker: str) -> int:
    return next(i + 1 for i, text in enumerate(QUICK_C) if marker in text)


@pytest.fixture
def follow_children(monkeypatch):
    monkeypatch.setenv("STROBE_FOLLOW_CHILDREN", "1")


def local(r, name):
    for v in r["locals"]:
        if v["name"] == name:
            return v.get("value")
    raise AssertionError(f"no local {name} in {r['locals']}")


async def launch(c, fixtures_dir, *args, **kw):
    return await c.call("debug_launch", command=str(fixtures_dir / "quick"), args=list(args), projectRoot=str(SRC), **kw)


async def first_pause(c, launched):
    """The launch's own report of its first pause, else wait for it."""
    if launched.get("status") == "paused":
        return launched["pausedThread"]
    p = await c.call("debug_continue", sessionId=launched["sessionId"], action="inspect", timeoutMs=30000)
    assert p["status"] == "paused", p
    return p


async def events(c, sid, event_type):
    return (await c.call("debug_query", sessionId=sid, eventType=event_type, limit=500, verbose=True))["events"]


async def stdout(c, sid):
    """The program's output lines (an unbuffered line may arrive in pieces)."""
    return "".join(e["text"] for e in await events(c, sid, "stdout")).splitlines()


async def run_to_exit(c, sid):
    done = await c.call("debug_continue", sessionId=sid, action="continue", timeoutMs=30000)
    assert done["status"] == "exited", done
    await c.wait_for(sid, "quick done", eventType="stdout")
    return done


def quick_processes():
    """Live processes running the `quick` fixture."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if os.readlink(f"/proc/{pid}/exe").endswith("/quick") and pid_alive(int(pid)):
                    found.append(int(pid))
            except OSError:
                pass
    return found


async def test_stop_on_entry_pauses_at_main_before_any_output(strobe_home, fixtures_dir):
    async with mcp_client(strobe_home) as c:
        r = await launch(c, fixtures_dir, stopOnEntry=True)
        sid = r["sessionId"]
        [entry] = r["breakpoints"]
        assert entry["origin"] == "stopOnEntry" and entry["function"] == "main", r
        assert entry["file"].endswith("quick.c") and entry["address"].startswith("0x"), entry
        # A PIE: the static address and where it sits in the process differ by the slide.
        assert int(entry["runtimeAddress"], 16) > int(entry["address"], 16), entry
        p = await first_pause(c, r)
        assert p["function"] == "main" and p["breakpointId"] == entry["id"], p
        assert p["arguments"][0] == 1, p  # argc: the program's name only
        # Paused before the first instruction of main: nothing printed yet.
        assert await events(c, sid, "stdout") == []
        st = await c.call("debug_session", action="status", sessionId=sid)
        assert st["status"] == "paused" and len(st["pausedThreads"]) == 1, st

        await run_to_exit(c, sid)
        out = await events(c, sid, "stdout")
        assert await stdout(c, sid) == ["quick start 84", "quick done"], out
        [pause] = await events(c, sid, "pause")
        assert all(e["timestampNs"] > pause["timestampNs"] for e in out), (pause, out)


async def test_staged_breakpoint_pauses_before_any_output(strobe_home, fixtures_dir):
    line = line_of("QUICK_SUM")
    async with mcp_client(strobe_home) as c:
        s = await c.call("debug_breakpoint", add=[{"file": "quick.c", "line": line}])
        assert s["mode"] == "staged" and [b["id"] for b in s["staged"]] == ["staged-1"], s

        r = await launch(c, fixtures_dir)
        sid = r["sessionId"]
        [bp] = r["breakpoints"]
        assert bp["origin"] == "staged" and bp["stagedId"] == "staged-1", r
        assert bp["function"] == "compute" and bp["line"] == line, bp
        p = await first_pause(c, r)
        assert p["function"] == "compute" and p["line"] == line, p
        if "locals" not in p:
            p = await c.call("debug_continue", sessionId=sid, action="inspect")
        assert local(p, "a") == 20 and local(p, "b") == 22 and local(p, "sum") == 42, p
        assert await events(c, sid, "stdout") == []

        await run_to_exit(c, sid)
        assert await stdout(c, sid) == ["quick start 84", "quick done"]
        # A line in a leaf function is a hardware point, armed at main's entry: that
        # internal stop is not the user's pause.
        assert bp["hook"] == "hardware", bp
        assert [e["function"] for e in await events(c, sid, "pause")] == ["compute"]

        # Staged breakpoints stay for the connection's later launches until cleared.
        again = await launch(c, fixtures_dir)
        assert [b["stagedId"] for b in again["breakpoints"]] == ["staged-1"], again
        await first_pause(c, again)
        await run_to_exit(c, again["sessionId"])


async def test_staged_breakpoint_pauses_a_forked_child(strobe_home, fixtures_dir, follow_children):
    async with mcp_client(strobe_home) as c:
        await c.call("debug_breakpoint", add=[{"function": "child_step"}])
        r = await launch(c, fixtures_dir, "fork")
        sid, pid = r["sessionId"], r["pid"]
        p = await c.call("debug_continue", sessionId=sid, action="inspect", timeoutMs=30000)
        assert p["status"] == "paused" and p["function"] == "child_step", p
        assert p["pid"] != pid and p["arguments"] == [7], p
        texts = await stdout(c, sid)
        assert "quick start 84" in texts and "child 14" not in texts, texts

        await run_to_exit(c, sid)
        texts = await stdout(c, sid)
        assert "child 14" in texts and "child exited 3" in texts, texts


async def test_staging_belongs_to_the_connection(strobe_home, fixtures_dir):
    async with mcp_client(strobe_home) as a:
        await a.call("debug_trace", add=["compute"])
        await a.call("debug_breakpoint", add=[{"function": "compute"}])
        async with mcp_client(strobe_home) as b:
            # B's launch runs free: A's patterns and breakpoints are A's.
            r = await launch(b, fixtures_dir)
            assert "breakpoints" not in r and "pendingPatternsApplied" not in r, r
            assert (await b.wait_status(r["sessionId"]))["status"] == "exited"
            assert await events(b, r["sessionId"], "function_enter") == []

            # A's launch applies and lists both.
            ra = await launch(a, fixtures_dir)
            assert ra["stagedPatterns"] == ["compute"] and ra["pendingPatternsApplied"] == 1, ra
            assert [bp["function"] for bp in ra["breakpoints"]] == ["compute"], ra
            await first_pause(a, ra)
            await run_to_exit(a, ra["sessionId"])
    # A is gone: a new client's launch gets nothing of what A staged.
    async with mcp_client(strobe_home) as c:
        r = await launch(c, fixtures_dir)
        assert "breakpoints" not in r and "pendingPatternsApplied" not in r, r
        assert (await c.wait_status(r["sessionId"]))["status"] == "exited"


async def test_clear_and_remove_staged(strobe_home, fixtures_dir):
    async with mcp_client(strobe_home) as c:
        t = await c.call("debug_trace", add=["compute", "tick"])
        assert t["activePatterns"] == ["compute", "tick"]
        t = await c.call("debug_trace", clear=True)
        assert t["mode"] == "pending" and t["activePatterns"] == [], t

        s = await c.call("debug_breakpoint", add=[{"function": "compute"}, {"function": "tick", "condition": "args[0] > 3"}])
        assert [b["id"] for b in s["staged"]] == ["staged-1", "staged-2"], s
        s = await c.call("debug_breakpoint", remove=["staged-1"])
        assert [(b["id"], b["function"]) for b in s["staged"]] == [("staged-2", "tick")], s
        e = await c.error("debug_breakpoint", remove=["staged-9"])
        assert e.code == "VALIDATION_ERROR" and "staged-2" in e.message, e.message
        e = await c.error("debug_breakpoint", add=[{"file": "quick.c"}])
        assert e.code == "VALIDATION_ERROR" and "add[0]" in e.message and "line" in e.message, e.message
        s = await c.call("debug_breakpoint", clear=True)
        assert s["staged"] == [], s

        r = await launch(c, fixtures_dir)
        assert "breakpoints" not in r and "pendingPatternsApplied" not in r, r
        assert (await c.wait_status(r["sessionId"]))["status"] == "exited"


async def test_a_launch_breakpoint_that_does_not_resolve_leaves_nothing_running(strobe_home, fixtures_dir):
    async with mcp_client(strobe_home) as c:
        e = await c.error("debug_launch", command=str(fixtures_dir / "quick"), projectRoot=str(SRC),
                          breakpoints=[{"function": "compute"}, {"function": "no_such_function"}])
        assert e.code == "VALIDATION_ERROR", e
        assert "breakpoints[1]" in e.message and "no_such_function" in e.message and "Closest" in e.message, e.message
        await c.call("debug_breakpoint", add=[{"file": "quick.c", "line": 4000}])
        e = await c.error("debug_launch", command=str(fixtures_dir / "quick"), projectRoot=str(SRC))
        assert "staged-1" in e.message and "quick.c:4000" in e.message, e.message
        listed = await c.call("debug_session", action="list")
        assert [s for s in listed["sessions"] if s["status"] in ("running", "paused")] == [], listed
        assert quick_processes() == []


async def test_a_bad_item_adds_nothing(strobe_home, fixtures_dir):
    tick = line_of("QUICK_TICK")
    async with mcp_client(strobe_home) as c:
        r = await launch(c, fixtures_dir, "loop", stopOnEntry=True)
        sid = r["sessionId"]
        await first_pause(c, r)
        # An unknown function: refused before anything is set.
        e = await c.error("debug_breakpoint", sessionId=sid, add=[{"file": "quick.c", "line": tick, "message": "i={i}"}, {"function": "nope_nope"}])
        assert e.code == "VALIDATION_ERROR" and "add[1]" in e.message and "nope_nope" in e.message, e.message
        # An item the agent refuses (a condition that does not compile) takes the others back out.
        e = await c.error("debug_breakpoint", sessionId=sid,
                          add=[{"file": "quick.c", "line": tick, "message": "i={i}"}, {"function": "tick", "condition": "args[0] >"}])
        assert e.code == "EVAL_ERROR" and "add[1]" in e.message, e.message
        assert "    at " not in e.message and ".js:" not in e.message, e.message  # no JavaScript stack
        st = await c.call("debug_session", action="status", sessionId=sid)
        assert [b["function"] for b in st["breakpoints"]] == ["main"], st
        assert st.get("logpoints", []) == [], st

        done = await c.call("debug_continue", sessionId=sid, action="continue", timeoutMs=30000)
        assert done["status"] == "exited", done
        await c.wait_for(sid, "quick done", eventType="stdout")
        assert await events(c, sid, "logpoint") == []


async def test_removing_a_breakpoint_and_a_logpoint_together_logs_nothing_after(strobe_home, fixtures_dir):
    tick = line_of("QUICK_TICK")
    async with mcp_client(strobe_home) as c:
        r = await launch(c, fixtures_dir, "loop",
                         breakpoints=[{"function": "tick"}, {"file": "quick.c", "line": tick, "message": "tick {i}"}])
        sid = r["sessionId"]
        assert [b["function"] for b in r["breakpoints"]] == ["tick"] and len(r["logpoints"]) == 1, r
        p = await first_pause(c, r)
        assert p["function"] == "tick" and p["arguments"] == [0], p
        ids = [r["breakpoints"][0]["id"], r["logpoints"][0]["id"]]
        after = await c.call("debug_breakpoint", sessionId=sid, remove=ids)
        assert after["breakpoints"] == [] and after["logpoints"] == [], after
        await c.wait_for(sid, "quick done", eventType="stdout")
        assert await events(c, sid, "logpoint") == []


async def test_stop_on_entry_in_rust_is_the_crates_main(strobe_home, fixtures_dir):
    async with mcp_client(strobe_home) as c:
        r = await c.call("debug_launch", command=str(fixtures_dir / "rust_debugee"), projectRoot=str(REPO / "tests" / "fixtures" / "rust"),
                         stopOnEntry=True)
        assert r["breakpoints"][0]["function"] == "debugee::main", r
        p = await first_pause(c, r)
        assert p["function"] == "debugee::main" and p["file"].endswith("debugee.rs"), p
        await c.call("debug_session", action="stop", sessionId=r["sessionId"])


async def test_a_users_breakpoint_at_main_and_a_hardware_line_point(strobe_home, fixtures_dir):
    """The hardware point waits for main's entry; the user's own breakpoint there must not
    hold the thread away from that gate."""
    line = line_of("QUICK_SUM")
    async with mcp_client(strobe_home) as c:
        r = await launch(c, fixtures_dir, breakpoints=[{"function": "main"}, {"file": "quick.c", "line": line}])
        sid = r["sessionId"]
        assert [b["function"] for b in r["breakpoints"]] == ["main", "compute"], r
        p = await first_pause(c, r)
        assert p["function"] == "main", p
        n = await c.call("debug_continue", sessionId=sid, action="continue", timeoutMs=30000)
        assert n["status"] == "paused" and n["function"] == "compute" and n["line"] == line, n
        await run_to_exit(c, sid)
        assert [e["function"] for e in await events(c, sid, "pause")] == ["main", "compute"]
