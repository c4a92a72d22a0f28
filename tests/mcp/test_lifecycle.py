"""Process lifecycle through a real MCP client: crash capture (one crash event per fatal
signal, symbolized backtrace, the events before it kept), exit status (code, crash signal,
outside kill), fork/exec children followed with their pids, thread names on events."""

import os
import re
import signal
import time

import pytest

from conftest import REPO, mcp_client, pid_alive, _sleep

pytestmark = pytest.mark.anyio


def first_arg(e):
    """The first argument of an integer-only function: typed by the daemon from the hook's
    words ({"n": 1}), or a raw word in processes without the session's image (an exec)."""
    args = e["arguments"]
    return next(iter(args.values())) if isinstance(args, dict) else int(args[0], 16)

# Children are followed by default; STROBE_FOLLOW_CHILDREN=0 in the daemon's environment
# turns it off. The fixtures set it either way so each test says what it relies on.
@pytest.fixture
def follow_children(monkeypatch):
    monkeypatch.setenv("STROBE_FOLLOW_CHILDREN", "1")


@pytest.fixture
def no_follow(monkeypatch):
    monkeypatch.setenv("STROBE_FOLLOW_CHILDREN", "0")


SRC = REPO / "tests" / "fixtures" / "c"
CRASH_C = (SRC / "crash.c").read_text().splitlines()


def line_of(text: str) -> int:
    """1-based line of the first line of crash.c containing `text`."""
    return next(i + 1 for i, l in enumerate(CRASH_C) if text in l)


# mode -> (signal, function of the crash site, its line, memory operation or None)
CRASHES = {
    "segv": ("SIGSEGV", "write_through", line_of("the SIGSEGV line"), "write"),
    "read": ("SIGSEGV", "read_through", line_of("return *source;"), "read"),
    "abort": ("SIGABRT", "crash_in", line_of('"abort") == 0) abort()'), None),
    "assert": ("SIGABRT", "check_positive", line_of("assert(value > 0)"), None),
    "fpe": ("SIGFPE", "divide", line_of("the SIGFPE line"), None),
    "ill": ("SIGILL", "illegal_instruction", line_of("__builtin_trap()"), None),
    "bus": ("SIGBUS", "read_past_end", line_of("return p[0];"), "read"),
}


async def query_all(c, sid, **q):
    return (await c.call("debug_query", sessionId=sid, limit=500, verbose=True, **q))["events"]


@pytest.mark.parametrize("mode", list(CRASHES))
async def test_crash_capture(strobe_home, fixtures_dir, mode):
    sig, func, line, op = CRASHES[mode]
    async with mcp_client(strobe_home) as c:
        await c.call("debug_trace", add=["step", "crash_in"])
        r = await c.call("debug_launch", command=str(fixtures_dir / "crash"), args=[mode], projectRoot=str(SRC))
        sid, pid = r["sessionId"], r["pid"]
        await c.wait_for(sid, "", eventType="crash", timeout=30)
        st = await c.wait_status(sid)

        crashes = await query_all(c, sid, eventType="crash")
        assert len(crashes) == 1, crashes
        crash = crashes[0]
        assert crash["signal"] == sig, crash
        assert crash["pid"] == pid
        assert crash["threadId"] == pid, "the main thread crashed"
        assert crash["registers"]["rip"] and crash["registers"]["rsp"], crash["registers"]
        # The crash site, symbolized from DWARF with file:line.
        assert crash.get("function") == func, crash
        assert crash["sourceFile"].endswith("crash.c") and crash["line"] == line, crash
        assert crash["text"].startswith(sig), crash["text"]
        if op:
            assert f"invalid {op}" in crash["text"], crash["text"]
        if mode == "segv":
            assert crash["faultAddress"] == "0x0"
        # The backtrace names the fixture's functions, innermost first, with file:line.
        frames = [f for f in crash["backtrace"] if f.get("file", "").endswith("crash.c")]
        names = [f["function"] for f in frames]
        assert names[-1] == "main", names
        assert names.index(func) < names.index("main"), names
        if func != "crash_in":
            assert "crash_in" in names, names
        main_frame = frames[-1]
        assert main_frame["line"] == line_of("int r = crash_in(mode);"), main_frame

        # Everything that led up to the crash is in the timeline, before it.
        enters = await query_all(c, sid, eventType="function_enter", function={"equals": "step"})
        assert [first_arg(e) for e in enters] == [1, 2, 3]
        assert all(e["eventId"] < crash["eventId"] for e in enters)
        crash_in = await query_all(c, sid, eventType="function_enter", function={"equals": "crash_in"})
        assert len(crash_in) == 1 and crash_in[0]["eventId"] < crash["eventId"]
        out = await query_all(c, sid, eventType="stdout")
        assert "step 3" in "".join(e["text"] for e in out)
        if mode == "assert":
            await c.wait_for(sid, "Assertion", eventType="stderr")

        # The session ended with that signal.
        assert st["signal"] == sig, st
        assert st.get("exitCode") is None and st["exitReason"] == f"signal: {sig}", st
        err = await c.error("debug_trace", sessionId=sid, add=["step"])
        assert err.code == "PROCESS_EXITED" and f"signal: {sig}" in err.message, err.message
        assert not pid_alive(pid)


