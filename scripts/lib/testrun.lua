-- Test runs (debug_test, strobe.test.run/status): choose an adapter (adapters/*.lua),
-- start its command directly or under Frida, and shape progress and results. The core
-- (src/testrun/) owns the process, its output and the stuck detector.
local traced = require("testrun_traced")
local shape = require("testrun_shape")

local M = {}

local function fail(msg) strobe.error("VALIDATION_ERROR", msg) end

local function adapter_names()
  local names = {}
  for name in pairs(strobe.test.adapters()) do names[#names + 1] = name end
  table.sort(names)
  return names
end

-- The adapter for `root`: the one named by `framework`, else the most confident detector.
function M.pick(root, framework, ctx)
  local adapters = strobe.test.adapters()
  if framework then
    for name, a in pairs(adapters) do
      if name:lower() == framework:lower() then return a end
    end
    fail(("Unknown framework '%s'. Known: %s. Omit 'framework' to auto-detect."):format(framework, table.concat(adapter_names(), ", ")))
  end
  local best, best_score = nil, 0
  for _, name in ipairs(adapter_names()) do
    local a = adapters[name]
    local ok, score = pcall(a.detect, root, ctx)
    if ok and type(score) == "number" and score > best_score then best, best_score = a, score end
    if not ok then strobe.log.warn("adapter " .. name .. " detect failed: " .. tostring(score)) end
  end
  if not best then
    fail(("No test framework detected in %s (looked for %s). Pass 'framework', and 'command' for a test binary (Catch2, Google Test)."):format(root, table.concat(adapter_names(), ", ")))
  end
  return best
end

local function merged_env(a, b)
  local env = {}
  for k, v in pairs(a or {}) do env[k] = v end
  for k, v in pairs(b or {}) do env[k] = v end
  return env
end

-- Start a run; returns {testRunId, status = "running", framework}.
function M.run(args)
  local root = args.projectRoot
  if not root or root == "" then
    fail("'projectRoot' is required for action 'run': the directory holding the project's tests, e.g. {action: 'run', projectRoot: '/src/app'}.")
  end
  if not strobe.fs.is_dir(root) then
    fail(("projectRoot '%s' is not a directory. Pass the root of the project whose tests to run."):format(root))
  end
  if args.command and not strobe.fs.exists(args.command) and not args.command:find("^[%w_.-]+$") then
    fail(("command '%s' does not exist. Pass the path of the built test binary (e.g. build/tests)."):format(args.command))
  end
  local ctx = {
    root = root, command = args.command, level = args.level, test = args.test, env = args.env or {},
    killOnStuck = args.killOnStuck or false, scratch = strobe.test.scratch(),
  }
  local adapter = M.pick(root, args.framework, ctx)
  ctx.framework = adapter.name
  if adapter.needs_command and not args.command then
    fail(("framework '%s' runs a built test binary: pass 'command' (its path), e.g. {projectRoot, command: 'build/unit_tests'}."):format(adapter.name))
  end
  local spec
  if args.test then
    spec = (adapter.single_test_command or adapter.suite_command)(ctx, args.test)
  else
    spec = adapter.suite_command(ctx, args.level)
  end
  ctx.outputs = spec.outputs
  local meta = { adapter = adapter.name, ctx = ctx }
  local env = merged_env(spec.env, args.env)
  -- Search paths the adapter extended from the caller's own value (ctx.env) keep its version.
  for _, k in ipairs({ "PYTHONPATH", "NODE_PATH" }) do
    if spec.env and spec.env[k] then env[k] = spec.env[k] end
  end
  if args.tracePatterns or args.watches then
    return traced.start(adapter, ctx, env, args, meta)
  end
  local id = strobe.test.start{
    cmd = spec.cmd, cwd = spec.cwd or root, env = env, meta = meta,
    killOnStuck = args.killOnStuck or false, stuckMs = args.stuckMs, dumpSignal = spec.dump_signal,
  }
  return { testRunId = id, status = "running", framework = adapter.name }
end

-- Stop a run (its whole process tree); the next status gives what it had reported.
function M.kill(id)
  local r = strobe.test.get(id)
  if r.sessionId then
    pcall(strobe.stop_session, r.sessionId, true)
  else
    strobe.test.kill(id)
  end
  return { testRunId = id, status = r.status == "running" and "stopping" or "completed" }
end

function M.status(id)
  local r = strobe.test.get(id)
  if r.result then
    return { testRunId = id, status = "completed", sessionId = r.sessionId, result = r.result }
  end
  local adapter = strobe.test.adapters()[r.meta.adapter]
  if not adapter then
    strobe.error("INTERNAL_ERROR", ("adapter '%s' of run %s is no longer loaded"):format(r.meta.adapter, id))
  end
  if r.sessionId then traced.refresh(r) end
  if r.status == "running" then
    return { testRunId = id, status = "running", sessionId = r.sessionId, progress = shape.progress(adapter, r) }
  end
  local result = shape.result(adapter, r)
  if r.sessionId and (result.summary or {}).failed ~= 0 then
    local ok, calls = pcall(traced.unwound_calls, r.sessionId)
    if ok and #calls > 0 then result.unwoundCalls = calls end
  end
  strobe.test.finish(id, result)
  return { testRunId = id, status = "completed", sessionId = r.sessionId, result = result }
end

-- Wait up to `wait_ms` for run `id` to complete, sending MCP progress (tests done so far)
-- each poll; answers early, as status does, when the run completes or a test is stuck.
function M.wait(id, wait_ms)
  local deadline = strobe.time.monotonic_ms() + wait_ms
  local reported = 0
  strobe.progress(0, nil, "tests starting")
  while true do
    local st = M.status(id)
    if st.status == "completed" then
      local sum = (st.result or {}).summary or {}
      local n = (sum.passed or 0) + (sum.failed or 0) + (sum.skipped or 0)
      strobe.progress(math.max(n, reported + 1), math.max(n, reported + 1),
        ("completed: %d passed, %d failed, %d skipped"):format(sum.passed or 0, sum.failed or 0, sum.skipped or 0))
      return st
    end
    local p = st.progress or {}
    if p.stuck and #p.stuck > 0 then return st end
    local done = (p.passed or 0) + (p.failed or 0) + (p.skipped or 0)
    if done > reported then
      reported = done
      local msg = ("%d passed, %d failed, %d skipped"):format(p.passed or 0, p.failed or 0, p.skipped or 0)
      if p.currentTest then msg = msg .. "; running " .. p.currentTest end
      strobe.progress(done, nil, msg)
    end
    local left = deadline - strobe.time.monotonic_ms()
    if left <= 0 then return st end
    strobe.sleep(math.min(250, left))
  end
end

return M
