"""Bad input never crashes the daemon: each mistake gets the spec's error code and a
message that says what to do, and the daemon keeps serving."""

import json
import os
import socket

import pytest

from conftest import MCPError, REPO, mcp_client, pid_alive, _sleep

pytestmark = pytest.mark.anyio


async def test_tool_errors_carry_spec_codes(strobe_home, fixtures_dir, tmp_path):
    src = str(REPO / "tests" / "fixtures")
    async with mcp_client(strobe_home) as c:
        # An unknown tool is a JSON-RPC error (MCP spec), listing the tools there are.
        with pytest.raises(MCPError) as unknown:
            await c.call("debug_nonexistent")
        assert unknown.value.error.code == -32602 and "debug_launch" in unknown.value.error.message

        e = await c.error("debug_launch", projectRoot=src)
        assert e.code == "VALIDATION_ERROR" and "command" in e.message

        e = await c.error("debug_launch", command=str(tmp_path / "no-such-binary"), projectRoot=src)
        assert e.code == "VALIDATION_ERROR" and "does not exist" in e.message

        e = await c.error("debug_query", sessionId="nope-2026-01-01-00h00")
        assert e.code == "SESSION_NOT_FOUND" and "nope-2026-01-01-00h00" in e.message

        e = await c.error("debug_query", sessionId="x", limit=9999)
        assert e.code == "VALIDATION_ERROR" and "limit" in e.message

        e = await c.error("debug_trace", add=["foo::"])
        assert e.code == "INVALID_PATTERN" and "foo::" in e.message

        e = await c.error("debug_session", action="explode")
        assert e.code == "VALIDATION_ERROR"

        # A binary without DWARF: launching works (output is still captured); tracing says why not.
        r = await c.call("debug_launch", command=str(fixtures_dir / "c_sample_nodebug"), args=["20", "100"],
                         projectRoot=src)
        sid = r["sessionId"]
        await c.wait_for(sid, "start", eventType="stdout")
        e = await c.error("debug_trace", sessionId=sid, add=["compute_sum"])
        assert e.code == "NO_DEBUG_SYMBOLS" and "-g" in e.message
        e = await c.error("debug_trace", sessionId=sid, add=["a:::b"])
        assert e.code == "INVALID_PATTERN"
        await c.call("debug_session", action="stop", sessionId=sid)

        # Still serving after all of that.
        tools = await c.session.list_tools()
        assert len(tools.tools) >= 4


async def test_exited_target_stays_queryable(strobe_home, fixtures_dir):
    src = str(REPO / "tests" / "fixtures" / "c")
    async with mcp_client(strobe_home) as c:
        r = await c.call("debug_launch", command=str(fixtures_dir / "c_sample"), args=["3", "10"], projectRoot=src)
        sid = r["sessionId"]
        await c.wait_for(sid, "done", eventType="stdout")
        await c.wait_status(sid, "exited", timeout=10.0)
        out = await c.call("debug_query", sessionId=sid, eventType="stdout", limit=500)
        text = "".join(e["text"] for e in out["events"])
        assert "round 3: sum=66" in text
        e = await c.error("debug_trace", sessionId=sid, add=["compute_sum"])
        assert e.code == "PROCESS_EXITED" and "queryable" in e.message
        # Retained stop keeps the events.
        s = await c.call("debug_session", action="stop", sessionId=sid, retain=True)
        assert s["eventsCollected"] >= 5
        listed = await c.call("debug_session", action="list")
        assert any(x["sessionId"] == sid for x in listed["sessions"])
        out = await c.call("debug_query", sessionId=sid, eventType="stdout")
        assert out["totalCount"] >= 1
        await c.call("debug_session", action="delete", sessionId=sid)
        e = await c.error("debug_query", sessionId=sid)
        assert e.code == "SESSION_NOT_FOUND"


def _raw_exchange(home, lines):
    """Talk JSON-RPC to the daemon's socket directly, line by line."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(home / "strobe.sock"))
    f = s.makefile("rw")
    out = []
    for line in lines:
        f.write(line + "\n")
        f.flush()
        out.append(json.loads(f.readline()))
    s.close()
    return out


async def test_malformed_json_rpc(strobe_home):
    async with mcp_client(strobe_home):
        replies = _raw_exchange(strobe_home, [
            json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}),
            "{not json",
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "no/such/method"}),
            json.dumps({"jsonrpc": "2.0", "id": 2}),
            json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {}}),
            json.dumps({"jsonrpc": "2.0", "id": 4, "method": "ping"}),
        ])
        assert "result" in replies.pop(0)
        assert replies[0]["error"]["code"] == -32700
        assert replies[1]["error"]["code"] == -32601
        assert replies[2]["error"]["code"] == -32600
        assert replies[3]["error"]["code"] == -32602
        assert replies[4]["result"] == {}


async def test_proxy_survives_stale_socket_and_pid(strobe_home):
    # A crashed daemon leaves a socket nobody listens on and a pid that is gone.
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(strobe_home / "strobe.sock"))
    stale.close()
    (strobe_home / "strobe.pid").write_text("999999\n")
    async with mcp_client(strobe_home) as c:
        tools = await c.session.list_tools()
        assert len(tools.tools) >= 4
    assert int((strobe_home / "strobe.pid").read_text()) != 999999


async def test_disconnect_stops_the_clients_targets(strobe_home, fixtures_dir):
    src = str(REPO / "tests" / "fixtures" / "c")
    async with mcp_client(strobe_home) as c:
        r = await c.call("debug_launch", command=str(fixtures_dir / "c_sample"), args=["600", "100"], projectRoot=src)
        pid, sid = r["pid"], r["sessionId"]
        await c.wait_for(sid, "start", eventType="stdout")
        assert pid_alive(pid)
    for _ in range(100):
        if not pid_alive(pid):
            break
        await _sleep(0.1)
    assert not pid_alive(pid), "the target of a disconnected client must not linger"
    # Its data was kept for a later look.
    async with mcp_client(strobe_home) as c:
        out = await c.call("debug_query", sessionId=sid, eventType="stdout")
        assert out["totalCount"] >= 1
