"""debug_query end to end: every filter, alone and combined, against the events a real
traced fixture (tests/fixtures/c/query_main.c + query_helpers.c) left in a real store;
settings (events.maxPerSession from a project file, invalid values as warnings) and the
FIFO limit's eventsDropped; session limits per connection (also for concurrent launches);
debug_ui's UI_NOT_AVAILABLE; retention at daemon start (fabricated end times)."""

import json
import shutil
import subprocess

import pytest

from conftest import REPO, mcp_client, _sleep

pytestmark = pytest.mark.anyio

ROUNDS = 8
FIXTURE_SRC = REPO / "tests" / "fixtures" / "c"
EVENT_TYPES = ["function_enter", "function_exit", "stdout", "stderr", "crash",
               "variable_snapshot", "pause", "logpoint", "condition_error"]


def build_fixture(out_dir):
    exe = out_dir / "query_fixture"
    subprocess.run(["cc", "-g", "-O0", "-o", str(exe), str(FIXTURE_SRC / "query_main.c"),
                    str(FIXTURE_SRC / "query_helpers.c"), "-lpthread"], check=True)
    return exe


async def wait_count(c, sid, n, timeout=30.0, **query):
    """Poll until at least n events match; return the last result."""
    for _ in range(int(timeout * 10)):
        r = await c.call("debug_query", sessionId=sid, limit=500, **query)
        if r["totalCount"] >= n:
            return r
        await _sleep(0.1)
    raise AssertionError(f"fewer than {n} events for {query}: {r['totalCount']}")


async def launch_traced(c, exe, project):
    await c.call("debug_trace", add=["qm_*", "qh_*"])
    r = await c.call("debug_launch", command=str(exe), projectRoot=str(project))
    sid = r["sessionId"]
    await c.wait_for(sid, "done", eventType="stdout")
    # 8 rounds x 3 calls + 8 worker calls, enter and exit.
    await wait_count(c, sid, 32, eventType="function_exit")
    await wait_count(c, sid, 32, eventType="function_enter")
    await wait_count(c, sid, ROUNDS, eventType="stderr")
    return sid, r


async def q(c, sid, **kw):
    return await c.call("debug_query", sessionId=sid, **kw)


