-- After a plain launch: read the output before tracing anything.
return {
  name = "launch_read_output",
  when = "launch",
  rule = function(ctx)
    if (ctx.pendingPatternsApplied or 0) > 0 then return nil end
    return string.format(
      "Query stderr/stdout first: debug_query({sessionId: %q, eventType: 'stderr'}). Add traces only if the output does not explain the problem: debug_trace({sessionId: %q, add: ['module::*']}).",
      ctx.sessionId, ctx.sessionId)
  end,
}
