-- A Python target where a pattern matched no native function: it most likely names Python
-- code, which cannot be traced yet; say that, not "typo or no symbols". Patterns naming the
-- interpreter's or a C extension's functions are hooked like anywhere else.
return {
  name = "trace_python",
  when = "trace",
  priority = 10,
  rule = function(r)
    if not r.pythonTarget then return nil end
    local unmatched = {}
    for _, m in ipairs(r.matchesPerPattern or {}) do
      if m[2] == 0 then table.insert(unmatched, "'" .. m[1] .. "'") end
    end
    return string.format(
      "Python functions cannot be traced yet: %s matched no native function (Strobe hooks C, C++ and Rust functions with debug info, e.g. a C extension's; a pattern stays active for extensions imported later). For Python code, read the program's output with debug_query({sessionId, eventType: 'stdout'}).",
      table.concat(unmatched, ", "))
  end,
}
