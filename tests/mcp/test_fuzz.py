"""Bounded fuzz of the MCP surface (issue 17): a fixed seed and count of malformed
JSON-RPC messages and malformed tool arguments (wrong types, huge strings, deep nesting,
unknown fields, random bytes, invalid UTF-8) over one real `strobe mcp` connection.
Every message gets exactly one answer — a JSON-RPC error with a spec code, or a tool
result whose error carries one of Strobe's codes (never INTERNAL_ERROR) — and the daemon
stays healthy: the same connection and a new one still work, the daemon process is the
same, and its log shows no panic."""

import json
import random
import re
import time

from conftest import REPO
from test_hardening import Raw

SEED = 17
COUNT = 2000
JSONRPC_CODES = {-32700, -32600, -32601, -32602, -32603}
TOOL_CODES = set(re.findall(r'=> "([A-Z_]+)"', (REPO / "src" / "error.rs").read_text())) - {"INTERNAL_ERROR"}


class Fuzzer:
    def __init__(self, rng: random.Random, tools: dict):
        self.rng = rng
        self.tools = tools  # name -> inputSchema
        self.next_id = 1000

    def new_id(self):
        self.next_id += 1
        return self.next_id if self.rng.random() < 0.7 else f"id-{self.next_id}"

    def junk(self, depth=0):
        """A random JSON value, sometimes huge or deeply nested."""
        r = self.rng
        kind = r.randrange(10 if depth < 4 else 6)
        if kind == 0:
            return None
        if kind == 1:
            return r.choice([True, False])
        if kind == 2:
            return r.choice([0, -1, 1, 2**31, -(2**63), 2**64 + 1, 5.0, 1e308, -0.5, 3.14])
        if kind == 3:
            return "".join(r.choice("ab\u00e9\u4e2d\x00\"\\/\n\t{}") for _ in range(r.randrange(0, 40)))
        if kind == 4:
            return "x" * r.choice([0, 1, 4096, 4097, 100_000, 1_000_000])
        if kind == 5:
            return r.choice(["", "-5s", "0x0", "main", "*", "@usercode", "../../etc/passwd", "%s%n", "😀"])
        if kind in (6, 7):
            return [self.junk(depth + 1) for _ in range(r.randrange(0, 6))]
        if kind == 8:
            return {r.choice(["sessionId", "add", "x", "", "__proto__", "constructor"]): self.junk(depth + 1)
                    for _ in range(r.randrange(0, 5))}
        nested = "leaf"
        for _ in range(r.choice([50, 127, 500])):
            nested = [nested] if r.random() < 0.5 else {"a": nested}
        return nested

    def tool_args(self, schema):
        """Arguments near the tool's schema: known fields with junk, unknown fields, or no object at all."""
        r = self.rng
        if r.random() < 0.1:
            return self.junk()
        props = list((schema.get("properties") or {}).keys())
        args = {}
        for p in r.sample(props, k=min(len(props), r.randrange(0, 5))):
            args[p] = self.junk()
        if r.random() < 0.3:
            args[r.choice(["bogus", "sessionId ", "ADD", ""])] = self.junk()
        if "sessionId" in props and r.random() < 0.5:
            args["sessionId"] = f"fuzz-{r.randrange(1000)}"  # never a live session
        return args

    def message(self) -> tuple[bytes, object]:
        """One line to send, and the id its answer must carry (None: any, for unparseable input)."""
        r = self.rng
        kind = r.randrange(12)
        mid = self.new_id()
        if kind <= 4:
            name = r.choice(list(self.tools))
            msg = {"jsonrpc": "2.0", "id": mid, "method": "tools/call",
                   "params": {"name": name, "arguments": self.tool_args(self.tools[name])}}
            if name == "debug_launch" and isinstance(msg["params"]["arguments"], dict):
                msg["params"]["arguments"]["command"] = "/nonexistent/fuzz"  # never spawn anything
            return json.dumps(msg).encode(), mid
        if kind == 5:  # tools/call with broken params
            params = r.choice([None, [], "x", {"name": self.junk()}, {"arguments": {}}, {"name": "no_such_tool"},
                               {"name": "debug_query", "arguments": self.junk()}])
            return json.dumps({"jsonrpc": "2.0", "id": mid, "method": "tools/call", "params": params}).encode(), mid
        if kind == 6:  # envelope errors
            msg = r.choice([
                {"jsonrpc": "1.0", "id": mid, "method": "ping"},
                {"id": mid, "method": "ping"},
                {"jsonrpc": "2.0", "id": mid},
                {"jsonrpc": "2.0", "id": mid, "method": 42},
                {"jsonrpc": "2.0", "id": mid, "method": "no/such/method", "params": self.junk()},
                {"jsonrpc": "2.0", "id": mid, "method": "tools/list", "params": self.junk()},
                {"jsonrpc": "2.0", "id": mid, "method": "ping", "params": self.junk()},
            ])
            return json.dumps(msg).encode(), mid
        if kind == 7:  # odd ids: answered, echoed as sent
            odd = r.choice([{"a": 1}, [1], True, 1.5, -0.0, None])
            return json.dumps({"jsonrpc": "2.0", "id": odd, "method": "ping"}).encode(), "any"
        if kind == 8:  # batches of requests, some broken
            items = [r.choice([{"jsonrpc": "2.0", "id": self.new_id(), "method": "ping"}, 1, "x", {},
                               {"jsonrpc": "2.0", "id": self.new_id(), "method": "tools/call",
                                "params": {"name": "debug_query", "arguments": self.junk()}}])
                     for _ in range(r.randrange(1, 6))]
            return json.dumps(items).encode(), "batch"
        if kind == 9:  # random bytes, invalid UTF-8 included
            data = bytes(r.randrange(256) for _ in range(r.randrange(1, 300))).replace(b"\n", b" ").replace(b"\r", b" ")
            return b"\x01" + data, "any"
        if kind == 10:  # truncated JSON
            text = json.dumps({"jsonrpc": "2.0", "id": mid, "method": "tools/call",
                               "params": {"name": "debug_query", "arguments": {"sessionId": "x"}}})
            return text[: r.randrange(1, len(text) - 1)].encode(), "any"
        deep = "[" * r.choice([129, 1000, 100_000])  # past serde_json's nesting limit
        return deep.encode(), "any"


