-- JavaScript/TypeScript: Deno's test runner. Results come from its JUnit XML report
-- (`--junit-path=<file>`: each test with its line, each failure with its message and
-- stack). Tests run with all permissions (-A), as a developer's own suite usually needs.
-- Deno is the project's own (node_modules/.bin/deno, from the `deno` npm package) or the
-- one on PATH.
local A = { name = "deno", language = "javascript", build_system = "deno" }

local js = require("adapter_js")

function A.detect(root)
  for _, f in ipairs({ "deno.json", "deno.jsonc", "deno.lock" }) do
    if strobe.fs.exists(root .. "/" .. f) then return 90 end
  end
  return 0
end

local function command(ctx, name)
  local report = ctx.scratch .. "/deno-junit.xml"
  local cmd = { js.bin(ctx.root, "deno"), "test", "-A", "--no-check", "--junit-path=" .. report }
  if name then cmd[#cmd + 1] = "--filter" cmd[#cmd + 1] = name end
  return { cmd = cmd, outputs = { junit = report } }
end

function A.suite_command(ctx) return command(ctx, nil) end
function A.single_test_command(ctx, test) return command(ctx, test) end

function A.progress() return { phase = "running" } end

function A.parse_output(stdout, stderr, exit, ctx)
  return js.parse_junit(ctx.outputs.junit, ctx.root, stderr, "deno test", function(tc) return tc.attrs.name end)
end

function A.rerun_command(failure)
  return ("deno test -A --filter %q"):format(failure.name)
end

function A.test_files(root)
  return js.test_files(root, { "*{_,.}test.{js,ts,jsx,tsx,mjs}", "{test,tests,src}/**/*{_,.}test.{js,ts,jsx,tsx,mjs}" })
end

function A.no_tests_hint()
  return "deno test found no tests: name files *_test.ts or *.test.ts (Deno.test), or check the 'test' filter (--filter)."
end

return A
