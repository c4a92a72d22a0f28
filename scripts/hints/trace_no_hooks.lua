-- Patterns that hooked nothing: the likely causes and the closest names.
return {
  name = "trace_no_hooks",
  when = "trace",
  priority = 30,
  rule = function(r)
    -- A Python target's unmatched patterns are explained by trace_python.
    if r.mode == "pending" or #(r.activePatterns or {}) == 0 or r.hookedFunctions ~= 0 or r.pythonTarget then return nil end
    local lines = { "0 functions hooked. Possible causes: a typo in the pattern, the function was inlined or optimized out, or it lives in a library without debug symbols." }
    for _, s in ipairs(r.suggestions or {}) do
      local pattern, names = s[1], s[2]
      if names and #names > 0 then
        table.insert(lines, string.format("Closest names to '%s': %s.", pattern, table.concat(names, ", ")))
      end
    end
    return table.concat(lines, " ")
  end,
}
