"""Requests in flight (issue 17, items 5, 6 and 11): cancellation stops a call's work and
gets no answer; a client that goes away mid-request has its targets killed at once;
`strobe mcp` answers in-flight requests when the daemon dies and serves the next one from
a fresh daemon; long work sends progress notifications (a script's own, a long wait's
heartbeat, the first-time Frida setup)."""

import json
import os
import shutil
import signal
import socket
import time

import anyio
import pytest

from conftest import MCPError, REPO, mcp_client, pid_alive, strobe_env, _sleep
from test_hardening import INIT, Raw
from test_races import copies_of

pytestmark = pytest.mark.anyio


def tool_call(id, name, args, progress_token=None):
    params = {"name": name, "arguments": args}
    if progress_token is not None:
        params["_meta"] = {"progressToken": progress_token}
    return {"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}


def tool_body(reply):
    assert "result" in reply, reply
    return json.loads(reply["result"]["content"][0]["text"])


async def wait_dead(pid, limit):
    """Seconds until `pid` died, or fail after `limit`."""
    t0 = time.monotonic()
    while pid_alive(pid):
        assert time.monotonic() - t0 < limit, f"target {pid} still alive {limit}s later"
        await _sleep(0.05)
    return time.monotonic() - t0


def wait_dead_now(pid, limit):
    t0 = time.monotonic()
    while pid_alive(pid):
        assert time.monotonic() - t0 < limit, f"target {pid} still alive {limit}s later"
        time.sleep(0.05)
    return time.monotonic() - t0


def daemon_pid(home):
    return int((home / "strobe.pid").read_text().strip())


def launch_raw(c, binary, tmp_path):
    r = tool_body(c.ask(tool_call(1, "debug_launch", {"command": str(binary), "args": ["600"], "projectRoot": str(tmp_path)})))
    assert "sessionId" in r, r
    return r["sessionId"], r["pid"]


def read_until(c, pred, limit=20):
    """Lines until one satisfies `pred`; all of them."""
    seen = []
    deadline = time.monotonic() + limit
    while True:
        m = json.loads(c.recv_line(timeout=max(0.1, deadline - time.monotonic())))
        seen.append(m)
        if pred(m):
            return seen


# -- cancellation ----------------------------------------------------------------------

def test_a_cancelled_wait_gets_no_answer_sends_no_more_progress_and_the_connection_works(strobe_home, tmp_path):
    (binary,) = copies_of("sleep", tmp_path, 1, "waiter")
    c = Raw(strobe_home)
    c.initialize()
    sid, pid = launch_raw(c, binary, tmp_path)
    c.send(json.dumps(tool_call(7, "debug_continue", {"sessionId": sid, "action": "inspect", "timeoutMs": 60000}, "p7")).encode() + b"\n")
    read_until(c, lambda m: m.get("method") == "notifications/progress" and m["params"]["progressToken"] == "p7")
    c.send(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"test"}}\n')
    c.send(b'{"jsonrpc":"2.0","id":8,"method":"ping"}\n')
    read_until(c, lambda m: m.get("id") == 8)
    # Nothing more for request 7: no answer, no heartbeat (its wait ended).
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        try:
            m = json.loads(c.recv_line(timeout=max(0.01, deadline - time.monotonic())))
        except AssertionError:
            break
        assert m.get("id") != 7, f"a cancelled request was answered: {m}"
        assert m.get("params", {}).get("progressToken") != "p7", f"progress after cancellation: {m}"
    c.still_works()
    assert pid_alive(pid), "cancelling a wait leaves the session alone"
    c.close()


SCRIPT_THAT_WAITS = """
local s = strobe.launch{{command="{binary}", args={{"600"}}, projectRoot="{root}"}}
strobe.fs.write("{pidfile}", tostring(s.pid))
{wait}
return "not reached"
"""


@pytest.mark.parametrize("wait", ["strobe.sleep(60000)", "while true do end"], ids=["sleeping", "computing"])
async def test_cancelling_a_script_stops_it_and_its_targets(strobe_home, tmp_path, wait):
    # The official SDK sends notifications/cancelled when the caller abandons a call.
    (binary,) = copies_of("sleep", tmp_path, 1, "scripted")
    pidfile = tmp_path / "pid"
    script = SCRIPT_THAT_WAITS.format(binary=binary, root=tmp_path, pidfile=pidfile, wait=wait)
    async with mcp_client(strobe_home) as c:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: c.call("debug_script", script=script, timeoutMs=120000))
            with anyio.fail_after(60):
                while not pidfile.exists() or not pidfile.read_text():
                    await _sleep(0.05)
            pid = int(pidfile.read_text())
            assert pid_alive(pid)
            await _sleep(0.3)
            tg.cancel_scope.cancel()
        took = await wait_dead(pid, 10)
        print(f"target of the cancelled script dead {took:.2f}s after the cancel")
        sessions = await c.call("debug_session", action="list")
        assert sessions is not None


