-- MCP tool: debug_query — read the session's timeline: output, function calls, crashes.
local EVENT_TYPES = { "function_enter", "function_exit", "stdout", "stderr", "crash",
  "variable_snapshot", "pause", "logpoint", "condition_error" }

local text_filter = {
  type = "object",
  additionalProperties = false,
  properties = {
    equals = { type = "string" },
    contains = { type = "string" },
    matches = { type = "string", description = "Regular expression" },
  },
}

-- The kind of value a function returned, for the summary shape (the value itself is verbose).
local function return_type(e)
  if e.eventType ~= "function_exit" then
    return nil
  end
  local v = e.returnValue
  if v == nil or v == strobe.json.null or v == "0x0" then
    return "null"
  end
  if type(v) == "string" and v:match("^0x%x+$") then
    return "pointer"
  end
  if type(v) == "table" then
    return (#v > 0 or getmetatable(v) ~= nil) and "array" or "object"
  end
  return math.type(v) == "integer" and "integer" or type(v)
end

-- Summary mode keeps what an LLM needs to choose where to look next: the spec's
-- { id, timestampNs, function, sourceFile, line, durationNs, returnType }, plus eventType
-- and, for output, text (without it an stdout event says nothing).
local function summarize(e)
  local s = { id = e.id, eventType = e.eventType, timestampNs = e.timestampNs }
  if e.eventType == "stdout" or e.eventType == "stderr" then
    s.text = e.text
  else
    s["function"] = e["function"]
    s.sourceFile = e.sourceFile
    s.line = e.line
    s.durationNs = e.durationNs
    s.returnType = return_type(e)
  end
  if e.eventType == "crash" then
    -- "SIGSEGV: invalid write at 0x0 in f (x.c:12)"; verbose adds backtrace and registers.
    s.text = e.text
    s.signal = e.signal
    s.faultAddress = e.faultAddress
  end
  return s
end

-- Every key of the spec's shapes is present on function-side events (null when it does
-- not apply), so a caller can tell "no parent" from "not reported".
local SUMMARY_KEYS = { "function", "sourceFile", "line", "durationNs", "returnType" }
local VERBOSE_KEYS = { "functionRaw", "threadId", "threadName", "pid", "parentEventId", "arguments",
  "returnValue", "watchValues", "sampled" }

local function fill_nulls(t, keys)
  for _, k in ipairs(keys) do
    if t[k] == nil then
      t[k] = strobe.json.null
    end
  end
  return t
end

local function shape(e, verbose)
  if e.eventType == "stdout" or e.eventType == "stderr" then
    return verbose and e or summarize(e)
  end
  if not verbose then
    return fill_nulls(summarize(e), SUMMARY_KEYS)
  end
  e.returnType = return_type(e)
  return fill_nulls(fill_nulls(e, SUMMARY_KEYS), VERBOSE_KEYS)
end

return {
  name = "debug_query",
  description = [[Query the session's execution timeline in chronological order: process stdout/stderr (always captured), function_enter/function_exit of traced functions, crashes. Start with eventType 'stderr' or 'stdout'. Summary mode by default; verbose: true adds arguments, return values, thread and parent ids. Page with limit/offset, or poll new events with afterEventId = lastEventId.]],
  inputSchema = {
    type = "object",
    required = { "sessionId" },
    additionalProperties = false,
    properties = {
      sessionId = { type = "string", minLength = 1 },
      eventType = { type = "string", enum = EVENT_TYPES },
      ["function"] = text_filter,
      sourceFile = text_filter,
      returnValue = { type = "object", additionalProperties = false,
        properties = { equals = {}, isNull = { type = "boolean" } } },
      threadName = { type = "object", additionalProperties = false, properties = { contains = { type = "string" } } },
      timeFrom = { type = { "integer", "string" }, description = "Absolute ns since session start, or relative like '-5s', '-500ms'" },
      timeTo = { type = { "integer", "string" } },
      minDurationNs = { type = "integer", minimum = 0 },
      pid = { type = "integer" },
      limit = { type = "integer", minimum = 1, maximum = 500, description = "Default 50, max 500" },
      offset = { type = "integer", minimum = 0 },
      verbose = { type = "boolean" },
      afterEventId = { type = { "integer", "string" }, description = "Only events after this id (lastEventId of a previous query)" },
    },
  },
  handler = function(args)
    local r = strobe.session(args.sessionId):query(args)
    local events = strobe.json.array()
    for i, e in ipairs(r.events) do
      events[i] = shape(e, args.verbose)
    end
    local out = { events = events, totalCount = r.totalCount, hasMore = r.hasMore }
    out.lastEventId = r.lastEventId
    out.pids = r.pids
    if r.eventsDropped then
      out.eventsDropped = true
    end
    return out
  end,
}
