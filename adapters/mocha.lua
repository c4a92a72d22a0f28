-- JavaScript: Mocha. Results come from its JSON reporter written to a file
-- (`--reporter json --reporter-option output=<file>`: stats, and each failure with its
-- file, message and stack). That reporter prints nothing while the tests run, so the
-- progress shows the phase only. Mocha comes from the project's node_modules.
local A = { name = "mocha", language = "javascript", build_system = "npm" }

local function read_json(path)
  local ok, text = pcall(strobe.fs.read, path)
  if not ok then return nil end
  local ok2, v = pcall(strobe.json.decode, text)
  return ok2 and v or nil
end

function A.detect(root)
  for _, f in ipairs({ ".mocharc.js", ".mocharc.json", ".mocharc.yml", ".mocharc.yaml", ".mocharc.cjs" }) do
    if strobe.fs.exists(root .. "/" .. f) then return 90 end
  end
  local pkg = read_json(root .. "/package.json")
  if pkg and ((pkg.devDependencies or {}).mocha or (pkg.dependencies or {}).mocha or (pkg.scripts and (pkg.scripts.test or ""):find("mocha"))) then
    return 90
  end
  return 0
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

-- "    at fn (file.js:3:33)" frames, innermost first, outside node's internals.
local function stack_of(text)
  local frames = {}
  for line in (text or ""):gmatch("[^\n]+") do
    local fn, file, ln = line:match("^%s+at (.-) %((.-):(%d+):%d+%)$")
    if not fn then file, ln = line:match("^%s+at (.-):(%d+):%d+$") end
    if file and not file:find("^node:") and not file:find("node_modules") then
      frames[#frames + 1] = { ["function"] = fn or "<anonymous>", file = file, line = tonumber(ln) }
    end
  end
  return frames
end

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
    local stack = stack_of(f.err and f.err.stack)
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
  local files = strobe.fs.glob(root .. "/test/**/*.js")
  for _, f in ipairs(strobe.fs.glob(root .. "/test/**/*.ts")) do files[#files + 1] = f end
  table.sort(files)
  return files
end

function A.no_tests_hint()
  return "mocha found no tests: put them under test/ (describe/it), or check the 'test' filter (--grep)."
end

return A
