-- What debug_script adds to the `strobe` API: sessions with a hit handler
-- (`s:on_break(spec, function(hit) ... end)`) and a driver (`s:run{...}`) that continues
-- until the program exits, a handler says "stop", a condition holds, a count of hits
-- or a timeout. Sessions from `strobe.launch` / `strobe.session` (and the `session`
-- global) are wrapped: every method of the Rust session still works on them.
local M = {}

local Session = {}
local Hit = {}

-- A wrapped session: the Rust session's methods and fields, plus Session's.
local function wrap(ud)
  local p = { _ud = ud, _handlers = {}, id = ud.id, pid = ud.pid }
  return setmetatable(p, {
    __index = function(t, k)
      if Session[k] ~= nil then
        return Session[k]
      end
      local ok, v = pcall(function() return ud[k] end)
      if not ok then
        return nil
      end
      if type(v) == "function" then
        local f = function(self, ...)
          if self == t then
            return v(ud, ...)
          end
          return v(self, ...)
        end
        rawset(t, k, f)
        return f
      end
      return v
    end,
    __tostring = function() return tostring(ud) end,
  })
end
M.wrap = wrap

-- "queue.c:88" or "name" or a breakpoint table ({file=, line=, condition=, hitCount=} / {["function"]=}).
local function point_spec(spec)
  if type(spec) == "string" then
    local file, line = spec:match("^(.-):(%d+)$")
    if file then
      return { file = file, line = tonumber(line) }
    end
    return { ["function"] = spec }
  end
  return spec
end

-- s:on_break(spec, fn) sets a breakpoint; at each of its hits, s:run calls fn(hit).
-- fn returns "stop" (or calls hit:stop()) to end the run there. Returns the breakpoint.
function Session:on_break(spec, fn)
  local r = self._ud:breakpoint { add = { point_spec(spec) } }
  local bp = r.breakpoints[1]
  if not bp then
    strobe.error("VALIDATION_ERROR", "on_break needs a breakpoint (file:line or function), not a logpoint")
  end
  self._handlers[bp.id] = fn or false
  return bp
end

local function paused_entry(s, thread)
  for _, p in ipairs(s._ud:paused()) do
    if p.threadId == thread then
      return p
    end
  end
end

-- hit.locals (name -> value), hit.vars (with types), hit.backtrace and hit.args are
-- read on first use.
Hit.__index = function(h, k)
  if Hit[k] ~= nil then
    return Hit[k]
  end
  if k == "locals" or k == "vars" then
    local r = h.session._ud:locals { threadId = h.thread }
    local by_name = {}
    for _, v in ipairs(r.locals) do
      if v.value ~= nil then
        by_name[v.name] = v.value
      else
        by_name[v.name] = v.error and ("<" .. v.error .. ">") or strobe.json.null
      end
    end
    rawset(h, "locals", by_name)
    rawset(h, "vars", r.locals)
    return rawget(h, k)
  end
  if k == "backtrace" or k == "args" then
    local p = paused_entry(h.session, h.thread) or {}
    rawset(h, "backtrace", p.backtrace or strobe.json.array())
    rawset(h, "args", p.arguments or strobe.json.array())
    return rawget(h, k)
  end
  return nil
end

-- hit:eval("q->len") evaluates a C/C++/Rust expression in the paused frame (session:eval).
function Hit:eval(expr, frame)
  local s = self.session
  if s.eval == nil then
    strobe.error("VALIDATION_ERROR", "hit:eval needs session:eval, which this build does not have; read hit.locals instead")
  end
  local r = s._ud:eval { expressions = { expr }, threadId = self.thread, frame = frame }
  local first = r and r.results and r.results[1]
  if first == nil then
    return r
  end
  if first.error then
    strobe.error("EVAL_ERROR", tostring(first.error))
  end
  if first.value ~= nil then
    return first.value
  end
  return first
end

function Hit:stop()
  rawset(self, "_stop", true)
end

local function make_hit(s, r, n)
  return setmetatable({
    session = s, n = n, thread = r.threadId, pid = r.pid, breakpointId = r.breakpointId,
    ["function"] = r["function"], file = r.file, line = r.line,
  }, Hit)
end