def check_answer(line: bytes, sent: bytes, expect):
    try:
        reply = json.loads(line)
    except ValueError:
        raise AssertionError(f"not JSON: {line[:200]!r} for {sent[:200]!r}")
    if expect == "batch" and isinstance(reply, dict):  # a batch too deep to parse: one parse error
        assert reply["error"]["code"] == -32700, reply
    replies = reply if isinstance(reply, list) else [reply]
    assert isinstance(replies, list) and replies, (reply, sent[:200])
    for rep in replies:
        assert isinstance(rep, dict) and rep.get("jsonrpc") == "2.0", (rep, sent[:200])
        if "error" in rep:
            assert rep["error"]["code"] in JSONRPC_CODES, (rep, sent[:200])
            continue
        result = rep["result"]
        if isinstance(result, dict) and result.get("isError"):
            body = json.loads(result["content"][0]["text"])
            assert body["error"] in TOOL_CODES, (body, sent[:300])
    if expect not in ("any", "batch"):
        assert reply.get("id") == expect, (reply, expect)


def daemon_pid(home) -> int:
    return int((home / "strobe.pid").read_text().strip())


def test_fuzzed_messages_are_all_answered_and_the_daemon_stays_healthy(strobe_home):
    rng = random.Random(SEED)
    raw = Raw(strobe_home)
    raw.initialize()
    pid = daemon_pid(strobe_home)
    tools = {t["name"]: t["inputSchema"] for t in raw.ask({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})["result"]["tools"]}
    fuzz = Fuzzer(rng, tools)
    started = time.monotonic()
    kinds = {"tool_error": 0, "rpc_error": 0, "ok": 0}
    for _ in range(COUNT):
        line, expect = fuzz.message()
        raw.send(line + b"\n")
        answer = raw.recv_line(timeout=60)
        check_answer(answer, line, expect)
        text = answer.decode(errors="replace")
        kinds["rpc_error" if '"error":{"code"' in text else "tool_error" if '"isError":true' in text else "ok"] += 1
    elapsed = time.monotonic() - started
    print(f"{COUNT} fuzzed messages in {elapsed:.1f}s: {kinds}")
    assert kinds["tool_error"] > COUNT // 4 and kinds["rpc_error"] > COUNT // 10, kinds  # both layers were reached
    # Healthy: this connection, a new one, the same daemon, no panic in its log.
    raw.still_works()
    assert raw.ask({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})["result"]["tools"]
    raw.close()
    fresh = Raw(strobe_home)
    fresh.initialize()
    fresh.still_works()
    fresh.close()
    assert daemon_pid(strobe_home) == pid
    log = (strobe_home / "daemon.log").read_text(errors="replace")
    assert "panicked" not in log, log[-3000:]
