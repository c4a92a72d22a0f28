"""Traced values as the LLM sees them (debug_query verbose): every traced function reports
its declared parameters by name and its return value by its DWARF type, whichever hook path
carries it (native fast path words typed by the daemon, or typed reads in the agent).
Fixtures: tests/fixtures/{c/values.c, cpp/values.cpp, rust/traced.rs} (-O0 and -O2) and
c/many_lines.c. The golden file holds, per fixture and function, each call's arguments and
result; the values are gdb's for the same calls (pointers, which vary per run, are masked)."""

import json
import os
import re
import sys
from pathlib import Path

import pytest

from conftest import REPO, mcp_client

pytestmark = pytest.mark.anyio

SRC = str(REPO / "tests" / "fixtures")
GOLDEN = Path(__file__).parent / "golden" / "traced_values.json"
ROUNDS = 2
CPP_PATTERNS = ["Counter::add", "Counter::positive", "Counter::ratio", "is_big", "scale", "mean", "mode_of", "reset",
                "find_index", "lookup", "label"]
FIXTURES = {
    "c_values": ["vc_*"],
    "c_values_O2": ["vc_*"],
    "cpp_values": CPP_PATTERNS,
    "cpp_values_O2": CPP_PATTERNS,
    "rust_traced": ["traced::turn", "traced::make_shape", "traced::area", "traced::first_even", "traced::nonzero",
                    "traced::half", "traced::greet", "traced::evens", "traced::is_odd", "traced::ratio",
                    "traced::apply", "traced::main::{{closure}}"],
}
HEX = re.compile(r"^0x[0-9a-f]+$")


def masked(v):
    """Pointers differ per run (ASLR): compared as "<ptr>"."""
    if isinstance(v, str) and HEX.match(v):
        return "<ptr>"
    if isinstance(v, dict):
        return {k: masked(x) for k, x in v.items()}
    if isinstance(v, list):
        return [masked(x) for x in v]
    return v


async def all_events(c, sid, **query):
    out, offset = [], 0
    while True:
        r = await c.call("debug_query", sessionId=sid, limit=500, offset=offset, **query)
        out.extend(r["events"])
        if len(r["events"]) < 500:
            return out
        offset += 500


async def traced_calls(c, fixtures_dir, prog, patterns):
    """{function: [[arguments, returnValue], ...]} in call order, pointers masked."""
    await c.call("debug_trace", add=patterns)
    r = await c.call("debug_launch", command=str(fixtures_dir / prog), args=[str(ROUNDS)], projectRoot=SRC)
    sid = r["sessionId"]
    await c.wait_status(sid)
    events = await all_events(c, sid, verbose=True)
    calls, open_ = {}, []  # open_: a stack of (function, [arguments, result]) per call
    for e in events:
        if e["eventType"] == "function_enter":
            call = [masked(e["arguments"]), None]
            calls.setdefault(e["function"], []).append(call)
            open_.append((e["function"], call))
        elif e["eventType"] == "function_exit":
            i = max(i for i, (fn, _) in enumerate(open_) if fn == e["function"])
            open_.pop(i)[1][1] = masked(e["returnValue"])
    return calls


@pytest.mark.parametrize("prog", sorted(FIXTURES))
async def test_traced_values_match_the_golden_file(strobe_home, fixtures_dir, prog):
    async with mcp_client(strobe_home) as c:
        got = await traced_calls(c, fixtures_dir, prog, FIXTURES[prog])
    golden = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    if os.environ.get("STROBE_UPDATE_GOLDEN") == "1":
        golden[prog] = got
        GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    want = golden[prog]
    # Field by field, so a failure names the function, call and value.
    assert sorted(got) == sorted(want), (prog, sorted(got))
    for fn, calls in want.items():
        assert len(got[fn]) == len(calls), (prog, fn, got[fn])
        for i, (args, ret) in enumerate(calls):
            assert got[fn][i][0] == args, f"{prog} {fn} call {i} arguments: {got[fn][i][0]} != {args}"
            assert got[fn][i][1] == ret, f"{prog} {fn} call {i} result: {got[fn][i][1]} != {ret}"