-- s:run{stop_when = function(hit) ... end, count = N, timeoutMs = 30000}
-- Continues the program, calling the on_break handler of each hit, until it exits
-- (reason "exit"), a handler returns "stop" ("stopped"), stop_when(hit) is true
-- ("until"), count hits were seen ("count"), or timeoutMs passed ("timeout").
-- `["until"]` is accepted for stop_when. Returns {reason, hits, exitCode?, line?}.
function Session:run(opts)
  opts = opts or {}
  local stop_when = opts.stop_when or opts["until"]
  local deadline = strobe.now_ms() + (opts.timeoutMs or 30000)
  local out = { hits = 0 }
  local pending
  -- A thread already paused at one of our breakpoints is the first hit; any other
  -- pause (stopOnEntry, a step) is just continued from.
  local already = self._ud:paused()
  local p = already[1]
  if p and self._handlers[p.breakpointId] ~= nil then
    pending = { status = "paused", threadId = p.threadId, pid = p.pid, breakpointId = p.breakpointId,
      file = p.file, line = p.line, ["function"] = p["function"] }
  end
  while true do
    local left = deadline - strobe.now_ms()
    if left <= 0 then
      out.reason = "timeout"
      break
    end
    local r = pending or self._ud:continue { timeoutMs = math.min(left, 300000) }
    pending = nil
    if r.status == "exited" then
      out.reason, out.exitCode = "exit", r.exitCode
      break
    end
    if r.status ~= "paused" then
      out.reason = "timeout"
      break
    end
    out.hits = out.hits + 1
    local hit = make_hit(self, r, out.hits)
    local handler = self._handlers[r.breakpointId]
    local verdict = handler and handler(hit)
    if verdict == "stop" or rawget(hit, "_stop") then
      out.reason, out.file, out.line = "stopped", hit.file, hit.line
      break
    end
    if type(stop_when) == "function" and stop_when(hit) then
      out.reason, out.file, out.line = "until", hit.file, hit.line
      break
    end
    if opts.count and out.hits >= opts.count then
      out.reason = "count"
      break
    end
  end
  return out
end

-- Wrap what the script sees: strobe.launch / strobe.session return wrapped sessions;
-- `session` (the caller's sessionId) and `args` are globals.
function M.install(session_id, args)
  local raw_launch, raw_session = strobe.launch, strobe.session
  strobe.launch = function(a)
    local s, info = raw_launch(a)
    return wrap(s), info
  end
  strobe.session = function(id)
    return wrap(raw_session(id))
  end
  if session_id then
    session = strobe.session(session_id)
  end
  _G.args = args
end

local function is_session(v)
  return type(v) == "table" and rawget(v, "_ud") ~= nil
end

-- The script's value as plain JSON data: sessions become their ids, functions and
-- other userdata their names, cycles "<cycle>".
local function plain(v, seen, depth)
  local t = type(v)
  if v == strobe.json.null then
    return v
  end
  if is_session(v) then
    return v.id
  end
  if t == "table" then
    if seen[v] then
      return "<cycle>"
    end
    if depth > 40 then
      return "<too deep>"
    end
    seen[v] = true
    local n, count = #v, 0
    for _ in pairs(v) do
      count = count + 1
    end
    local out
    if count == n and (n > 0 or getmetatable(v) == getmetatable(strobe.json.array())) then
      out = strobe.json.array()
      for i = 1, n do
        out[i] = plain(v[i], seen, depth + 1)
      end
    else
      out = {}
      for k, x in pairs(v) do
        if type(k) ~= "string" or k:sub(1, 1) ~= "_" or not is_session(v) then
          out[tostring(k)] = plain(x, seen, depth + 1)
        end
      end
    end
    seen[v] = nil
    return out
  end
  if t == "userdata" then
    local ok, id = pcall(function() return v.id end)
    if ok and type(id) == "string" then
      return id
    end
    return tostring(v)
  end
  if t == "function" or t == "thread" then
    return tostring(v)
  end
  if t == "number" and (v ~= v or v == math.huge or v == -math.huge) then
    return tostring(v)
  end
  return v
end

-- The script's return value -> { result = plain data, keep = { session ids } }.
-- `return {keep = s}` (or keep = {s1, s2}) keeps those sessions running.
function M.finish(v)
  local keep = strobe.json.array()
  if type(v) == "table" and not is_session(v) and v.keep ~= nil then
    local k = v.keep
    if is_session(k) or type(k) == "string" or type(k) == "userdata" then
      k = { k }
    end
    for _, s in ipairs(k) do
      keep[#keep + 1] = plain(s, {}, 0)
    end
  end
  return { result = plain(v, {}, 0), keep = keep }
end

return M
