-- MCP tool: debug_memory — read or write globals/statics and raw memory of a running
-- process; poll values over time into variable_snapshot events.
local TYPES = { "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "f32", "f64", "pointer", "bool", "string" }

return {
  name = "debug_memory",
  title = "Read or write process memory",
  -- action 'write' overwrites target memory.
  annotations = { readOnlyHint = false, destructiveHint = true, idempotentHint = false, openWorldHint = false },
  description = [[Read or write memory of a running process, no breakpoint needed.
Targets (1-16): {variable: "gCounter"} or a pointer chain {variable: "gClock->counter"} / {variable: "gConfig.limits.max"} (DWARF globals and statics, max 4 '->'), or raw {address: "0x7f…", size: 4, type: "u32"} (size a multiple of the type: 16 bytes of u32 = 4 values; type "string" reads a C string), or an expression {expr: "q->items[q->tail].key"} (debug_eval's language; locals of the paused frame while a thread is paused — write one with {expr: "q->len", value: 0}).
action 'read' (default): value per target; structs expand into 'fields' to 'depth' (1-5, default 1). With poll {intervalMs 50-5000, durationMs 100-30000}: samples are recorded as variable_snapshot events — read them with debug_query({eventType: "variable_snapshot", verbose: true}).
action 'write': targets with 'value' (scalars only: integers, floats, bools, enum names, pointers); returns previousValue and newValue.]],
  inputSchema = {
    type = "object",
    required = { "sessionId", "targets" },
    additionalProperties = false,
    properties = {
      sessionId = { type = "string", minLength = 1 },
      action = { type = "string", enum = { "read", "write" } },
      targets = {
        type = "array",
        minItems = 1,
        maxItems = 16,
        items = {
          type = "object",
          additionalProperties = false,
          properties = {
            variable = { type = "string", description = "Global/static name or chain: 'g', 'g->f', 'g.f'" },
            expr = { type = "string", maxLength = 4096, description = "A debug_eval expression: 'q->items[2].key', 'len' (locals of the paused frame when a thread is paused, else globals). With 'value': assigns it" },
            address = { type = "string", description = "Raw runtime address, hex" },
            size = { type = "integer", minimum = 1, maximum = 4096 },
            type = { type = "string", enum = TYPES },
            value = { description = "New value (action 'write')" },
          },
        },
      },
      depth = { type = "integer", minimum = 1, maximum = 5, description = "Struct expansion depth (default 1)" },
      pid = { type = "integer", minimum = 1, description = "Which process: the session's root (default) or a followed fork, e.g. the pid of a thread paused there" },
      poll = {
        type = "object",
        additionalProperties = false,
        required = { "intervalMs", "durationMs" },
        properties = {
          intervalMs = { type = "integer", minimum = 50, maximum = 5000 },
          durationMs = { type = "integer", minimum = 100, maximum = 30000 },
        },
      },
    },
  },
  handler = function(args)
    local session = strobe.session(args.sessionId)
    if (args.action or "read") == "write" then
      if args.poll then
        strobe.error("VALIDATION_ERROR", "poll is only for action 'read'. Write once, then poll with a read.")
      end
      local r = session:write({ targets = args.targets, pid = args.pid })
      local results = strobe.json.array()
      for i, x in ipairs(r.results) do
        results[i] = { label = x.label or x.target, address = x.address, previousValue = x.previousValue,
          newValue = x.newValue, error = x.error }
      end
      return { results = results }
    end
    local r = session:read({ targets = args.targets, depth = args.depth, poll = args.poll, pid = args.pid })
    if r.polling then
      return r
    end
    return { results = strobe.json.array(r.results) }
  end,
}
