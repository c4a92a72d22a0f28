-- JavaScript/TypeScript: Bun's test runner. Results come from its JUnit XML reporter
-- (`--reporter=junit --reporter-outfile=<file>`: each test with its file and line, each
-- failure with its message and stack). Bun is the project's own (node_modules/.bin/bun,
-- from the `bun` npm package) or the one on PATH.
local A = { name = "bun", language = "javascript", build_system = "bun" }

local js = require("adapter_js")

function A.detect(root)
  for _, f in ipairs({ "bun.lock", "bun.lockb", "bunfig.toml" }) do
    if strobe.fs.exists(root .. "/" .. f) then return 90 end
  end
  local pkg = js.read_json(root .. "/package.json")
  local test = pkg and pkg.scripts and pkg.scripts.test or ""
  return test:find("bun test", 1, true) and 90 or 0
end

local function command(ctx, name)
  local report = ctx.scratch .. "/bun-junit.xml"
  local cmd = { js.bin(ctx.root, "bun"), "test", "--reporter=junit", "--reporter-outfile=" .. report }
  if name then cmd[#cmd + 1] = "--test-name-pattern" cmd[#cmd + 1] = name end
  return { cmd = cmd, outputs = { junit = report } }
end

function A.suite_command(ctx) return command(ctx, nil) end
function A.single_test_command(ctx, test) return command(ctx, test) end

function A.progress() return { phase = "running" } end

-- "describe name" + " " + "test name": what --test-name-pattern matches.
local function full_name(tc)
  local class = tc.attrs.classname or ""
  return class ~= "" and (class .. " " .. tc.attrs.name) or tc.attrs.name
end

function A.parse_output(stdout, stderr, exit, ctx)
  return js.parse_junit(ctx.outputs.junit, ctx.root, stderr, "bun test", full_name)
end

function A.rerun_command(failure)
  return ("bun test --test-name-pattern %q"):format(failure.name)
end

function A.test_files(root)
  return js.test_files(root, { "*.{test,spec}.{js,ts,jsx,tsx}", "{test,tests,src}/**/*.{test,spec}.{js,ts,jsx,tsx}", "**/*_{test,spec}.{js,ts}" })
end

function A.no_tests_hint()
  return "bun test found no tests: name files *.test.{js,ts} (or *_test, *.spec), or check the 'test' filter (--test-name-pattern)."
end

return A
