"""debug_eval through a real MCP client: expressions at a pause, checked against what gdb
prints for the same expressions at the same line of the same binary."""

import re
import subprocess

import pytest

from conftest import REPO, mcp_client, thread_report

pytestmark = pytest.mark.anyio

SRC = REPO / "tests" / "fixtures" / "c" / "eval.c"


def line_of(marker: str) -> int:
    for i, text in enumerate(SRC.read_text().splitlines(), start=1):
        if marker in text:
            return i
    raise AssertionError(marker)


async def paused(c, binary, tmp_path, **point):
    go = tmp_path / "go"
    r = await c.call("debug_launch", command=str(binary), args=[str(go)], projectRoot=str(SRC.parent))
    sid = r["sessionId"]
    await c.wait_for(sid, "ready", eventType="stdout")
    await c.call("debug_breakpoint", sessionId=sid, add=[point])
    go.write_text("go")
    p = await c.call("debug_continue", sessionId=sid, action="inspect", timeoutMs=30000)
    assert p["status"] == "paused", p
    return sid


def results(r):
    return {x["expression"]: x for x in r["results"]}


def gdb_print(binary, line, exprs, frame=0):
    """What gdb prints for each expression at eval.c:line (frame N), as raw text."""
    cmd = ["gdb", "-batch", "-nx", "-ex", f"break eval.c:{line}", "-ex", "run"]
    if frame:
        cmd += ["-ex", f"frame {frame}"]
    for e in exprs:
        cmd += ["-ex", f"print {e}"]
    out = subprocess.run(cmd + [str(binary)], capture_output=True, text=True, timeout=60).stdout
    values = [m.group(1) for m in re.finditer(r"^\$\d+ = (.*)$", out, re.M)]
    assert len(values) == len(exprs), out
    return dict(zip(exprs, values))


def same_as_gdb(ours, theirs):
    """Our JSON value against gdb's text for scalars, enums, chars and strings."""
    if isinstance(ours, bool):
        return theirs in ("true", "false") and (theirs == "true") == ours or theirs == str(int(ours))
    if isinstance(ours, (int, float)):
        return float(theirs.split()[0]) == float(ours)
    if isinstance(ours, str):
        quoted = re.search(r'"(.*)"', theirs)
        if quoted:
            return quoted.group(1) == ours
        char = re.match(r"-?\d+ '(.*)'", theirs)
        if char:
            return char.group(1) == ours or theirs.split()[0] == ours
        return theirs == ours or theirs.startswith(ours)
    return False


SCALARS = [
    "len", "factor", "sum", "q->len", "q->cap", "q->items[q->tail].key", "q->items[1].name", "top->name",
    "top->state", "q->items[1].state", "q->items[2].flags.urgent", "q->items[3].flags.delta",
    "q->items[3].flags.retries", "q->label[0]", "g_scale * 2 + 1", "g_total", "sizeof(struct job)",
    "sizeof q->items", "q->first->next->next->key", "q->items[0].weight + 0.25", "g_word.u", "g_word.bytes[3]",
    "(unsigned char)-1", "-len / 3", "len % 3", "1 << 40", "g_ratio * 4", "RUNNING + 1", "top - q->first",
    "q->items[3].next == 0", "(char)(q->items[0].key + 55)", "~len", "len > 3 && q->cap == 8", "!len",
]


async def test_eval_matches_gdb_at_the_same_pause(strobe_home, fixtures_dir, tmp_path):
    binary = fixtures_dir / "c_eval"
    line = line_of("WEIGH_RESULT")
    expected = gdb_print(binary, line, SCALARS)
    async with mcp_client(strobe_home) as c:
        sid = await paused(c, binary, tmp_path, file="eval.c", line=line)
        r = await c.call("debug_eval", sessionId=sid, expressions=SCALARS[:32])
        assert r["frame"]["function"] == "weigh" and r["frame"]["line"] == line, r["frame"]
        got = results(r)
        got.update(results(await c.call("debug_eval", sessionId=sid, expressions=SCALARS[32:])))
        wrong = {e: (got[e].get("value", got[e].get("error")), expected[e]) for e in SCALARS if not same_as_gdb(got[e].get("value"), expected[e])}
        assert not wrong, wrong

        # Types as C spells them; lvalues carry their address.
        assert got["q->len"]["type"] == "int" and got["q->len"]["address"].startswith("0x")
        assert got["top->state"]["type"] == "enum state"
        assert got["len > 3 && q->cap == 8"]["type"] == "bool"

        # Frame 1 is the caller (run), with its own parameter q.
        up = await c.call("debug_eval", sessionId=sid, frame=1, expressions=["q->cap", "q->items[1].key", "$pc"])
        assert up["frame"]["function"] == "run" and up["frame"]["line"] == line_of("RUN_CALL"), up["frame"]
        assert [x.get("value") for x in up["results"][:2]] == [8, 20], up
        top = await c.call("debug_eval", sessionId=sid, frame=2, expressions=["g_queue.cap"])
        assert top["frame"]["function"] == "main" and top["results"][0]["value"] == 8, top


