"""The event store under tracing load, through the real daemon: hot loops traced with a small
`events.maxPerSession` never show more events than the limit and eviction never fails on a
lock; ten busy sessions stopped at once all end `stopped` (none `exited` with a signal).
No timing is asserted (benches/load.rs measures it); waits are generous."""

import asyncio
import json
import shutil
import time

import pytest

from conftest import _sleep, mcp_client

pytestmark = pytest.mark.anyio

LIMIT = 1000


async def launch_hot(c, exe, project, wait=False):
    # Staged before launch: the hooks go in while the process is suspended.
    await c.call("debug_trace", add=["hot_leaf"])
    args = ["spin", "0"] + (["wait"] if wait else [])
    r = await c.call("debug_launch", command=str(exe), args=args, projectRoot=str(project))
    assert r.get("pendingPatternsApplied", 0) >= 1, r
    return r["sessionId"]


async def wait_events(c, sid, timeout=120.0):
    deadline = time.monotonic() + timeout
    while True:
        st = await c.call("debug_session", action="status", sessionId=sid)
        if st["eventCount"] > 0:
            return st
        assert st["status"] == "running", st
        assert time.monotonic() < deadline, f"no events from {sid} within {timeout}s: {st}"
        await _sleep(0.2)


def copies(fixtures_dir, tmp_path, n):
    out = []
    for i in range(n):
        exe = tmp_path / f"hotloop{i}"
        shutil.copy(fixtures_dir / "hotloop", exe)
        out.append(exe)
    return out


def lock_errors(home):
    log = (home / "daemon.log").read_text(errors="replace") if (home / "daemon.log").exists() else ""
    return [l for l in log.splitlines() if "database is locked" in l or "eviction failed" in l]


async def test_event_limit_holds_while_hot_loops_ingest(strobe_home, fixtures_dir, tmp_path):
    project = tmp_path / "project"
    (project / ".strobe").mkdir(parents=True)
    (project / ".strobe" / "settings.json").write_text(json.dumps({"events.maxPerSession": LIMIT}))
    exes = copies(fixtures_dir, tmp_path, 3)
    async with mcp_client(strobe_home) as c:
        sids = [await launch_hot(c, exe, project) for exe in exes]
        for sid in sids:
            await wait_events(c, sid)
        worst, dropped = 0, False
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline or not dropped:
            for sid in sids:
                st = await c.call("debug_session", action="status", sessionId=sid)
                assert st["status"] == "running", st
                r = await c.call("debug_query", sessionId=sid, limit=1)
                worst = max(worst, st["eventCount"], r["totalCount"])
                dropped = dropped or r.get("eventsDropped") is True
            assert time.monotonic() < deadline + 120, "no eviction within two minutes"
        assert worst <= LIMIT, f"a session showed {worst} events with events.maxPerSession {LIMIT}"
        await asyncio.gather(*(c.call("debug_session", action="stop", sessionId=s) for s in sids))
    assert lock_errors(strobe_home) == []


async def test_ten_busy_sessions_stop_as_stopped(strobe_home, fixtures_dir, tmp_path):
    exes = copies(fixtures_dir, tmp_path, 10)
    async with mcp_client(strobe_home) as c:
        # All launched (each waits for a line), then all started: a launch does not compete
        # with nine spinning targets for the CPU.
        sids = [await launch_hot(c, exe, tmp_path, wait=True) for exe in exes]
        for sid in sids:
            await c.wait_for(sid, "ready", eventType="stdout", timeout=120)
            await c.call("debug_script", sessionId=sid, script='session:stdin("go\\n")')
        for sid in sids:
            await wait_events(c, sid)
        await _sleep(1)
        stops = await asyncio.gather(
            *(c.call("debug_session", action="stop", sessionId=s, retain=True) for s in sids))
        assert len(stops) == 10
        listed = {s["sessionId"]: s for s in (await c.call("debug_session", action="list"))["sessions"]}
        ended = {sid: (listed[sid]["status"], listed[sid].get("exitCode"), listed[sid].get("signal")) for sid in sids}
        assert all(v[0] == "stopped" for v in ended.values()), ended
        for sid in sids:
            st = await c.call("debug_session", action="status", sessionId=sid)
            assert st["status"] == "stopped" and st.get("signal") is None, st
    assert lock_errors(strobe_home) == []
