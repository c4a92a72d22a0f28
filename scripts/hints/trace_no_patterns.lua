-- Nothing to trace: say how patterns are written.
return {
  name = "trace_no_patterns",
  when = "trace",
  priority = 20,
  rule = function(r)
    if r.mode == "pending" or #(r.activePatterns or {}) > 0 then return nil end
    return "No trace patterns are active. Add some with add: ['name::*'] (glob on demangled names; '*' stops at '::', '**' crosses it), '@usercode' or '@file:part'."
  end,
}