async def test_eval_values_structs_pointers_and_strings(strobe_home, fixtures_dir, tmp_path):
    async with mcp_client(strobe_home) as c:
        sid = await paused(c, fixtures_dir / "c_eval", tmp_path, file="eval.c", line=line_of("WEIGH_RESULT"))
        r = results(await c.call("debug_eval", sessionId=sid, depth=1,
                                 expressions=["*top", "q->first", "g_greeting", "q->label", "*q->items@2", "&q->items[1]", "$sp"]))
        job = r["*top"]["value"]
        assert r["*top"]["type"] == "struct job"
        assert job["key"] == 30 and job["name"] == "gamma" and job["state"] == "IDLE" and job["weight"] == 1.5, job
        first = r["q->first"]["value"]
        assert first["@"].startswith("0x") and first["key"] == 10 and first["name"] == "alpha", first
        assert r["g_greeting"]["value"] == "hello, eval"
        assert r["q->label"]["value"] == "jobs"
        pair = r["*q->items@2"]["value"]
        assert [j["key"] for j in pair] == [10, 20] and r["*q->items@2"]["type"] == "struct job[2]"
        assert r["&q->items[1]"]["type"] == "struct job *"
        # Pause reports show parameters in the same value model (one level), not raw hex.
        st = await c.call("debug_session", action="status", sessionId=sid)
        q, length, factor = st["pausedThreads"][0]["arguments"]
        assert q["@"].startswith("0x") and q["len"] == 4 and q["label"] == "jobs", q
        assert (length, factor) == (4, 1.5), st["pausedThreads"][0]["arguments"]
        assert int(r["$sp"]["value"] if isinstance(r["$sp"]["value"], str) else r["$sp"]["value"]["@"], 16) > 0


async def test_eval_writes_change_the_program_and_errors_point_at_the_token(strobe_home, fixtures_dir, tmp_path):
    async with mcp_client(strobe_home) as c:
        sid = await paused(c, fixtures_dir / "c_eval", tmp_path, file="eval.c", line=line_of("WEIGH_RESULT"))
        bad = results(await c.call("debug_eval", sessionId=sid, expressions=[
            "nope + 1", "top->nxt", "q->items[3].next->key", "len / 0", "q->", "(struct nosuch *)q", "weigh(q, 1, 1.0)",
        ]))
        assert "no variable 'nope'" in bad["nope + 1"]["error"] and bad["nope + 1"]["position"] == 0
        assert "unknown field 'nxt' in struct job; fields: key, name, weight, state, flags, next" in bad["top->nxt"]["error"]
        assert bad["top->nxt"]["position"] == 5
        assert "null pointer" in bad["q->items[3].next->key"]["error"]
        assert "division by zero" in bad["len / 0"]["error"] and bad["len / 0"]["position"] == 6
        assert "field name" in bad["q->"]["error"]
        assert "unknown type 'struct nosuch'" in bad["(struct nosuch *)q"]["error"]
        assert "function calls" in bad["weigh(q, 1, 1.0)"]["error"]

        e = await c.error("debug_eval", sessionId=sid, expressions=["x" * 10000])
        assert e.code == "VALIDATION_ERROR"
        e = await c.error("debug_eval", sessionId=sid, expressions=["len"], frame=99)
        assert e.code == "VALIDATION_ERROR" and "beyond the stack" in e.message
        e = await c.error("debug_eval", sessionId=sid, expressions=["len"], threadId=1)
        assert e.code == "NOT_PAUSED"

        # Writes through expressions: the program computes with the new values.
        w = results(await c.call("debug_eval", sessionId=sid, expressions=["sum = 100", "len = 2", "sum"]))
        assert w["sum = 100"]["value"] == 100 and w["sum"]["value"] == 100
        done = await c.call("debug_continue", sessionId=sid, action="continue", timeoutMs=30000)
        assert done["status"] == "exited", done
        await c.wait_for(sid, "weigh 30 jobs 150", eventType="stdout")
        await c.wait_for(sid, "len=2", eventType="stdout")

        # Not paused any more: a clear NOT_PAUSED or PROCESS_EXITED, never a crash.
        e = await c.error("debug_eval", sessionId=sid, expressions=["len"])
        assert e.code in ("NOT_PAUSED", "PROCESS_EXITED"), e


