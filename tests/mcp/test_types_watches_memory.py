"""Typed argument serialization (DWARF), watches and debug_memory against the real
`c_types` and `rust_types` fixtures (tests/fixtures/c/types.c, tests/fixtures/rust/types.rs)."""

import time

import pytest

from conftest import REPO, mcp_client, _sleep

pytestmark = pytest.mark.anyio

SRC = str(REPO / "tests" / "fixtures")


async def launch(c, fixtures_dir, name, ready, rounds="400", interval="30"):
    r = await c.call("debug_launch", command=str(fixtures_dir / name), args=[rounds, interval], projectRoot=SRC)
    sid = r["sessionId"]
    await c.wait_for(sid, ready, eventType="stdout")
    return sid


async def last_event(c, sid, fn, kind="function_enter", timeout=20.0):
    """The most recent event of `fn`, waiting until one exists."""
    r = await c.wait_for(sid, fn, timeout=timeout, eventType=kind, verbose=True, **{"function": {"equals": fn}})
    return r["events"][-1]


async def last_watched_event(c, sid, fn, kind="function_enter", timeout=20.0):
    """The most recent event of `fn` recorded with watch values. debug_trace installs the
    hooks before the watches, so a call in between has none."""
    deadline = time.monotonic() + timeout
    while True:
        e = await last_event(c, sid, fn, kind, timeout)
        if e.get("watchValues") or time.monotonic() > deadline:
            return e
        await _sleep(0.1)


async def test_typed_arguments_depths_cycles_and_nulls(strobe_home, fixtures_dir):
    async with mcp_client(strobe_home) as c:
        # 60 s of rounds: its steps wait for fresh events until the end (on a loaded machine
        # the default 12 s ran out before the depth-1 step).
        sid = await launch(c, fixtures_dir, "c_types", "round 1", rounds="2000")
        r = await c.call("debug_trace", sessionId=sid, add=["take_outer", "walk_list", "greet", "set_mode",
                                                           "sum_pair", "sum_big", "make_pair"])
        assert r["hookedFunctions"] == 7, r

        # Default depth 3: nested structs, arrays, C strings, pointer followed.
        e = await last_event(c, sid, "take_outer")
        o = e["arguments"]["o"]
        assert o["inner"] == {"id": 1, "weight": 0.5, "tag": "outer"}
        assert o["values"] == [10, 20, 30, 40]
        assert o["link"]["id"] in (7, 8)
        assert isinstance(e["arguments"]["depth_hint"], int)

        # A cyclic list ends in a circular reference marker, not an endless walk.
        e = await last_event(c, sid, "walk_list")
        head = e["arguments"]["head"]
        assert head["value"] == 1 and head["next"]["value"] == 2
        assert head["next"]["next"]["next"] == "<circular ref to struct Node>"

        # NULL pointers are JSON null, and the key stays.
        e = await last_event(c, sid, "greet")
        assert e["arguments"]["name"] == "strobe"
        assert "missing" in e["arguments"] and e["arguments"]["missing"] is None, e["arguments"]

        # Enums by name, by-value structs in registers and on the stack, struct returns.
        e = await last_event(c, sid, "set_mode")
        assert e["arguments"]["m"] in ("MODE_RUN", "MODE_STOP")
        e = await last_event(c, sid, "sum_pair")
        assert e["arguments"]["p"]["b"] == 2 * e["arguments"]["p"]["a"]
        e = await last_event(c, sid, "sum_big")
        assert e["arguments"]["b"]["w"][4] == 100 and e["arguments"]["extra"] == 2
        e = await last_event(c, sid, "make_pair", kind="function_exit")
        assert e["returnValue"]["b"] == 5

        # Depth 1: nested structs collapse to their type name.
        await c.call("debug_trace", sessionId=sid, serializationDepth=1)
        cursor = (await c.call("debug_query", sessionId=sid, limit=1))["lastEventId"]
        await _sleep(0.3)
        r = await c.wait_for(sid, "take_outer", eventType="function_enter", verbose=True,
                             afterEventId=cursor, **{"function": {"equals": "take_outer"}})
        o = r["events"][-1]["arguments"]["o"]
        assert o["inner"] == "<struct Inner>" and o["link"] == "<struct Inner>"
        assert o["values"] == [10, 20, 30, 40]

        # Depth 10: the whole cycle is still cut at the repeat.
        await c.call("debug_trace", sessionId=sid, serializationDepth=10)
        cursor = (await c.call("debug_query", sessionId=sid, limit=1))["lastEventId"]
        await _sleep(0.3)
        r = await c.wait_for(sid, "walk_list", eventType="function_enter", verbose=True,
                             afterEventId=cursor, **{"function": {"equals": "walk_list"}})
        head = r["events"][-1]["arguments"]["head"]
        assert head["next"]["next"]["next"] == "<circular ref to struct Node>"

        e = await c.error("debug_trace", sessionId=sid, serializationDepth=11)
        assert e.code == "VALIDATION_ERROR"
        await c.call("debug_session", action="stop", sessionId=sid)


