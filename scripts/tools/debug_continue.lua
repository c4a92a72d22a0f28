-- MCP tool: debug_continue — resume paused threads or step one, then report where
-- execution stopped next (or that it is still running, or exited).
local locals_of = require("stops").locals_of

return {
  name = "debug_continue",
  title = "Continue or step a paused program",
  -- setLocals writes the target; resuming lets the program act on the world.
  annotations = { readOnlyHint = false, destructiveHint = true, idempotentHint = false, openWorldHint = true },
  description = [[Resume after a breakpoint pause. action: 'continue' (default; resumes every paused thread unless threadId is given), 'step-over' (next line of this function), 'step-into' (into a function called on this line), 'step-out' (to the caller's next line). Waits for the next pause or the exit (up to timeoutMs, default 10000; then status is 'running'); on exit it gives exitCode, or signal when a signal killed the process; a process that stopped itself (raise(SIGSTOP)) is listed in stoppedBySignal, and 'continue' sends it SIGCONT. When paused, the response includes the frame's locals and backtrace. 'inspect' waits for a pause without resuming anything (use it right after setting breakpoints). setLocals writes locals of the paused frame (by name) before the action.]],
  inputSchema = {
    type = "object",
    required = { "sessionId" },
    additionalProperties = false,
    properties = {
      sessionId = { type = "string", minLength = 1 },
      action = { type = "string", enum = { "continue", "step-over", "step-into", "step-out", "inspect" }, description = "'inspect' resumes nothing: it reports the paused thread (waiting up to timeoutMs for a first pause) and its locals, after setLocals" },
      threadId = { type = "integer", description = "The paused thread to act on (default: the most recently paused; 'continue' without it resumes all)" },
      timeoutMs = { type = "integer", minimum = 0, maximum = 300000 },
      setLocals = {
        type = "object",
        description = "Locals of the paused frame to write before acting, by name: {buffer_size: 256}",
        additionalProperties = { type = { "number", "string", "boolean" } },
      },
    },
  },
  -- The answer's shape (the next stop, still running, or the exit): clients get it as structuredContent.
  outputSchema = {
    type = "object",
    required = { "status", "nextSteps" },
    properties = {
      status = { type = "string", description = "paused, running or exited" },
      nextSteps = { type = "string" },
      threadId = { type = "integer" },
      pid = { type = "integer" },
      breakpointId = { type = "string" },
      reason = { type = "string" },
      ["function"] = { type = "string" },
      file = { type = "string" },
      line = { type = "integer" },
      backtrace = { type = "array", items = { type = "object" } },
      arguments = { description = "The paused function's arguments" },
      locals = { type = "array", items = { type = "object", required = { "name" } } },
      localsWritten = { type = "array", items = { type = "object" } },
      exitCode = { type = "integer" },
      signal = { type = "string" },
      exitReason = { type = "string" },
      pausedThreads = { type = "integer", description = "Threads still paused after this call" },
      stoppedBySignal = { type = "array", items = { type = "integer" }, description = "With status 'running': processes stopped by a signal (raise(SIGSTOP)); 'continue' sends them SIGCONT" },
      warnings = { type = "array", items = { type = "string" } },
    },
  },
  handler = function(args)
    local s = strobe.session(args.sessionId)
    local written = nil
    if args.setLocals then
      written = strobe.json.array()
      for name, value in pairs(args.setLocals) do
        table.insert(written, s:set_local({ name = name, value = value, threadId = args.threadId }))
      end
    end
    local out
    if args.action == "inspect" then
      -- Waits (up to timeoutMs) for a pause if none yet; resumes nothing.
      out = s:wait_pause({ timeoutMs = args.timeoutMs })
      for _, p in ipairs(s:paused()) do
        if p.threadId == (args.threadId or out.threadId) then
          out.threadId, out.pid, out.breakpointId, out.file, out.line = p.threadId, p.pid, p.breakpointId, p.file, p.line
          out["function"], out.backtrace, out.arguments = p["function"], p.backtrace, p.arguments
        end
      end
    else
      out = s:continue({ action = args.action or "continue", threadId = args.threadId, timeoutMs = args.timeoutMs })
    end
    if out.status == "paused" and out.threadId then
      out.locals = locals_of(s, out.threadId)
    end
    out.localsWritten = written
    if out.status == "paused" then
      out.nextSteps = "Inspect locals (in this response), change one with setLocals, then debug_continue again (action 'continue', 'step-over', 'step-into' or 'step-out')."
    elseif out.status == "running" and out.stoppedBySignal then
      out.nextSteps = "The process stopped itself with a signal (e.g. raise(SIGSTOP)) and will not reach a breakpoint: inspect memory or globals now (debug_memory), or debug_continue({action: 'continue'}) to send it SIGCONT."
    elseif out.status == "running" then
      out.nextSteps = "No pause yet; the target is running. Call debug_continue({action: 'inspect'}) or debug_session status later, or query events."
    else
      out.nextSteps = "The process exited. Read its output with debug_query({eventType: 'stdout'})."
    end
    return out
  end,
}
