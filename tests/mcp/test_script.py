"""debug_script: a whole investigation in one call (breakpoint hits collected, a trace
queried and summarised, errors with the script's line, sessions stopped or kept), and
the daemon's watchdog: a runaway loop in debug_script, in a tool script and in
`strobe repl --connect` ends with an error within its budget while a second client is
answered; os.exit is unavailable; a query that would return megabytes fits maxBytes."""

import json
import time

import anyio
import pytest

from conftest import REPO, mcp_client, strobe_bin
from test_repl import Pty, env_for

pytestmark = pytest.mark.anyio

SRC = REPO / "tests" / "fixtures" / "c"


def line_of(marker: str) -> int:
    for i, text in enumerate((SRC / "debugee.c").read_text().splitlines(), start=1):
        if marker in text:
            return i
    raise AssertionError(marker)


def launch_lua(fixtures_dir, mode):
    return f'strobe.launch{{command="{fixtures_dir / "c_debugee"}", args={{"{mode}"}}, projectRoot="{SRC}"}}'


async def test_breakpoint_hits_collected_in_one_call(strobe_home, fixtures_dir):
    script = f"""
local s = {launch_lua(fixtures_dir, "mix")}
s:wait_for{{eventType="stdout", text="ready", timeoutMs=20000}}
local blocks = {{}}
s:on_break("debugee.c:{line_of("MIX_BODY")}", function(hit)
  blocks[#blocks + 1] = {{hit.locals.index, hit.locals.buffer_size, hit.args[2]}}
end)
s:stdin("go\\n")
local r = s:run{{timeoutMs = 60000}}
print("hits", r.hits)
return {{blocks = blocks, reason = r.reason, session = s}}
"""
    async with mcp_client(strobe_home) as c:
        r = await c.call("debug_script", script=script, timeoutMs=90000)
        assert "error" not in r, r
        res = r["result"]
        assert res["blocks"] == [[0, 64, 64], [1, 128, 128], [2, -256, -256], [3, 512, 512]], res
        assert res["reason"] == "exit"
        assert r["output"] == "hits\t4\n"
        # The script's session was stopped at its end, its events kept.
        sid = res["session"]
        assert r["sessions"] == [], r
        st = await c.call("debug_session", action="status", sessionId=sid)
        assert st["status"] != "running", st
        pauses = await c.call("debug_query", sessionId=sid, eventType="pause")
        assert pauses["totalCount"] == 4


async def test_trace_query_and_summarise(strobe_home, fixtures_dir):
    script = f"""
local s = {launch_lua(fixtures_dir, "calls")}
s:wait_for{{eventType="stdout", text="ready", timeoutMs=20000}}
s:trace{{add = {{"bump"}}}}
s:stdin("go\\n")
assert(s:run{{timeoutMs=30000}}.reason == "exit", "the program did not exit")
local exits = s:query{{eventType="function_exit", ["function"]={{equals="bump"}}, limit=500}}.events
local sum, last = 0, nil
for _, e in ipairs(exits) do sum = sum + tonumber(e.returnValue); last = tonumber(e.returnValue) end
return {{calls = #exits, last = last, sum = sum, argsSeen = exits[1] and true}}
"""
    async with mcp_client(strobe_home) as c:
        r = await c.call("debug_script", script=script, timeoutMs=90000)
        assert "error" not in r, r
        # bump(i) for i = 1..10 returns the running total 1, 3, 6, ..., 55.
        assert r["result"] == {"calls": 10, "last": 55, "sum": 220, "argsSeen": True}, r
        assert r["elapsedMs"] > 0


async def test_errors_report_the_scripts_line(strobe_home):
    async with mcp_client(strobe_home) as c:
        r = await c.call("debug_script", script="local a = 1\nlocal b = = 2\n")
        assert r["error"]["line"] == 2, r
        r = await c.call("debug_script", script='print("before")\nlocal t = nil\nlocal function f() return t.x end\nlocal v = f()\nreturn v\n')
        assert r["error"]["line"] == 3, r
        assert "attempt to index" in r["error"]["message"]
        assert any(l.startswith("script:4") for l in r["error"]["traceback"]), r
        assert r["output"] == "before\n"
        # A coded error from the API keeps its code and names the line that called it.
        r = await c.call("debug_script", script='local x = 1\nstrobe.session("no-such-session")\n')
        assert r["error"]["code"] == "SESSION_NOT_FOUND" and r["error"]["line"] == 2, r
        # Printed output is capped with a notice.
        r = await c.call("debug_script", script='for i = 1, 1000 do print(string.rep("x", 100)) end', maxOutputBytes=1000)
        assert len(r["output"]) < 1300 and "output truncated" in r["output"], r["output"][-200:]


