-- MCP tool: debug_trace — add/remove trace patterns on a running session, or stage
-- them for the next launch when no sessionId is given.
local guidance = require("guidance")

-- The per-session event limit (settings arrive with the settings work; this is the spec default).
local EVENT_LIMIT = 200000

return {
  name = "debug_trace",
  description = [[Add or remove function trace patterns. With sessionId: changes hooks on the running process, no restart (recommended, after reading its output). Without sessionId: stages patterns for the next debug_launch.
Patterns are globs on demangled names: 'foo::bar' exact, 'foo::*' direct children ('*' stops at '::'), 'foo::**' all descendants, '*::validate', '@usercode' (functions under projectRoot), '@file:parser.c' (declared in files whose path contains the text).]],
  inputSchema = {
    type = "object",
    additionalProperties = false,
    properties = {
      sessionId = { type = "string", description = "Running session; omit to stage patterns for the next launch" },
      add = { type = "array", items = { type = "string" }, description = "Patterns to add" },
      remove = { type = "array", items = { type = "string" }, description = "Patterns to remove" },
    },
  },
  handler = function(args)
    local r
    if args.sessionId then
      r = strobe.session(args.sessionId):trace({ add = args.add, remove = args.remove })
    else
      r = strobe.trace_pending({ add = args.add, remove = args.remove })
    end
    local out = {
      mode = r.mode,
      activePatterns = r.activePatterns,
      hookedFunctions = r.hookedFunctions,
      activeWatches = strobe.json.array(),
      warnings = r.warnings,
      eventLimit = EVENT_LIMIT,
      status = guidance.trace_status(r),
    }
    if r.matchedFunctions ~= r.hookedFunctions then
      out.matchedFunctions = r.matchedFunctions
    end
    return out
  end,
}