# -- a client that goes away -------------------------------------------------------------

def test_a_client_gone_mid_request_has_its_targets_killed_at_once(strobe_home, tmp_path):
    (binary,) = copies_of("sleep", tmp_path, 1, "orphan")
    keeper = Raw(strobe_home)  # starts the daemon
    keeper.initialize()
    s = socket.socket(socket.AF_UNIX)
    s.connect(str(strobe_home / "strobe.sock"))
    f = s.makefile("rwb", buffering=0)

    def ask(msg):
        f.write(json.dumps(msg).encode() + b"\n")
        while True:
            m = json.loads(f.readline())
            if m.get("id") == msg["id"]:
                return m

    ask(INIT)
    r = tool_body(ask(tool_call(1, "debug_launch", {"command": str(binary), "args": ["600"], "projectRoot": str(tmp_path)})))
    pid = r["pid"]
    f.write(json.dumps(tool_call(2, "debug_continue", {"sessionId": r["sessionId"], "action": "inspect", "timeoutMs": 60000})).encode() + b"\n")
    time.sleep(0.5)
    f.close()
    s.close()
    took = wait_dead_now(pid, 10)
    print(f"target dead {took:.2f}s after its client closed the socket")
    keeper.still_works()
    keeper.close()


def test_a_client_gone_through_strobe_mcp_has_its_targets_killed_at_once(strobe_home, tmp_path):
    # The client process dies: the proxy's stdin ends and its stdout has no reader.
    (binary,) = copies_of("sleep", tmp_path, 1, "orphan")
    c = Raw(strobe_home)
    c.initialize()
    sid, pid = launch_raw(c, binary, tmp_path)
    c.send(json.dumps(tool_call(2, "debug_continue", {"sessionId": sid, "action": "inspect", "timeoutMs": 60000})).encode() + b"\n")
    time.sleep(0.5)
    c.proc.stdin.close()
    c.proc.stdout.close()
    took = wait_dead_now(pid, 10)
    print(f"target dead {took:.2f}s after the client of strobe mcp went away")
    c.proc.wait(timeout=10)


def test_a_client_that_only_shut_down_its_input_still_gets_its_answer(strobe_home):
    # Half-close is not a disconnect: `printf request | strobe mcp` style clients.
    keeper = Raw(strobe_home)
    keeper.initialize()
    s = socket.socket(socket.AF_UNIX)
    s.connect(str(strobe_home / "strobe.sock"))
    s.sendall(json.dumps(INIT).encode() + b"\n"
              + json.dumps(tool_call(3, "debug_script", {"script": "strobe.sleep(1500) return 42"})).encode() + b"\n")
    s.shutdown(socket.SHUT_WR)
    data = b""
    s.settimeout(30)
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    replies = [json.loads(l) for l in data.splitlines()]
    assert tool_body(next(r for r in replies if r.get("id") == 3))["result"] == 42, replies
    keeper.close()


# -- the daemon dies under strobe mcp -------------------------------------------------------

async def test_a_dead_daemon_answers_in_flight_requests_and_the_next_request_works(strobe_home, tmp_path):
    (binary,) = copies_of("sleep", tmp_path, 1, "survivor")
    async with mcp_client(strobe_home) as c:
        r = await c.call("debug_launch", command=str(binary), args=["600"], projectRoot=str(tmp_path))
        old = daemon_pid(strobe_home)
        outcome = {}

        async def waiting():
            try:
                outcome["result"] = await c.call("debug_continue", sessionId=r["sessionId"], action="inspect", timeoutMs=60000)
            except MCPError as e:
                outcome["error"] = str(e)

        try:
            with anyio.fail_after(30):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(waiting)
                    await _sleep(1.0)
                    os.kill(old, signal.SIGKILL)
                    killed = time.monotonic()
            print(f"in-flight request answered {time.monotonic() - killed:.2f}s after kill -9 of the daemon")
            assert "daemon stopped" in outcome.get("error", ""), outcome
            t0 = time.monotonic()
            # The next request starts a fresh daemon, initialized as the client had.
            listed = await c.call("debug_session", action="list")
            print(f"next request answered by a fresh daemon {time.monotonic() - t0:.2f}s later")
            assert listed is not None
            assert daemon_pid(strobe_home) != old
            r2 = await c.call("debug_launch", command=str(binary), args=["600"], projectRoot=str(tmp_path))
            await c.call("debug_session", action="stop", sessionId=r2["sessionId"])
        finally:
            if pid_alive(r["pid"]):  # the killed daemon's target (not this test's subject)
                os.kill(r["pid"], signal.SIGKILL)


