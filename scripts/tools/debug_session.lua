-- MCP tool: debug_session — status, stop, list and delete sessions.
local actions = {}

-- Retention settings apply to what stop/list keep; bad values come back as warnings
-- (settings are re-read on every call).
local function with_settings_warnings(out, opts)
  local settings = strobe.settings(opts)
  if #settings.warnings > 0 then
    out.warnings = settings.warnings
  end
  return out
end

function actions.status(args)
  local st = strobe.session(args.sessionId):status()
  local dbg = strobe.session(args.sessionId):debug_state()
  st.breakpoints = strobe.json.array(dbg.breakpoints)
  st.logpoints = strobe.json.array(dbg.logpoints)
  st.watches = strobe.json.array(strobe.session(args.sessionId):watches())
  st.pausedThreads = strobe.json.array(dbg.pausedThreads)
  -- "paused" while any thread waits at a breakpoint (the others may still run).
  if st.status == "running" and #dbg.pausedThreads > 0 then st.status = "paused" end
  st.tracePatterns = strobe.json.array(st.tracePatterns)
  st.children = strobe.json.array(st.children)
  st.sampledFunctions = strobe.json.array(st.sampledFunctions)
  return st
end

function actions.stop(args)
  local n = strobe.stop_session(args.sessionId, args.retain or false)
  return with_settings_warnings({ success = true, eventsCollected = n }, {})
end

function actions.list()
  local sessions = strobe.sessions()
  for _, s in ipairs(sessions) do
    if s.endedAt == nil then
      s.endedAt = strobe.json.null -- live: the spec's shape says null, not absent
    end
  end
  return with_settings_warnings({ sessions = strobe.json.array(sessions) }, {})
end

function actions.delete(args)
  strobe.delete_session(args.sessionId)
  return { success = true }
end

return {
  name = "debug_session",
  title = "Session status, stop, list, delete",
  -- stop kills the target; delete removes its data. Repeating a call changes nothing more.
  annotations = { readOnlyHint = false, destructiveHint = true, idempotentHint = true, openWorldHint = false },
  description = [[Manage debug sessions. action 'status': state, pid, exitCode or the killing signal (exitReason says which), breakpoints and logpoints with their hits, paused threads, forked/exec'd children, event count, hooks. 'stop': kill the target where it stands (a paused thread runs no further; its children too) and end the session (retain: true keeps its events for later queries; otherwise they are deleted). 'list': live and retained sessions. 'delete': remove a retained session's data.]],
  inputSchema = {
    type = "object",
    required = { "action" },
    additionalProperties = false,
    properties = {
      action = { type = "string", enum = { "status", "stop", "list", "delete" } },
      sessionId = { type = "string", minLength = 1 },
      retain = { type = "boolean", description = "With stop: keep the session's events for post-mortem queries" },
    },
  },
  -- One shape per action (status, stop, list, delete); clients get it as structuredContent.
  outputSchema = {
    type = "object",
    anyOf = {
      { required = { "sessionId", "status", "pid" } },
      { required = { "success", "eventsCollected" } },
      { required = { "sessions" } },
      { required = { "success" } },
    },
    properties = {
      sessionId = { type = "string" },
      status = { type = "string", description = "running, paused, exited or stopped" },
      pid = { type = "integer" },
      binaryPath = { type = "string" },
      exitCode = { type = { "integer", "null" } },
      exitReason = { type = { "string", "null" } },
      signal = { type = { "string", "null" } },
      children = { type = "array", items = { type = "object" } },
      eventCount = { type = "integer" },
      hookedFunctions = { type = "integer" },
      tracePatterns = { type = "array", items = { type = "string" } },
      eventsLost = { type = "integer" },
      sampledFunctions = { type = "array", items = { type = "object" } },
      breakpoints = { type = "array", items = { type = "object" } },
      logpoints = { type = "array", items = { type = "object" } },
      watches = { type = "array", items = { type = "object" } },
      pausedThreads = { type = "array", items = { type = "object" } },
      success = { type = "boolean" },
      eventsCollected = { type = "integer" },
      sessions = { type = "array", items = { type = "object", required = { "sessionId", "status" } } },
      warnings = { type = "array", items = { type = "string" } },
    },
  },
  handler = function(args)
    if args.action ~= "list" and not args.sessionId then
      strobe.error("VALIDATION_ERROR", "sessionId is required for action '" .. args.action .. "'. Use action 'list' to see sessions.")
    end
    return actions[args.action](args)
  end,
}
