-- JavaScript: Jest. Results come from its JSON report (`--json --outputFile=<file>
-- --testLocationInResults`: every assertion result with status, location and failure
-- messages carrying the stack). Jest prints its console reporter on stderr meanwhile,
-- which feeds the live progress ("✓"/"✕" lines). Jest comes from the project's node_modules.
local js = require("adapter_js")

local A = { name = "jest", language = "javascript", build_system = "npm" }

function A.detect(root)
  return js.detect(root, "jest", { "jest.config.js", "jest.config.ts", "jest.config.mjs", "jest.config.cjs", "jest.config.json" }, 92)
end

local function command(ctx, pattern)
  local report = ctx.scratch .. "/jest.json"
  local cmd = { ctx.root .. "/node_modules/.bin/jest", "--ci", "--json", "--outputFile=" .. report, "--testLocationInResults", "--verbose" }
  if pattern then cmd[#cmd + 1] = "-t" cmd[#cmd + 1] = pattern end
  return { cmd = cmd, outputs = { json = report }, env = { FORCE_COLOR = "0" } }
end

function A.suite_command(ctx) return command(ctx, nil) end
function A.single_test_command(ctx, test) return command(ctx, test) end

function A.progress(stdout, stderr)
  local p = { passed = 0, failed = 0, skipped = 0, phase = "running" }
  for mark in stderr:gmatch("\n%s+([✓✕○])") do
    if mark == "✓" then p.passed = p.passed + 1 elseif mark == "✕" then p.failed = p.failed + 1 else p.skipped = p.skipped + 1 end
  end
  return p
end

function A.parse_output(stdout, stderr, exit, ctx)
  return js.parse_jest_json(ctx.outputs.json, ctx.root, stderr, "jest")
end

function A.rerun_command(failure)
  return ("npx jest -t %q"):format(failure.name)
end

function A.test_files(root)
  return js.test_files(root, { "*.test.js", "*.test.ts", "test/**/*.js", "tests/**/*.js", "__tests__/**/*.js", "src/**/*.test.js", "src/**/*.test.ts" })
end

function A.no_tests_hint()
  return "jest found no tests: name files *.test.js or put them in __tests__/, or check the 'test' filter (-t)."
end

return A
