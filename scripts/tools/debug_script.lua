-- MCP tool: debug_script — run a whole investigation as one Lua program.
return {
  name = "debug_script",
  title = "Run a Lua investigation",
  -- A Lua program with every primitive: launch, write memory, stop sessions.
  annotations = { readOnlyHint = false, destructiveHint = true, idempotentHint = false, openWorldHint = true },
  description = [[Run a Lua program against the debugger in ONE call: launch, set breakpoints, collect values at every hit, trace, query, and return a compact JSON answer. Prefer it to single calls whenever you would otherwise repeat continue/inspect more than twice, or need a loop, a condition or a summary over many events.
API (docs/lua-api.md "Investigations"): strobe.launch{command=, args=, projectRoot=} -> s; s:on_break("file.c:88", function(hit) ... end) (hit.locals, hit.args, hit.backtrace, hit:eval(expr), return "stop" to end); s:run{count=, stop_when=function(hit) end, timeoutMs=} -> {reason, hits}; s:trace{add={...}}, s:query{...}, s:wait_for{...}, s:stdin(text), s:continue{}, s:locals{}, s:read{...}, s:stop(). `session` is the session of sessionId, `args` your args. print() goes to output.
Sessions the script launched are stopped when it ends (events kept, queryable) unless returned as {keep = s}.
Example: local s = strobe.launch{command="./app", projectRoot="."}; local lens = {}
s:on_break("queue.c:88", function(hit) lens[#lens+1] = hit.locals.len end)
s:stdin("go\n"); local r = s:run{}; return {lens = lens, reason = r.reason}]],
  inputSchema = {
    type = "object",
    required = { "script" },
    additionalProperties = false,
    properties = {
      script = { type = "string", minLength = 1, description = "Lua source; its return value is the answer" },
      sessionId = { type = "string", minLength = 1, description = "Bound as the global `session`" },
      args = { description = "Any JSON, bound as the global `args`" },
      timeoutMs = { type = "integer", minimum = 1, maximum = 300000, description = "Default 30000" },
      maxOutputBytes = { type = "integer", minimum = 0, maximum = 1048576, description = "Cap on printed output; default 16384" },
    },
  },
  -- The envelope's shape (result is whatever the script returned): clients get it as structuredContent.
  outputSchema = {
    type = "object",
    required = { "output", "elapsedMs" },
    properties = {
      result = { description = "The script's return value, as JSON" },
      output = { type = "string", description = "What the script printed" },
      elapsedMs = { type = "integer" },
      sessions = { type = "array", items = { type = "string" }, description = "Sessions the script kept ({keep = s})" },
    },
  },
  handler = function(args)
    if args.sessionId then
      strobe.session(args.sessionId) -- SESSION_NOT_FOUND before anything runs
    end
    return strobe.script_run(args)
  end,
}
