-- Guidance texts for tool responses: the `nextSteps` and `status` fields that steer
-- an LLM toward the observe-first workflow. Kept apart from the tools so a user can
-- override the wording with their own scripts/lib/guidance.lua.
local M = {}

function M.after_launch(session_id, pending_applied)
  if pending_applied and pending_applied > 0 then
    return string.format(
      "Launched with %d staged pattern(s) applied. Query events with debug_query({sessionId: %q, eventType: 'function_enter'}); read output with eventType 'stdout' or 'stderr'.",
      pending_applied, session_id)
  end
  return string.format(
    "Query stderr/stdout first: debug_query({sessionId: %q, eventType: 'stderr'}). Add traces only if the output does not explain the problem: debug_trace({sessionId: %q, add: ['module::*']}).",
    session_id, session_id)
end

-- Why a runtime trace hooked what it did, and what to try next.
function M.trace_status(r)
  if r.mode == "pending" then
    return "Patterns staged for the next debug_launch. Recommended instead: launch without patterns, read the output, then add patterns to the running session."
  end
  if #r.activePatterns == 0 then
    return "No trace patterns are active. Add some with add: ['name::*'] (glob on demangled names; '*' stops at '::', '**' crosses it), '@usercode' or '@file:part'."
  end
  if r.hookedFunctions == 0 then
    local lines = { "0 functions hooked. Possible causes: a typo in the pattern, the function was inlined or optimized out, or it lives in a library without debug symbols." }
    for _, s in ipairs(r.suggestions or {}) do
      local pattern, names = s[1], s[2]
      if names and #names > 0 then
        table.insert(lines, string.format("Closest names to '%s': %s.", pattern, table.concat(names, ", ")))
      end
    end
    return table.concat(lines, " ")
  end
  local n = r.hookedFunctions
  local stability
  if n < 50 then
    stability = "Under 50 hooks - excellent stability."
  elseif n < 500 then
    stability = "Moderate hook count - fine for most programs; narrow the patterns if the target slows down."
  else
    stability = "Many hooks - expect a visible slowdown and many events; narrow the patterns if you can."
  end
  return string.format("%d function(s) hooked. %s Query with debug_query({sessionId, eventType: 'function_enter'}).", n, stability)
end

return M