async def test_eval_reads_registers_and_optimized_locals_at_O2(strobe_home, fixtures_dir, tmp_path):
    binary = fixtures_dir / "c_eval_O2"
    async with mcp_client(strobe_home) as c:
        sid = await paused(c, binary, tmp_path, **{"function": "weigh"})
        r = results(await c.call("debug_eval", sessionId=sid, expressions=["len", "q->cap", "q->items[q->tail].name"]))
        assert r["len"]["value"] == 4, r
        assert r["q->cap"]["value"] == 8, r
        assert r["q->items[q->tail].name"]["value"] == "gamma", r


def marker_line(path, marker):
    for i, text in enumerate(path.read_text().splitlines(), start=1):
        if marker in text:
            return i
    raise AssertionError(marker)


CPP = REPO / "tests" / "fixtures" / "cpp" / "containers.cpp"
RUST = REPO / "tests" / "fixtures" / "rust" / "values.rs"


async def stopped_before(c, binary, src, marker):
    """Launch with a breakpoint on the line holding `marker` (set before main runs)."""
    r = await c.call("debug_launch", command=str(binary), projectRoot=str(src.parent),
                     breakpoints=[{"file": src.name, "line": marker_line(src, marker)}])
    p = await c.call("debug_continue", sessionId=r["sessionId"], action="inspect", timeoutMs=30000)
    if p["status"] != "paused":
        # Seen in CI twice (the breakpoint counted a hit, no pause reported, the process
        # running): say where each thread was.
        st = await c.call("debug_session", action="status", sessionId=r["sessionId"])
        raise AssertionError({"continue": p, "launch": r, "status": st, "threads": thread_report(r["pid"])})
    return r["sessionId"]


async def test_eval_cpp_containers_and_expressions_over_them(strobe_home, fixtures_dir):
    async with mcp_client(strobe_home) as c:
        sid = await stopped_before(c, fixtures_dir / "cpp_containers", CPP, "raise(SIGSTOP)")
        exprs = ["g_vec", "g_vec[2]", "g_vec_str[1]", "g_map", "g_opt_some", "g_opt_none", "g_uptr->y",
                 "g_short == \"hi\"", "g_long", "g_arr[3] + g_vec[0]", "g_derived.id", "g_color", "(int)g_color + 1",
                 "sizeof(Point)", "g_node_a.next->next->value", "g_set", "g_umap", "g_span", "g_vec[3]"]
        r = results(await c.call("debug_eval", sessionId=sid, expressions=exprs))
        v = {e: r[e].get("value", r[e].get("error")) for e in exprs}
        assert v["g_vec"] == [1, 2, 3], v
        assert v["g_vec[2]"] == 3 and v["g_vec_str[1]"] == "yz", v
        assert v["g_map"] == {"one": 1, "three": 3, "two": 2}, v
        assert v["g_opt_some"] == 42 and v["g_opt_none"] is None, v
        assert v["g_uptr->y"] == 2 and v["g_short == \"hi\""] is True, v
        assert v["g_long"] == "a string that is longer than fifteen chars", v
        assert v["g_arr[3] + g_vec[0]"] == 41 and v["g_derived.id"] == 7, v
        assert v["g_color"] == "BLUE" and v["(int)g_color + 1"] == 3 and v["sizeof(Point)"] == 8, v
        assert v["g_node_a.next->next->value"] == 1, v
        assert v["g_set"] == [1, 3, 5] and v["g_span"] == [4, 5, 6], v
        assert "out of range for length 3" in r["g_vec[3]"]["error"], r["g_vec[3]"]
        await c.call("debug_session", action="stop", sessionId=sid)


