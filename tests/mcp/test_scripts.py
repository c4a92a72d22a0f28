"""Scripts are the product's surface: adding, changing, breaking and deleting a tool
script while the daemon runs takes effect without a restart and is announced with
notifications/tools/list_changed; a broken script keeps its last good version and is
reported with file and line; project scripts load only once their directory is trusted;
hint rules and tool preconditions come from scripts too."""

import os
import shutil
import subprocess
import time
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from conftest import MCPError, REPO, Client, _sleep, strobe_bin, strobe_env

pytestmark = pytest.mark.anyio

HELLO = """-- a tool added while the daemon runs
return {
  name = "hello",
  description = "Greets.",
  inputSchema = { type = "object", properties = { who = { type = "string" } } },
  handler = function(args) return { greeting = "%s " .. (args.who or "?") } end,
}
"""

BROKEN = """return {
  name = "hello",
  handler = function(args) return { greeting = "never" } end
  oops
}
"""


@asynccontextmanager
async def client_with_notifications(home: Path):
    """Like conftest.mcp_client, but records the notifications the server sends."""
    seen = []

    async def on_message(message):
        text = repr(message)
        if "list_changed" in text or "ToolListChanged" in type(message).__name__ or "ToolListChanged" in text:
            seen.append(time.monotonic())

    params = StdioServerParameters(command=strobe_bin(), args=["mcp"], env=strobe_env(home))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, message_handler=on_message) as session:
            await session.initialize()
            c = Client(session)
            c.list_changed = seen
            yield c


async def tool_names(c):
    return {t.name for t in (await c.session.list_tools()).tools}


async def eventually(what, check, timeout=20.0):
    """Poll `check` (async, returns a truthy value when done) until it holds."""
    deadline = time.monotonic() + timeout
    while True:
        got = await check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout}s")
        await _sleep(0.1)


async def test_hot_reload_adds_changes_breaks_and_deletes_a_tool(strobe_home):
    tools_dir = strobe_home / "scripts" / "tools"
    async with client_with_notifications(strobe_home) as c:
        assert "hello" not in await tool_names(c)
        # The scripts directory does not exist yet: creating it is seen too.
        tools_dir.mkdir(parents=True)
        (tools_dir / "hello.lua").write_text(HELLO % "hello")

        async def has_hello():
            return "hello" in await tool_names(c)

        await eventually("the new tool appears", has_hello)
        await eventually("list_changed is sent", lambda: _value(len(c.list_changed) >= 1))
        assert (await c.call("hello", who="ann"))["greeting"] == "hello ann"

        # Edit: the behaviour changes, no restart.
        (tools_dir / "hello.lua").write_text(HELLO % "bonjour")

        async def says_bonjour():
            return (await c.call("hello", who="ann"))["greeting"] == "bonjour ann"

        await eventually("the edited tool answers", says_bonjour)

        # Break it: the last good version keeps answering; the error names file and line.
        (tools_dir / "hello.lua").write_text(BROKEN)

        async def reports_error():
            r = await c.call("hello", who="ann")
            return r if r.get("scriptErrors") else None

        r = await eventually("the script error is reported", reports_error)
        assert r["greeting"] == "bonjour ann", r
        err = r["scriptErrors"][0]
        print(err)
        assert err["file"].endswith("tools/hello.lua") and err["line"] == 4, err
        assert "last good version" in err["message"]

        # Fix it again: the error goes away.
        (tools_dir / "hello.lua").write_text(HELLO % "hi")

        async def fixed():
            r = await c.call("hello", who="ann")
            return r["greeting"] == "hi ann" and "scriptErrors" not in r

        await eventually("the fixed tool answers without errors", fixed)

        # Delete it: the tool disappears and clients are told.
        before = len(c.list_changed)
        (tools_dir / "hello.lua").unlink()

        async def gone():
            return "hello" not in await tool_names(c)

        await eventually("the deleted tool disappears", gone)
        await eventually("list_changed is sent again", lambda: _value(len(c.list_changed) > before))
        # An unknown tool is a JSON-RPC error (-32602), as the MCP spec says.
        with pytest.raises(MCPError) as e:
            await c.call("hello")
        assert e.value.error.code == -32602 and "Unknown tool" in e.value.error.message


async def _value(v):
    return v


