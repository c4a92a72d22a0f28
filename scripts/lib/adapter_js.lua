-- What the JavaScript adapters (mocha, jest) share: package.json, V8 stack frames.
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

-- `score` when one of the framework's config files exists or package.json uses it.
function J.detect(root, name, config_files, score)
  for _, f in ipairs(config_files) do
    if strobe.fs.exists(root .. "/" .. f) then return score end
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

return J
