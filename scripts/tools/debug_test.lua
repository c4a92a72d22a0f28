-- MCP tool: debug_test — run a project's tests through its framework's adapter
-- (adapters/*.lua), poll progress, get structured failures with hints; with
-- tracePatterns/watches the tests run under Frida as a session for debug_query.
local testrun = require("testrun")

local actions = {}

function actions.run(args)
  local started = testrun.run(args)
  if args.waitMs then return testrun.wait(started.testRunId, args.waitMs) end
  return started
end

function actions.status(args)
  if args.waitMs then return testrun.wait(args.testRunId, args.waitMs) end
  return testrun.status(args.testRunId)
end

function actions.kill(args)
  return testrun.kill(args.testRunId)
end

return {
  name = "debug_test",
  title = "Run tests and read structured results",
  -- Runs the project's test commands (they may do anything); 'kill' stops a run.
  annotations = { readOnlyHint = false, destructiveHint = true, idempotentHint = false, openWorldHint = true },
  description = [[Run a project's tests and get structured results. ALWAYS use this instead of running test commands in a shell. action 'run' starts the tests in the background and returns testRunId; poll action 'status' (every 1-2 s) for progress (passed/failed so far, currentTest, phase compiling/running/suites_finished, stuck warnings) until status is 'completed', then read result: summary, failures (name, file, line, message, stack, suggestedTraces, rerunCommand), stuck tests with every thread's backtrace, compileErrors, noTests. The framework is detected (cargo, pytest, unittest, go, gtest, catch2, jest, vitest, mocha, bun, deno) or given; gtest/Catch2 need 'command' (the test binary). 'test' runs one test (name or substring). To debug a failure, rerun it traced: {action: 'run', projectRoot, test: failure.name, tracePatterns: failure.suggestedTraces} gives a sessionId for debug_query, and its result's unwoundCalls lists the traced calls the failure's panic or exception left, innermost first, with their arguments. A stuck test: action 'kill' stops the run (or pass killOnStuck: true).
Pass waitMs (e.g. 120000) to 'run' or 'status' to wait for the result in one call instead of polling (it answers early when a test is stuck).
Example: {action: 'run', projectRoot: '/src/app', waitMs: 120000}, or {action: 'run', projectRoot: '/src/app'} then {action: 'status', testRunId: 'test-...'}.]],
  inputSchema = {
    type = "object",
    additionalProperties = false,
    properties = {
      action = { type = "string", enum = { "run", "status", "kill" }, description = "Default 'run'" },
      testRunId = { type = "string", minLength = 1, description = "Required for 'status' and 'kill'" },
      projectRoot = { type = "string", description = "Required for 'run': the project's root directory" },
      framework = { type = "string", description = "Override detection: cargo, pytest, unittest, go, gtest, catch2, jest, vitest, mocha, bun, deno" },
      level = { type = "string", enum = { "unit", "integration", "e2e" }, description = "Only this level of tests (omit for all)" },
      test = { type = "string", minLength = 1, description = "Run only this test (full name or substring)" },
      command = { type = "string", minLength = 1, description = "Test binary (required for gtest and Catch2)" },
      tracePatterns = { type = "array", items = { type = "string" }, description = "Run under Frida with these trace patterns (as debug_trace's add)" },
      watches = { type = "object", description = "Run under Frida with these watches (as debug_trace's watches: {add: [...]})" },
      env = { type = "object", additionalProperties = { type = "string" }, description = "Extra environment variables" },
      waitMs = { type = "integer", minimum = 0, maximum = 600000, description = "Wait up to this long for the run to complete before answering (MCP progress notifications meanwhile); saves polling. A run that is still going answers as 'status' does" },
      killOnStuck = { type = "boolean", description = "Stop the run when a test is confirmed stuck (~8 s without progress)" },
    },
  },
  handler = function(args)
    local action = args.action or "run"
    if action ~= "run" and not args.testRunId then
      strobe.error("VALIDATION_ERROR", "testRunId is required for action '" .. action .. "': pass the id that action 'run' returned.")
    end
    return actions[action](args)
  end,
}
