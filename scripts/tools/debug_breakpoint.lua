-- MCP tool: debug_breakpoint — set/remove breakpoints and logpoints on a running session.
local function summary(r)
  local nb, nl = #r.breakpoints, #r.logpoints
  return string.format(
    "%d breakpoint(s), %d logpoint(s) active. A hit pauses only the thread that hit it: wait for it with debug_continue, or find it with debug_query({eventType: 'pause'}). Logpoint output: debug_query({eventType: 'logpoint'}).",
    nb, nl)
end

local point = {
  type = "object",
  additionalProperties = false,
  properties = {
    ["function"] = { type = "string", description = "Function name or pattern matching exactly one function (breaks at its entry; args are its parameters)" },
    file = { type = "string", description = "Source file: absolute, relative ('src/foo.c') or a bare name ('foo.c'); with line" },
    line = { type = "integer", minimum = 1, description = "1-based line; a line without code snaps to the next line with code (up to 3 lines)" },
    condition = { type = "string", maxLength = 1024, description = "JavaScript expression; pauses/logs only when true. 'args[i]' are the function's parameters, locals are available by name: 'args[0] > 100', 'count < 0'" },
    hitCount = { type = "integer", minimum = 0, description = "Breakpoints: pause only on the Nth hit (counted after the condition); 0 = every hit" },
    message = { type = "string", maxLength = 2048, description = "Makes a logpoint (never pauses): template with {expr}, e.g. 'size={buffer_size} first={args[0]}'" },
  },
}

return {
  name = "debug_breakpoint",
  description = [[Set or remove breakpoints and logpoints on a running session. A breakpoint pauses only the thread that hits it (others keep running); a logpoint (with 'message') records a 'logpoint' event and never pauses. Target a function ('function') or a source line ('file' + 'line'). While paused: debug_continue to resume or step; locals via debug_continue's response, session:locals() in Lua. Limits: 50 breakpoints, 100 logpoints.]],
  inputSchema = {
    type = "object",
    required = { "sessionId" },
    additionalProperties = false,
    properties = {
      sessionId = { type = "string", minLength = 1 },
      add = { type = "array", items = point },
      remove = { type = "array", items = { type = "string" }, description = "Breakpoint/logpoint ids to remove; a thread paused on a removed breakpoint is resumed" },
    },
  },
  handler = function(args)
    if (not args.add or #args.add == 0) and (not args.remove or #args.remove == 0) then
      strobe.error("VALIDATION_ERROR", "Nothing to do: pass 'add' (e.g. [{file: 'main.c', line: 42}]) and/or 'remove' (ids).")
    end
    local r = strobe.session(args.sessionId):breakpoint({ add = args.add, remove = args.remove })
    return {
      breakpoints = strobe.json.array(r.breakpoints),
      logpoints = strobe.json.array(r.logpoints),
      status = summary(r),
    }
  end,
}