async def test_every_filter(strobe_home, tmp_path):
    exe = build_fixture(tmp_path)
    async with mcp_client(strobe_home) as c:
        sid, launched = await launch_traced(c, exe, tmp_path)
        full = await q(c, sid, limit=500, verbose=True)
        events = full["events"]
        total = full["totalCount"]
        assert total == len(events) == (ROUNDS + 1) + ROUNDS + 64, total
        assert full["hasMore"] is False

        # Chronological order, ids unique.
        stamps = [e["timestampNs"] for e in events]
        assert stamps == sorted(stamps)
        assert len({e["id"] for e in events}) == total

        # limit: default 50, max 500; hasMore; offset pages concatenate to the whole.
        r = await q(c, sid)
        assert len(r["events"]) == 50 and r["hasMore"] is True and r["totalCount"] == total
        for bad in (0, 501):
            e = await c.error("debug_query", sessionId=sid, limit=bad)
            assert e.code == "VALIDATION_ERROR" and "limit" in e.message
        e = await c.error("debug_query", sessionId=sid, offset=-1)
        assert e.code == "VALIDATION_ERROR"
        paged = []
        for off in range(0, total, 7):
            page = await q(c, sid, limit=7, offset=off)
            paged += [x["id"] for x in page["events"]]
            assert page["hasMore"] == (off + 7 < total)
        assert paged == [x["id"] for x in events]

        # eventType: every one of the nine is accepted and filters exactly.
        expect = {"function_enter": 32, "function_exit": 32, "stdout": ROUNDS + 1, "stderr": ROUNDS}
        for t in EVENT_TYPES:
            r = await q(c, sid, eventType=t, limit=500)
            assert all(x["eventType"] == t for x in r["events"]), t
            assert r["totalCount"] == expect.get(t, 0), (t, r["totalCount"])
        e = await c.error("debug_query", sessionId=sid, eventType="function_call")
        assert e.code == "VALIDATION_ERROR"

        # function: equals, contains (case-insensitive), matches (regex), bad regex.
        r = await q(c, sid, limit=500, **{"function": {"equals": "qm_fast"}})
        assert r["totalCount"] == 32 and {x["function"] for x in r["events"]} == {"qm_fast"}
        r = await q(c, sid, limit=500, **{"function": {"contains": "QH_"}})
        assert r["totalCount"] == 32 and {x["function"] for x in r["events"]} == {"qh_slow", "qh_maybe_null"}
        r = await q(c, sid, limit=500, **{"function": {"matches": "^qh_(slow|nothing)$"}})
        assert r["totalCount"] == 16 and {x["function"] for x in r["events"]} == {"qh_slow"}
        e = await c.error("debug_query", sessionId=sid, **{"function": {"matches": "qm_("}})
        assert e.code == "VALIDATION_ERROR" and "qm_(" in e.message and "unclosed group" in e.message.lower()
        r = await q(c, sid, **{"function": {"equals": "no_such_function"}})
        assert r["totalCount"] == 0 and r["events"] == []

        # sourceFile: equals (the stored path), contains.
        helpers = [x for x in events if x.get("function") == "qh_slow"][0]["sourceFile"]
        assert helpers.endswith("query_helpers.c"), helpers
        r = await q(c, sid, limit=500, sourceFile={"equals": helpers})
        assert r["totalCount"] == 32 and all(x["sourceFile"] == helpers for x in r["events"])
        r = await q(c, sid, limit=500, sourceFile={"contains": "query_main"})
        assert r["totalCount"] == 32 and {x["function"] for x in r["events"]} == {"qm_fast"}

        # returnValue: equals (numbers), isNull (exit events only).
        r = await q(c, sid, limit=500, verbose=True, returnValue={"equals": 6})
        assert r["totalCount"] == 1 and r["events"][0]["function"] == "qm_fast"
        assert r["events"][0]["eventType"] == "function_exit" and r["events"][0]["returnValue"] in (6, "6", "0x6")
        r = await q(c, sid, limit=500, returnValue={"isNull": True}, **{"function": {"equals": "qh_maybe_null"}})
        assert r["totalCount"] == ROUNDS // 2, r
        assert all(x["returnType"] == "null" for x in r["events"])
        r = await q(c, sid, limit=500, returnValue={"isNull": False}, **{"function": {"equals": "qh_maybe_null"}})
        assert r["totalCount"] == ROUNDS // 2 and all(x["eventType"] == "function_exit" for x in r["events"])

        # threadName contains.
        r = await q(c, sid, limit=500, verbose=True, threadName={"contains": "qwork"})
        assert r["totalCount"] == 2 * ROUNDS
        assert all(x["threadName"] == "qworker" and x["function"] == "qm_fast" for x in r["events"])

        # minDurationNs: only the 30 ms sleeper.
        r = await q(c, sid, limit=500, minDurationNs=25_000_000)
        assert r["totalCount"] == ROUNDS and {x["function"] for x in r["events"]} == {"qh_slow"}
        assert all(x["durationNs"] >= 25_000_000 for x in r["events"])

        # timeFrom / timeTo: absolute ns (inclusive) and relative.
        fn = [x for x in events if x["eventType"] == "function_exit"]
        lo, hi = fn[5]["timestampNs"], fn[20]["timestampNs"]
        r = await q(c, sid, limit=500, timeFrom=lo, timeTo=hi)
        assert [x["id"] for x in r["events"]] == [x["id"] for x in events if lo <= x["timestampNs"] <= hi]
        r = await q(c, sid, limit=500, timeFrom="-1m")
        assert r["totalCount"] == total
        r = await q(c, sid, limit=500, timeTo="-1m")
        assert r["totalCount"] == 0
        await _sleep(1.0)  # everything happened in the first few hundred ms
        r = await q(c, sid, limit=500, timeFrom="-500ms")
        assert r["totalCount"] == 0, r
        r = await q(c, sid, limit=500, timeTo="-500ms", eventType="stdout")
        assert r["totalCount"] == ROUNDS + 1
        e = await c.error("debug_query", sessionId=sid, timeFrom="five seconds ago")
        assert e.code == "VALIDATION_ERROR" and "-5s" in e.message

        # pid: the target's own pid matches all; another none; pids only when several.
        pid = launched["pid"]
        assert "pids" not in full
        assert all(x["pid"] == pid for x in events if x["eventType"].startswith("function"))
        r = await q(c, sid, limit=500, pid=pid, eventType="function_enter")
        assert r["totalCount"] == 32
        r = await q(c, sid, pid=pid + 100000)
        assert r["totalCount"] == 0

        # verbose vs summary shapes.
        summary_keys = {"id", "eventType", "timestampNs", "function", "sourceFile", "line", "durationNs",
                        "returnType", "text"}
        s = await q(c, sid, limit=500)
        for x in s["events"]:
            assert set(x) <= summary_keys, x
        exit_summary = [x for x in s["events"] if x["eventType"] == "function_exit"][0]
        assert {"function", "sourceFile", "line", "durationNs", "returnType"} <= set(exit_summary)
        enter_v = [x for x in events if x["eventType"] == "function_enter"][0]
        exit_v = [x for x in events if x["eventType"] == "function_exit"][0]
        for k in ("threadId", "pid", "arguments"):
            assert k in enter_v, (k, enter_v)
        for k in ("threadId", "pid", "returnValue", "parentEventId"):
            assert k in exit_v, (k, exit_v)

        # afterEventId: a cursor walk sees every event exactly once, nothing dropped.
        seen, cursor = [], 0
        while True:
            page = await q(c, sid, limit=9, afterEventId=cursor)
            assert "eventsDropped" not in page
            seen += [x["id"] for x in page["events"]]
            if not page["events"]:
                break
            cursor = page["lastEventId"]
        assert sorted(seen) == sorted(x["id"] for x in events) and len(seen) == len(set(seen))
        r = await q(c, sid, afterEventId=cursor)
        assert r["events"] == [] and r["totalCount"] == 0
        e = await c.error("debug_query", sessionId=sid, afterEventId="not-a-cursor")
        assert e.code == "VALIDATION_ERROR"

        # Combinations: each filter narrows.
        r = await q(c, sid, limit=500, verbose=True, eventType="function_exit", threadName={"contains": "qworker"},
                    returnValue={"equals": 206}, **{"function": {"contains": "qm"}})
        assert r["totalCount"] == 1 and r["events"][0]["threadName"] == "qworker"
        r = await q(c, sid, limit=500, eventType="function_enter", sourceFile={"contains": "helpers"},
                    **{"function": {"matches": "slow"}})
        assert r["totalCount"] == ROUNDS
        r = await q(c, sid, limit=3, offset=2, eventType="function_exit", minDurationNs=25_000_000)
        assert len(r["events"]) == 3 and r["totalCount"] == ROUNDS and r["hasMore"] is True

        # Unknown arguments and sessions are refused, not ignored.
        e = await c.error("debug_query", sessionId=sid, functionName="x")
        assert e.code == "VALIDATION_ERROR"
        e = await c.error("debug_query", sessionId=sid + "-nope")
        assert e.code == "SESSION_NOT_FOUND"
        await c.call("debug_session", action="stop", sessionId=sid)


