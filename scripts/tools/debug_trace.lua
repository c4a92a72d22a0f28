-- MCP tool: debug_trace — add/remove trace patterns on a running session, or stage
-- them for the next launch when no sessionId is given.
local guidance = require("guidance")


return {
  name = "debug_trace",
  title = "Trace functions and watch variables",
  -- Adds or removes hooks; recorded events are never deleted.
  annotations = { readOnlyHint = false, destructiveHint = false, idempotentHint = false, openWorldHint = false },
  description = [[Add or remove function trace patterns. With sessionId: changes hooks on the running process, no restart (recommended, after reading its output). Without sessionId: stages patterns for this connection's next debug_launch (listed in its response as stagedPatterns; clear them with {clear: true}); e.g. debug_trace({add: ['parse_*']}) then debug_launch.
Patterns are globs on demangled names: 'foo::bar' exact, 'foo::*' direct children ('*' stops at '::'), 'foo::**' all descendants, '*::validate', '@usercode' (functions under projectRoot), '@file:parser.c' (declared in files whose path contains the text).]],
  inputSchema = {
    type = "object",
    additionalProperties = false,
    properties = {
      sessionId = { type = "string", description = "Running session; omit to stage patterns for the next launch" },
      projectRoot = { type = "string", description = "Root whose .strobe/settings.json applies (default: the session's)" },
      add = { type = "array", items = { type = "string" }, description = "Patterns to add" },
      remove = { type = "array", items = { type = "string" }, description = "Patterns to remove" },
      clear = { type = "boolean", description = "Remove every pattern first (the session's, or the staged ones without sessionId)" },
      argumentsAtExit = { type = "boolean",
        description = "Exit events also show pointer parameters, read again at return (see a callee's writes through them): {\"r\": 101} for void bump(int *r, int by). Needs sessionId." },
      serializationDepth = { type = "integer", minimum = 1, maximum = 10,
        description = "How deep typed arguments, return values and watches expand structs (default 3). Needs sessionId." },
      watches = {
        type = "object",
        additionalProperties = false,
        description = "Values read on every enter/exit of traced functions, shown as watchValues (verbose debug_query). Max 32. Needs sessionId.",
        properties = {
          add = { type = "array", items = {
            type = "object",
            additionalProperties = false,
            properties = {
              variable = { type = "string", description = "Global/static name or pointer chain: 'gCounter', 'gClock->counter', 'cfg.limits.max' (max 4 '->')" },
              address = { type = "string", description = "Raw runtime address '0x7f…' (with type)" },
              type = { type = "string", enum = { "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "f32", "f64", "pointer", "bool" } },
              label = { type = "string", description = "Name in watchValues (default: the variable/address/expr)" },
              expr = { type = "string", description = "JavaScript evaluated in the target, e.g. \"ptr('0x1234').readU32()\"" },
              on = { type = "array", items = { type = "string" }, description = "Only record during these traced functions (patterns)" },
            },
          } },
          remove = { type = "array", items = { type = "string" }, description = "Labels of watches to remove" },
        },
      },
      sampling = {
        type = "object",
        additionalProperties = false,
        description = "Hot-function sampling (functions above 100k calls/s record 1 call in 100, events marked sampled). disable: patterns of hooked functions to record in full again (never auto-sampled after); enable: allow auto-sampling again. Needs sessionId.",
        properties = {
          disable = { type = "array", items = { type = "string" } },
          enable = { type = "array", items = { type = "string" } },
        },
      },
    },
  },
  -- The answer's shape: clients get it as structuredContent.
  outputSchema = {
    type = "object",
    required = { "mode", "activePatterns", "hookedFunctions", "status" },
    additionalProperties = false,
    properties = {
      mode = { type = "string", enum = { "pending", "runtime" } },
      activePatterns = { type = "array", items = { type = "string" } },
      hookedFunctions = { type = "integer" },
      matchedFunctions = { type = "integer" },
      activeWatches = { type = "array", items = { type = "object" } },
      warnings = { type = "array", items = { type = "string" } },
      eventLimit = { type = "integer" },
      eventsLost = { type = "integer" },
      sampledFunctions = { type = "array", items = { type = "object" } },
      status = { type = "string" },
    },
  },
  handler = function(args)
    local r
    if args.sampling and not args.sessionId then
      strobe.error("VALIDATION_ERROR", "sampling needs a sessionId: it changes hooks of a running session. Launch first, then debug_trace({sessionId, sampling = {disable = {'fn'}}}).")
    end
    if (args.watches or args.serializationDepth or args.argumentsAtExit ~= nil) and not args.sessionId then
      strobe.error("VALIDATION_ERROR", "watches, serializationDepth and argumentsAtExit need a sessionId: they apply to a running session. Launch first, then call debug_trace with its sessionId.")
    end
    local session = args.sessionId and strobe.session(args.sessionId)
    if session and args.serializationDepth then
      session:set_depth(args.serializationDepth)
    end
    if args.sessionId then
      local remove = args.remove
      if args.clear then
        remove = session:trace({}).activePatterns
      end
      r = session:trace({ add = args.add, remove = remove, sampling = args.sampling,
        argumentsAtExit = args.argumentsAtExit })
    else
      r = strobe.trace_pending({ add = args.add, remove = args.remove, clear = args.clear })
    end
    -- Settings are read on every call; bad values come back as warnings.
    local settings = strobe.settings({ projectRoot = args.projectRoot, sessionId = args.sessionId })
    for _, w in ipairs(settings.warnings) do
      table.insert(r.warnings, w)
    end
    local out = {
      mode = r.mode,
      activePatterns = r.activePatterns,
      hookedFunctions = r.hookedFunctions,
      activeWatches = strobe.json.array(session and session:watches() or nil),
      warnings = r.warnings,
      eventLimit = settings.values["events.maxPerSession"],
      eventsLost = r.eventsLost or 0,
      sampledFunctions = strobe.json.array(r.sampledFunctions),
      status = guidance.trace_status(r),
    }
    if session and args.watches then
      local watches, warnings = session:watch({ add = args.watches.add, remove = args.watches.remove })
      out.activeWatches = strobe.json.array(watches)
      for _, w in ipairs(warnings) do
        table.insert(out.warnings, w)
      end
    end
    if r.matchedFunctions ~= r.hookedFunctions then
      out.matchedFunctions = r.matchedFunctions
    end
    return out
  end,
}