async def test_a_process_that_stopped_itself_is_named_and_continued(strobe_home, fixtures_dir):
    """No breakpoint: cpp_containers runs into its raise(SIGSTOP). 'running' alone would have
    an LLM wait for a pause that cannot come; the answer names the stopped process, and
    'continue' sends it SIGCONT."""
    async with mcp_client(strobe_home) as c:
        r = await c.call("debug_launch", command=str(fixtures_dir / "cpp_containers"), projectRoot=str(CPP.parent))
        sid, pid = r["sessionId"], r["pid"]
        for _ in range(40):
            p = await c.call("debug_continue", sessionId=sid, action="inspect", timeoutMs=500)
            if p.get("stoppedBySignal"):
                break
        assert p["status"] == "running" and p["stoppedBySignal"] == [pid], p
        assert "SIGCONT" in p["nextSteps"] and any("stopped by a signal" in w for w in p["warnings"]), p
        done = await c.call("debug_continue", sessionId=sid, timeoutMs=20000)
        assert done["status"] == "exited" and done.get("exitCode") == 0, done  # 3 elements + 2 owners - 5
        assert any("sent it SIGCONT" in w for w in done["warnings"]), done


async def test_eval_rust_enums_options_and_strings(strobe_home, fixtures_dir):
    async with mcp_client(strobe_home) as c:
        sid = await stopped_before(c, fixtures_dir / "rust_values", RUST, "raise(19)")
        exprs = ["NUMS", "NUMS[1] * 10", "NAME", "NAME == \"hello\"", "SOME", "NONE", "OK", "ERR", "FIELDLESS",
                 "CIRCLE", "RECT", "NICHE_FLAG", "NICHE_OTHER", "OPT_NZ", "GREETING", "SLICE[2]", "WORDS[1]",
                 "ANSWER + 1", "NUMS.len", "HUGE"]
        r = results(await c.call("debug_eval", sessionId=sid, expressions=exprs))
        v = {e: r[e].get("value", r[e].get("error")) for e in exprs}
        assert v["NUMS"] == [1, 2, 3] and v["NUMS[1] * 10"] == 20 and v["NUMS.len"] == 3, v
        assert v["NAME"] == "hello" and v["NAME == \"hello\""] is True, v
        assert v["SOME"] == 5 and v["NONE"] is None, v
        assert v["OK"] == {"Ok": 3} and v["ERR"] == {"Err": "bad"}, v
        assert v["FIELDLESS"] == "Gamma", v
        assert v["CIRCLE"] == {"Circle": 1.5} and v["RECT"] == {"Rect": {"w": 3, "h": 4}}, v
        assert v["NICHE_FLAG"] == {"Flag": True} and v["NICHE_OTHER"] == "Other", v
        assert v["OPT_NZ"] == 17, v
        assert v["GREETING"] == "hi there" and v["SLICE[2]"] == 9 and v["WORDS[1]"] == "bc", v
        assert v["ANSWER + 1"] == 43, v
        assert v["HUGE"] in (18446744073709551615, "18446744073709551615"), v
        await c.call("debug_session", action="stop", sessionId=sid)


async def test_compiled_conditions_and_templates_in_the_expression_language(strobe_home, fixtures_dir, tmp_path):
    go = tmp_path / "go"
    async with mcp_client(strobe_home) as c:
        r = await c.call("debug_launch", command=str(fixtures_dir / "c_eval"), args=[str(go)], projectRoot=str(SRC.parent))
        sid = r["sessionId"]
        await c.wait_for(sid, "ready", eventType="stdout")
        # A condition over struct fields through pointers, a logpoint template in the same
        # language, and a condition that reads through a null pointer at run time.
        await c.call("debug_breakpoint", sessionId=sid, add=[
            {"function": "weigh", "message": "len={len} tail={q->items[q->tail].name} state={top->state}"},
            {"function": "run", "condition": "q->items[3].next->key > 0"},
            {"function": "weigh", "condition": "q->items[q->tail].key == 30 && len == 4 && g_scale * 2 == 6"},
        ])
        bad = await c.error("debug_breakpoint", sessionId=sid, add=[{"function": "weigh", "condition": "len >"}])
        assert bad.code == "EVAL_ERROR" and "column" in bad.message, bad.message
        go.write_text("go")
        p = await c.call("debug_continue", sessionId=sid, action="inspect", timeoutMs=30000)
        assert p["status"] == "paused" and p["function"] == "weigh", p
        errors = await c.call("debug_query", sessionId=sid, eventType="condition_error", verbose=True)
        assert errors["totalCount"] == 1 and "q->items[3].next->key > 0" in errors["events"][0]["text"], errors
        await c.call("debug_continue", sessionId=sid, action="continue", timeoutMs=30000)
        logs = await c.call("debug_query", sessionId=sid, eventType="logpoint", verbose=True)
        # At weigh's entry `top` is not assigned yet: its placeholder says why, the others show values.
        message = logs["events"][0].get("logpointMessage") or logs["events"][0]["text"]
        assert message.startswith("len=4 tail=gamma state="), message


