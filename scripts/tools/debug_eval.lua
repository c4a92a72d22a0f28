-- MCP tool: debug_eval — gdb's `print` at a pause: C/C++/Rust expressions over the paused
-- frame's locals, parameters and globals, typed from DWARF, containers pretty-printed.
return {
  name = "debug_eval",
  title = "Evaluate expressions at a pause",
  -- An assignment (q->len = 0) writes the target.
  annotations = { readOnlyHint = false, destructiveHint = true, idempotentHint = false, openWorldHint = false },
  description = [[Evaluate expressions in a paused thread's frame, like gdb's print. Up to 32 per call; each result is {expression, type, value, address?} or {expression, error, position}.
Language: locals, parameters, globals (ns::name, crate::NAME), a.b, p->b, *p, &x, a[i] (also std::vector, std::string, Vec, slices), *p@8 (8 elements from *p), arithmetic, comparisons, && || !, casts ((struct node *)p, x as u32), sizeof, registers ($rax, $pc, $sp), string compare (name == "bob"), assignment (q->len = 0 writes the target).
Values: structs as objects of fields, pointers to structs as the pointee's fields plus "@" (the pointer), C strings and std::string/String as strings, containers (vector, map, optional, unique_ptr, Vec, Option, Result, enums) pretty-printed.
frame: 0 = innermost (the pause), 1 = its caller, ... Needs a paused thread (debug_breakpoint, or debug_launch with stopOnEntry); otherwise NOT_PAUSED.
Example: {sessionId, expressions: ["q->len", "q->items[q->tail].key", "*q->items@q->len"]}]],
  inputSchema = {
    type = "object",
    required = { "sessionId", "expressions" },
    additionalProperties = false,
    properties = {
      sessionId = { type = "string", minLength = 1 },
      expressions = {
        type = "array",
        minItems = 1,
        maxItems = 32,
        items = { type = "string", minLength = 1, maxLength = 4096 },
        description = "Expressions, e.g. [\"node->next->key\", \"count * 2 > limit\"]",
      },
      threadId = { type = "integer", description = "Paused thread (default: the most recently paused)" },
      frame = { type = "integer", minimum = 0, maximum = 256, description = "0 = the paused frame, 1 = its caller, ..." },
      depth = { type = "integer", minimum = 0, maximum = 10, description = "Levels of structs/arrays/pointers expanded (default 2)" },
      format = { type = "string", enum = { "natural", "hex" }, description = "'hex' shows integers in hex" },
    },
  },
  -- The answer's shape: clients get it as structuredContent.
  outputSchema = {
    type = "object",
    required = { "results" },
    properties = {
      results = { type = "array", items = {
        type = "object",
        required = { "expression" },
        properties = {
          expression = { type = "string" },
          type = { type = "string" },
          value = { description = "The value: number, string, boolean, null, object of fields, array" },
          address = { type = "string" },
          error = { type = "string" },
          position = { type = "integer", description = "Column (0-based) where the expression went wrong" },
        },
      } },
      frame = { type = "object", properties = { index = { type = "integer" }, ["function"] = { type = "string" },
        file = { type = "string" }, line = { type = "integer" }, address = { type = "string" } } },
      threadId = { type = "integer" },
      pid = { type = "integer" },
    },
  },
  handler = function(args)
    local r = strobe.session(args.sessionId):eval({
      expressions = args.expressions,
      threadId = args.threadId,
      frame = args.frame,
      depth = args.depth,
      format = args.format,
    })
    r.results = strobe.json.array(r.results)
    return r
  end,
}
