"""Tool metadata and structured results as the official MCP Python SDK sees them
(issue 17, item 11): every tool has a title and honest behaviour hints; tools with a
fixed answer shape declare an outputSchema, and their answers carry structuredContent
that validates against it (checked here with `jsonschema`, so a schema cannot drift
from what the tools return). Older protocol versions get only what they know."""

import json

import jsonschema
import pytest

from conftest import REPO, mcp_client
from test_hardening import Raw

pytestmark = pytest.mark.anyio

SRC = REPO / "tests" / "fixtures" / "c" / "eval.c"

# tool: (readOnly, destructive, idempotent, openWorld), the worst case over its actions.
HINTS = {
    "debug_query": (True, False, True, False),
    "debug_ui": (True, False, True, False),
    "debug_session": (False, True, True, False),
    "debug_eval": (False, True, False, False),
    "debug_memory": (False, True, False, False),
    "debug_breakpoint": (False, True, False, False),
    "debug_continue": (False, True, False, True),
    "debug_trace": (False, False, False, False),
    "debug_launch": (False, False, False, True),
    "debug_script": (False, True, False, True),
    "debug_test": (False, True, False, True),
}
STRUCTURED = {"debug_query", "debug_session", "debug_eval", "debug_launch", "debug_breakpoint", "debug_trace",
              "debug_script", "debug_continue"}


def hint(annotations, name):
    """A hint as the SDK parsed it (snake_case in the 2.x SDK, camelCase in 1.x)."""
    snake = "".join("_" + c.lower() if c.isupper() else c for c in name)
    return getattr(annotations, snake, getattr(annotations, name, None))


def line_of(marker: str) -> int:
    return next(i for i, t in enumerate(SRC.read_text().splitlines(), 1) if marker in t)


async def test_tools_list_has_titles_hints_and_output_schemas(strobe_home):
    async with mcp_client(strobe_home) as c:
        tools = {t.name: t for t in (await c.session.list_tools()).tools}
    assert set(HINTS) <= set(tools), set(tools)
    for name, expected in HINTS.items():
        t = tools[name]
        assert t.title and t.title != name, (name, t.title)
        got = tuple(hint(t.annotations, h) for h in ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"])
        assert got == expected, (name, got)
        schema = getattr(t, "output_schema", None) or getattr(t, "outputSchema", None)
        assert (schema is not None) == (name in STRUCTURED), (name, schema)
        if schema:
            jsonschema.Draft202012Validator.check_schema(schema)
            assert schema["type"] == "object" and "scriptErrors" in schema["properties"], schema


async def call_structured(c, schemas, name, **args):
    """Call `name`; its structuredContent must equal the text's JSON and fit its schema."""
    r = await c.session.call_tool(name, args)
    assert not r.is_error, r.content[0].text
    structured = getattr(r, "structured_content", None)
    assert structured is not None, f"{name}: no structuredContent"
    assert structured == json.loads(r.content[0].text), name
    jsonschema.validate(structured, schemas[name], cls=jsonschema.Draft202012Validator)
    return structured


async def test_answers_carry_structured_content_that_fits_the_schema(strobe_home, fixtures_dir, tmp_path):
    go = tmp_path / "go"
    async with mcp_client(strobe_home) as c:
        schemas = {t.name: t.output_schema for t in (await c.session.list_tools()).tools if t.output_schema}
        call = lambda name, **a: call_structured(c, schemas, name, **a)  # noqa: E731
        await call("debug_breakpoint", add=[{"function": "main"}])  # staged
        await call("debug_breakpoint", remove=["staged-1"])
        await call("debug_trace", add=["weigh"])  # pending
        r = await call("debug_launch", command=str(fixtures_dir / "c_eval"), args=[str(go)], projectRoot=str(SRC.parent))
        sid = r["sessionId"]
        await c.wait_for(sid, "ready", eventType="stdout")
        await call("debug_query", sessionId=sid, eventType="stdout")
        await call("debug_query", sessionId=sid, verbose=True, maxBytes=1024)
        await call("debug_query", sessionId=sid, fields=["id"], joinOutput=True)
        await call("debug_trace", sessionId=sid, add=["run"])
        await call("debug_breakpoint", sessionId=sid, add=[{"file": "eval.c", "line": line_of("WEIGH_RESULT")}])
        go.write_text("go")
        p = await call("debug_continue", sessionId=sid, action="inspect", timeoutMs=30000)
        assert p["status"] == "paused" and p["locals"], p
        r = await call("debug_eval", sessionId=sid, expressions=["q->len", "no_such_name", "1 +"])
        assert "value" in r["results"][0] and "error" in r["results"][1], r
        st = await call("debug_session", action="status", sessionId=sid)
        assert st["status"] == "paused", st
        await call("debug_session", action="list")
        await call("debug_script", script="print('hi') return {n = 1}")
        await call("debug_continue", sessionId=sid, action="step-over", timeoutMs=30000)
        r = await call("debug_continue", sessionId=sid, timeoutMs=30000)
        assert r["status"] in ("paused", "exited"), r
        await call("debug_session", action="stop", sessionId=sid, retain=True)
        await call("debug_session", action="delete", sessionId=sid)
        # A launch that stops at once reports the pause in its answer.
        go.unlink()
        r = await call("debug_launch", command=str(fixtures_dir / "c_eval"), args=[str(go)],
                       projectRoot=str(SRC.parent), stopOnEntry=True)
        assert r.get("status") == "paused" and r["pausedThread"]["threadId"], r
        await call("debug_session", action="stop", sessionId=r["sessionId"])
        # A tool error is no structured answer: the text says what went wrong.
        e = await c.session.call_tool("debug_query", {"sessionId": "no-such-session"})
        assert e.is_error and getattr(e, "structured_content", None) is None, e


def raw_client(home, version):
    raw = Raw(home)
    r = raw.ask({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                 "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
    assert r["result"]["protocolVersion"] == version, r
    raw.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    return raw


@pytest.mark.parametrize("version,annotations,structured", [
    ("2024-11-05", False, False),
    ("2025-03-26", True, False),
    ("2025-06-18", True, True),
    ("2025-11-25", True, True),
])
def test_each_protocol_version_gets_what_it_knows(strobe_home, version, annotations, structured):
    raw = raw_client(strobe_home, version)
    try:
        tools = {t["name"]: t for t in raw.ask({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})["result"]["tools"]}
        q = tools["debug_query"]
        assert ("annotations" in q) == annotations, q.keys()
        if annotations:
            assert q["annotations"]["readOnlyHint"] is True and q["annotations"]["title"], q["annotations"]
        assert ("title" in q) == structured and ("outputSchema" in q) == structured, q.keys()
        r = raw.ask({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                     "params": {"name": "debug_session", "arguments": {"action": "list"}}})["result"]
        assert ("structuredContent" in r) == structured, r
        assert json.loads(r["content"][0]["text"]) == r.get("structuredContent", json.loads(r["content"][0]["text"]))
    finally:
        raw.close()
