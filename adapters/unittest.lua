-- Python: the standard library's unittest. It has no machine-readable reporter, so the
-- adapter runs the tests through a small runner (written to the run's scratch directory)
-- whose TestResult prints one JSON line per event, prefixed "@@strobe ".
local py = require("adapter_python")

local A = py.mixin({
  name = "unittest",
  language = "python",
})

local RUNNER = [[
import json, os, sys, time, traceback, unittest, faulthandler, signal

faulthandler.register(signal.SIGUSR1, all_threads=True)
root, selector = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "")
sys.path.insert(0, root)
out = sys.__stdout__
UNITTEST_DIR = os.path.dirname(unittest.__file__) + os.sep

def emit(kind, test, **extra):
    extra.update(event=kind, name=test.id())
    out.write("@@strobe " + json.dumps(extra) + "\n")
    out.flush()

def frames(tb):
    return [{"function": f.name, "file": os.path.relpath(f.filename, root) if f.filename.startswith(root) else f.filename,
             "line": f.lineno} for f in traceback.extract_tb(tb)
            if not f.filename.startswith(UNITTEST_DIR)]

class Result(unittest.TextTestResult):
    def startTest(self, test):
        self._t0 = time.monotonic()
        super().startTest(test)
        emit("start", test)
    def _ms(self):
        return (time.monotonic() - getattr(self, "_t0", time.monotonic())) * 1000
    def addSuccess(self, test):
        super().addSuccess(test); emit("pass", test, ms=self._ms())
    def addFailure(self, test, err):
        super().addFailure(test, err); self._bad("fail", test, err)
    def addError(self, test, err):
        super().addError(test, err); self._bad("error", test, err)
    def _bad(self, kind, test, err):
        msg = "".join(traceback.format_exception_only(err[0], err[1])).strip()
        emit(kind, test, message=msg, stack=frames(err[2]), ms=self._ms())
    def addSkip(self, test, reason):
        super().addSkip(test, reason); emit("skip", test, reason=reason)
    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err); emit("skip", test, reason="expected failure")
    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test); emit("fail", test, message="unexpected success", stack=[])

def flatten(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from flatten(t)
        else:
            yield t

loader = unittest.TestLoader()
start = os.path.join(root, "tests") if os.path.isdir(os.path.join(root, "tests")) else root
suite = loader.discover(start, pattern="test*.py", top_level_dir=root)
tests = [t for t in flatten(suite) if selector in t.id()]
for t in tests:
    if isinstance(t, unittest.loader._FailedTest):
        emit("collect_error", t, message=str(getattr(t, "_exception", "import failed")))
out.write("@@strobe " + json.dumps({"event": "collected", "count": len(tests)}) + "\n")
result = unittest.TextTestRunner(stream=sys.stderr, verbosity=0, resultclass=Result).run(unittest.TestSuite(tests))
out.write("@@strobe " + json.dumps({"event": "done"}) + "\n")
sys.exit(0 if result.wasSuccessful() else 1)
]]

function A.detect(root)
  if #py.test_files(root) > 0 then return 70 end
  return 0
end

local function command(ctx, selector)
  local runner = ctx.scratch .. "/strobe_unittest_runner.py"
  strobe.fs.write(runner, RUNNER)
  local cmd = py.interpreter(ctx.root, ctx.env)
  cmd[#cmd + 1] = runner
  cmd[#cmd + 1] = ctx.root
  cmd[#cmd + 1] = selector or ""
  return { cmd = cmd, dump_signal = "SIGUSR1", env = { PYTHONUNBUFFERED = "1", PYTHONDONTWRITEBYTECODE = "1" } }
end

function A.suite_command(ctx)
  return command(ctx, nil)
end

function A.single_test_command(ctx, test)
  return command(ctx, test)
end

local function events(stdout)
  local out = {}
  for line in stdout:gmatch("@@strobe ([^\n]+)") do
    local ok, v = pcall(strobe.json.decode, line)
    if ok then out[#out + 1] = v end
  end
  return out
end

function A.progress(stdout)
  local p = { passed = 0, failed = 0, skipped = 0, phase = "running" }
  for _, e in ipairs(events(stdout)) do
    if e.event == "start" then p.currentTest = e.name
    elseif e.event == "pass" then p.passed = p.passed + 1 p.currentTest = nil
    elseif e.event == "fail" or e.event == "error" then p.failed = p.failed + 1 p.currentTest = nil
    elseif e.event == "skip" then p.skipped = p.skipped + 1 p.currentTest = nil
    elseif e.event == "done" then p.phase = "suites_finished" end
  end
  return p
end

function A.parse_output(stdout, stderr, exit)
  local r = { summary = { passed = 0, failed = 0, skipped = 0 }, failures = {}, durations = {} }
  local done = false
  for _, e in ipairs(events(stdout)) do
    if e.ms then r.durations[e.name] = e.ms end
    if e.event == "start" then r.unfinished = e.name
    elseif e.event == "pass" then r.summary.passed = r.summary.passed + 1 r.unfinished = nil
    elseif e.event == "skip" then r.summary.skipped = r.summary.skipped + 1 r.unfinished = nil
    elseif e.event == "fail" or e.event == "error" then
      r.unfinished = nil
      r.summary.failed = r.summary.failed + 1
      local stack = {}
      for i = #(e.stack or {}), 1, -1 do stack[#stack + 1] = e.stack[i] end -- innermost first
      local at = stack[1] or {}
      r.failures[#r.failures + 1] = { name = e.name, file = at.file, line = at.line, message = e.message, stack = stack }
    elseif e.event == "done" then done = true end
  end
  if not done and r.summary.passed + r.summary.failed + r.summary.skipped == 0 then
    r.details = stderr:sub(-4000)
  end
  return r
end

function A.rerun_command(failure, ctx)
  return table.concat(py.interpreter_text(ctx.root), " ") .. " -m unittest " .. failure.name
end

function A.no_tests_hint()
  return "unittest found no tests: name files test*.py (under tests/ or the project root) with unittest.TestCase classes."
end

return A
