-- What the JavaScript adapters (mocha, jest, vitest, bun, deno) share: package.json, V8
-- stack frames, Jest's JSON report, JUnit XML reports.
local junit = require("junit")
local J = {}

function J.read_json(path)
  local ok, text = pcall(strobe.fs.read, path)
  if not ok then return nil end
  local ok2, v = pcall(strobe.json.decode, text)
  return ok2 and v or nil
end

-- Does package.json depend on `name` or run it as its test script?
function J.uses(root, name)
  local pkg = J.read_json(root .. "/package.json")
  if not pkg then return false end
  return (pkg.devDependencies or {})[name] or (pkg.dependencies or {})[name]
    or (pkg.scripts and (pkg.scripts.test or ""):find(name, 1, true)) and true or false
end

-- The project's own copy of tool `name` (node_modules/.bin), else the one on PATH.
function J.bin(root, name)
  local own = root .. "/node_modules/.bin/" .. name
  return strobe.fs.exists(own) and own or name
end

-- `score` when one of the framework's config files exists or package.json uses it.
function J.detect(root, name, config_files, score)
  for _, f in ipairs(config_files) do
    if strobe.fs.exists(root .. "/" .. f) then return score end
  end
  return J.uses(root, name) and score or 0
end

-- "    at fn (file.js:3:33)" frames, innermost first, outside node's internals and
-- node_modules; paths relative to `root`.
function J.stack_of(text, root)
  local frames = {}
  for line in (text or ""):gmatch("[^\n]+") do
    local fn, file, ln = line:match("^%s+at (.-) %((.-):(%d+):%d+%)$")
    if not fn then file, ln = line:match("^%s+at (.-):(%d+):%d+$") end
    if file then file = file:gsub("^file://", "") end
    if file and not file:find("^node:") and not file:find("node_modules", 1, true) then
      if root and file:sub(1, #root + 1) == root .. "/" then file = file:sub(#root + 2) end
      frames[#frames + 1] = { ["function"] = fn or "<anonymous>", file = file, line = tonumber(ln) }
    end
  end
  return frames
end

local function strip_ansi(s) return (s:gsub("\27%[[%d;]*m", "")) end

-- Jest's JSON report (Vitest writes the same shape) as a debug_test result.
function J.parse_jest_json(path, root, stderr, tool)
  local r = { summary = { passed = 0, failed = 0, skipped = 0 }, failures = {}, durations = {} }
  local doc = J.read_json(path)
  if not doc then
    r.details = ("no JSON report (%s did not finish)"):format(tool) .. (stderr ~= "" and (": " .. stderr:sub(-2000)) or "")
    return r
  end
  r.summary = { passed = doc.numPassedTests or 0, failed = doc.numFailedTests or 0, skipped = (doc.numPendingTests or 0) + (doc.numTodoTests or 0) }
  for _, file in ipairs(doc.testResults or {}) do
    for _, t in ipairs(file.assertionResults or {}) do
      r.durations[t.fullName] = t.duration
      if t.status == "failed" then
        local text = strip_ansi(table.concat(t.failureMessages or {}, "\n"))
        local stack = J.stack_of(text, root)
        local at = stack[1] or {}
        r.failures[#r.failures + 1] = {
          name = t.fullName, file = at.file, line = at.line, stack = stack,
          message = (text:match("^(.-)\n%s+at ") or text):gsub("^%w*Error: ", ""):gsub("%s+$", ""),
        }
      end
    end
    if file.status == "failed" and #(file.assertionResults or {}) == 0 then
      r.details = strip_ansi(file.message or "") -- a test file that did not load
    end
  end
  return r
end

-- A JUnit XML report (bun test --reporter=junit, deno test --junit-path) as a debug_test
-- result. `full_name(testcase)` gives the name a rerun filter accepts.
function J.parse_junit(path, root, stderr, tool, full_name)
  local r = { summary = { passed = 0, failed = 0, skipped = 0 }, failures = {}, durations = {} }
  local ok, text = pcall(strobe.fs.read, path)
  if not ok then
    r.details = ("no JUnit report (%s did not finish)"):format(tool) .. (stderr ~= "" and (": " .. stderr:sub(-2000)) or "")
    return r
  end
  for _, tc in ipairs(junit.cases(strobe.xml.decode(text))) do
    local name = full_name(tc)
    local verdict, failed = junit.verdict(tc)
    r.durations[name] = math.floor((tonumber(tc.attrs.time) or 0) * 1000 + 0.5)
    if verdict == "failed" then
      r.summary.failed = r.summary.failed + 1
      local body = strip_ansi(failed.text or "")
      local stack = J.stack_of(body, root)
      local at = stack[1] or {}
      local message = strip_ansi(failed.attrs.message or body:match("^[^\n]*") or "")
      message = message:gsub("^Uncaught ", ""):gsub("^%w*Error: ", ""):gsub("%s+$", "")
      r.failures[#r.failures + 1] = { name = name, file = at.file, line = at.line, message = message, stack = stack }
    elseif verdict == "skipped" then
      r.summary.skipped = r.summary.skipped + 1
    else
      r.summary.passed = r.summary.passed + 1
    end
  end
  return r
end

-- Test files under `root` matching `globs` (relative to it), outside node_modules.
function J.test_files(root, globs)
  local files, seen = {}, {}
  for _, g in ipairs(globs) do
    for _, f in ipairs(strobe.fs.glob(root .. "/" .. g)) do
      if not f:find("/node_modules/", 1, true) and not seen[f] then
        seen[f] = true
        files[#files + 1] = f
      end
    end
  end
  table.sort(files)
  return files
end

return J
