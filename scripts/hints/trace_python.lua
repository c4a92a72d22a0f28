-- A Python target: its functions cannot be traced yet; say that, not "typo or no symbols".
return {
  name = "trace_python",
  when = "trace",
  priority = 10,
  rule = function(r)
    if not r.pythonTarget then return nil end
    return "Python functions cannot be traced yet (Strobe traces native C, C++ and Rust functions). Nothing was hooked. Read the program's output with debug_query({sessionId, eventType: 'stdout'}) instead."
  end,
}
