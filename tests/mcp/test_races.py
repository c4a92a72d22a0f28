"""Process accounting and races of debug_launch (issue 17): session limits count only
running targets; concurrent launches of one binary leave one session and no stray
process; a dead Frida host takes its targets with it."""

import os
import shutil
import time

import anyio
import pytest

from conftest import ToolError, mcp_client, pid_alive, _sleep

pytestmark = pytest.mark.anyio


def copies_of(program, tmp_path, n: int, prefix: str):
    """`n` copies of a program (one live session per binary)."""
    src = shutil.which(program) if isinstance(program, str) else program
    out = []
    for i in range(n):
        p = tmp_path / f"{prefix}{i}"
        shutil.copy(src, p)
        out.append(p)
    return out


async def test_exited_and_crashed_sessions_do_not_count_against_the_limit(strobe_home, fixtures_dir, tmp_path):
    # Ten targets that end on their own (five exit, five are killed by a signal), then an
    # eleventh launch on the same connection: the limit counts running targets only.
    quick = copies_of("true", tmp_path, 5, "quick")
    crashing = copies_of(fixtures_dir / "crash", tmp_path, 5, "crashing")
    sleepers = copies_of("sleep", tmp_path, 1, "sleeper")
    async with mcp_client(strobe_home) as c:
        ids = []
        for p in quick:
            ids.append((await c.call("debug_launch", command=str(p), projectRoot=str(tmp_path)))["sessionId"])
        for p in crashing:
            r = await c.call("debug_launch", command=str(p), args=["segv"], projectRoot=str(tmp_path))
            ids.append(r["sessionId"])
        for sid in ids:
            await c.wait_status(sid, "exited", timeout=60)
        r = await c.call("debug_launch", command=str(sleepers[0]), args=["60"], projectRoot=str(tmp_path))
        assert r["pid"] > 0
        await c.call("debug_session", action="stop", sessionId=r["sessionId"])