async def test_watches_scoped_chains_raw_and_errors(strobe_home, fixtures_dir):
    async with mcp_client(strobe_home) as c:
        sid = await launch(c, fixtures_dir, "c_types", "round 1")
        # Raw-address watch: the runtime address of g_counter, from debug_memory.
        addr = (await c.call("debug_memory", sessionId=sid, targets=[{"variable": "g_counter"}]))["results"][0]["address"]
        r = await c.call("debug_trace", sessionId=sid, add=["tick_clock", "deep"], watches={"add": [
            {"variable": "g_clock->counter", "on": ["tick_clock"]},
            {"variable": "g_l1.down->down->leaf", "label": "leaf"},
            {"address": addr, "type": "i32", "label": "raw_counter"},
            {"expr": "1 + 2", "label": "js"},
        ]})
        labels = {w["label"] for w in r["activeWatches"]}
        assert labels == {"g_clock->counter", "leaf", "raw_counter", "js"}, r

        e = await last_watched_event(c, sid, "tick_clock", kind="function_exit")
        w = e["watchValues"]
        assert isinstance(w["g_clock->counter"], int) and w["leaf"] == 42 and w["js"] == 3
        assert isinstance(w["raw_counter"], int) and w["raw_counter"] > 0
        # Scoped: deep() does not record the tick_clock-only watch.
        e = await last_watched_event(c, sid, "deep")
        assert "g_clock->counter" not in e["watchValues"] and e["watchValues"]["leaf"] == 42

        st = await c.call("debug_session", action="status", sessionId=sid)
        assert {w["label"] for w in st["watches"]} == labels

        r = await c.call("debug_trace", sessionId=sid, watches={"remove": ["js"]})
        assert "js" not in {w["label"] for w in r["activeWatches"]}

        e = await c.error("debug_trace", sessionId=sid, watches={"add": [{"variable": "no_such_global"}]})
        assert e.code == "WATCH_FAILED" and "Closest" in e.message
        e = await c.error("debug_trace", sessionId=sid, watches={"add": [{"variable": "g_clock.counter"}]})
        assert e.code == "WATCH_FAILED" and "->" in e.message
        e = await c.error("debug_trace", sessionId=sid, watches={"add": [{"variable": "g_l1->x"}]})
        assert e.code == "WATCH_FAILED"
        e = await c.error("debug_trace", sessionId=sid, watches={"add": [{"variable": "a->b->c->d->e->f"}]})
        assert e.code == "VALIDATION_ERROR" and "4" in e.message
        e = await c.error("debug_trace", sessionId=sid, watches={"add": [{"expr": "this is not js ("}]})
        assert e.code == "WATCH_FAILED"
        e = await c.error("debug_trace", sessionId=sid, watches={"remove": ["never-added"]})
        assert e.code == "WATCH_FAILED"
        e = await c.error("debug_trace", watches={"add": [{"variable": "g_counter"}]})
        assert e.code == "VALIDATION_ERROR" and "sessionId" in e.message
        many = [{"expr": str(i), "label": f"w{i}"} for i in range(40)]
        e = await c.error("debug_trace", sessionId=sid, watches={"add": many})
        assert e.code == "VALIDATION_ERROR" and "32" in e.message
        await c.call("debug_session", action="stop", sessionId=sid)


