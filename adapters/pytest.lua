-- Python: pytest. Results come from its JUnit XML report (`--junitxml`, xunit1 family:
-- each testcase carries file and line); `-v` lines only feed the live progress.
-- Interpreter: `uv run` for uv-managed projects (uv.lock) when uv is installed, else the
-- project's .venv / venv, else python3. A small plugin registers faulthandler on SIGUSR1
-- (writing to the real stderr, past pytest's capture): the stuck detector sends it, and
-- stuck reports carry the Python stacks.
local py = require("adapter_python")
local junit = require("junit")

local A = py.mixin({
  name = "pytest",
  language = "python",
})

-- Loaded with -p from the run's scratch directory.
local DUMP_PLUGIN = [[
import faulthandler, os, signal
_stderr = os.fdopen(os.dup(2), "w")
faulthandler.register(signal.SIGUSR1, file=_stderr, all_threads=True)
]]

function A.detect(root)
  if strobe.fs.exists(root .. "/pytest.ini") or strobe.fs.exists(root .. "/conftest.py") then return 90 end
  for _, f in ipairs({ "pyproject.toml", "setup.cfg", "tox.ini" }) do
    local ok, text = pcall(strobe.fs.read, root .. "/" .. f)
    if ok and (text:find("%[tool%.pytest") or text:find("%[tool:pytest%]") or text:find("%[pytest%]") or text:find("pytest")) then
      return 90
    end
  end
  if #strobe.fs.glob(root .. "/tests/conftest.py") > 0 then return 90 end
  return 0
end

local function command(ctx, selectors)
  local report = ctx.scratch .. "/junit.xml"
  strobe.fs.write(ctx.scratch .. "/strobe_stack_dump.py", DUMP_PLUGIN)
  local cmd = py.interpreter(ctx.root, ctx.env)
  for _, a in ipairs({ "-m", "pytest", "-v", "-p", "no:cacheprovider", "-p", "strobe_stack_dump", "--tb=short",
    "--junitxml=" .. report, "-o", "junit_family=xunit1" }) do
    cmd[#cmd + 1] = a
  end
  for _, a in ipairs(selectors) do cmd[#cmd + 1] = a end
  local pythonpath = ctx.scratch .. ((ctx.env or {}).PYTHONPATH and (":" .. ctx.env.PYTHONPATH) or "")
  return {
    cmd = cmd, outputs = { junit = report }, dump_signal = "SIGUSR1",
    env = { PYTHONUNBUFFERED = "1", PYTHONDONTWRITEBYTECODE = "1", PYTHONPATH = pythonpath },
  }
end

function A.suite_command(ctx, level)
  if level then
    local dir = ctx.root .. "/tests/" .. level
    if strobe.fs.is_dir(dir) then return command(ctx, { dir }) end
    return command(ctx, { "-m", level })
  end
  return command(ctx, {})
end

function A.single_test_command(ctx, test)
  if test:find("::", 1, true) or test:find("%.py$") then return command(ctx, { test }) end
  return command(ctx, { "-k", test })
end

function A.progress(stdout)
  local p = { passed = 0, failed = 0, skipped = 0, phase = "running" }
  for line in (stdout .. "\n"):gmatch("([^\n]*)\n") do
    local node, verdict = line:match("^(%S+::%S+) ?(%u*)")
    if verdict == "PASSED" or verdict == "XPASS" then p.passed = p.passed + 1
    elseif verdict == "FAILED" or verdict == "ERROR" then p.failed = p.failed + 1
    elseif verdict == "SKIPPED" or verdict == "XFAIL" then p.skipped = p.skipped + 1
    -- `-v` prints the node id when a test starts and its verdict when it ends.
    elseif node then p.currentTest = node end
  end
  if stdout:find("\n=+ .*in [%d%.]+s") then p.phase = "suites_finished" end
  return p
end

-- "--tb=short" frames: "path.py:12: in func".
local function stack_of(text)
  local frames = {}
  for file, line, fn in text:gmatch("([^\n%s]+%.py):(%d+): in ([%w_<>]+)") do
    table.insert(frames, 1, { ["function"] = fn, file = file, line = tonumber(line) })
  end
  return frames
end

function A.parse_output(stdout, stderr, exit, ctx)
  local r = { summary = { passed = 0, failed = 0, skipped = 0 }, failures = {}, durations = {} }
  local report = ctx.outputs and ctx.outputs.junit
  if not (report and strobe.fs.exists(report)) then
    r.details = (stderr ~= "" and stderr or stdout):sub(-4000)
    return r
  end
  for _, tc in ipairs(junit.cases(strobe.xml.decode(strobe.fs.read(report)))) do
    if tc.attrs.name then -- an interrupted run leaves a nameless entry for the test it stopped
    local name = (tc.attrs.file or tc.attrs.classname or "") .. "::" .. tc.attrs.name
    r.durations[name] = (tonumber(tc.attrs.time) or 0) * 1000
    local verdict, bad = junit.verdict(tc)
    if verdict == "failed" then
      r.summary.failed = r.summary.failed + 1
      local stack = stack_of(bad.text or "")
      -- Where it failed: the innermost frame inside the project.
      -- (the report's own line is the 0-based line of the test's def)
      local at = stack[1] or { file = tc.attrs.file, line = tc.attrs.line and tonumber(tc.attrs.line) + 1 }
      r.failures[#r.failures + 1] = {
        name = name, file = at.file, line = at.line,
        message = bad.attrs.message or bad.text, stack = stack, output = bad.text,
      }
    elseif verdict == "skipped" then
      r.summary.skipped = r.summary.skipped + 1
    else
      r.summary.passed = r.summary.passed + 1
    end
    end
  end
  r.unfinished = A.progress(stdout).currentTest
  if exit == 4 or exit == 2 and r.summary.passed + r.summary.failed == 0 then
    r.details = (stdout .. stderr):sub(-4000) -- usage error or collection error
  end
  return r
end

function A.rerun_command(failure, ctx)
  return table.concat(py.interpreter_text(ctx.root), " ") .. " -m pytest '" .. failure.name .. "'"
end

function A.no_tests_hint()
  return "pytest collected no tests: name files test_*.py with functions test_*, or check the 'test' filter (-k)."
end

return A