@pytest.mark.parametrize("code", [0, 3])
async def test_exit_code(strobe_home, fixtures_dir, code):
    async with mcp_client(strobe_home) as c:
        r = await c.call("debug_launch", command=str(fixtures_dir / "crash"), args=["exit", str(code)],
                         projectRoot=str(SRC))
        st = await c.wait_status(r["sessionId"])
        assert st["exitCode"] == code and st.get("signal") is None, st
        assert st["exitReason"] == f"code: {code}", st
        err = await c.error("debug_trace", sessionId=r["sessionId"], add=["step"])
        assert f"code: {code}" in err.message, err.message
        assert (await query_all(c, r["sessionId"], eventType="crash")) == []
        # The code survives the end of the live session (retained row).
        await c.call("debug_session", action="stop", sessionId=r["sessionId"], retain=True)
        st = await c.call("debug_session", action="status", sessionId=r["sessionId"])
        assert st["exitCode"] == code, st


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
async def test_killed_from_outside(strobe_home, fixtures_dir, sig):
    async with mcp_client(strobe_home) as c:
        r = await c.call("debug_launch", command=str(fixtures_dir / "crash"), args=["sleep"], projectRoot=str(SRC))
        sid, pid = r["sessionId"], r["pid"]
        await c.wait_for(sid, "step 3", eventType="stdout")
        os.kill(pid, sig)
        st = await c.wait_status(sid)
        assert st.get("exitCode") is None, st
        # The kernel's status when the host saw it first, else an honest "could not observe".
        name = signal.Signals(sig).name
        assert st["exitReason"] == f"signal: {name}" or "kill -9" in st["exitReason"], st
        assert (await query_all(c, sid, eventType="crash")) == [], "an outside kill is not a crash"


async def child_returns_through_traced_frame(c, fixtures_dir, followed=False):
    """forker return: the child returns through fork_in_helper, a traced (on C integer
    functions: replaceFast-wrapped) frame its fork copied. It must exit 9, not crash."""
    await c.call("debug_trace", add=["fork_in_helper", "child_work", "parent_work"])
    r = await c.call("debug_launch", command=str(fixtures_dir / "forker"), args=["return"], projectRoot=str(SRC))
    st = await c.wait_status(r["sessionId"])
    why = {k: st.get(k) for k in ("status", "exitReason", "signal", "children")}
    if followed and st.get("exitCode") is None:
        # The documented Frida race (docs/performance.md, "Fork/exec following"): forking
        # inside a traced function, the child's teardown can end the parent's session just
        # as the parent exits. Strobe must say so, not invent a status.
        assert st["status"] == "exited" and "Frida had ended its session" in st["exitReason"], why
    else:
        assert st.get("exitCode") == 0, why
    out = "".join(e["text"] for e in await query_all(c, r["sessionId"], eventType="stdout"))
    assert re.search(r"child \d+ exited 9", out), out
    return r["sessionId"]


async def test_unfollowed_child_returns_through_a_traced_frame(strobe_home, fixtures_dir, no_follow):
    async with mcp_client(strobe_home) as c:
        sid = await child_returns_through_traced_frame(c, fixtures_dir)
        entered = await query_all(c, sid, eventType="function_exit", function={"equals": "fork_in_helper"})
        assert len(entered) == 1, entered  # the parent's return; the child is not traced


async def test_followed_child_returns_through_a_traced_frame(strobe_home, fixtures_dir, follow_children):
    async with mcp_client(strobe_home) as c:
        sid = await child_returns_through_traced_frame(c, fixtures_dir, followed=True)
        kids = (await c.call("debug_session", action="status", sessionId=sid))["children"]
        assert [k["exitCode"] for k in kids] == [9], kids


