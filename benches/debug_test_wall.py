"""Wall time of debug_test (through the MCP SDK, polling status every 20 ms) against the
same test command run directly, on the fixture projects; and the traced path's cost.

Run after `cargo build` and `tests/fixtures/build.sh target/fixtures`:
  STROBE_BIN=$PWD/target/debug/strobe STROBE_CACHE_DIR=$PWD/target/strobe-cache \\
    target/py-test-venv/bin/python benches/debug_test_wall.py [reps]
"""

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "mcp"))
from conftest import mcp_client, stop_daemon  # noqa: E402

PROJECTS = REPO / "tests" / "fixtures" / "test_projects"
BUILD = REPO / "target" / "test-projects"
GTEST = REPO / "target" / "fixtures" / "test_projects" / "gtest_calc"
CARGO_ENV = {"CARGO_TARGET_DIR": str(BUILD / "cargo-target")}


def direct(cmd, cwd, env):
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


async def via_tool(c, **args):
    t0 = time.perf_counter()
    r = await c.call("debug_test", action="run", **args)
    while True:
        st = await c.call("debug_test", action="status", testRunId=r["testRunId"])
        if st["status"] == "completed":
            return time.perf_counter() - t0
        await asyncio.sleep(0.02)


async def main(reps):
    cases = [
        ("cargo (fixture, built)", dict(projectRoot=str(PROJECTS / "cargo"), env=CARGO_ENV),
         (["cargo", "test", "--no-fail-fast", "--message-format=json", "--", "-Z", "unstable-options",
           "--format", "json", "--report-time"], PROJECTS / "cargo",
          {**CARGO_ENV, "RUSTC_BOOTSTRAP": "1", "RUST_BACKTRACE": "1"})),
        ("gtest (fixture binary)", dict(projectRoot=str(PROJECTS / "cpp"), command=str(GTEST)),
         (["/usr/bin/stdbuf", "-oL", str(GTEST), "--gtest_output=json:/tmp/strobe-bench-gtest.json"], PROJECTS / "cpp", {})),
    ]
    home = Path(tempfile.mkdtemp()) / "home"
    home.mkdir()
    try:
        async with mcp_client(home) as c:
            for name, args, (cmd, cwd, env) in cases:
                await via_tool(c, **args)  # warm: build caches, adapter load
                direct(cmd, cwd, env)
                d = [direct(cmd, cwd, env) for _ in range(reps)]
                t = [await via_tool(c, **args) for _ in range(reps)]
                md, mt = statistics.median(d), statistics.median(t)
                print(f"{name}: direct {md*1000:.0f} ms, debug_test {mt*1000:.0f} ms, "
                      f"overhead {(mt-md)*1000:+.0f} ms ({(mt/md-1)*100:+.1f} %), budget {(md*0.05+0.2)*1000:.0f} ms")
            traced = [await via_tool(c, projectRoot=str(PROJECTS / "cpp"), command=str(GTEST), test="Calc.FactorialOfFive",
                                     tracePatterns=["calc::factorial"]) for _ in range(reps)]
            plain = [await via_tool(c, projectRoot=str(PROJECTS / "cpp"), command=str(GTEST), test="Calc.FactorialOfFive")
                     for _ in range(reps)]
            print(f"gtest one test: direct path {statistics.median(plain)*1000:.0f} ms, "
                  f"traced path {statistics.median(traced)*1000:.0f} ms")
    finally:
        stop_daemon(home)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 5))