async def test_settings_limit_events_and_report_bad_values(strobe_home, tmp_path):
    exe = build_fixture(tmp_path)
    project = tmp_path / "project"
    (project / ".strobe").mkdir(parents=True)
    # Project file overrides the global one; the global one also carries a bad value.
    (strobe_home / "settings.json").write_text(json.dumps({"events.maxPerSession": 1000,
                                                           "test.statusRetryMs": 10}))
    (project / ".strobe" / "settings.json").write_text(json.dumps({"events.maxPerSession": 20}))
    async with mcp_client(strobe_home) as c:
        await c.call("debug_trace", add=["qm_*", "qh_*"])
        r = await c.call("debug_launch", command=str(exe), projectRoot=str(project))
        sid = r["sessionId"]
        assert any("test.statusRetryMs" in w for w in r.get("warnings", [])), r
        await c.wait_for(sid, "done", eventType="stdout", timeout=30)
        # FIFO: at most 20 kept; the rest were evicted oldest first.
        for _ in range(100):
            r = await q(c, sid, limit=500)
            if r["totalCount"] <= 20:
                break
            await _sleep(0.1)
        assert r["totalCount"] <= 20 and r.get("eventsDropped") is True, r
        assert any(x.get("text") == "done\n" or (x.get("text") or "").startswith("done") for x in r["events"])
        assert (await q(c, sid, afterEventId=0)).get("eventsDropped") is True
        newest = r["lastEventId"]
        assert "eventsDropped" not in await q(c, sid, afterEventId=newest)
        t = await c.call("debug_trace", sessionId=sid)
        assert t["eventLimit"] == 20
        st = await c.call("debug_session", action="status", sessionId=sid)
        assert st["eventCount"] <= 20

        # Re-read on every call: raise the limit, get it back at once; an invalid value warns.
        (project / ".strobe" / "settings.json").write_text(json.dumps({"events.maxPerSession": 0}))
        t = await c.call("debug_trace", sessionId=sid)
        assert t["eventLimit"] == 1000, t  # the global layer stays in effect
        assert any("events.maxPerSession" in w and "between 1 and 10000000" in w for w in t["warnings"]), t
        (project / ".strobe" / "settings.json").write_text("{broken")
        t = await c.call("debug_trace", sessionId=sid)
        assert any("invalid JSON" in w for w in t["warnings"]), t
        (strobe_home / "settings.json").unlink()
        (project / ".strobe" / "settings.json").unlink()
        t = await c.call("debug_trace", sessionId=sid)
        assert t["eventLimit"] == 200000 and t["warnings"] == []
        # Retention settings govern what list/stop keep: their bad values warn there.
        (strobe_home / "settings.json").write_text(json.dumps({"retention.maxAgeDays": -1}))
        listed = await c.call("debug_session", action="list")
        assert any("retention.maxAgeDays" in w for w in listed.get("warnings", [])), listed
        stopped = await c.call("debug_session", action="stop", sessionId=sid, retain=True)
        assert any("retention.maxAgeDays" in w for w in stopped.get("warnings", [])), stopped
        (strobe_home / "settings.json").unlink()
        assert "warnings" not in await c.call("debug_session", action="list")


