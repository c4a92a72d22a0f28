-- A custom MCP tool: how often each traced function was called, busiest first.
-- Install it by copying it to $STROBE_HOME/scripts/tools/ (or a trusted project's
-- .strobe/scripts/tools/); a running daemon picks it up at once.
return {
  name = "call_counts",
  description = "Count the calls of each traced function in a session (from its function_enter events), busiest first.",
  title = "Count calls per function",
  annotations = { readOnlyHint = true, destructiveHint = false, idempotentHint = true, openWorldHint = false },
  requires = "session",
  inputSchema = {
    type = "object",
    required = { "sessionId" },
    additionalProperties = false,
    properties = {
      sessionId = { type = "string", minLength = 1 },
      top = { type = "integer", minimum = 1, maximum = 100, description = "How many functions to list (default 20)" },
    },
  },
  -- Clients get the answer as structuredContent too.
  outputSchema = {
    type = "object",
    required = { "totalCalls", "functions" },
    properties = {
      totalCalls = { type = "integer" },
      functions = { type = "array", items = { type = "object", required = { "function", "calls" },
        properties = { ["function"] = { type = "string" }, calls = { type = "integer" } } } },
    },
  },
  handler = function(args)
    local s = strobe.session(args.sessionId)
    local counts, total, after = {}, 0, nil
    -- Page through every enter event (500 per query).
    repeat
      local r = s:query({ eventType = "function_enter", limit = 500, afterEventId = after })
      for _, e in ipairs(r.events) do
        local name = e["function"] or "?"
        counts[name] = (counts[name] or 0) + 1
        total = total + 1
      end
      after = r.lastEventId
    until not r.hasMore or #r.events == 0
    local rows = {}
    for name, n in pairs(counts) do table.insert(rows, { ["function"] = name, calls = n }) end
    table.sort(rows, function(a, b) return a.calls > b.calls or (a.calls == b.calls and a["function"] < b["function"]) end)
    local top = {}
    for i = 1, math.min(args.top or 20, #rows) do top[i] = rows[i] end
    return { totalCalls = total, functions = strobe.json.array(top) }
  end,
}
