-- MCP tool: debug_launch — spawn a program under Frida with its output captured.
local guidance = require("guidance")

return {
  name = "debug_launch",
  description = [[Spawn a process with Frida attached. Its stdout/stderr are ALWAYS captured (no tracing needed). Staged patterns (debug_trace without sessionId) are installed before the process runs.
Recommended workflow: launch with no patterns, read stderr/stdout with debug_query, then add targeted traces with debug_trace on the running session.]],
  inputSchema = {
    type = "object",
    required = { "command", "projectRoot" },
    additionalProperties = false,
    properties = {
      command = { type = "string", minLength = 1, description = "Path to the executable (absolute, or relative to cwd)" },
      args = { type = "array", items = { type = "string" }, description = "Command line arguments" },
      cwd = { type = "string", description = "Working directory (default: the daemon's)" },
      projectRoot = { type = "string", minLength = 1, description = "Root of the user's code (for @usercode)" },
      env = { type = "object", additionalProperties = { type = "string" }, description = "Extra environment variables" },
    },
  },
  handler = function(args)
    local session, info = strobe.launch(args)
    local out = {
      sessionId = session.id,
      pid = session.pid,
      nextSteps = guidance.after_launch(session.id, info.pendingPatternsApplied),
    }
    if info.pendingPatternsApplied > 0 then
      out.pendingPatternsApplied = info.pendingPatternsApplied
      out.hookedFunctions = info.hookedFunctions
    end
    if #info.warnings > 0 then
      out.warnings = info.warnings
    end
    return out
  end,
}