async def test_session_limit_per_connection(strobe_home, tmp_path):
    # One live session per binary (SESSION_EXISTS), so copies of a sleeper.
    import anyio
    from conftest import ToolError
    sleeper = shutil.which("sleep")
    copies = []
    for i in range(12):
        p = tmp_path / f"sleeper{i}"
        shutil.copy(sleeper, p)
        copies.append(p)
    async with mcp_client(strobe_home) as c:
        # Eleven launches at once: the limit holds even for concurrent requests.
        launched, refused = {}, []

        async def launch(i):
            try:
                r = await c.call("debug_launch", command=str(copies[i]), args=["60"], projectRoot=str(tmp_path))
                launched[i] = r["sessionId"]
            except ToolError as e:
                refused.append(e)

        async with anyio.create_task_group() as tg:
            for i in range(11):
                tg.start_soon(launch, i)
        assert len(launched) == 10 and len(refused) == 1, (launched, refused)
        e = refused[0]
        assert e.code == "SESSION_LIMIT" and "max 10" in e.message and "stop" in e.message
        e = await c.error("debug_launch", command=str(copies[11]), args=["60"], projectRoot=str(tmp_path))
        assert e.code == "SESSION_LIMIT"
        # A second client is not limited by the first one's sessions.
        async with mcp_client(strobe_home) as c2:
            r = await c2.call("debug_launch", command=str(copies[11]), args=["60"], projectRoot=str(tmp_path))
            await c2.call("debug_session", action="stop", sessionId=r["sessionId"])
        # Stopping one frees a slot; relaunching a binary that is still live is SESSION_EXISTS.
        (first, first_id), (second, _) = sorted(launched.items())[:2]
        await c.call("debug_session", action="stop", sessionId=first_id)
        del launched[first]
        e = await c.error("debug_launch", command=str(copies[second]), args=["60"], projectRoot=str(tmp_path))
        assert e.code == "SESSION_EXISTS" and "stop" in e.message
        r = await c.call("debug_launch", command=str(copies[first]), args=["60"], projectRoot=str(tmp_path))
        launched[first] = r["sessionId"]
        ids = list(launched.values())
        listed = {x["sessionId"]: x for x in (await c.call("debug_session", action="list"))["sessions"]}
        assert listed[ids[0]]["status"] == "running" and listed[ids[0]]["endedAt"] is None
        assert {"binaryPath", "pid", "startedAt"} <= set(listed[ids[0]])
        # UI observation is macOS-only: an unknown session first, then UI_NOT_AVAILABLE.
        e = await c.error("debug_ui", sessionId="nope-2026-01-01-00h00")
        assert e.code == "SESSION_NOT_FOUND"
        e = await c.error("debug_ui", sessionId=ids[0])
        assert e.code == "UI_NOT_AVAILABLE" and "macOS" in e.message and "debug_query" in e.message
        e = await c.error("debug_ui", sessionId=ids[0], vision=True)
        assert e.code == "VALIDATION_ERROR" and "vision.enabled" in e.message
        for sid in ids:
            await c.call("debug_session", action="stop", sessionId=sid)


