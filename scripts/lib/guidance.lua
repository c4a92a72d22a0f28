-- Guidance texts for tool responses (`nextSteps`, `status`). The wording lives in hint
-- rules (scripts/hints/*.lua), so users add or override rules without touching tools;
-- this module keeps the tools' calls short.
local M = {}

function M.after_launch(session_id, pending_applied, python_target, hooked)
  return strobe.hint("launch", { sessionId = session_id, pendingPatternsApplied = pending_applied or 0,
    pythonTarget = python_target or false, hookedFunctions = hooked or 0 }) or ""
end

-- Why a runtime trace hooked what it did, and what to try next. `r` is session:trace's result.
function M.trace_status(r)
  return strobe.hint("trace", r) or ""
end

return M
