-- MCP tool: debug_breakpoint — set/remove breakpoints and logpoints on a running session,
-- or stage them for this connection's next debug_launch when no sessionId is given.
local function summary(r)
  local nb, nl = #r.breakpoints, #r.logpoints
  return string.format(
    "%d breakpoint(s), %d logpoint(s) active. A hit pauses only the thread that hit it: wait for it with debug_continue, or find it with debug_query({eventType: 'pause'}). Logpoint output: debug_query({eventType: 'logpoint'}).",
    nb, nl)
end

local point = require("stops").point_item

local function staged_summary(list)
  if #list == 0 then
    return "Nothing staged. Stage with debug_breakpoint({add: [{function: 'main'}]}) (no sessionId); debug_launch applies staged breakpoints before the program runs."
  end
  return string.format(
    "%d breakpoint(s)/logpoint(s) staged for this connection's next debug_launch (resolved against the launched program; one that does not resolve fails the launch). They stay staged for later launches until removed (remove: ['staged-N'] or clear: true).",
    #list)
end

return {
  name = "debug_breakpoint",
  title = "Set or remove breakpoints and logpoints",
  -- remove/clear delete stops (and resume a thread paused on one); add twice = two stops.
  annotations = { readOnlyHint = false, destructiveHint = true, idempotentHint = false, openWorldHint = false },
  description = [[Set or remove breakpoints and logpoints. A breakpoint pauses only the thread that hits it (others keep running); a logpoint (with 'message') records a 'logpoint' event and never pauses. Target a function ('function') or a source line ('file' + 'line'). One call is all or nothing: if any item fails, nothing is added or removed.
Without sessionId: stages them for this connection's next debug_launch, installed before the program's first instruction (ids 'staged-N'; remove: ['staged-1'] or clear: true). E.g. debug_breakpoint({add: [{function: 'parse_header'}]}), then debug_launch — it answers status 'paused' if the stop came within 1 s. Staged stops also pause forked children (except lines in leaf functions: hardware breakpoints); they do not apply to exec'd programs.
While paused: debug_continue to resume or step; locals via debug_continue's response, session:locals() in Lua. Limits: 50 breakpoints, 100 logpoints.
Logpoints log at most 2,000 messages a second (all together); later hits are counted ('hits', status). On a hot function prefer a logpoint with a condition that names the case you want, e.g. {function: 'lookup', message: 'key={key}', condition: 'key == 42'}.]],
  inputSchema = {
    type = "object",
    additionalProperties = false,
    properties = {
      sessionId = { type = "string", minLength = 1, description = "Running session; omit to stage for the next debug_launch" },
      add = { type = "array", items = point },
      remove = { type = "array", items = { type = "string" }, description = "Breakpoint/logpoint ids to remove (staged-N without sessionId); a thread paused on a removed breakpoint is resumed once all removals are done" },
      clear = { type = "boolean", description = "Remove all breakpoints and logpoints first (the session's, or the staged ones without sessionId)" },
    },
  },
  -- The answer's shape (a running session's stops, or the staged ones): clients get it as structuredContent.
  outputSchema = {
    type = "object",
    required = { "status" },
    additionalProperties = false,
    properties = {
      status = { type = "string", description = "What is active now and what to do next" },
      breakpoints = { type = "array", items = { type = "object", required = { "id" } } },
      logpoints = { type = "array", items = { type = "object", required = { "id" } } },
      mode = { type = "string", enum = { "staged" } },
      warnings = { type = "array", items = { type = "string" }, description = "About the points just added (e.g. one in code built for AVX)" },
      staged = { type = "array", items = { type = "object", required = { "id" } } },
    },
  },
  handler = function(args)
    if (not args.add or #args.add == 0) and (not args.remove or #args.remove == 0) and not args.clear then
      strobe.error("VALIDATION_ERROR", "Nothing to do: pass 'add' (e.g. [{file: 'main.c', line: 42}]), 'remove' (ids) and/or 'clear: true'.")
    end
    if not args.sessionId then
      local staged = strobe.stage_breakpoints({ add = args.add, remove = args.remove, clear = args.clear })
      return {
        mode = "staged",
        staged = strobe.json.array(staged),
        status = staged_summary(staged),
      }
    end
    local s = strobe.session(args.sessionId)
    local remove = args.remove
    if args.clear then
      remove = {}
      local state = s:debug_state()
      for _, list in ipairs({ state.breakpoints, state.logpoints }) do
        for _, p in ipairs(list) do table.insert(remove, p.id) end
      end
    end
    local r = s:breakpoint({ add = args.add, remove = remove })
    return {
      breakpoints = strobe.json.array(r.breakpoints),
      logpoints = strobe.json.array(r.logpoints),
      warnings = r.warnings and #r.warnings > 0 and r.warnings or nil,
      status = summary(r),
    }
  end,
}