async def test_retention_at_daemon_start(strobe_home, tmp_path):
    import sqlite3
    import time
    from conftest import stop_daemon

    sleeper = tmp_path / "retained_sleeper"
    shutil.copy(shutil.which("sleep"), sleeper)
    ids = []
    async with mcp_client(strobe_home) as c:
        for _ in range(2):
            r = await c.call("debug_launch", command=str(sleeper), args=["60"], projectRoot=str(tmp_path))
            await c.call("debug_session", action="stop", sessionId=r["sessionId"], retain=True)
            ids.append(r["sessionId"])
    stop_daemon(strobe_home)
    old, recent = ids
    day = 86400
    db = sqlite3.connect(strobe_home / "strobe.db")
    db.execute("UPDATE sessions SET ended_at = ? WHERE id = ?", (int(time.time()) - 8 * day, old))
    db.execute("UPDATE sessions SET ended_at = ? WHERE id = ?", (int(time.time()) - 3 * day, recent))
    db.commit()
    db.close()

    async def listed_after_start(gone):
        async with mcp_client(strobe_home) as c:
            for _ in range(100):
                names = {x["sessionId"] for x in (await c.call("debug_session", action="list"))["sessions"]}
                if gone not in names:
                    break
                await _sleep(0.1)
            await _sleep(0.5)  # a pass that purged too much would show by now
            return {x["sessionId"] for x in (await c.call("debug_session", action="list"))["sessions"]}

    # Default retention.maxAgeDays (7): the 8-day-old session goes, the 3-day-old stays.
    names = await listed_after_start(old)
    assert old not in names and recent in names, names
    stop_daemon(strobe_home)
    # Configured down to 2 days in the global settings: the other one goes too.
    (strobe_home / "settings.json").write_text(json.dumps({"retention.maxAgeDays": 2}))
    names = await listed_after_start(recent)
    assert recent not in names, names