async def test_patterns_changed_while_a_child_runs_reach_it(strobe_home, fixtures_dir, follow_children):
    async with mcp_client(strobe_home) as c:
        r = await c.call("debug_launch", command=str(fixtures_dir / "forker"), args=["tick"], projectRoot=str(SRC))
        sid, pid = r["sessionId"], r["pid"]
        out = await c.wait_for(sid, "work 3", eventType="stdout")
        child_pid = int(re.search(r"child pid (\d+) work 3", "".join(e["text"] for e in out["events"])).group(1))

        await c.call("debug_trace", sessionId=sid, add=["child_work"])
        await c.wait_for(sid, "child_work", eventType="function_enter", pid=child_pid)

        await c.call("debug_trace", sessionId=sid, remove=["child_work"])
        await _sleep(0.3)  # calls already past the hook when it went
        before = len(await query_all(c, sid, eventType="function_enter", pid=child_pid))
        await _sleep(0.5)  # 20 more calls
        after = len(await query_all(c, sid, eventType="function_enter", pid=child_pid))
        assert after == before, (before, after)
        await c.call("debug_session", action="stop", sessionId=sid)
        assert not pid_alive(child_pid) and not pid_alive(pid)


async def test_forks_trace_like_the_session(strobe_home, fixtures_dir, follow_children):
    """Typed-argument recipes, watches and serializationDepth set while a fork runs reach it,
    and the forks born afterwards get them when they are instrumented."""
    async with mcp_client(strobe_home) as c:
        r = await c.call("debug_launch", command=str(fixtures_dir / "forker"), args=["label"], projectRoot=str(SRC))
        sid = r["sessionId"]
        out = await c.wait_for(sid, "work 3", eventType="stdout")
        ticker = int(re.search(r"child pid (\d+) work 3", "".join(e["text"] for e in out["events"])).group(1))

        await c.call("debug_trace", sessionId=sid, add=["child_label"], serializationDepth=2,
                     watches={"add": [{"variable": "sink", "on": ["child_label"]}]})

        async def calls_with_watches(late):
            """child_label calls of the ticker (or of forks born later) that carry watch values."""
            for _ in range(300):
                events = await query_all(c, sid, eventType="function_enter", function={"equals": "child_label"})
                hits = [e for e in events if (e["pid"] != ticker) == late and e.get("watchValues")]
                if hits:
                    return hits
                await _sleep(0.1)
            raise AssertionError(f"no child_label call with watch values (late={late}); last: {events[-3:]}")

        # The ticker was running when the trace was set: its hooks took the recipes, watches too.
        e = (await calls_with_watches(late=False))[-1]
        assert e["arguments"]["tag"] == "tick" and isinstance(e["arguments"]["i"], int), e
        assert isinstance(e["watchValues"]["sink"], int), e
        # A fork born after the trace was set: instrumented with all of it from the start.
        e = (await calls_with_watches(late=True))[-1]
        assert e["arguments"]["tag"] == "late" and isinstance(e["arguments"]["i"], int), e
        assert isinstance(e["watchValues"]["sink"], int), e
        await c.call("debug_session", action="stop", sessionId=sid)