# -- progress ------------------------------------------------------------------------------

async def test_a_script_reports_progress(strobe_home):
    seen = []

    async def on_progress(progress, total, message):
        seen.append((progress, total, message))

    script = 'for i = 1, 3 do strobe.progress(i, 3, "step " .. i) end return strobe.progress(3, 3)'
    async with mcp_client(strobe_home) as c:
        result = await c.session.call_tool("debug_script", {"script": script}, progress_callback=on_progress)
        body = json.loads(result.content[0].text)
        assert body["result"] is False, "a value not above the last is not sent"
        await _sleep(0.2)
        assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")], seen


async def test_a_long_script_sends_heartbeats_until_it_reports_its_own_progress(strobe_home):
    seen = []

    async def on_progress(progress, total, message):
        seen.append((progress, total, message))

    script = 'strobe.sleep(2500) strobe.progress(100, 200, "half") strobe.sleep(1500) return 1'
    async with mcp_client(strobe_home) as c:
        await c.session.call_tool("debug_script", {"script": script}, progress_callback=on_progress)
        await _sleep(0.2)
    beats = [s for s in seen if s[1] is None]
    assert len(beats) >= 2 and all("the script is running" in m for _, _, m in beats), seen
    assert seen[-1] == (100, 200, "half"), f"no heartbeat after the script's own report: {seen}"


async def test_a_long_wait_sends_heartbeats(strobe_home, tmp_path):
    (binary,) = copies_of("sleep", tmp_path, 1, "slow")
    seen = []

    async def on_progress(progress, total, message):
        seen.append((progress, message))

    async with mcp_client(strobe_home) as c:
        r = await c.call("debug_launch", command=str(binary), args=["600"], projectRoot=str(tmp_path))
        result = await c.session.call_tool(
            "debug_continue", {"sessionId": r["sessionId"], "action": "inspect", "timeoutMs": 3500}, progress_callback=on_progress)
        assert json.loads(result.content[0].text)["status"] == "running"
        await _sleep(0.2)
        assert len(seen) >= 2, seen
        assert all("waiting for a pause" in m for _, m in seen), seen
        assert [p for p, _ in seen] == sorted(set(p for p, _ in seen)), f"progress must grow: {seen}"
        await c.call("debug_session", action="stop", sessionId=r["sessionId"])


async def test_first_time_frida_setup_reports_progress(strobe_home, tmp_path, monkeypatch):
    # A fresh cache: the Frida Python package is installed (from PyPI, 10-20 s) as on a
    # new machine; the compiled agent and host script are copied to spare their rebuild.
    cache = tmp_path / "cache"
    cache.mkdir()
    shared = REPO / "target" / "strobe-cache"
    for p in list(shared.glob("agent-*.js")) + list(shared.glob("host-*.py")):
        shutil.copy(p, cache / p.name)
    monkeypatch.setenv("STROBE_CACHE_DIR", str(cache))
    monkeypatch.setenv("PIP_CACHE_DIR", str(tmp_path / "pip-cache"))
    (binary,) = copies_of("sleep", tmp_path, 1, "first")
    seen = []

    async def on_progress(progress, total, message):
        seen.append(message)

    async with mcp_client(strobe_home) as c:
        result = await c.session.call_tool(
            "debug_launch", {"command": str(binary), "args": ["600"], "projectRoot": str(tmp_path)},
            read_timeout_seconds=300, progress_callback=on_progress)
        body = json.loads(result.content[0].text)
        assert "sessionId" in body, body
        await _sleep(0.2)
        assert any("installing the Frida Python package" in (m or "") for m in seen), seen
        await c.call("debug_session", action="stop", sessionId=body["sessionId"])
