-- The traced path of debug_test: the test process runs under Frida as a Strobe session
-- (like debug_launch), with the trace patterns in place before its first instruction
-- and watches set while it waits at main. Its output comes back from the session's
-- stdout/stderr events.
local T = {}

local function launch_spec(adapter, ctx, test)
  if adapter.traced_command then return adapter.traced_command(ctx, test) end
  if test then return (adapter.single_test_command or adapter.suite_command)(ctx, test) end
  return adapter.suite_command(ctx, ctx.level)
end

function T.start(adapter, ctx, env, args, meta)
  local spec = launch_spec(adapter, ctx, args.test)
  ctx.outputs = spec.outputs or ctx.outputs
  for k, v in pairs(spec.env or {}) do env[k] = env[k] or v end
  -- Stage the patterns for this launch only: remove afterwards what was not staged before.
  local before = {}
  for _, p in ipairs(strobe.staged().patterns or {}) do before[p] = true end
  local added = {}
  for _, p in ipairs(args.tracePatterns or {}) do
    if not before[p] then added[#added + 1] = p end
  end
  if #added > 0 then strobe.trace_pending{ add = added } end
  local ok, session, info = pcall(strobe.launch, {
    command = spec.cmd[1], args = { table.unpack(spec.cmd, 2) }, cwd = spec.cwd or ctx.root,
    projectRoot = ctx.root, env = env, stopOnEntry = args.watches ~= nil,
  })
  if #added > 0 then strobe.trace_pending{ remove = added } end
  if not ok then error(session, 0) end
  local warnings = strobe.json.array(info.warnings)
  if args.watches then
    local wok, werr = pcall(function() session:watch{ add = args.watches.add, remove = args.watches.remove } end)
    if not wok then warnings[#warnings + 1] = "watches not set: " .. tostring(werr) end
    if info.pause and info.pause.status == "paused" then session:continue{} end
  end
  meta.traced = true
  local id = strobe.test.track{ meta = meta, sessionId = session.id }
  local out = {
    testRunId = id, status = "running", framework = adapter.name, sessionId = session.id,
    hookedFunctions = info.hookedFunctions or 0,
  }
  if #warnings > 0 then out.warnings = warnings end
  return out
end

-- All of one output stream recorded for the session so far.
local function read_stream(session, kind)
  local parts, offset = {}, 0
  while true do
    local r = session:query{ eventType = kind, limit = 500, offset = offset }
    for _, e in ipairs(r.events) do parts[#parts + 1] = e.text or "" end
    offset = offset + #r.events
    if not r.hasMore or #r.events == 0 then break end
  end
  return table.concat(parts)
end

-- Fill the run snapshot `r` from its session: output so far, and the exit once it ended.
function T.refresh(r)
  local session = strobe.session(r.sessionId)
  local st = session:status()
  r.stdout = read_stream(session, "stdout")
  r.stderr = read_stream(session, "stderr")
  if st.status ~= "running" and st.status ~= "paused" then
    r.status = "exited"
    r.exitCode = st.exitCode
    r.signal = st.signal
  end
end

-- The traced calls the run's last exception or panic left, innermost first, each with the
-- arguments of its enter: the unwound exits recorded together last (fast_hook.c writes one
-- group per catch, all at one time). What an LLM asks next about a failing test; empty when
-- nothing traced was unwound. Reads at most two pages of null-returning exits from the end.
local MAX_UNWOUND = 8

local function last_page(session, q)
  local limit = q.limit
  q.limit = 1 -- the count alone first
  local total = session:query(q).totalCount
  q.limit, q.offset = limit, math.max(0, total - limit)
  return session:query(q).events
end

function T.unwound_calls(id)
  local session = strobe.session(id)
  local group, at = {}, nil
  local q = { eventType = "function_exit", returnValue = { isNull = true }, limit = 500 }
  local exits = last_page(session, q)
  for i = #exits, 1, -1 do
    local e = exits[i]
    if e.unwound then
      if at == nil then at = e.timestampNs end
      if e.timestampNs ~= at then break end
      table.insert(group, 1, e) -- ids ascend innermost first: keep that order
    elseif at ~= nil then
      break
    end
  end
  local out = {}
  for i = 1, math.min(#group, MAX_UNWOUND) do
    local e = group[i]
    local enters = last_page(session, { eventType = "function_enter", ["function"] = { equals = e["function"] }, timeTo = e.timestampNs, limit = 1 })
    local enter = enters[1]
    out[#out + 1] = {
      ["function"] = e["function"], sourceFile = e.sourceFile, line = e.line,
      arguments = enter and enter.arguments or nil, durationNs = e.durationNs, eventId = e.id,
    }
  end
  return out
end

return T