async def test_breakpoints_pause_a_forked_child(strobe_home, fixtures_dir, follow_children):
    """A breakpoint set while a fork runs pauses the fork's thread (with its pid); locals,
    debug_memory with that pid, stepping and continuing act on that process; removing the
    breakpoint lets it run on."""
    def local(r, name):
        return next(v["value"] for v in r["locals"] if v["name"] == name)

    async with mcp_client(strobe_home) as c:
        r = await c.call("debug_launch", command=str(fixtures_dir / "forker"), args=["tick"], projectRoot=str(SRC))
        sid, pid = r["sessionId"], r["pid"]
        out = await c.wait_for(sid, "work 3", eventType="stdout")
        child = int(re.search(r"child pid (\d+) work 3", "".join(e["text"] for e in out["events"])).group(1))

        bp = await c.call("debug_breakpoint", sessionId=sid, add=[{"function": "child_work"}])
        bp_id = bp["breakpoints"][0]["id"]
        p = await c.call("debug_continue", sessionId=sid, action="inspect", timeoutMs=30000)
        assert p["status"] == "paused" and p["function"] == "child_work", p
        assert p["pid"] == child and p["threadId"] == child, p
        i = local(p, "i")
        st = await c.call("debug_session", action="status", sessionId=sid)
        assert [(t["pid"], t["threadId"]) for t in st["pausedThreads"]] == [(child, child)], st
        # Globals of that process: the fork's sink holds 1 + ... + (i - 1), the root's 0.
        mem = lambda **k: c.call("debug_memory", sessionId=sid, targets=[{"variable": "sink"}], **k)
        assert (await mem(pid=child))["results"][0]["value"] == i * (i - 1) // 2
        assert (await mem())["results"][0]["value"] == 0
        e = await c.error("debug_memory", sessionId=sid, targets=[{"variable": "sink"}], pid=1)
        assert e.code == "VALIDATION_ERROR" and str(child) in e.message, e.message

        s = await c.call("debug_continue", sessionId=sid, action="step-over", timeoutMs=30000)
        assert s["status"] == "paused" and s["reason"] == "step" and s["pid"] == child, s
        assert s["function"] == "child_work" and s["line"] > p["line"], (p, s)
        n = await c.call("debug_continue", sessionId=sid, action="continue", timeoutMs=30000)
        assert n["status"] == "paused" and n["pid"] == child and local(n, "i") == i + 1, n

        await c.call("debug_breakpoint", sessionId=sid, remove=[bp_id])
        await c.wait_for(sid, f"child pid {child} work {i + 4}", eventType="stdout")
        st = await c.call("debug_session", action="status", sessionId=sid)
        assert st["pausedThreads"] == [] and st["status"] == "running", st
        await c.call("debug_session", action="stop", sessionId=sid)
        assert not pid_alive(child) and not pid_alive(pid)


async def test_fork_children_are_followed(strobe_home, fixtures_dir, follow_children):
    async with mcp_client(strobe_home) as c:
        await c.call("debug_trace", add=["child_work", "parent_work"])
        r = await c.call("debug_launch", command=str(fixtures_dir / "forker"), args=["fork"], projectRoot=str(SRC))
        sid, pid = r["sessionId"], r["pid"]
        st = await c.wait_status(sid)
        assert st["exitCode"] == 0, st
        out = "".join(e["text"] for e in await query_all(c, sid, eventType="stdout"))
        m = re.search(r"child (\d+) exited (-?\d+)", out)
        assert m and m.group(2) == "7", out
        child_pid = int(m.group(1))
        # The child's own output arrives under the root pid (Frida's output signal).
        await c.wait_for(sid, f"child pid {child_pid} work 3", eventType="stdout")

        children = await query_all(c, sid, eventType="function_enter", function={"equals": "child_work"})
        assert [first_arg(e) for e in children] == [1, 2, 3], children
        assert {e["pid"] for e in children} == {child_pid}
        parents = await query_all(c, sid, eventType="function_enter", function={"equals": "parent_work"})
        assert {e["pid"] for e in parents} == {pid} and len(parents) == 3, parents

        q = await c.call("debug_query", sessionId=sid, eventType="function_enter")
        assert sorted(q["pids"]) == sorted([pid, child_pid]), q.get("pids")
        only_child = await query_all(c, sid, pid=child_pid)
        assert only_child and all(e["pid"] == child_pid for e in only_child)
        assert {e["function"] for e in only_child} == {"child_work"}
        # Exit events pair with their enters inside the child (call ids are per process).
        exits = await query_all(c, sid, eventType="function_exit", function={"equals": "child_work"})
        assert len(exits) == 3 and all(e["pid"] == child_pid for e in exits)

        st = await c.call("debug_session", action="status", sessionId=sid)
        kids = {k["pid"]: k for k in st["children"]}
        assert kids[child_pid]["origin"] == "fork" and kids[child_pid]["exitCode"] == 7, st["children"]


async def test_forks_survive_status_polls(strobe_home, fixtures_dir, follow_children):
    """A status poll asks the agents for breakpoint hits (an RPC). One still in Frida's queues
    when the program forks was answered by the child on the parent's connection: SIGSEGV
    (12 of 120 forks under a tight poll). The fork gate now has the host hold its messages
    around fork() (forksafe.ts, host.py `_fork_intent`). forker label forks 40 short-lived
    children beside a ticking one while a logpoint (never hit) makes every poll an RPC."""
    async with mcp_client(strobe_home) as c:
        await c.call("debug_trace", add=["child_label"])
        r = await c.call("debug_launch", command=str(fixtures_dir / "forker"), args=["label"], projectRoot=str(SRC),
                         breakpoints=[{"function": "execd_work", "message": "never"}])
        sid, polls = r["sessionId"], 0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            st = await c.call("debug_session", action="status", sessionId=sid)
            polls += 1
            if st["status"] == "exited":
                break
        assert st["status"] == "exited" and st["exitCode"] == 0, st
        out = "".join(e["text"] for e in await query_all(c, sid, eventType="stdout"))
        late = re.findall(r"late pid \d+ labelled (\d+)", out)
        assert sorted(map(int, late)) == list(range(1, 41)), (polls, out)
        kids = st["children"]
        assert len(kids) == 41 and all(k.get("exitCode") == 0 for k in kids), [k for k in kids if k.get("exitCode") != 0]
        assert polls > 50, polls  # the polls did run while the program forked