async def test_keep_keeps_a_session_and_the_rest_are_stopped(strobe_home, fixtures_dir, tmp_path):
    never = tmp_path / "never"
    script = f"""
local a = strobe.launch{{command="{fixtures_dir / "c_debugee"}", args={{"calls", "{never}"}}, projectRoot="{SRC}"}}
local b = strobe.launch{{command="{fixtures_dir / "c_debugee_O2"}", args={{"calls", "{never}"}}, projectRoot="{SRC}"}}
return {{keep = a, other = b}}
"""
    async with mcp_client(strobe_home) as c:
        r = await c.call("debug_script", script=script, timeoutMs=90000)
        assert "error" not in r, r
        kept, other = r["result"]["keep"], r["result"]["other"]
        assert r["sessions"] == [kept] and r["stoppedSessions"] == [other], r
        assert (await c.call("debug_session", action="status", sessionId=kept))["status"] == "running"
        assert (await c.call("debug_session", action="status", sessionId=other))["status"] != "running"
        # A kept session is the caller's: usable with `session` in the next script.
        r2 = await c.call("debug_script", sessionId=kept, script="return {id = session.id, running = session:is_running()}")
        assert r2["result"] == {"id": kept, "running": True}, r2
        await c.call("debug_session", action="stop", sessionId=kept)


async def test_scripts_are_isolated_and_cannot_exit(strobe_home):
    async with mcp_client(strobe_home) as c:
        r = await c.call("debug_script", script="x_global = 41\nstrobe.hint = function() return 'HACKED' end\nreturn os.exit == nil")
        assert r["result"] is True, r
        r = await c.call("debug_script", script="return {fresh = x_global == nil, hint = strobe.hint('launch', {sessionId='s'}) ~= 'HACKED'}")
        assert r["result"] == {"fresh": True, "hint": True}, r
        r = await c.call("debug_script", script="local x = 1\nlocal big = string.rep('x', 400 * 1024 * 1024)\nreturn #big")
        assert "not enough memory" in r["error"]["message"], r  # the 256 MiB limit, not the daemon
        r = await c.call("debug_script", script="os.exit(1)")
        assert "os.exit" in r["error"]["message"] or "nil" in r["error"]["message"], r
        assert (await c.session.list_tools()).tools  # the daemon lives


async def answered_meanwhile(c2, sid, done):
    """The second client's tools/list and debug_query, timed, while `done` is unset."""
    t0 = time.monotonic()
    tools = await c2.session.list_tools()
    q = await c2.call("debug_query", sessionId=sid, eventType="stdout")
    assert tools.tools and "events" in q
    assert not done.is_set(), "the runaway ended before the second client was answered"
    return time.monotonic() - t0


async def runaway_with_a_bystander(strobe_home, fixtures_dir, start_runaway):
    """Run `start_runaway()` (which must end in an error) and, while it spins, a second
    client's calls; returns the runaway's error."""
    async with mcp_client(strobe_home) as c2:
        r = await c2.call("debug_launch", command=str(fixtures_dir / "c_debugee"), args=["calls"], projectRoot=str(SRC))
        sid = r["sessionId"]
        await c2.wait_for(sid, "ready", eventType="stdout")
        done = anyio.Event()
        out = {}

        async def runaway():
            out["error"] = await start_runaway()
            done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(runaway)
            await anyio.sleep(1.0)
            await answered_meanwhile(c2, sid, done)
        await c2.call("debug_session", action="stop", sessionId=sid)
        return out["error"]


async def test_runaway_debug_script_is_interrupted_and_others_are_served(strobe_home, fixtures_dir):
    async with mcp_client(strobe_home) as c1:
        async def spin():
            r = await c1.call("debug_script", script="local n = 0\nwhile true do n = n + 1 end", timeoutMs=8000)
            return r["error"]

        err = await runaway_with_a_bystander(strobe_home, fixtures_dir, spin)
        assert err["code"] == "SCRIPT_TIMEOUT" and err["line"] == 2, err


async def test_runaway_tool_script_is_interrupted_and_others_are_served(strobe_home, fixtures_dir):
    tools = strobe_home / "scripts" / "tools"
    tools.mkdir(parents=True)
    (tools / "spin.lua").write_text(
        'return { name = "spin", handler = function() while true do end end }\n')
    async with mcp_client(strobe_home) as c1:
        async def spin():
            e = await c1.error("spin")
            return {"code": e.code, "message": e.message}

        err = await runaway_with_a_bystander(strobe_home, fixtures_dir, spin)
        assert err["code"] == "SCRIPT_TIMEOUT" and "tool script" in err["message"], err
        # The daemon is fine afterwards.
        assert (await c1.call("debug_script", script="return 1"))["result"] == 1


