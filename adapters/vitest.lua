-- JavaScript/TypeScript: Vitest. Results come from its JSON reporter
-- (`--reporter=json --outputFile=<file>`, Jest's shape: each test with status and failure
-- messages carrying the stack). Vitest comes from the project's node_modules.
local js = require("adapter_js")

local A = { name = "vitest", language = "javascript", build_system = "npm" }

function A.detect(root)
  return js.detect(root, "vitest", { "vitest.config.js", "vitest.config.ts", "vitest.config.mjs", "vite.config.ts", "vite.config.js" }, 95)
end

local function command(ctx, pattern)
  local report = ctx.scratch .. "/vitest.json"
  local cmd = { ctx.root .. "/node_modules/.bin/vitest", "run", "--reporter=json", "--outputFile=" .. report }
  if pattern then cmd[#cmd + 1] = "-t" cmd[#cmd + 1] = pattern end
  return { cmd = cmd, outputs = { json = report }, env = { FORCE_COLOR = "0", CI = "1" } }
end

function A.suite_command(ctx) return command(ctx, nil) end
function A.single_test_command(ctx, test) return command(ctx, test) end

function A.parse_output(stdout, stderr, exit, ctx)
  return js.parse_jest_json(ctx.outputs.json, ctx.root, stderr, "vitest")
end

function A.rerun_command(failure)
  return ("npx vitest run -t %q"):format(failure.name)
end

function A.test_files(root)
  return js.test_files(root, { "*.test.js", "*.test.ts", "test/**/*.ts", "tests/**/*.ts", "src/**/*.test.ts", "src/**/*.test.js" })
end

function A.no_tests_hint()
  return "vitest found no tests: name files *.test.ts / *.test.js, or check the 'test' filter (-t)."
end

return A