async def test_exec_child_is_reinstrumented(strobe_home, fixtures_dir, follow_children):
    async with mcp_client(strobe_home) as c:
        await c.call("debug_trace", add=["execd_work", "parent_work"])
        r = await c.call("debug_launch", command=str(fixtures_dir / "forker"), args=["exec"], projectRoot=str(SRC))
        sid, pid = r["sessionId"], r["pid"]
        st = await c.wait_status(sid)
        assert st["exitCode"] == 0, st
        out = "".join(e["text"] for e in await query_all(c, sid, eventType="stdout"))
        child_pid = int(re.search(r"execd pid (\d+) work 1", out).group(1))
        execd = await query_all(c, sid, eventType="function_enter", function={"equals": "execd_work"})
        assert [first_arg(e) for e in execd] == [1, 2, 3], execd
        assert {e["pid"] for e in execd} == {child_pid}
        assert child_pid != pid


async def launch_hanging_forker(c, fixtures_dir):
    """forker hang: parent and child both run until killed. (session id, parent, child pid)"""
    r = await c.call("debug_launch", command=str(fixtures_dir / "forker"), args=["hang"], projectRoot=str(SRC))
    out = await c.wait_for(r["sessionId"], "hangs", eventType="stdout")
    child_pid = int(re.search(r"child (\d+) hangs", "".join(e["text"] for e in out["events"])).group(1))
    return r["sessionId"], r["pid"], child_pid


async def test_stop_kills_the_family(strobe_home, fixtures_dir, follow_children):
    async with mcp_client(strobe_home) as c:
        sid, pid, child_pid = await launch_hanging_forker(c, fixtures_dir)
        # The child is followed (attached and resumed) before it prints.
        await c.wait_for(sid, f"child pid {child_pid} work 1", eventType="stdout", timeout=30)
        assert pid_alive(child_pid)
        await c.call("debug_session", action="stop", sessionId=sid)
        # stop returns once the processes are gone (SIGKILL, then waited for).
        assert not pid_alive(pid) and not pid_alive(child_pid)


async def test_stop_kills_an_unfollowed_child(strobe_home, fixtures_dir, no_follow):
    """Not followed, never reported by Frida: still the debuggee's, and stop kills it."""
    async with mcp_client(strobe_home) as c:
        sid, pid, child_pid = await launch_hanging_forker(c, fixtures_dir)
        assert pid_alive(child_pid)
        st = await c.call("debug_session", action="status", sessionId=sid)
        assert st["children"] == [], st["children"]
        await c.call("debug_session", action="stop", sessionId=sid)
        # stop returns once the processes are gone (SIGKILL, then waited for).
        assert not pid_alive(pid) and not pid_alive(child_pid)


async def test_a_process_that_exits_while_a_thread_is_paused(strobe_home, fixtures_dir):
    """exit(3) on the main thread while a worker is paused at a breakpoint: the session ends
    with the program's code (the agent's exit hook, not Frida's exit monitor, reports it) and
    lists no paused thread: they went with the process."""
    async with mcp_client(strobe_home) as c:
        r = await c.call("debug_launch", command=str(fixtures_dir / "threads"), args=["exit"], projectRoot=str(SRC),
                         breakpoints=[{"function": "thread_work"}])
        sid, pid = r["sessionId"], r["pid"]
        p = await c.call("debug_continue", sessionId=sid, action="inspect", timeoutMs=10000)
        assert p["status"] == "paused" and p["threadId"] != pid, p
        st = await c.wait_status(sid)
        assert st["exitCode"] == 3 and st["pausedThreads"] == [], st
        out = await query_all(c, sid, eventType="stdout")
        assert any("main exits" in e["text"] for e in out), out


