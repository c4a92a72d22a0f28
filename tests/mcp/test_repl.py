"""`strobe repl` through a pseudo-terminal: multi-line input, tab completion, pretty
tables, errors that do not end the REPL, history; `--connect` sees the daemon's sessions."""

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time

import pytest

from conftest import REPO, mcp_client, strobe_bin, strobe_env

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][AB012]|\r")


class Pty:
    """A program on a pseudo-terminal, driven like a person at a keyboard."""

    def __init__(self, args, env):
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
        self.proc = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
        os.close(slave)
        self.seen = ""
        self.pos = 0

    def send(self, text):
        os.write(self.master, text.encode())

    def expect(self, text, timeout=30.0):
        """Wait until `text` appears after what earlier expects consumed; return the text in between."""
        deadline = time.monotonic() + timeout
        while True:
            clean = ANSI.sub("", self.seen)
            i = clean.find(text, self.pos)
            if i >= 0:
                between = clean[self.pos : i]
                self.pos = i + len(text)
                return between
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{text!r} not seen within {timeout}s; screen so far:\n{clean[self.pos:]}")
            r, _, _ = select.select([self.master], [], [], min(left, 0.2))
            if r:
                try:
                    self.seen += os.read(self.master, 65536).decode(errors="replace")
                except OSError:
                    pass

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        os.close(self.master)


def env_for(home):
    env = strobe_env(home)
    env["TERM"] = "xterm"
    return env


def test_repl_multiline_completion_errors_history(strobe_home):
    repl = Pty([strobe_bin(), "repl"], env_for(strobe_home))
    try:
        repl.expect("strobe> ")
        # Multi-line input: continues while the chunk is incomplete.
        repl.send("function add(a, b)\r")
        repl.expect("..> ")
        repl.send("  return a + b\r")
        repl.expect("..> ")
        repl.send("end\r")
        repl.expect("strobe> ")
        repl.send("add(2, 40)\r")
        assert "42" in repl.expect("strobe> ")

        # Tab completion of strobe.* names.
        repl.send("strobe.js\t")
        repl.expect("strobe.json")
        repl.send(".enc\t")
        repl.expect("strobe.json.encode")
        repl.send('({ok = true})\r')
        assert '{"ok":true}' in repl.expect("strobe> ")

        # Pretty-printed tables, sorted keys.
        repl.send('{ zeta = { 1, 2 }, alpha = "a" }\r')
        out = repl.expect("strobe> ")
        assert 'alpha = "a",' in out and "zeta = { 1, 2 }" in out, out

        # print() output reaches the terminal.
        repl.send('print("printed", 7)\r')
        assert "printed\t7" in repl.expect("strobe> ") or "printed" in repl.seen

        # Errors do not end the REPL; coded errors keep their code.
        repl.send('error("boom")\r')
        out = repl.expect("strobe> ")
        assert "error: " in out and "boom" in out, out
        repl.send('strobe.session("no-such-session")\r')
        assert "SESSION_NOT_FOUND" in repl.expect("strobe> ")
        repl.send("x = = 1\r")
        assert "error:" in repl.expect("strobe> ")
        repl.send("1 + 1\r")
        assert "2" in repl.expect("strobe> ")

        # Ctrl-D ends it cleanly and keeps the history.
        repl.send("\x04")
        assert repl.proc.wait(timeout=20) == 0
        history = (strobe_home / "repl_history").read_text()
        assert "add(2, 40)" in history and "function add(a, b)" in history
    finally:
        repl.close()


@pytest.mark.anyio
async def test_repl_connect_sees_the_daemons_sessions(strobe_home, fixtures_dir):
    src = str(REPO / "tests" / "fixtures" / "c")
    async with mcp_client(strobe_home) as c:
        r = await c.call("debug_launch", command=str(fixtures_dir / "c_sample"), args=["1000", "100"], projectRoot=src)
        sid = r["sessionId"]
        repl = Pty([strobe_bin(), "repl", "--connect"], env_for(strobe_home))
        try:
            repl.expect("connected to the daemon")
            repl.expect("strobe> ")
            # Completing a session id inside a string literal.
            repl.send('s = strobe.session("' + sid[:4] + "\t")
            repl.expect(sid)
            repl.send('")\r')
            repl.expect("strobe> ")
            repl.send("s.id, s:is_running()\r")
            out = repl.expect("strobe> ")
            assert sid in out and "true" in out, out
            repl.send("#strobe.sessions()\r")
            assert re.search(r"\b[1-9]\d*\b", repl.expect("strobe> "))
            repl.send("\x04")
            assert repl.proc.wait(timeout=20) == 0
        finally:
            repl.close()
        await c.call("debug_session", action="stop", sessionId=sid)
