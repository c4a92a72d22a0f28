-- A Python target launched with staged patterns: they were not applied.
return {
  name = "launch_python",
  when = "launch",
  priority = 10,
  rule = function(ctx)
    if not ctx.pythonTarget then return nil end
    return string.format(
      "Python functions cannot be traced yet, so the staged patterns were not applied. Read the program's output with debug_query({sessionId: %q, eventType: 'stdout'}).",
      ctx.sessionId)
  end,
}
