-- C++: Catch2 (v2 and v3). Results come from its XML reporter (`-r xml` on stdout: every
-- test case with file and line, each failed assertion with its expression, expanded
-- values and line); the report streams, so it also feeds the live progress. Hidden
-- tests (tag "[.]") are not run and count as skipped. Needs `command`: the test binary.
local N = require("adapter_native")

local A = N.mixin({ name = "catch2", language = "cpp", needs_command = true })

function A.detect(root, ctx)
  if ctx and ctx.command then
    return N.binary_has(N.binary(ctx), "Catch::") and 85 or 0
  end
  return N.build_mentions(root, { "Catch2", "catch2" }) and 80 or 0
end

local function command(ctx, spec)
  local cmd = N.line_buffered({ N.binary(ctx), "-r", "xml", "--durations", "yes" })
  if spec then cmd[#cmd + 1] = spec end
  return { cmd = cmd }
end

function A.suite_command(ctx, level)
  return command(ctx, nil)
end

function A.single_test_command(ctx, test)
  return command(ctx, test:find("[%*%[]") and test or ("*" .. test .. "*"))
end

function A.progress(stdout)
  local p = { passed = 0, failed = 0, skipped = 0, phase = "running" }
  local pos = 1
  while true do
    local s, e, name = stdout:find('<TestCase name="([^"]*)"', pos)
    if not s then break end
    local close = stdout:find("</TestCase>", e, true)
    if close then
      local body = stdout:sub(e, close)
      if body:find('<OverallResult success="true"', 1, true) then p.passed = p.passed + 1 else p.failed = p.failed + 1 end
      pos = close
    else
      p.currentTest = name
      break
    end
  end
  if stdout:find("</Catch>", 1, true) then p.phase = "suites_finished" end
  return p
end

local function text_of(el, tag)
  for _, c in ipairs(el.children) do
    if c.tag == tag then return c.text end
  end
end

-- Failed assertions anywhere under a test case (sections nest them).
local function failed_expressions(el, out)
  for _, c in ipairs(el.children) do
    if c.tag == "Expression" and c.attrs.success == "false" then out[#out + 1] = c
    elseif c.tag == "FatalErrorCondition" or c.tag == "Exception" then out[#out + 1] = c
    else failed_expressions(c, out) end
  end
  return out
end

local function hidden_tests(ctx)
  local ok, r = pcall(strobe.exec, { cmd = { N.binary(ctx), "[.]", "--list-test-names-only" }, cwd = ctx.root, timeout_ms = 10000 })
  if not ok then return 0 end
  local n = 0
  for line in r.stdout:gmatch("[^\n]+") do
    if line:match("%S") and not line:match("^%d+ matching") then n = n + 1 end
  end
  return n
end

function A.parse_output(stdout, stderr, exit, ctx)
  local r = { summary = { passed = 0, failed = 0, skipped = 0 }, failures = {}, durations = {} }
  local start = stdout:find("<Catch", 1, true)
  local ok, doc = pcall(strobe.xml.decode, start and stdout:sub(stdout:find("<%?xml") or start) or "")
  if not ok then
    local p = A.progress(stdout)
    r.summary = { passed = p.passed, failed = p.failed, skipped = p.skipped }
    r.unfinished = p.currentTest
    r.details = "no complete XML report (the test binary did not finish, or the tests print to stdout)"
      .. (stderr ~= "" and (": " .. stderr:sub(-2000)) or "")
    return r
  end
  local function walk(el)
    for _, c in ipairs(el.children) do
      if c.tag == "TestCase" then
        local result
        for _, x in ipairs(c.children) do
          if x.tag == "OverallResult" then result = x end
        end
        local name = c.attrs.name
        if result and result.attrs.durationInSeconds then
          r.durations[name] = tonumber(result.attrs.durationInSeconds) * 1000
        end
        if result and result.attrs.success == "true" then
          r.summary.passed = r.summary.passed + 1
        elseif result and result.attrs.skips and tonumber(result.attrs.skips) > 0 then
          r.summary.skipped = r.summary.skipped + 1
        elseif ctx.killed and #failed_expressions(c, {}) > 0 and failed_expressions(c, {})[#failed_expressions(c, {})].tag == "FatalErrorCondition" then
          -- Stopped by debug_test (Catch2 reports the SIGINT as a fatal condition): the stuck test.
          r.unfinished = name
        else
          r.summary.failed = r.summary.failed + 1
          local exprs = failed_expressions(c, {})
          local first = exprs[1]
          local messages = {}
          for _, x in ipairs(exprs) do
            if x.tag == "Expression" then
              messages[#messages + 1] = ("%s(%s) with expansion: %s"):format(x.attrs.type or "CHECK",
                (text_of(x, "Original") or ""), (text_of(x, "Expanded") or ""))
            else
              messages[#messages + 1] = x.tag .. ": " .. (x.text or "")
            end
          end
          r.failures[#r.failures + 1] = {
            name = name, file = N.relative(ctx.root, (first and first.attrs.filename) or c.attrs.filename),
            line = tonumber((first and first.attrs.line) or c.attrs.line),
            message = table.concat(messages, "\n"), stack = {},
          }
        end
      else
        walk(c)
      end
    end
  end
  walk(doc)
  if not ctx.test then r.summary.skipped = r.summary.skipped + hidden_tests(ctx) end
  return r
end

function A.rerun_command(failure, ctx)
  return ("%s %q"):format(ctx.command, failure.name)
end

function A.no_tests_hint(ctx)
  return "The binary ran no Catch2 test case: check 'command' (the built test binary) and the 'test' filter."
end

return A
