"""Phase 2 validation scenario through a real MCP client: a conditional breakpoint catches a
negative buffer size, the LLM reads the locals, writes a corrected value, continues, and a
logpoint confirms the fix while the program completes correctly."""

import pytest

from conftest import REPO, mcp_client, _sleep

pytestmark = pytest.mark.anyio

SRC = REPO / "tests" / "fixtures" / "c" / "debugee.c"


def line_of(marker: str) -> int:
    for i, text in enumerate(SRC.read_text().splitlines(), start=1):
        if marker in text:
            return i
    raise AssertionError(marker)


def local(result, name):
    for v in result["locals"]:
        if v["name"] == name:
            return v.get("value")
    raise AssertionError(f"no local {name} in {result['locals']}")


async def test_fix_a_negative_value_while_paused(strobe_home, fixtures_dir, tmp_path):
    go = tmp_path / "go"
    async with mcp_client(strobe_home) as c:
        tools = {t.name for t in (await c.session.list_tools()).tools}
        assert {"debug_breakpoint", "debug_continue"} <= tools

        r = await c.call("debug_launch", command=str(fixtures_dir / "c_debugee"), args=["mix", str(go)],
                         projectRoot=str(SRC.parent))
        sid = r["sessionId"]
        await c.wait_for(sid, "ready mix", eventType="stdout")

        # A conditional breakpoint on a negative value (locals by name, or args[1]).
        bp = await c.call("debug_breakpoint", sessionId=sid,
                          add=[{"file": "debugee.c", "line": line_of("MIX_BODY"), "condition": "buffer_size < 0"}])
        assert bp["breakpoints"][0]["function"] == "mix_block"
        assert bp["breakpoints"][0]["line"] == line_of("MIX_BODY")
        go.write_text("go")

        # The app pauses at the exact moment the negative value appears.
        p = await c.call("debug_continue", sessionId=sid, action="inspect", timeoutMs=30000)
        assert p["status"] == "paused", p
        assert p["function"] == "mix_block" and p["line"] == line_of("MIX_BODY")
        assert local(p, "buffer_size") == -256 and local(p, "index") == 2
        assert p["arguments"] == [2, -256]
        assert p["backtrace"][1]["function"] == "main"

        st = await c.call("debug_session", action="status", sessionId=sid)
        assert st["status"] == "paused" and len(st["pausedThreads"]) == 1
        assert [b["id"] for b in st["breakpoints"]] == [bp["breakpoints"][0]["id"]]

        # Write the corrected value, then add a logpoint that shows what the code sees.
        w = await c.call("debug_continue", sessionId=sid, action="inspect", setLocals={"buffer_size": 256})
        assert w["localsWritten"][0]["previousValue"] == -256 and w["localsWritten"][0]["newValue"] == 256
        assert local(w, "buffer_size") == 256
        lp = await c.call("debug_breakpoint", sessionId=sid,
                          add=[{"file": "debugee.c", "line": line_of("MIX_PRINT"), "message": "block {index} size={buffer_size}"}])
        assert len(lp["logpoints"]) == 1

        # Continue: no other block is negative, so the program runs to completion.
        done = await c.call("debug_continue", sessionId=sid, action="continue", timeoutMs=30000)
        assert done["status"] == "exited", done

        logs = await c.call("debug_query", sessionId=sid, eventType="logpoint", verbose=True)
        messages = [e.get("logpointMessage") or e.get("text") for e in logs["events"]]
        assert messages == ["block 2 size=256", "block 3 size=512"], messages
        await c.wait_for(sid, "total=486", eventType="stdout")
        pauses = await c.call("debug_query", sessionId=sid, eventType="pause", verbose=True)
        assert pauses["totalCount"] == 1 and pauses["events"][0]["breakpointId"] == bp["breakpoints"][0]["id"]


async def test_breakpoint_errors_are_actionable(strobe_home, fixtures_dir, tmp_path):
    async with mcp_client(strobe_home) as c:
        r = await c.call("debug_launch", command=str(fixtures_dir / "c_debugee"), args=["calls", str(tmp_path / "never")],
                         projectRoot=str(SRC.parent))
        sid = r["sessionId"]
        await c.wait_for(sid, "ready", eventType="stdout")
        e = await c.error("debug_breakpoint", sessionId=sid, add=[{"file": "debugee.c", "line": 5000}])
        assert e.code == "NO_CODE_AT_LINE" and "Valid lines" in e.message
        e = await c.error("debug_breakpoint", sessionId=sid, add=[{"function": "no_such_function"}])
        assert e.code == "VALIDATION_ERROR" and "Closest" in e.message
        e = await c.error("debug_continue", sessionId=sid, action="step-over")
        assert e.code == "VALIDATION_ERROR" and "paused" in e.message
        running = await c.call("debug_continue", sessionId=sid, action="inspect", timeoutMs=200)
        assert running["status"] == "running"
        await c.call("debug_session", action="stop", sessionId=sid)


def cpu_has_avx2() -> bool:
    try:
        return "avx2" in open("/proc/cpuinfo").read().split()
    except OSError:
        return False


@pytest.mark.skipif(not cpu_has_avx2(), reason="the fixture is built -mavx2")
async def test_a_point_in_avx_code_says_vector_registers_may_change(strobe_home, fixtures_dir):
    """A logpoint on a function GCC built -O2 -mavx2 answers with a warning the LLM can act on
    (Frida's trampoline keeps only the lower 128 bits of each vector register)."""
    async with mcp_client(strobe_home) as c:
        r = await c.call("debug_launch", command=str(fixtures_dir / "c_ipa_avx2_O2"), args=["10"],
                         projectRoot=str(SRC.parent))
        sid = r["sessionId"]
        await c.wait_for(sid, "ready", eventType="stdout")
        lp = await c.call("debug_breakpoint", sessionId=sid, add=[{"function": "vy_step", "message": "step"}])
        assert len(lp["logpoints"]) == 1, lp
        assert len(lp["warnings"]) == 1 and "built for AVX" in lp["warnings"][0], lp
        assert "debug_trace" in lp["warnings"][0], lp
        await c.call("debug_session", action="stop", sessionId=sid)


@pytest.mark.skipif(not cpu_has_avx2(), reason="the fixture is built -mavx2")
async def test_a_watch_moving_avx_code_to_the_js_path_says_so(strobe_home, fixtures_dir):
    """A watch moves a traced function to the JS path; in code GCC built -O2 -mavx2 its callers
    may keep 256-bit values across the call, so debug_trace's answer warns and says what to do."""
    async with mcp_client(strobe_home) as c:
        r = await c.call("debug_launch", command=str(fixtures_dir / "c_ipa_avx2_O2"), args=["10"],
                         projectRoot=str(SRC.parent))
        sid = r["sessionId"]
        await c.wait_for(sid, "ready", eventType="stdout")
        t = await c.call("debug_trace", sessionId=sid, add=["vy_step"])
        assert t["warnings"] == [], t
        t = await c.call("debug_trace", sessionId=sid,
                         watches={"add": [{"variable": "vy_steps", "on": ["vy_step"]}]})
        assert len(t["activeWatches"]) == 1, t
        js = [w for w in t["warnings"] if w.startswith("function 'vy_step' is traced on the JS path")]
        assert len(js) == 1 and "native hook" in js[0], t
        await c.call("debug_session", action="stop", sessionId=sid)
