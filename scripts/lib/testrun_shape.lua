-- The shapes debug_test answers with: progress while a run goes, the result once it
-- ended (failures with suggested traces and a rerun command from the adapter and the
-- hint rules of scripts/hints/ with when = "test_traces" / "test_rerun" / "test_failure").
local S = {}

local function array(t) return strobe.json.array(t or {}) end

local function call(adapter, fname, ...)
  local f = adapter[fname]
  if not f then return nil end
  local ok, v = pcall(f, ...)
  if not ok then
    strobe.log.warn(("adapter %s.%s failed: %s"):format(adapter.name, fname, tostring(v)))
    return nil
  end
  return v
end

local function progress_of(adapter, r)
  return call(adapter, "progress", r.stdout, r.stderr, r.meta.ctx) or {}
end

-- Stuck reports of the core, with the test that was running (the adapter's view) and
-- the language's own stacks where the adapter can read them (Python's faulthandler).
local function stuck_list(adapter, r, current)
  local out = array()
  for _, s in ipairs(r.stuck or {}) do
    local threads = array()
    for _, t in ipairs(s.threads) do
      threads[#threads + 1] = { thread = t.thread, frames = array(t.frames) }
    end
    local entry = {
      test = current, pid = s.pid, kind = s.kind, silentMs = s.silentMs, atMs = s.atMs,
      killed = s.killed, threads = threads,
    }
    local lang = call(adapter, "stuck_stacks", r.stdout, r.stderr, r.meta.ctx)
    if lang and #lang > 0 then
      for _, t in ipairs(lang) do t.frames = array(t.frames) end
      entry.languageStacks = array(lang)
    end
    out[#out + 1] = entry
  end
  return out
end

function S.progress(adapter, r)
  local p = progress_of(adapter, r)
  local out = {
    elapsedMs = r.elapsedMs, passed = p.passed or 0, failed = p.failed or 0, skipped = p.skipped or 0,
    phase = p.phase or r.phase or "running", warnings = array(r.warnings),
  }
  if p.currentTest then
    out.currentTest = p.currentTest
    out.currentTestElapsedMs, out.currentTestBaselineMs = strobe.test.current(r.id, p.currentTest, r.meta.ctx.root)
  end
  if #(r.stuck or {}) > 0 then
    out.stuck = stuck_list(adapter, r, p.currentTest)
  end
  return out
end

local function frame_text(f)
  if type(f) ~= "table" then return tostring(f) end
  local where = f.file and (" (" .. f.file .. (f.line and (":" .. f.line) or "") .. ")") or ""
  return (f["function"] or "?") .. where
end

local function add_unique(list, seen, v)
  if type(v) == "string" and v ~= "" and not seen[v] then
    seen[v] = true
    list[#list + 1] = v
  end
end

local function failure(adapter, f, ctx)
  local hint_ctx = { failure = f, framework = adapter.name, language = adapter.language, root = ctx.root }
  local traces, seen = array(), {}
  for _, p in ipairs(call(adapter, "suggest_traces", f, ctx) or {}) do add_unique(traces, seen, p) end
  for _, v in ipairs(strobe.hint_values("test_traces", hint_ctx)) do
    if type(v) == "table" then
      for _, p in ipairs(v) do add_unique(traces, seen, p) end
    else
      add_unique(traces, seen, v)
    end
  end
  local rerun = call(adapter, "rerun_command", f, ctx) or strobe.hint_values("test_rerun", hint_ctx)[1]
  local stack = array()
  for _, fr in ipairs(f.stack or {}) do stack[#stack + 1] = frame_text(fr) end
  local out = {
    name = f.name, file = f.file, line = f.line, message = f.message or "", stack = stack,
    suggestedTraces = traces, rerunCommand = rerun,
    rerun = { test = f.name },
  }
  local suggestions = strobe.hints("test_failure", hint_ctx)
  if #suggestions > 0 then out.suggestions = suggestions end
  return out
end

local function project_info(adapter, ctx)
  local files = call(adapter, "test_files", ctx.root, ctx) or {}
  local rel = array()
  for i, f in ipairs(files) do
    if i > 50 then break end
    rel[#rel + 1] = (f:sub(1, #ctx.root + 1) == ctx.root .. "/") and f:sub(#ctx.root + 2) or f
  end
  return { language = adapter.language, buildSystem = (type(adapter.build_system) == "function" and call(adapter, "build_system", ctx.root, ctx)) or adapter.build_system or adapter.name, testFiles = rel }
end

local function tail(text, n)
  if #text <= n then return text end
  return "..." .. text:sub(-n)
end

function S.result(adapter, r)
  local ctx = r.meta.ctx
  ctx.killed = r.killed
  local ok, res = pcall(adapter.parse_output, r.stdout, r.stderr, r.exitCode, ctx)
  if not ok or type(res) ~= "table" then
    res = { details = ("adapter '%s' could not read the output: %s"):format(adapter.name, tostring(res)) }
  end
  local summary = res.summary or {}
  local failures = array()
  for _, f in ipairs(res.failures or {}) do failures[#failures + 1] = failure(adapter, f, ctx) end
  local p = (#(r.stuck or {}) > 0 or r.killed) and progress_of(adapter, r) or {}
  local result = {
    framework = adapter.name,
    summary = {
      passed = summary.passed or 0, failed = summary.failed or #failures, skipped = summary.skipped or 0,
      durationMs = r.elapsedMs,
    },
    failures = failures,
    stuck = stuck_list(adapter, r, res.unfinished or p.currentTest),
    project = project_info(adapter, ctx),
    exitCode = r.exitCode,
  }
  if #result.stuck > 0 then result.summary.stuck = #result.stuck end
  if res.details then result.details = res.details end
  local total = result.summary.passed + result.summary.failed + result.summary.skipped
  if res.compileErrors and #res.compileErrors > 0 then
    result.phase = "compiling"
    result.compileErrors = array(res.compileErrors)
    result.hint = "The project does not compile: fix compileErrors (file:line, message) and run debug_test again."
  elseif r.killed then
    result.killed = true
    result.hint = "The run was stopped before it finished; counts cover the tests that reported. Fix or skip the stuck test, then run again."
  elseif total == 0 then
    result.noTests = true
    result.hint = call(adapter, "no_tests_hint", ctx) or
      ("No tests ran. Check the test filter ('test', 'level') and that the project has tests (" .. (adapter.name) .. ").")
    if r.exitCode ~= 0 and not res.details then
      result.details = tail(r.stderr ~= "" and r.stderr or r.stdout, 4000)
    end
  end
  if r.signal then result.signal = r.signal end
  for name, ms in pairs(res.durations or {}) do strobe.test.record(ctx.root, name, math.floor(ms)) end
  if r.droppedBytes and r.droppedBytes > 0 then
    result.warnings = array({ ("%d bytes of output beyond the cap were not kept"):format(r.droppedBytes) })
  end
  return result
end

return S
