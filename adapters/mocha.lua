-- JavaScript: Mocha. Results come from its JSON reporter written to a file
-- (`--reporter json --reporter-option output=<file>`: stats, and each failure with its
-- file, message and stack). That reporter prints nothing while the tests run, so the
-- progress shows the phase only. Mocha comes from the project's node_modules.
local A = { name = "mocha", language = "javascript", build_system = "npm" }

local js = require("adapter_js")
local read_json = js.read_json

function A.detect(root)
  return js.detect(root, "mocha", { ".mocharc.js", ".mocharc.json", ".mocharc.yml", ".mocharc.yaml", ".mocharc.cjs" }, 90)
end

local function command(ctx, grep)
  local report = ctx.scratch .. "/mocha.json"
  local cmd = { ctx.root .. "/node_modules/.bin/mocha", "--reporter", "json", "--reporter-option", "output=" .. report }
  if grep then cmd[#cmd + 1] = "--grep" cmd[#cmd + 1] = grep end
  return { cmd = cmd, outputs = { json = report } }
end

function A.suite_command(ctx) return command(ctx, nil) end
function A.single_test_command(ctx, test) return command(ctx, test) end

function A.progress() return { phase = "running" } end

function A.parse_output(stdout, stderr, exit, ctx)
  local r = { summary = { passed = 0, failed = 0, skipped = 0 }, failures = {}, durations = {} }
  local doc = read_json(ctx.outputs.json)
  if not doc then
    r.details = "no JSON report (mocha did not finish)" .. (stderr ~= "" and (": " .. stderr:sub(-2000)) or "")
    return r
  end
  r.summary = { passed = doc.stats.passes or 0, failed = doc.stats.failures or 0, skipped = doc.stats.pending or 0 }
  for _, t in ipairs(doc.passes or {}) do r.durations[t.fullTitle] = t.duration end
  for _, f in ipairs(doc.failures or {}) do
    local stack = js.stack_of(f.err and f.err.stack, ctx.root)
    local at = stack[1] or {}
    r.failures[#r.failures + 1] = {
      name = f.fullTitle, file = at.file, line = at.line, message = f.err and f.err.message or "", stack = stack,
    }
  end
  return r
end

function A.rerun_command(failure)
  return ("npx mocha --grep %q"):format(failure.name)
end

function A.test_files(root)
  return js.test_files(root, { "test/**/*.js", "test/**/*.ts" })
end

function A.no_tests_hint()
  return "mocha found no tests: put them under test/ (describe/it), or check the 'test' filter (--grep)."
end

return A