async def test_memory_read_write_poll_and_errors(strobe_home, fixtures_dir):
    async with mcp_client(strobe_home) as c:
        sid = await launch(c, fixtures_dir, "c_types", "round 1", interval="50")
        r = await c.call("debug_memory", sessionId=sid, depth=2, targets=[
            {"variable": "g_clock"}, {"variable": "g_l1"}, {"variable": "g_name"}, {"variable": "g_array"},
            {"variable": "g_ratio"}, {"variable": "g_l1.down->down->leaf"}])
        by = {x["target"]: x for x in r["results"]}
        # A pointer to a struct reads like the struct: its own value, the pointee in `fields`.
        assert by["g_clock"]["value"].startswith("0x") and by["g_clock"]["fields"]["counter"] >= 3, by["g_clock"]
        assert by["g_l1"]["fields"] == {"l1": 1, "down": {"l2": 2, "down": "<struct Level3>"}}
        assert by["g_name"]["value"] == "strobe" and by["g_array"]["value"] == [1, 2, 3, 4, 5, 6, 7, 8]
        assert by["g_ratio"]["value"] == 1.5 and by["g_l1.down->down->leaf"]["value"] == 42

        # Raw reads: 8 bytes of u32 are two values.
        addr = by["g_array"]["address"]
        r = await c.call("debug_memory", sessionId=sid, targets=[{"address": addr, "size": 8, "type": "u32"}])
        assert r["results"][0]["value"] == [1, 2]
        r = await c.call("debug_memory", sessionId=sid, targets=[{"address": "0x10", "size": 4, "type": "u32"}])
        assert "not readable" in r["results"][0]["error"]

        # A write changes what the program prints.
        r = await c.call("debug_memory", sessionId=sid, action="write", targets=[{"variable": "g_counter", "value": 5000}])
        assert r["results"][0]["newValue"] == 5000 and isinstance(r["results"][0]["previousValue"], int)
        await c.wait_for(sid, "counter=500", eventType="stdout")
        r = await c.call("debug_memory", sessionId=sid, action="write", targets=[{"variable": "g_mode", "value": "MODE_IDLE"}])
        assert r["results"][0]["newValue"] == "MODE_IDLE"

        # Poll: samples arrive as variable_snapshot events.
        r = await c.call("debug_memory", sessionId=sid, targets=[{"variable": "g_counter"}],
                         poll={"intervalMs": 50, "durationMs": 500})
        assert r["polling"] is True and r["expectedSamples"] == 10 and r["eventType"] == "variable_snapshot"
        r = await c.wait_for(sid, "", eventType="variable_snapshot", verbose=True)
        assert r["events"][0]["watchValues"]["g_counter"] >= 5000

        for bad, code in [
            (dict(targets=[]), "VALIDATION_ERROR"),
            (dict(targets=[{"variable": "g_counter"}] * 17), "VALIDATION_ERROR"),
            (dict(targets=[{"variable": "nope"}]), "VALIDATION_ERROR"),
            (dict(targets=[{"variable": "g_counter"}], depth=6), "VALIDATION_ERROR"),
            (dict(targets=[{"address": "zz", "size": 4, "type": "u32"}]), "VALIDATION_ERROR"),
            (dict(targets=[{"address": "0x1000", "size": 3, "type": "u32"}]), "VALIDATION_ERROR"),
            (dict(targets=[{"variable": "g_counter"}], poll={"intervalMs": 10, "durationMs": 500}), "VALIDATION_ERROR"),
            (dict(action="write", targets=[{"variable": "g_clock_storage", "value": 1}]), "VALIDATION_ERROR"),
            (dict(action="write", targets=[{"variable": "g_counter"}]), "VALIDATION_ERROR"),
        ]:
            e = await c.error("debug_memory", sessionId=sid, **bad)
            assert e.code == code, (bad, e.code, e.message)
        e = await c.error("debug_memory", sessionId="nope-2026-01-01-00h00", targets=[{"variable": "g_counter"}])
        assert e.code == "SESSION_NOT_FOUND"
        await c.call("debug_session", action="stop", sessionId=sid)


async def test_rust_values(strobe_home, fixtures_dir):
    async with mcp_client(strobe_home) as c:
        sid = await launch(c, fixtures_dir, "rust_types", "round 1")
        r = await c.call("debug_trace", sessionId=sid, add=["types::describe", "types::maybe", "types::total", "types::owned"])
        assert r["hookedFunctions"] == 4, r
        e = await last_event(c, sid, "types::describe")
        a = e["arguments"]
        assert a["label"] == "hello" and a["values"] == [4, 5, 6]
        assert a["cfg"]["name"] == "primary" and a["cfg"]["tags"] == ["a", "bc"]
        assert a["cfg"]["limit"] == 9 and a["cfg"]["retries"] == 3
        e = await last_event(c, sid, "types::total")
        assert e["arguments"]["xs"] == [1, 2, 3, 4]
        e = await last_event(c, sid, "types::owned")
        assert e["arguments"]["s"].startswith("round-")
        # Option<&Config> / Option<u32>: Some(x) is x, None is null.
        # maybe() gets Some on even rounds and None on odd ones: wait until both were recorded.
        some = lambda x: x.get("n") is not None and x["v"]["retries"] == 3
        none = lambda x: x.get("n") is None and x.get("v") is None
        for _ in range(300):
            r = await c.call("debug_query", sessionId=sid, eventType="function_enter", verbose=True,
                             limit=50, **{"function": {"equals": "types::maybe"}})
            seen = [ev["arguments"] for ev in r["events"]]
            if any(map(some, seen)) and any(map(none, seen)):
                break
            await _sleep(0.1)
        assert any(map(some, seen)), seen
        assert any(map(none, seen)), seen

        r = await c.call("debug_memory", sessionId=sid, targets=[{"variable": "types::LEVEL"}])
        assert r["results"][0]["value"] == 5
        await c.call("debug_memory", sessionId=sid, action="write", targets=[{"variable": "LEVEL", "value": 77}])
        await c.wait_for(sid, "level=77", eventType="stdout")
        await c.call("debug_session", action="stop", sessionId=sid)
