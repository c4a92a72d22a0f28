-- After a launch that applied staged patterns: the events are already flowing.
return {
  name = "launch_staged",
  when = "launch",
  rule = function(ctx)
    local n = ctx.pendingPatternsApplied or 0
    if n == 0 or ctx.pythonTarget then return nil end
    return string.format(
      "Launched with %d staged pattern(s) applied. Query events with debug_query({sessionId: %q, eventType: 'function_enter', verbose: true}) (verbose: with arguments and return values); read output with eventType 'stdout' or 'stderr'.",
      n, ctx.sessionId)
  end,
}
