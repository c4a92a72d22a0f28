-- A Python target launched with staged patterns, some matching no native function (they most
-- likely name Python code): say so; native ones (C extensions) were hooked as usual.
return {
  name = "launch_python",
  when = "launch",
  priority = 10,
  rule = function(ctx)
    if not ctx.pythonTarget then return nil end
    return string.format(
      "Python functions cannot be traced yet: a staged pattern matched no native function (%d hooked; see warnings). Patterns stay active for C extensions imported later. Read the program's output with debug_query({sessionId: %q, eventType: 'stdout'}).",
      ctx.hookedFunctions or 0, ctx.sessionId)
  end,
}