async def test_entry_values_of_optimized_parameters_like_gdb(strobe_home, fixtures_dir, tmp_path):
    """At -O2, `q` in weigh's last line lives only as DW_OP_entry_value(rdi): recovered from
    the caller's call site as gdb does (q@entry); `len`, which the caller did not record, says so."""
    binary = fixtures_dir / "c_eval_O2"
    line = line_of("WEIGH_RETURN")
    expected = gdb_print(binary, line, ["q->cap", "q->items[q->tail].key"])
    async with mcp_client(strobe_home) as c:
        sid = await paused(c, binary, tmp_path, file="eval.c", line=line)
        r = results(await c.call("debug_eval", sessionId=sid, expressions=["q->cap", "q->items[q->tail].key", "len"]))
        assert str(r["q->cap"]["value"]) == expected["q->cap"] == "8", (r, expected)
        assert str(r["q->items[q->tail].key"]["value"]) == expected["q->items[q->tail].key"], (r, expected)
        assert "optimized out" in r["len"]["error"], r["len"]
        # A line the optimizer left without instructions of its own: a clear error (it used to
        # crash the Lua worker with an index out of bounds), and the session keeps working.
        try:
            await c.call("debug_breakpoint", sessionId=sid, add=[{"file": "eval.c", "line": line_of("WEIGH_RESULT")}])
        except Exception as e:  # noqa: BLE001 - the code is what matters
            assert getattr(e, "code", None) == "NO_CODE_AT_LINE", e
        again = results(await c.call("debug_eval", sessionId=sid, expressions=["q->cap"]))
        assert again["q->cap"]["value"] == 8


RVO = REPO / "tests" / "fixtures" / "cpp" / "rvo.cpp"


async def test_a_named_return_value_is_read_through_the_hidden_pointer(strobe_home, fixtures_dir, tmp_path):
    """C++ NRVO: `b` lives in the caller's buffer, located by DW_OP_fbreg + DW_OP_deref
    (issue 14 item 6: it read as 'b cannot be read here'). Values as gdb prints them."""
    binary = fixtures_dir / "cpp_rvo"
    line = marker_line(RVO, "RVO_RETURN")
    cmd = ["gdb", "-batch", "-nx", "-ex", f"break rvo.cpp:{line}", "-ex", "run",
           "-ex", "print b.count", "-ex", "print b.cells[0]", "-ex", "print b.cells[7]", str(binary)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout
    expected = [m.group(1) for m in re.finditer(r"^\$\d+ = (.*)$", out, re.M)]
    assert expected == ["3", "7", "-1"], out
    go = tmp_path / "go"
    async with mcp_client(strobe_home) as c:
        r = await c.call("debug_launch", command=str(binary), args=[str(go)], projectRoot=str(RVO.parent))
        sid = r["sessionId"]
        await c.wait_for(sid, "ready", eventType="stdout")
        await c.call("debug_breakpoint", sessionId=sid, add=[{"file": "rvo.cpp", "line": line}])
        go.write_text("go")
        p = await c.call("debug_continue", sessionId=sid, action="inspect", timeoutMs=30000)
        assert p["status"] == "paused", p
        b = next(v for v in p["locals"] if v["name"] == "b")
        assert b["value"]["count"] == 3 and b["value"]["cells"][0] == 7, b
        got = results(await c.call("debug_eval", sessionId=sid, expressions=["b.count", "b.cells[0]", "b.cells[7]"]))
        assert [str(got[e]["value"]) for e in ["b.count", "b.cells[0]", "b.cells[7]"]] == expected, got
