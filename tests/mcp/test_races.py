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


def processes_of(binary) -> list:
    """Pids of the processes running `binary` (by /proc/PID/exe or argv[0]), zombies excluded."""
    target = os.path.realpath(binary)
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            exe = os.readlink(f"/proc/{entry}/exe")
        except OSError:
            exe = ""
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv0 = f.read().split(b"\0")[0].decode(errors="replace")
        except OSError:
            argv0 = ""
        if (exe == target or argv0 == target) and pid_alive(int(entry)):
            pids.append(int(entry))
    return sorted(pids)


@pytest.mark.parametrize("clients", [2, 4])
async def test_concurrent_launches_of_one_binary_leave_one_session(strobe_home, tmp_path, clients):
    # Launches of one binary at the same moment from different clients: one wins, the
    # others are SESSION_EXISTS, and no losing launch leaves a (suspended) process behind.
    (binary,) = copies_of("sleep", tmp_path, 1, "racer")
    from contextlib import AsyncExitStack
    async with AsyncExitStack() as stack:
        cs = [await stack.enter_async_context(mcp_client(strobe_home)) for _ in range(clients)]
        won, lost = [], []

        async def launch(c):
            try:
                won.append(await c.call("debug_launch", command=str(binary), args=["60"], projectRoot=str(tmp_path)))
            except ToolError as e:
                lost.append(e)

        async with anyio.create_task_group() as tg:
            for c in cs:
                tg.start_soon(launch, c)
        assert len(won) == 1, (won, lost)
        assert [e.code for e in lost] == ["SESSION_EXISTS"] * (clients - 1), lost
        winner = won[0]
        # Give a stray process time to show up, then: exactly the winner's target runs.
        await _sleep(1.0)
        assert processes_of(binary) == [winner["pid"]]
        listed = await cs[0].call("debug_session", action="list")
        running = [s for s in listed["sessions"] if s.get("status") == "running"]
        assert [s["sessionId"] for s in running] == [winner["sessionId"]], listed
        # Stopping the one session kills the one process.
        await cs[0].call("debug_session", action="stop", sessionId=winner["sessionId"])
        assert processes_of(binary) == []


def children_of(pid: int) -> list:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    return out


async def test_a_dead_frida_host_takes_its_targets_with_it(strobe_home, tmp_path):
    # A target that writes nothing, then kill -9 of the Frida host (the daemon's Python
    # child): the target must not run on as an orphan of init while Strobe thinks it ended.
    (binary,) = copies_of("sleep", tmp_path, 1, "quiet")
    async with mcp_client(strobe_home) as c:
        r = await c.call("debug_launch", command=str(binary), args=["600"], projectRoot=str(tmp_path))
        sid, pid = r["sessionId"], r["pid"]
        assert pid_alive(pid)
        daemon = int((strobe_home / "strobe.pid").read_text().strip())
        hosts = []
        for child in children_of(daemon):
            with open(f"/proc/{child}/cmdline", "rb") as f:
                if b"python" in f.read():
                    hosts.append(child)
        assert len(hosts) == 1, hosts
        os.kill(hosts[0], 9)
        deadline = time.monotonic() + 10
        while pid_alive(pid) and time.monotonic() < deadline:
            await _sleep(0.1)
        assert not pid_alive(pid), f"target {pid} still runs after the Frida host died"
        st = await c.wait_status(sid, "exited", timeout=10)
        assert "Frida host" in (st.get("exitReason") or ""), st
        # The next launch starts a fresh host.
        r = await c.call("debug_launch", command=str(binary), args=["600"], projectRoot=str(tmp_path))
        assert pid_alive(r["pid"])
        await c.call("debug_session", action="stop", sessionId=r["sessionId"])
        assert not pid_alive(r["pid"])


async def test_a_script_limit_counts_running_targets_only(strobe_home, tmp_path):
    # debug_script's own limit (10 live sessions per script) had the same defect.
    copies_of("true", tmp_path, 10, "quick")
    copies_of("sleep", tmp_path, 1, "last")
    script = f"""
for i = 0, 9 do
  local s = strobe.launch{{command="{tmp_path}/quick" .. i, projectRoot="{tmp_path}"}}
  for _ = 1, 600 do
    if not s:is_running() then break end
    strobe.sleep(50)
  end
end
local last = strobe.launch{{command="{tmp_path}/last0", args={{"60"}}, projectRoot="{tmp_path}"}}
return {{eleventh = last.id}}
"""
    async with mcp_client(strobe_home) as c:
        r = await c.call("debug_script", script=script, timeoutMs=90000)
        assert "error" not in r, r
        assert r["result"]["eleventh"].startswith("last0"), r
