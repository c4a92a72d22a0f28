-- MCP tool: debug_session — status, stop, list and delete sessions.
local actions = {}

function actions.status(args)
  local st = strobe.session(args.sessionId):status()
  st.breakpoints = strobe.json.array()
  st.logpoints = strobe.json.array()
  st.watches = strobe.json.array()
  st.pausedThreads = strobe.json.array()
  st.tracePatterns = strobe.json.array(st.tracePatterns)
  return st
end

function actions.stop(args)
  local n = strobe.stop_session(args.sessionId, args.retain or false)
  return { success = true, eventsCollected = n }
end

function actions.list()
  return { sessions = strobe.json.array(strobe.sessions()) }
end

function actions.delete(args)
  strobe.delete_session(args.sessionId)
  return { success = true }
end

return {
  name = "debug_session",
  description = [[Manage debug sessions. action 'status': state, pid, exit code, event count, hooks. 'stop': kill the target and end the session (retain: true keeps its events for later queries; otherwise they are deleted). 'list': live and retained sessions. 'delete': remove a retained session's data.]],
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
  handler = function(args)
    if args.action ~= "list" and not args.sessionId then
      strobe.error("VALIDATION_ERROR", "sessionId is required for action '" .. args.action .. "'. Use action 'list' to see sessions.")
    end
    return actions[args.action](args)
  end,
}