async def test_integer_only_c_functions_report_named_parameters(strobe_home, fixtures_dir):
    """vc_add(int a, int b) on the native fast path: {a, b} and an int, not six registers
    and a pointer; a void function without parameters: {} and null."""
    async with mcp_client(strobe_home) as c:
        await c.call("debug_trace", add=["vc_add", "vc_tick"])
        sid = (await c.call("debug_launch", command=str(fixtures_dir / "c_values"), args=["2"], projectRoot=SRC))["sessionId"]
        await c.wait_status(sid)
        ev = await all_events(c, sid, verbose=True, **{"function": {"equals": "vc_add"}})
        assert [e["arguments"] for e in ev if e["eventType"] == "function_enter"] == [{"a": 0, "b": 40}, {"a": 1, "b": 40}]
        exits = [e for e in ev if e["eventType"] == "function_exit"]
        assert [e["returnValue"] for e in exits] == [40, 41] and exits[0]["returnType"] == "integer", exits
        tick = await all_events(c, sid, verbose=True, **{"function": {"equals": "vc_tick"}})
        assert [(e["arguments"], e["returnValue"]) for e in tick] == [({}, None), (None, None)] * 2, tick
        # returnValue.equals with a number given as a string compares numerically.
        for target in ("40", 40):
            hits = await all_events(c, sid, **{"returnValue": {"equals": target}, "function": {"equals": "vc_add"}})
            assert len(hits) == 1, (target, hits)


async def test_output_is_one_event_per_line(strobe_home, fixtures_dir):
    """20,002 short lines written through a full stdio buffer (cut anywhere): 20,002 events,
    each a whole line, in order."""
    async with mcp_client(strobe_home) as c:
        sid = (await c.call("debug_launch", command=str(fixtures_dir / "many_lines"), projectRoot=SRC))["sessionId"]
        await c.wait_status(sid, timeout=60)
        lines = [e["text"] for e in await all_events(c, sid, eventType="stdout")]
        assert len(lines) == 20002, (len(lines), [l for l in lines if not l.endswith("\n")][:5])
        assert lines == [f"line {i}\n" for i in range(20002)]


PY_EXT_APP = """import ctypes, os, sys, time
def work(n):
    return n * 2
time.sleep(0.5)  # the library loads after launch, like a C extension imported later
lib = ctypes.CDLL(sys.argv[1])
class Account(ctypes.Structure):
    pass
Account._fields_ = [("id", ctypes.c_long), ("balance", ctypes.c_double),
                    ("owner", ctypes.c_char_p), ("parent", ctypes.POINTER(Account))]
lib.pyext_deposit.restype = ctypes.c_double
lib.pyext_deposit.argtypes = [ctypes.POINTER(Account), ctypes.c_double]
lib.pyext_vowels.argtypes = [ctypes.c_char_p]
bank = Account(1, 1000.0, b"bank", None)
alice = Account(7, 10.0, b"alice", ctypes.pointer(bank))
for i in range(300):
    print("balance", lib.pyext_deposit(ctypes.byref(alice), 2.5), work(i), flush=True)
    lib.pyext_vowels(b"strobe debugger")
    if os.path.exists(sys.argv[2]):
        break
    time.sleep(0.05)
"""


