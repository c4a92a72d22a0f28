"""Hardening (issue 17): the daemon's files and socket are private to its user, and
malformed JSON-RPC gets an error while the same connection keeps working. Raw bytes over
`strobe mcp` or the socket: the official SDK cannot send malformed input."""

import json
import os
import select
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import strobe_bin, strobe_env

INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "0"}}}


class Raw:
    """`strobe mcp` driven with raw bytes: one line out, one line back."""

    def __init__(self, home: Path, umask=None):
        pre = (lambda: os.umask(umask)) if umask is not None else None
        self.proc = subprocess.Popen([strobe_bin(), "mcp"], env=strobe_env(home), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, preexec_fn=pre, bufsize=0)

    def send(self, data: bytes):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def recv_line(self, timeout=60) -> bytes:
        """One reply line; a missing reply fails the test instead of hanging it."""
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        assert ready, f"no reply within {timeout}s"
        line = self.proc.stdout.readline()  # unbuffered: select above saw all there is
        assert line, "the connection was dropped without a reply"
        return line

    def recv(self):
        return json.loads(self.recv_line())

    def ask(self, msg) -> dict:
        self.send(json.dumps(msg).encode() + b"\n")
        return self.recv()

    def initialize(self):
        r = self.ask(INIT)
        assert "result" in r, r
        self.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')

    def still_works(self, id=4242):
        r = self.ask({"jsonrpc": "2.0", "id": id, "method": "ping"})
        assert r == {"jsonrpc": "2.0", "id": id, "result": {}}, r

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


@pytest.fixture
def raw(strobe_home):
    c = Raw(strobe_home)
    c.initialize()
    yield c
    c.close()


def mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_home_db_log_socket_private_under_umask_000(strobe_home):
    os.chmod(strobe_home, 0o777)
    c = Raw(strobe_home, umask=0)
    c.initialize()
    # A tool call makes the database write (WAL and SHM exist from the first open).
    c.ask({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
           "params": {"name": "debug_query", "arguments": {"sessionId": "none"}}})
    assert mode(strobe_home) == 0o700
    for name in ["strobe.db", "strobe.db-wal", "strobe.db-shm", "daemon.log", "strobe.sock"]:
        assert (strobe_home / name).exists(), name
        assert mode(strobe_home / name) == 0o600, f"{name} is {oct(mode(strobe_home / name))}"
    c.close()


def test_another_uid_is_refused(raw, strobe_home):
    # As `nobody`, keeping only the power to pass file permissions (the home is 0700,
    # the socket 0600), so that the daemon's own peer check is what is tested.
    probe = (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
        "s.settimeout(20); data = b''\n"
        "while True:\n"
        "    chunk = s.recv(65536)\n"
        "    if not chunk: break\n"
        "    data += chunk\n"
        "print(data.decode())\n"
    )
    out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                          "--inh-caps=+dac_override", "--ambient-caps=+dac_override",
                          sys.executable, "-c", probe, str(strobe_home / "strobe.sock")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    replies = [json.loads(l) for l in out.stdout.splitlines() if l.strip()]
    assert len(replies) == 1, out.stdout
    assert "error" in replies[0] and "uid 65534" in replies[0]["error"]["message"], replies
    raw.still_works()  # our own uid still gets in


def test_over_long_line_gets_an_error_and_the_connection_works(raw):
    # 17 MiB, over the 16 MiB cap; the daemon must not keep it, and must answer.
    raw.send(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"' + b"x" * (17 << 20) + b'"}}\n')
    r = raw.recv()
    assert r["error"]["code"] == -32600 and "16 MiB" in r["error"]["message"], r
    raw.still_works()


def test_invalid_utf8_gets_a_parse_error_and_the_connection_works(raw):
    raw.send(b'{"jsonrpc":"2.0","id":1,"method":"ping","x":"\xff\xfe"}\n')
    r = raw.recv()
    assert r["error"]["code"] == -32700, r
    raw.still_works()


def test_empty_batch_is_an_invalid_request(raw):
    raw.send(b"[]\n")
    r = raw.recv()
    assert r["error"]["code"] == -32600 and r["id"] is None, r
    raw.still_works()


def test_ids_beyond_64_bits_are_echoed_exactly(raw):
    for big in [b"18446744073709551617", b"-9223372036854775809", b"123456789012345678901234567890"]:
        raw.send(b'{"jsonrpc":"2.0","id":' + big + b',"method":"ping"}\n')
        line = raw.recv_line()
        assert line.startswith(b'{"jsonrpc":"2.0","id":' + big + b","), line
    raw.send(b'[{"jsonrpc":"2.0","id":18446744073709551617,"method":"ping"}]\n')
    line = raw.recv_line()
    assert b'"id":18446744073709551617,' in line, line


def test_requests_before_initialize_are_refused(strobe_home):
    c = Raw(strobe_home)
    r = c.ask({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert r["error"]["code"] == -32600 and "initialize" in r["error"]["message"], r
    c.still_works()  # ping is allowed before initialize
    c.initialize()
    assert "tools" in c.ask({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})["result"]
    c.close()


def test_unknown_tool_is_a_json_rpc_error(raw):
    r = raw.ask({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "no_such_tool", "arguments": {}}})
    assert r["error"]["code"] == -32602 and "no_such_tool" in r["error"]["message"], r


def test_float_for_an_integer_field_is_a_validation_error_naming_it(raw):
    r = raw.ask({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                 "params": {"name": "debug_query", "arguments": {"sessionId": "x", "limit": 5.0}}})
    assert r["result"]["isError"], r
    body = json.loads(r["result"]["content"][0]["text"])
    assert body["error"] == "VALIDATION_ERROR" and "limit" in body["message"] and "integer" in body["message"], body