async def test_runaway_repl_chunk_is_interrupted_and_isolated(strobe_home, fixtures_dir):
    async with mcp_client(strobe_home) as c1:
        await c1.session.list_tools()  # the daemon runs
        repl = Pty([strobe_bin(), "repl", "--connect"], env_for(strobe_home))
        try:
            repl.expect("strobe> ")
            # Redefining strobe.hint in the REPL changes nothing for other clients.
            repl.send("strobe.hint = function() return 'HACKED' end\r")
            repl.expect("strobe> ")

            async def spin():
                repl.send("while true do end\r")
                return await anyio.to_thread.run_sync(lambda: repl.expect("strobe> ", timeout=60))

            text = await runaway_with_a_bystander(strobe_home, fixtures_dir, spin)
            assert "SCRIPT_TIMEOUT" in text and "REPL chunk" in text, text
            r = await c1.call("debug_launch", command=str(fixtures_dir / "c_debugee"), args=["calls"], projectRoot=str(SRC))
            assert "HACKED" not in json.dumps(r), r
            await c1.call("debug_session", action="stop", sessionId=r["sessionId"])
            repl.send("\x04")
            repl.proc.wait(timeout=20)
        finally:
            repl.close()


async def test_a_huge_query_fits_max_bytes_with_a_continuation(strobe_home, fixtures_dir):
    setup = f"""
local s = strobe.launch{{command="{fixtures_dir / "c_bigargs"}", projectRoot="{SRC}"}}
s:wait_for{{eventType="stdout", text="ready", timeoutMs=20000}}
s:set_depth(4)
s:trace{{add = {{"consume"}}}}
s:stdin("go\\n")
assert(s:wait_for{{eventType="stdout", text="total=", timeoutMs=60000}}, "the program did not finish")
return {{keep = s}}
"""
    async with mcp_client(strobe_home) as c:
        r = await c.call("debug_script", script=setup, timeoutMs=120000)
        assert "error" not in r, r
        sid = r["result"]["keep"]
        await c.wait_status(sid, "exited", timeout=60)
        q = {"sessionId": sid, "eventType": "function_enter", "limit": 60, "verbose": True}
        big = await c.session.call_tool("debug_query", {**q, "maxBytes": 16777216})
        assert len(big.content[0].text) > 5_000_000, len(big.content[0].text)
        res = await c.session.call_tool("debug_query", {**q, "maxBytes": 300000})
        text = res.content[0].text
        assert len(text) <= 300000, len(text)
        body = json.loads(text)
        n = len(body["events"])
        assert body["hasMore"] and body["truncated"]["returned"] == n > 0, body.get("truncated")
        assert str(body["continueAfterEventId"]) in body["note"]
        rest = await c.call("debug_query", **{**q, "limit": 1, "afterEventId": body["continueAfterEventId"]})
        assert rest["events"][0]["arguments"]["round"] == n, rest["events"][0]["arguments"].get("round")
        # One event bigger than the budget is shrunk, never dropped silently.
        one = await c.session.call_tool("debug_query", {**q, "limit": 1, "maxBytes": 4096})
        assert len(one.content[0].text) <= 4096 and "bytes: query this event alone" in one.content[0].text
        # argDepth and fields make the same query small.
        small = await c.call("debug_query", **q, argDepth=1, fields=["function", "arguments"])
        assert small["events"][0] == {"function": "consume", "arguments": {"b": "{1 fields}", "round": 0}}, small["events"][0]
        assert "truncated" not in small


