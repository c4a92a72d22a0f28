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

-- Summary mode keeps what an LLM needs to choose where to look next.
local function summarize(e)
  local s = { id = e.id, eventType = e.eventType, timestampNs = e.timestampNs }
  if e.eventType == "stdout" or e.eventType == "stderr" then
    s.text = e.text
  else
    s["function"] = e["function"]
    s.sourceFile = e.sourceFile
    s.line = e.line
    s.durationNs = e.durationNs
  end
  return s
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
      events[i] = args.verbose and e or summarize(e)
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
