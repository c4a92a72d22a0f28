"""Tracing across the two hook paths through a real MCP client: parent links between a
JS-path (typed) caller and a fast-path (integer-only) callee and the reverse, and thread
names carried in-stream by fast-path events."""

import pytest

from conftest import REPO, mcp_client
from test_lifecycle import query_all

pytestmark = pytest.mark.anyio

SRC = REPO / "tests" / "fixtures" / "c"


def typed(e) -> bool:
    """Typed serialization (JS path) reads the struct behind a pointer; the fast path's words
    are typed by the daemon: integers only."""
    return any(isinstance(v, dict) for v in e["arguments"].values())


def parent_of(e):
    """The parent's event number: parentEventId is "<sessionId>-<eventId>"."""
    p = e["parentEventId"]
    return None if p is None else int(p.rsplit("-", 1)[1])


@pytest.mark.parametrize("requests", [
    [["typed_outer", "typed_inner", "plain_outer", "plain_inner"]],  # one debug_trace call
    [["typed_outer", "typed_inner"], ["plain_outer", "plain_inner"]],  # typed first
    [["plain_outer", "plain_inner"], ["typed_outer", "typed_inner"]],  # native first
])
async def test_parent_links_cross_hook_paths(strobe_home, fixtures_dir, requests):
    async with mcp_client(strobe_home) as c:
        for add in requests:
            await c.call("debug_trace", add=add)
        r = await c.call("debug_launch", command=str(fixtures_dir / "mixed_paths"), projectRoot=str(SRC))
        sid = r["sessionId"]
        await c.wait_status(sid)
        out = "".join(e["text"] for e in await query_all(c, sid, eventType="stdout"))
        assert "mixed done 14 9" in out, out
        evs = await query_all(c, sid, eventType="function_enter")
        enter = {e["function"]: e for e in evs}
        assert set(enter) == {"typed_outer", "typed_inner", "plain_outer", "plain_inner"}, evs
        # Each pair really spans both paths.
        assert typed(enter["typed_outer"]) and typed(enter["typed_inner"]), evs
        assert not typed(enter["plain_outer"]) and not typed(enter["plain_inner"]), evs
        # JS-path caller -> fast-path callee, and the reverse.
        assert parent_of(enter["plain_inner"]) == enter["typed_outer"]["eventId"], evs
        assert parent_of(enter["typed_inner"]) == enter["plain_outer"]["eventId"], evs
        assert enter["typed_outer"]["parentEventId"] is None and enter["plain_outer"]["parentEventId"] is None
        exits = {e["function"]: e for e in await query_all(c, sid, eventType="function_exit")}
        assert parent_of(exits["plain_inner"]) == enter["typed_outer"]["eventId"], exits
        assert parent_of(exits["typed_inner"]) == enter["plain_outer"]["eventId"], exits
        # Call order is kept across the two streams: parent enter < child enter < child exit < parent exit.
        for outer, inner in (("typed_outer", "plain_inner"), ("plain_outer", "typed_inner")):
            assert enter[outer]["eventId"] < enter[inner]["eventId"] < exits[inner]["eventId"] < exits[outer]["eventId"]


async def test_fast_path_events_carry_thread_names(strobe_home, fixtures_dir):
    async with mcp_client(strobe_home) as c:
        await c.call("debug_trace", add=["thread_work"])
        r = await c.call("debug_launch", command=str(fixtures_dir / "threads"), projectRoot=str(SRC))
        sid, pid = r["sessionId"], r["pid"]
        await c.wait_status(sid)
        evs = await query_all(c, sid, eventType="function_enter")
        assert len(evs) == 11, evs
        # thread_work(int) is on the fast path: its word, typed by the daemon.
        assert not any(typed(e) for e in evs), evs
        by_arg = {next(iter(e["arguments"].values())): e for e in evs}
        assert by_arg[0]["threadName"] == "threads" and by_arg[1]["threadName"] == "threads"
        assert {by_arg[i]["threadName"] for i in (10, 11, 12)} == {"worker-1"}
        assert {by_arg[i]["threadName"] for i in (20, 21, 22)} == {"worker-2"}
        # Renamed while traced: only events after the rename carry the new name.
        assert {by_arg[i]["threadName"] for i in (100, 101, 102)} == {"renamed-2"}
        exits = await query_all(c, sid, eventType="function_exit")
        assert all(e["threadName"] for e in exits), exits


async def test_crash_event_lists_the_crashing_frames_locals(strobe_home, fixtures_dir):
    async with mcp_client(strobe_home) as c:
        r = await c.call("debug_launch", command=str(fixtures_dir / "crash_locals"), projectRoot=str(SRC))
        sid = r["sessionId"]
        await c.wait_for(sid, "", eventType="crash", timeout=30)
        await c.wait_status(sid)
        crashes = await query_all(c, sid, eventType="crash")
        assert len(crashes) == 1, crashes
        crash = crashes[0]
        assert crash["function"] == "fault_with_locals", crash
        locals_ = {v["name"]: v for v in crash["locals"]}
        assert locals_["seed"]["value"] == 7 and locals_["seed"]["isParameter"], locals_
        assert locals_["count"]["value"] == 21, locals_
        assert locals_["total"]["value"] == -123456789, locals_
        assert locals_["bad"]["value"] == "0x0", locals_
        # `valid` holds the address the program printed before crashing.
        out = "".join(e["text"] for e in await query_all(c, sid, eventType="stdout"))
        printed = int(out.split("valid=")[1].split()[0], 16)
        assert int(locals_["valid"]["value"], 16) == printed and locals_["valid"]["type"] == "int *", (locals_, out)
        assert all("memory" in v["location"] for v in locals_.values()), locals_
