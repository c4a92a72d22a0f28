-- Go: `go test -json ./...` (test2json events: run/pass/fail/skip per test, output lines).
-- A failure's file:line comes from the t.Errorf/t.Fatalf output line ("    x_test.go:17: msg"),
-- which is how Go reports it; build errors ("./x.go:3:9: msg" on stderr) become compileErrors.
-- Stopping a stuck run sends SIGQUIT first: the Go runtime prints every goroutine's stack.
local A = { name = "go", language = "go", build_system = "go" }

function A.detect(root)
  return strobe.fs.exists(root .. "/go.mod") and 90 or 0
end

local function command(ctx, extra)
  local cmd = { "go", "test", "-json", "-count=1" }
  for _, a in ipairs(extra) do cmd[#cmd + 1] = a end
  cmd[#cmd + 1] = "./..."
  return { cmd = cmd, dump_signal = ctx.killOnStuck and "SIGQUIT" or nil }
end

function A.suite_command(ctx, level)
  if level == "unit" then return command(ctx, { "-short" }) end
  if level then return command(ctx, { "-run", "(?i)" .. level }) end
  return command(ctx, {})
end

function A.single_test_command(ctx, test)
  return command(ctx, { "-run", test })
end

local events = require("jsonlines").decode

local function key(e) return e.Package .. "." .. e.Test end

function A.progress(stdout)
  local p = { passed = 0, failed = 0, skipped = 0, phase = "compiling" }
  local running = {}
  for _, e in ipairs(events(stdout)) do
    p.phase = "running"
    if e.Test then
      if e.Action == "run" then running[key(e)] = e.Test
      elseif e.Action == "pass" or e.Action == "fail" or e.Action == "skip" then
        running[key(e)] = nil
        if e.Action == "pass" then p.passed = p.passed + 1
        elseif e.Action == "fail" then p.failed = p.failed + 1
        else p.skipped = p.skipped + 1 end
      end
    end
  end
  local _, name = next(running)
  p.currentTest = name
  return p
end

function A.parse_output(stdout, stderr, exit, ctx)
  local r = { summary = { passed = 0, failed = 0, skipped = 0 }, failures = {}, durations = {}, compileErrors = {} }
  local output, running = {}, {}
  for _, e in ipairs(events(stdout)) do
    if e.Test then
      local k = key(e)
      if e.Action == "run" then running[k] = e.Test
      elseif e.Action == "output" then output[k] = (output[k] or "") .. (e.Output or "")
      elseif e.Action == "pass" or e.Action == "fail" or e.Action == "skip" then
        running[k] = nil
        r.durations[e.Test] = (e.Elapsed or 0) * 1000
        if e.Action == "pass" then r.summary.passed = r.summary.passed + 1
        elseif e.Action == "skip" then r.summary.skipped = r.summary.skipped + 1
        else
          r.summary.failed = r.summary.failed + 1
          local text = output[k] or ""
          local file, line, msg = text:match("\n%s+([%w_%-%.]+%.go):(%d+): ([^\n]*)")
          local dir = e.Package:match("^[^/]+/[^/]+/(.+)$") -- module path example.com/x/sub → sub
          r.failures[#r.failures + 1] = {
            name = e.Test, package = e.Package,
            file = file and (dir and (dir .. "/" .. file) or file), line = tonumber(line),
            message = msg or text, stack = {}, output = text,
          }
        end
      end
    end
  end
  local uk, unfinished = next(running)
  r.unfinished = unfinished
  if unfinished and exit ~= 0 and not ctx.killed then
    -- The test binary died inside this test (panic in a goroutine, runtime fatal error).
    r.summary.failed = r.summary.failed + 1
    local text = output[uk] or ""
    r.failures[#r.failures + 1] = {
      name = unfinished, package = uk:match("^(.*)%.[^%.]+$"), message = "the test process died while this test ran: "
        .. (text:match("(fatal error: [^\n]+)") or text:match("(panic: [^\n]+)") or text:sub(-300)), stack = {}, output = text,
    }
  end
  for file, line, col, msg in stderr:gmatch("([^\n%s]+%.go):(%d+):(%d+): ([^\n]+)") do
    r.compileErrors[#r.compileErrors + 1] = { file = file:gsub("^%./", ""), line = tonumber(line), column = tonumber(col), message = msg }
  end
  return r
end

function A.stuck_stacks(stdout)
  -- The goroutine dump SIGQUIT printed, from the test's output events.
  local text = {}
  for _, e in ipairs(events(stdout)) do
    if e.Action == "output" and e.Output then text[#text + 1] = e.Output end
  end
  local threads, cur = {}, nil
  for line in table.concat(text):gmatch("[^\n]+") do
    local g = line:match("^(goroutine %d+ %b[])")
    if g then
      cur = { thread = g, frames = {} }
      threads[#threads + 1] = cur
    elseif cur then
      local fn = line:match("^([%w_%./%*%(%)]+)%(")
      local at = line:match("^\t(%S+:%d+)")
      if fn then cur.frames[#cur.frames + 1] = fn
      elseif at and #cur.frames > 0 and not cur.frames[#cur.frames]:find(" at ", 1, true) then
        cur.frames[#cur.frames] = cur.frames[#cur.frames] .. " at " .. at
      end
    end
  end
  return threads
end

function A.suggest_traces(failure)
  -- Go symbols are package-qualified: example.com/shop.Total → "example.com/shop.*" is too wide
  -- for native patterns; the package's functions by name come from the test body hint.
  return {}
end

function A.rerun_command(failure)
  return ("go test -run '^%s$' %s"):format(failure.name, failure.package or "./...")
end

function A.test_files(root)
  local files = strobe.fs.glob(root .. "/**/*_test.go")
  table.sort(files)
  return files
end

function A.no_tests_hint()
  return "go test found no Test functions: add func TestXxx(t *testing.T) in *_test.go files, or check the 'test' filter (-run)."
end

return A
