"""Shared fixtures for the MCP integration tests: a real `strobe mcp` proxy, a real
daemon with its own STROBE_HOME, real fixture programs, and the official MCP client."""

import fcntl
import json
import os
import signal
import subprocess
import time
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

try:  # a JSON-RPC error answer: MCPError in the 2.x SDK, McpError in 1.x
    from mcp.shared.exceptions import MCPError
except ImportError:
    from mcp.shared.exceptions import McpError as MCPError

REPO = Path(__file__).resolve().parents[2]


def strobe_bin() -> str:
    path = os.environ.get("STROBE_BIN") or str(REPO / "target" / "debug" / "strobe")
    assert Path(path).exists(), f"strobe binary not found at {path}: run `cargo build` first"
    return path


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    out = Path(os.environ.get("STROBE_FIXTURES") or REPO / "target" / "fixtures")
    out.parent.mkdir(parents=True, exist_ok=True)
    # Several test processes may build at once: one builds, the others wait.
    with open(out.parent / "fixtures.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        subprocess.run(["bash", str(REPO / "tests" / "fixtures" / "build.sh"), str(out)], check=True)
    return out


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def strobe_home(tmp_path):
    """A private STROBE_HOME; the daemon started in it is stopped afterwards."""
    home = tmp_path / "home"
    home.mkdir()
    yield home
    stop_daemon(home)


def stop_daemon(home: Path):
    pid_file = home / "strobe.pid"
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)


def strobe_env(home: Path) -> dict:
    env = dict(os.environ)
    env["STROBE_HOME"] = str(home)
    env.setdefault("STROBE_CACHE_DIR", str(REPO / "target" / "strobe-cache"))
    env["STROBE_IDLE_TIMEOUT_SECS"] = "120"
    return env


@asynccontextmanager
async def mcp_client(home: Path):
    params = StdioServerParameters(command=strobe_bin(), args=["mcp"], env=strobe_env(home))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield Client(session)


def thread_report(pid):
    """Each thread's state, name and kernel wait, and gdb's backtraces of all of them."""
    tasks = {}
    for tid in sorted(os.listdir(f"/proc/{pid}/task")) if os.path.isdir(f"/proc/{pid}/task") else []:
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            comm = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
            tasks[tid] = (comm, stat, Path(f"/proc/{pid}/task/{tid}/wchan").read_text())
        except OSError as e:
            tasks[tid] = str(e)
    try:
        bt = subprocess.run(["gdb", "-p", str(pid), "-batch", "-ex", "thread apply all bt 16"],
                            capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as e:
        bt = str(e)
    return {"tasks": tasks, "gdb": bt[-6000:]}


class ToolError(Exception):
    def __init__(self, code, message):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class Client:
    """Calls tools and decodes their JSON text; tool errors raise ToolError."""

    def __init__(self, session: ClientSession):
        self.session = session

    async def call(self, name: str, **args):
        result = await self.session.call_tool(name, args)
        text = result.content[0].text
        body = json.loads(text)
        # The 2.x SDK names the flag is_error; 1.x called it isError.
        is_error = getattr(result, "is_error", None)
        if is_error is None:
            is_error = result.isError
        if is_error:
            raise ToolError(body.get("error"), body.get("message"))
        return body

    async def error(self, name: str, **args) -> ToolError:
        try:
            body = await self.call(name, **args)
        except ToolError as e:
            return e
        raise AssertionError(f"{name} should have failed, returned {body}")

    async def wait_status(self, session_id: str, status: str = "exited", timeout=20.0):
        """Poll debug_session status until the session reaches `status`; return the report."""
        deadline = time.monotonic() + timeout
        while True:
            st = await self.call("debug_session", action="status", sessionId=session_id)
            if st["status"] == status:
                return st
            if time.monotonic() > deadline:
                where = thread_report(st["pid"]) if isinstance(st.get("pid"), int) else None
                raise AssertionError(f"session {session_id} not {status} within {timeout}s: {st}; threads: {where}")
            await _sleep(0.1)

    async def wait_for(self, session_id: str, what: str, timeout=20.0, **query):
        """Poll debug_query until an event matching `query` (and containing `what` in its
        text or function name, if given) arrives; return the query result."""
        deadline = time.monotonic() + timeout
        while True:
            r = await self.call("debug_query", sessionId=session_id, limit=500, **query)
            hits = [e for e in r["events"] if what in (e.get("text") or "") + (e.get("function") or "")]
            if hits:
                return r
            if time.monotonic() > deadline:
                raise AssertionError(f"no event with {what!r} for {query} within {timeout}s; last: {r}")
            await _sleep(0.1)


async def _sleep(s):
    import anyio

    await anyio.sleep(s)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False
