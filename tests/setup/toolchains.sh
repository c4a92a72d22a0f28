#!/usr/bin/env bash
# Toolchains the debug_test fixtures need (tests/fixtures/test_projects/): Google Test,
# Catch2 and Go from Debian packages. Idempotent and quiet when everything is there;
# called by .ci/run before `cargo test` and by tests/mcp_python.rs when something is missing.
# pytest comes from tests/mcp/requirements.txt (the MCP test venv).
set -euo pipefail
missing=()
[ -f /usr/include/gtest/gtest.h ] || missing+=(libgtest-dev)
[ -f /usr/include/catch2/catch.hpp ] || missing+=(catch2)
command -v go >/dev/null 2>&1 || missing+=(golang-go)
command -v g++ >/dev/null 2>&1 || missing+=(g++)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "toolchains.sh: installing ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
# A stale package list is the usual reason an install fails: refresh it once and retry.
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null \
  || { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; }
