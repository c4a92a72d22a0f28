-- C++: Google Test. Results come from its JSON report (`--gtest_output=json:<file>`:
-- every test with file, line, result and failure texts "file:line\nmessage"); the
-- "[ RUN      ]" lines only feed the live progress. Needs `command`: the test binary.
local N = require("adapter_native")

local A = N.mixin({ name = "gtest", language = "cpp", needs_command = true })

function A.detect(root, ctx)
  if ctx and ctx.command then
    return N.binary_has(N.binary(ctx), "--gtest_output") and 95 or 0
  end
  return N.build_mentions(root, { "gtest", "GTest", "googletest" }) and 85 or 0
end

local function command(ctx, filter)
  local report = ctx.scratch .. "/gtest.json"
  local cmd = N.line_buffered({ N.binary(ctx), "--gtest_output=json:" .. report, "--gtest_color=no" })
  if filter then cmd[#cmd + 1] = "--gtest_filter=" .. filter end
  return { cmd = cmd, outputs = { json = report } }
end

function A.suite_command(ctx, level)
  return command(ctx, nil)
end

function A.single_test_command(ctx, test)
  -- A full name (Suite.Name) or a part of one.
  return command(ctx, test:find("[*?:]") and test or ("*" .. test .. "*"))
end

function A.progress(stdout)
  local p = { passed = 0, failed = 0, skipped = 0, phase = "running" }
  for tag, name in stdout:gmatch("%[%s*(%u+)%s*%] ([%w_/%.]+)") do
    if tag == "RUN" then p.currentTest = name
    elseif name == p.currentTest then
      -- verdict lines carry "(N ms)"; the closing summary repeats FAILED names without it
      if tag == "OK" then p.passed = p.passed + 1
      elseif tag == "FAILED" then p.failed = p.failed + 1
      elseif tag == "SKIPPED" then p.skipped = p.skipped + 1 end
      p.currentTest = nil
    end
  end
  if stdout:find("%[==========%] %d+ tests? from .- ran") then p.phase = "suites_finished" end
  return p
end

function A.parse_output(stdout, stderr, exit, ctx)
  local r = { summary = { passed = 0, failed = 0, skipped = 0 }, failures = {}, durations = {} }
  local report = ctx.outputs and ctx.outputs.json
  if not (report and strobe.fs.exists(report)) then
    -- No report: the binary crashed or was stopped. Counts from the progress lines.
    local p = A.progress(stdout)
    r.summary = { passed = p.passed, failed = p.failed, skipped = p.skipped }
    r.unfinished = p.currentTest
    r.details = "no JSON report (the test binary did not finish)" .. (stderr ~= "" and (": " .. stderr:sub(-2000)) or "")
    return r
  end
  local doc = strobe.json.decode(strobe.fs.read(report))
  for _, suite in ipairs(doc.testsuites or {}) do
    for _, t in ipairs(suite.testsuite or {}) do
      local name = suite.name .. "." .. t.name
      r.durations[name] = (tonumber((t.time or "0s"):match("[%d%.]+")) or 0) * 1000
      if t.failures and #t.failures > 0 then
        r.summary.failed = r.summary.failed + 1
        local first = t.failures[1].failure or ""
        local file, line, msg = first:match("^(.-):(%d+)\n(.*)$")
        local messages = {}
        for _, f in ipairs(t.failures) do messages[#messages + 1] = (f.failure or ""):gsub("^.-:%d+\n", "") end
        r.failures[#r.failures + 1] = {
          name = name, file = N.relative(ctx.root, file or t.file), line = tonumber(line) or t.line,
          message = table.concat(messages, "\n"), stack = {},
        }
      elseif t.result == "SKIPPED" or t.result == "SUPPRESSED" or t.status == "NOTRUN" then
        r.summary.skipped = r.summary.skipped + 1
      else
        r.summary.passed = r.summary.passed + 1
      end
    end
  end
  return r
end

function A.rerun_command(failure, ctx)
  return ("%s --gtest_filter=%s"):format(ctx.command, failure.name)
end

function A.no_tests_hint(ctx)
  return "The binary ran no Google Test test: check 'command' (the built test binary) and the 'test' filter."
end

return A