@pytest.mark.parametrize("launch", ["interpreter", "script"])
async def test_python_targets_trace_c_extensions_and_explain_python_names(strobe_home, tmp_path, fixtures_dir, launch):
    """A Python program calling a C library with DWARF through ctypes (loaded after launch, like
    an imported C extension): a staged pattern hooks it when it loads and its typed arguments
    read as gdb prints them; a pattern naming Python code is explained, not called a typo.
    Launched as `python app.py` (a stripped interpreter here) or as the script itself (`#!`)."""
    script, stop = tmp_path / "app.py", tmp_path / "stop"
    script.write_text(f"#!{sys.executable}\n" + PY_EXT_APP)
    script.chmod(0o755)
    command, args = (sys.executable, [str(script)]) if launch == "interpreter" else (str(script), [])
    async with mcp_client(strobe_home) as c:
        await c.call("debug_trace", add=["pyext_deposit", "work"])
        r = await c.call("debug_launch", command=command, args=args + [str(fixtures_dir / "libpyext.so"), str(stop)],
                         projectRoot=str(tmp_path))
        sid = r["sessionId"]
        assert "cannot be traced yet" in r["nextSteps"] and "'work'" in " ".join(r["warnings"]), r
        assert r["stagedPatterns"] == ["pyext_deposit", "work"], r
        t = await c.call("debug_trace", sessionId=sid, add=["app.work"])
        assert "cannot be traced yet" in t["status"] and "'app.work'" in t["status"] and "typo" not in t["status"], t
        # Once the library has loaded, a pattern added at run time hooks at once.
        await c.wait_for(sid, "balance", timeout=60, eventType="stdout")
        t = await c.call("debug_trace", sessionId=sid, add=["pyext_vowels"])
        assert t["hookedFunctions"] == 2 and "cannot be traced yet" not in t["status"], t
        assert not any("cannot be traced yet" in w for w in t["warnings"]), t
        vowels = (await c.wait_for(sid, "pyext_vowels", timeout=30, verbose=True, eventType="function_exit",
                                   **{"function": {"equals": "pyext_vowels"}}))["events"]
        stop.write_text("")
        await c.wait_status(sid, timeout=60)
        assert vowels and vowels[0]["returnValue"] == 5, vowels
        enters = await all_events(c, sid, verbose=True, eventType="function_enter", **{"function": {"equals": "pyext_deposit"}})
        exits = await all_events(c, sid, verbose=True, eventType="function_exit", **{"function": {"equals": "pyext_deposit"}})
        stdout = "".join(e["text"] for e in await all_events(c, sid, eventType="stdout"))
        printed = [float(line.split()[1]) for line in stdout.splitlines() if line.startswith("balance")]
        assert len(enters) == len(exits) == len(printed) >= 2, (len(enters), len(exits), printed)
        for i, (enter, exit_) in enumerate(zip(enters, exits)):
            acct = enter["arguments"]["acct"]
            assert enter["arguments"]["amount"] == 2.5, enter
            assert acct["id"] == 7 and acct["owner"] == "alice" and acct["balance"] == 10.0 + 2.5 * i, enter
            assert acct["parent"]["owner"] == "bank" and acct["parent"]["balance"] == 1000.0 + 2.5 * i, enter
            assert exit_["returnValue"] == printed[i] == 10.0 + 2.5 * (i + 1), (exit_, printed[i])


async def test_arguments_at_exit_show_what_the_callee_wrote(strobe_home, fixtures_dir):
    """vc_bump(int *r, int by) does *r += by: with argumentsAtExit the exit event shows *r
    after the call (counter starts at 100: 101, then 103); without it, exits carry none."""
    async with mcp_client(strobe_home) as c:
        sid = (await c.call("debug_launch", command=str(fixtures_dir / "c_values"), args=["40", "50"], projectRoot=SRC))["sessionId"]
        await c.call("debug_trace", sessionId=sid, add=["vc_bump"], argumentsAtExit=True)
        await c.wait_status(sid, timeout=60)
        ev = await all_events(c, sid, verbose=True, **{"function": {"equals": "vc_bump"}})
        enters = [e for e in ev if e["eventType"] == "function_enter"]
        exits = [e for e in ev if e["eventType"] == "function_exit"]
        assert enters and len(enters) == len(exits), ev
        for enter, exit_ in zip(enters, exits):
            assert HEX.match(enter["arguments"]["r"]), enter
            assert exit_["arguments"] == {"r": 100 + sum(range(1, enter["arguments"]["by"] + 1))}, (enter, exit_)
        err = await c.error("debug_trace", add=["vc_bump"], argumentsAtExit=True)
        assert err.code == "VALIDATION_ERROR" and "sessionId" in err.message
