-- A custom hint rule: when a '**' pattern hooks many functions, suggest narrowing it.
-- Install it by copying it to $STROBE_HOME/scripts/hints/; debug_trace's `status`
-- then carries its text.
return {
  name = "trace_wide_pattern",
  when = "trace",
  priority = 50,
  rule = function(r)
    if (r.hookedFunctions or 0) < 100 then return nil end
    for _, p in ipairs(r.activePatterns or {}) do
      if p:find("**", 1, true) then
        return string.format("'%s' is wide; '*' stops at '::' and hooks only direct children.", p)
      end
    end
    return nil
  end,
}