async def test_project_scripts_load_only_when_trusted(strobe_home, tmp_path):
    project = tmp_path / "proj"
    (project / ".strobe" / "scripts" / "tools").mkdir(parents=True)
    (project / ".strobe" / "scripts" / "tools" / "proj_tool.lua").write_text(
        'return { name = "proj_tool", handler = function() return { from = "project" } end }\n'
    )
    env = strobe_env(strobe_home)
    async with client_with_notifications(strobe_home) as c:
        # A tool call names the project root; its scripts are not trusted, so not loaded.
        e = await c.error("debug_launch", command=str(tmp_path / "missing"), projectRoot=str(project))
        assert e.code == "VALIDATION_ERROR"
        assert "not trusted" in e.message and "strobe trust" in e.message, e.message
        assert "proj_tool" not in await tool_names(c)

        subprocess.run([strobe_bin(), "trust", str(project)], env=env, check=True, capture_output=True)

        async def has_proj_tool():
            return "proj_tool" in await tool_names(c)

        await eventually("the trusted project's tool appears", has_proj_tool)
        assert (await c.call("proj_tool"))["from"] == "project"

        subprocess.run([strobe_bin(), "trust", "--revoke", str(project)], env=env, check=True, capture_output=True)

        async def no_proj_tool():
            return "proj_tool" not in await tool_names(c)

        await eventually("the revoked project's tool disappears", no_proj_tool)


async def test_hint_rules_and_preconditions_come_from_scripts(strobe_home):
    scripts = strobe_home / "scripts"
    (scripts / "hints").mkdir(parents=True)
    (scripts / "tools").mkdir(parents=True)
    (scripts / "hints" / "custom.lua").write_text(
        'return { name = "custom", when = "trace", rule = function(r)\n'
        '  if r.mode == "pending" then return "CUSTOM HINT for " .. #r.activePatterns .. " pattern(s)" end\n'
        "end }\n"
    )
    shutil.copy(REPO / "examples" / "tools" / "call_counts.lua", scripts / "tools")
    (scripts / "tools" / "needs_running.lua").write_text(
        'return { name = "needs_running", requires = "running",\n'
        '  inputSchema = { type = "object", properties = { sessionId = { type = "string" } } },\n'
        '  handler = function() return { ran = true } end }\n'
    )
    async with client_with_notifications(strobe_home) as c:
        r = await c.call("debug_trace", add=["some_function"])
        # The built-in rule and the user's rule both speak.
        assert "staged for the next debug_launch" in r["status"], r
        assert "CUSTOM HINT for 1 pattern(s)" in r["status"], r
        await c.call("debug_trace", remove=["some_function"])

        e = await c.error("needs_running")
        assert e.code == "VALIDATION_ERROR" and "needs a running session" in e.message and "sessionId" in e.message
        e = await c.error("needs_running", sessionId="nope-2026-01-01-00h00")
        assert e.code == "SESSION_NOT_FOUND"
        e = await c.error("call_counts", sessionId="nope-2026-01-01-00h00")
        assert e.code == "SESSION_NOT_FOUND"


async def test_call_counts_example_and_running_precondition(strobe_home, fixtures_dir):
    scripts = strobe_home / "scripts" / "tools"
    scripts.mkdir(parents=True)
    shutil.copy(REPO / "examples" / "tools" / "call_counts.lua", scripts)
    (scripts / "needs_running.lua").write_text(
        'return { name = "needs_running", requires = "running",\n'
        '  inputSchema = { type = "object", properties = { sessionId = { type = "string" } } },\n'
        '  handler = function() return { ran = true } end }\n'
    )
    src = str(REPO / "tests" / "fixtures" / "c")
    async with client_with_notifications(strobe_home) as c:
        r = await c.call("debug_launch", command=str(fixtures_dir / "c_sample"), args=["3", "10"], projectRoot=src)
        sid = r["sessionId"]
        await c.wait_for(sid, "done", eventType="stdout")
        await c.wait_status(sid, "exited", timeout=10.0)
        e = await c.error("needs_running", sessionId=sid)
        assert e.code == "PROCESS_EXITED" and "debug_launch" in e.message and "queryable" in e.message, e.message
        counts = await c.call("call_counts", sessionId=sid)
        assert counts["totalCalls"] == 0 and counts["functions"] == []
        await c.call("debug_session", action="stop", sessionId=sid)
