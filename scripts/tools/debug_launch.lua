-- MCP tool: debug_launch — spawn a program under Frida with its output captured, with the
-- caller's staged patterns and breakpoints (and its own stops) in place before it runs.
local guidance = require("guidance")

local stops = require("stops")

return {
  name = "debug_launch",
  title = "Launch a program under the debugger",
  -- Runs an arbitrary program, which may reach anything.
  annotations = { readOnlyHint = false, destructiveHint = false, idempotentHint = false, openWorldHint = true },
  description = [[Spawn a process with Frida attached. Its stdout/stderr are ALWAYS captured (no tracing needed). Before the first instruction runs it installs what this connection staged (debug_trace / debug_breakpoint without sessionId) and the launch's own 'breakpoints'; 'stopOnEntry' pauses at main (a Rust program's <crate>::main). The response lists every stop with its id, static 'address' and 'runtimeAddress', and the first pause if it came within 1 s, 2 s with stopOnEntry (status 'paused', function, file:line, arguments, locals).
Programs that finish in milliseconds: stop them first, e.g. {command: './app', projectRoot: '/src/app', stopOnEntry: true, breakpoints: [{file: 'parse.c', line: 42}]}, then debug_continue.
Otherwise: launch with no patterns, read stderr/stdout with debug_query, then add targeted traces with debug_trace on the running session.]],
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
      breakpoints = { type = "array", items = stops.point_item, maxItems = 150,
        description = "Breakpoints/logpoints set before the program runs (same items as debug_breakpoint's add). All or nothing: one that does not resolve fails the launch, nothing is left running." },
      stopOnEntry = { type = "boolean", description = "Pause at the program's main before it runs (the user's <crate>::main for Rust)" },
    },
  },
  -- The answer's shape: clients get it as structuredContent.
  outputSchema = {
    type = "object",
    required = { "sessionId", "pid", "nextSteps" },
    additionalProperties = false,
    properties = {
      sessionId = { type = "string" },
      pid = { type = "integer" },
      nextSteps = { type = "string" },
      pendingPatternsApplied = { type = "integer" },
      stagedPatterns = { type = "array", items = { type = "string" } },
      hookedFunctions = { type = "integer" },
      breakpoints = { type = "array", items = { type = "object" } },
      logpoints = { type = "array", items = { type = "object" } },
      status = { type = "string", description = "paused, exited or running (the first stop, when one came)" },
      pausedThread = { type = "object", required = { "threadId" }, properties = {
        threadId = { type = "integer" }, pid = { type = "integer" }, breakpointId = { type = "string" },
        ["function"] = { type = "string" }, file = { type = "string" }, line = { type = "integer" },
        arguments = { type = "array" }, locals = { type = "array", items = { type = "object" } } } },
      exitCode = { type = "integer" },
      warnings = { type = "array", items = { type = "string" } },
    },
  },
  handler = function(args)
    local session, info = strobe.launch(args)
    local out = {
      sessionId = session.id,
      pid = session.pid,
      nextSteps = guidance.after_launch(session.id, info.pendingPatternsApplied, info.pythonTarget, info.hookedFunctions),
    }
    if info.pendingPatternsApplied > 0 then
      out.pendingPatternsApplied = info.pendingPatternsApplied
      out.stagedPatterns = info.stagedPatterns
      out.hookedFunctions = info.hookedFunctions
    end
    if #info.breakpoints > 0 then
      local bps, lps = strobe.json.array(), strobe.json.array()
      for _, p in ipairs(info.breakpoints) do
        table.insert(p.message and lps or bps, p)
      end
      out.breakpoints, out.logpoints = bps, lps
    end
    local pause = info.pause
    if pause then
      out.status = pause.status
      if pause.status == "paused" then
        out.pausedThread = {
          threadId = pause.threadId, pid = pause.pid, breakpointId = pause.breakpointId,
          ["function"] = pause["function"], file = pause.file, line = pause.line,
          arguments = pause.arguments, locals = stops.locals_of(session, pause.threadId),
        }
        out.nextSteps = "Paused before the program went on. Inspect pausedThread (locals, arguments), then debug_continue (action 'continue', 'step-over', 'step-into', 'step-out'); more breakpoints with debug_breakpoint."
      elseif pause.status == "exited" then
        out.exitCode = pause.exitCode
        out.nextSteps = "The program exited without hitting a breakpoint. Check the breakpoints' locations, and read its output with debug_query({eventType: 'stdout'})."
      else
        out.nextSteps = "No breakpoint hit yet; the program runs. Wait for one with debug_continue({action: 'inspect'})."
      end
    end
    if #info.warnings > 0 then
      out.warnings = info.warnings
    end
    return out
  end,
}
