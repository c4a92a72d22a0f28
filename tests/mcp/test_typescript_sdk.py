"""The official MCP TypeScript SDK (`@modelcontextprotocol/sdk`, pinned in
tests/mcp/ts/package.json) sees titles, annotations, outputSchema and structuredContent
(issue 17). The SDK is installed with `npm ci` into target/ts-sdk on first use; the
client itself is tests/mcp/ts/client.mjs."""

import fcntl
import shutil
import subprocess

from conftest import REPO, strobe_bin, strobe_env

TS = REPO / "tests" / "mcp" / "ts"
SDK_DIR = REPO / "target" / "ts-sdk"


def install_sdk():
    """npm ci into target/ts-sdk when the pinned lock file changed (file-locked: tests run in parallel)."""
    SDK_DIR.mkdir(parents=True, exist_ok=True)
    with open(SDK_DIR.parent / "ts-sdk.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        wanted = (TS / "package-lock.json").read_text()
        marker = SDK_DIR / ".installed"
        if not marker.exists() or marker.read_text() != wanted:
            for name in ["package.json", "package-lock.json"]:
                shutil.copy(TS / name, SDK_DIR / name)
            subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=SDK_DIR, check=True, timeout=600)
            marker.write_text(wanted)
        # The client runs from there so that Node finds the SDK in node_modules.
        shutil.copy(TS / "client.mjs", SDK_DIR / "client.mjs")


def test_typescript_sdk_client_sees_annotations_and_structured_results(strobe_home):
    install_sdk()
    env = strobe_env(strobe_home)
    env["STROBE_BIN"] = strobe_bin()
    out = subprocess.run(["node", str(SDK_DIR / "client.mjs")], env=env, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, f"{out.stdout}\n{out.stderr}"
    assert out.stdout.startswith("ok:"), out.stdout
