"""Floating-point arguments and results (System V: xmm registers, x87 for long double)
against the real `c_floats` fixture (tests/fixtures/c/floats.c). The agent reads the copy of
the xmm registers Frida saves around a hook (agent/src/xmm.ts); DWARF says which register
holds which value (src/engine/recipes.rs)."""

import pytest

from conftest import REPO, mcp_client

pytestmark = pytest.mark.anyio

SRC = str(REPO / "tests" / "fixtures")
ROUNDS = 3


async def calls(c, sid, fn):
    """(enter, exit) events of `fn`, in call order."""
    ev = (await c.call("debug_query", sessionId=sid, limit=500, verbose=True, **{"function": {"equals": fn}}))["events"]
    enters = [e for e in ev if e["eventType"] == "function_enter"]
    exits = [e for e in ev if e["eventType"] == "function_exit"]
    assert len(enters) == ROUNDS and len(exits) == ROUNDS, (fn, ev)
    return list(zip(enters, exits))


async def test_float_arguments_and_results(strobe_home, fixtures_dir):
    async with mcp_client(strobe_home) as c:
        await c.call("debug_trace", add=["fl_*"])
        r = await c.call("debug_launch", command=str(fixtures_dir / "c_floats"), args=[str(ROUNDS)], projectRoot=SRC)
        sid = r["sessionId"]
        await c.wait_for(sid, "floats done", eventType="stdout")
        await c.wait_status(sid)

        for n, (enter, exit_) in enumerate(await calls(c, sid, "fl_scale")):
            # Integer and float registers counted separately: k in esi, x in xmm0, y in xmm1.
            assert enter["arguments"] == {"x": 1.5 + n, "k": n + 2, "y": 0.25}, enter
            assert exit_["returnValue"] == (1.5 + n) * (n + 2) + 0.25, exit_

        for n, (enter, exit_) in enumerate(await calls(c, sid, "fl_mix")):
            assert enter["arguments"] == {"a": n, "b": 0.5, "c": 2.25, "d": 10}, enter
            assert exit_["returnValue"] == n + 12.75, exit_  # a float result, exact here

        for n, (enter, exit_) in enumerate(await calls(c, sid, "fl_vadd")):
            # A struct of two doubles: one xmm register per eightbyte, in and out.
            assert enter["arguments"] == {"a": {"x": 1.0 + n, "y": -2.0}, "b": {"x": 0.5, "y": 4.0 * n}}, enter
            assert exit_["returnValue"] == {"x": 1.5 + n, "y": -2.0 + 4.0 * n}, exit_

        for n, (enter, exit_) in enumerate(await calls(c, sid, "fl_mixed")):
            # SSE then INTEGER eightbyte; a struct of int + float is one INTEGER eightbyte.
            assert enter["arguments"] == {"m": {"w": 2.5, "id": 100 + n}, "t": {"id": 7, "w": 2.0}}, enter
            assert exit_["returnValue"] == {"w": 5.0, "id": 107 + n}, exit_

        for n, (enter, exit_) in enumerate(await calls(c, sid, "fl_nine")):
            # The ninth double does not fit in xmm0-7: it is read from the stack.
            args = enter["arguments"]
            assert [args[k] for k in "abcdefgh"] == [1, 2, 3, 4, 5, 6, 7, 8] and args["i"] == 9.5 + n, enter
            assert exit_["returnValue"] == 45.5 + n, exit_

        for n, (enter, exit_) in enumerate(await calls(c, sid, "fl_long")):
            # long double: passed in memory (read as the nearest double), returned in x87 st0.
            assert enter["arguments"] == {"v": 1.25, "k": n + 1}, enter
            assert "x87" in str(exit_["returnValue"]), exit_