async def test_thread_names_and_pids_on_events(strobe_home, fixtures_dir):
    async with mcp_client(strobe_home) as c:
        await c.call("debug_trace", add=["thread_work"])
        r = await c.call("debug_launch", command=str(fixtures_dir / "threads"), projectRoot=str(SRC))
        sid, pid = r["sessionId"], r["pid"]
        await c.wait_status(sid)
        evs = await query_all(c, sid, eventType="function_enter")
        assert len(evs) == 2 + 3 + 3 + 3, evs
        assert all(e["pid"] == pid for e in evs)
        by_arg = {first_arg(e): e for e in evs}
        assert by_arg[0]["threadName"] == "threads" and by_arg[0]["threadId"] == pid
        assert {by_arg[i]["threadName"] for i in (10, 11, 12)} == {"worker-1"}
        assert {by_arg[i]["threadName"] for i in (20, 21, 22)} == {"worker-2"}
        # Renamed while traced: events after the rename carry the new name.
        assert {by_arg[i]["threadName"] for i in (100, 101, 102)} == {"renamed-2"}
        assert by_arg[100]["threadId"] == by_arg[20]["threadId"]
        # The threadName filter of debug_query works on these names.
        hits = await query_all(c, sid, threadName={"contains": "worker"})
        assert {first_arg(e) for e in hits if e["eventType"] == "function_enter"} == {10, 11, 12, 20, 21, 22}
        out = await query_all(c, sid, eventType="stdout")
        assert all(e["pid"] == pid for e in out)


# fixture -> (source, crash site function, caller, marker of the crash line, of the call line)
NATIVE_CRASHES = {
    "cpp_sample": ("cpp/sample.cpp", "geometry::Canvas<int>::plot", "geometry::paint", "CANVAS_PLOT", "PAINT_CALL"),
    "rust_sample": ("rust/sample.rs", "sample::canvas::Canvas::plot", "sample::canvas::paint", "RUST_PLOT", "RUST_PAINT_CALL"),
}


@pytest.mark.parametrize("fixture", list(NATIVE_CRASHES))
async def test_crash_backtraces_are_demangled(strobe_home, fixtures_dir, fixture):
    """C++ and Rust crashes arrive (Rust's runtime gives each thread an 8 KiB alternate
    signal stack, too small for the crash report: agent/src/altstack.ts) with the crash site
    and its callers by their demangled, qualified names (no mangling, no Rust hash) at
    file:line, code the compiler inlined there as frames of their own, and the locals of
    the crashing frame."""
    rel, func, caller, site_marker, call_marker = NATIVE_CRASHES[fixture]
    src = REPO / "tests" / "fixtures" / rel
    lines = src.read_text().splitlines()
    line = lambda marker: next(i + 1 for i, l in enumerate(lines) if marker in l)
    async with mcp_client(strobe_home) as c:
        r = await c.call("debug_launch", command=str(fixtures_dir / fixture), args=["1", "0", "crash"],
                         projectRoot=str(src.parent))
        sid = r["sessionId"]
        await c.wait_for(sid, "", eventType="crash", timeout=30)
        st = await c.wait_status(sid)
        [crash] = await query_all(c, sid, eventType="crash")
        assert crash["signal"] == "SIGSEGV" and st["signal"] == "SIGSEGV", (crash, st)
        frames = crash["backtrace"]
        # The crash site is the innermost frame, inlined or not.
        assert (crash["function"], crash["line"]) == (frames[0]["function"], frames[0]["line"]), crash
        site = next(f for f in frames if not f.get("inlined"))
        inlined = frames[:frames.index(site)]
        assert all(f["address"] == site["address"] for f in inlined), inlined
        assert site["function"] == func and site["file"].endswith(rel) and site["line"] == line(site_marker), site
        if inlined:  # Rust's write_volatile: code of std, inlined into the fixture's method
            assert f"inlined into {func} " in crash["text"], crash["text"]
        else:
            assert crash["sourceFile"].endswith(rel), crash
        outer = [f for f in frames[frames.index(site) + 1:] if f.get("file", "").endswith(rel)]
        assert outer[0]["function"] == caller and outer[0]["line"] == line(call_marker), outer[0]
        names = [f["function"] for f in frames if "function" in f]
        assert not any(n.startswith(("_Z", "_R")) or re.search(r"::h[0-9a-f]{16}$", n) for n in names), names
        assert "value" in {v["name"] for v in crash["locals"]}, crash["locals"]
