#!/usr/bin/env bash
# Toolchains the debug_test fixtures need (tests/fixtures/test_projects/): Google Test,
# Catch2 and Go from Debian packages. Idempotent and quiet when everything is there;
# called by .ci/run before `cargo test` and by tests/mcp_python.rs when something is missing.
# pytest comes from tests/mcp/requirements.txt (the MCP test venv); JavaScript frameworks
# (tests/setup/package.json) from npm into target/test-projects/node.
set -euo pipefail
cd "$(dirname "$0")/../.."
node_dir=target/test-projects/node
if command -v npm >/dev/null 2>&1 && ! cmp -s tests/setup/package.json "$node_dir/package.json"; then
  echo "toolchains.sh: installing JavaScript test frameworks into $node_dir" >&2
  mkdir -p "$node_dir"
  cp tests/setup/package.json "$node_dir/package.json.new"
  mv "$node_dir/package.json.new" "$node_dir/package.json"
  (cd "$node_dir" && npm install --no-audit --no-fund --silent >/dev/null) || rm -f "$node_dir/package.json"
fi
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
