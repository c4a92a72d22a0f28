-- MCP tool: debug_query — read the session's timeline: output, function calls, crashes.
local shape_lib = require("shape")

-- Answer size when maxBytes is not given: keeps a verbose query of a big program's
-- state from flooding the client.
local DEFAULT_MAX_BYTES = 512 * 1024
-- Arguments that shape the answer (the Rust query does not take them).
local SHAPING = { "fields", "argDepth", "maxBytes", "joinOutput", "verbose" }
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
  if e.unwound then
    return "unwound" -- left by an exception or a longjmp: no return value
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
    s.unwound = e.unwound
  end
  if e.eventType == "logpoint" or e.eventType == "condition_error" then
    s.text = e.logpointMessage or e.text
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
  title = "Query the event timeline",
  -- Reads recorded events only.
  annotations = { readOnlyHint = true, destructiveHint = false, idempotentHint = true, openWorldHint = false },
  description = [[Query the session's execution timeline in chronological order: process stdout/stderr (always captured), function_enter/function_exit of traced functions, logpoints, crashes. Start with eventType 'stderr' or 'stdout' (joinOutput: true joins consecutive lines into one text). Summary mode by default; verbose: true adds arguments, return values, thread and parent ids. An exit with unwound: true (returnType 'unwound') is a call an exception or longjmp left: it returned nothing. Keep answers small with fields (e.g. ["function","arguments"]), argDepth (nesting of arguments/return values) and maxBytes (default 524288): a cut answer says how to get the rest. Page with limit/offset, or poll new events with afterEventId = lastEventId.]],
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
      fields = { type = "array", items = { type = "string" }, minItems = 1,
        description = "Return only these fields of each event, e.g. [\"id\", \"function\", \"arguments\"]" },
      argDepth = { type = "integer", minimum = 0, maximum = 32,
        description = "Nesting shown of arguments, returnValue, locals, watchValues; deeper levels become '{n fields}'" },
      maxBytes = { type = "integer", minimum = 1024, maximum = 16777216,
        description = "Answer size budget (default 524288); when cut, continueAfterEventId says where to go on" },
      joinOutput = { type = "boolean", description = "Join consecutive stdout/stderr lines into one event (lines counts them)" },
    },
  },
  -- The answer's shape: clients get it as structuredContent (checked by tests/mcp/test_tool_shapes.py).
  outputSchema = {
    type = "object",
    required = { "events", "totalCount", "hasMore" },
    additionalProperties = false,
    properties = {
      events = { type = "array", items = { type = "object" }, description = "Events, oldest first (summary, verbose or 'fields' shape)" },
      totalCount = { type = "integer", minimum = 0 },
      hasMore = { type = "boolean" },
      lastEventId = { type = "integer", description = "Pass as afterEventId to poll for newer events" },
      pids = { type = "array", items = { type = "integer" } },
      eventsDropped = { type = "boolean" },
      truncated = { type = "object", required = { "returned", "leftOut" },
        properties = { returned = { type = "integer" }, leftOut = { type = "integer" } } },
      continueAfterEventId = { type = "integer" },
      note = { type = "string" },
    },
  },
  handler = function(args)
    local query = {}
    for k, v in pairs(args) do
      query[k] = v
    end
    for _, k in ipairs(SHAPING) do
      query[k] = nil
    end
    local r = strobe.session(args.sessionId):query(query)
    local events, eids = strobe.json.array(), {}
    for i, e in ipairs(r.events) do
      eids[i] = e.eventId
      if args.argDepth then
        for _, k in ipairs({ "arguments", "returnValue", "locals", "watchValues" }) do
          e[k] = shape_lib.cut(e[k], args.argDepth)
        end
      end
      events[i] = shape(e, args.verbose)
    end
    if args.joinOutput then
      events, eids = shape_lib.join_output(events, eids)
    end
    if args.fields then
      for i, e in ipairs(events) do
        events[i] = shape_lib.pick(e, args.fields)
      end
    end
    local out = { totalCount = r.totalCount, hasMore = r.hasMore }
    out.lastEventId = r.lastEventId
    out.pids = r.pids
    if r.eventsDropped then
      out.eventsDropped = true
    end
    -- Fit the events into what is left of the budget after the rest of the answer.
    local budget = (args.maxBytes or DEFAULT_MAX_BYTES) - #strobe.json.encode(out) - 400
    local kept, left = shape_lib.fit(events, budget)
    out.events = kept
    if left > 0 then
      local last = eids[#kept]
      out.hasMore = true
      out.truncated = { returned = #kept, leftOut = left }
      if last then
        out.lastEventId = last
        out.continueAfterEventId = last
        out.note = string.format(
          "maxBytes reached: %d of %d events returned. Call debug_query again with the same filters and afterEventId=%d for the rest, or narrow with fields/argDepth.",
          #kept, #events, last)
      else
        out.note = "maxBytes is too small for even one event: raise maxBytes, or narrow with fields/argDepth."
      end
    end
    return out
  end,
}
