-- Shared by debug_breakpoint, debug_launch and debug_continue: the schema of one
-- breakpoint/logpoint item, and the locals of a paused thread.
local M = {}

M.point_item = {
  type = "object",
  additionalProperties = false,
  properties = {
    ["function"] = { type = "string", description = "Function name or pattern matching exactly one function (breaks at its entry; args are its parameters)" },
    file = { type = "string", description = "Source file: absolute, relative ('src/foo.c') or a bare name ('foo.c'); with line" },
    line = { type = "integer", minimum = 1, description = "1-based line; a line without code snaps to the next line with code (up to 3 lines)" },
    condition = { type = "string", maxLength = 1024, description = "Expression in debug_eval's C-like language, checked in the target on every hit (no round trip): 'q->len == q->cap && n > 0', 'args[0] > 100' (i-th parameter). Prefix 'js:' for JavaScript" },
    hitCount = { type = "integer", minimum = 0, description = "Breakpoints: pause only on the Nth hit (counted after the condition); 0 = every hit" },
    message = { type = "string", maxLength = 2048, description = "Makes a logpoint (never pauses): template with {expression} in debug_eval's language, e.g. 'len={q->len} tail={q->items[q->tail].key}'; {threadId} and {hit} too" },
  },
}

-- The locals of `thread_id`'s paused frame, or nil when they cannot be read.
function M.locals_of(s, thread_id)
  local ok, r = pcall(function() return s:locals({ threadId = thread_id }) end)
  if ok then return strobe.json.array(r.locals) end
  return nil
end

return M