async def test_output_is_compact_joined_and_shown_in_summaries(strobe_home, fixtures_dir):
    script = f"""
local s = {launch_lua(fixtures_dir, "mix")}
s:wait_for{{eventType="stdout", text="ready", timeoutMs=20000}}
s:breakpoint{{add = {{{{file="debugee.c", line={line_of("MIX_PRINT")}, message="block {{index}}"}}}}}}
s:stdin("go\\n")
assert(s:wait_for{{eventType="stdout", text="total=", timeoutMs=60000}})
return {{keep = s}}
"""
    async with mcp_client(strobe_home) as c:
        r = await c.call("debug_script", script=script, timeoutMs=90000)
        assert "error" not in r, r
        sid = r["result"]["keep"]
        res = await c.session.call_tool("debug_query", {"sessionId": sid, "eventType": "logpoint"})
        text = res.content[0].text
        assert "\n" not in text and '": ' not in text, text[:200]  # compact JSON
        logs = json.loads(text)["events"]
        assert [e["text"] for e in logs] == ["block 0", "block 1", "block 2", "block 3"], logs
        joined = await c.call("debug_query", sessionId=sid, eventType="stdout", joinOutput=True)
        assert len(joined["events"]) == 1, joined
        assert joined["events"][0]["text"].startswith("ready mix\nblock 0 size 64")
        assert "total=" in joined["events"][0]["text"] and joined["events"][0]["lines"] >= 6
        few = await c.call("debug_query", sessionId=sid, eventType="stdout", limit=2, fields=["id"])
        assert all(set(e) == {"id"} for e in few["events"]), few
        await c.call("debug_session", action="stop", sessionId=sid)


def investigation_scripts(fixtures_dir):
    """The three worked scripts of docs/lua-api.md ("Investigations"), pointed at the fixtures."""
    doc = (REPO / "docs" / "lua-api.md").read_text()
    section = doc[doc.index("## Investigations"):doc.index("## The REPL")]
    blocks = section.split("```lua\n")[1:]
    scripts = [b[: b.index("```")] for b in blocks]
    fix = lambda s: (s.replace('"./c_debugee"', f'"{fixtures_dir / "c_debugee"}"')
                      .replace('"./crash"', f'"{fixtures_dir / "crash"}"')
                      .replace('projectRoot = "."', f'projectRoot = "{SRC}"'))
    return [fix(s) for s in scripts]


async def test_the_documented_investigations_work(strobe_home, fixtures_dir):
    drift, crash, race = investigation_scripts(fixtures_dir)
    async with mcp_client(strobe_home) as c:
        r = await c.call("debug_script", script=drift, timeoutMs=90000)
        res = r["result"]
        assert res["reason"] == "stopped" and res["at"] == line_of("MIX_BODY"), r
        assert [h["size"] for h in res["seen"]] == [64, 128, -256]
        assert r["sessions"] == [res["keep"]]
        st = await c.call("debug_session", action="status", sessionId=res["keep"])
        assert st["status"] == "paused", st  # kept where the script stopped
        await c.call("debug_session", action="stop", sessionId=res["keep"])

        r = await c.call("debug_script", script=crash, timeoutMs=90000)
        res = r["result"]
        assert res["crash"].startswith("SIGSEGV") and "write_through" in res["crash"], r
        assert [x["fn"] for x in res["lastCalls"]][-2:] == ["crash_in", "write_through"], res

        r = await c.call("debug_script", script=race, timeoutMs=90000)
        res = r["result"]
        assert len(res["enterOrder"]) == 6 and len(set(res["enterOrder"])) == 2, r
        assert isinstance(res["overlaps"], list)


async def test_a_runaway_hint_rule_is_skipped(strobe_home, fixtures_dir):
    hints = strobe_home / "scripts" / "hints"
    hints.mkdir(parents=True)
    (hints / "spin.lua").write_text(
        'return { name = "spin", when = "launch", rule = function() while true do end end }\n')
    async with mcp_client(strobe_home) as c:
        r = await c.call("debug_launch", command=str(fixtures_dir / "c_debugee"), args=["calls"], projectRoot=str(SRC))
        # The runaway rule was interrupted (1 s budget) and skipped; the others still speak.
        assert "debug_query" in r["nextSteps"], r
        await c.call("debug_session", action="stop", sessionId=r["sessionId"])


async def test_hit_eval_reads_an_expression_in_the_paused_frame(strobe_home, fixtures_dir):
    script = f"""
local s = {launch_lua(fixtures_dir, "mix")}
s:wait_for{{eventType="stdout", text="ready", timeoutMs=20000}}
if s.eval == nil then return {{noEval = true}} end
local seen = {{}}
s:on_break("debugee.c:{line_of("MIX_BODY")}", function(hit)
  seen[#seen + 1] = {{hit:eval("buffer_size"), hit:eval("index")}}
end)
s:stdin("go\\n")
s:run{{timeoutMs = 60000}}
return {{seen = seen}}
"""
    async with mcp_client(strobe_home) as c:
        r = await c.call("debug_script", script=script, timeoutMs=90000)
    assert "error" not in r, r
    if r["result"].get("noEval"):
        pytest.skip("session:eval (debug_eval) is not in this build yet")
    assert r["result"]["seen"] == [[64, 0], [128, 1], [-256, 2], [512, 3]], r
