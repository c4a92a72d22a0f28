-- Patterns staged without a session: recommend the observe-first workflow.
return {
  name = "trace_pending",
  when = "trace",
  priority = 10,
  rule = function(r)
    if r.mode ~= "pending" then return nil end
    return "Patterns staged for the next debug_launch. Recommended instead: launch without patterns, read the output, then add patterns to the running session."
  end,
}
