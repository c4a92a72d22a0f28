-- { "assert_calls", ["function"] = "name", caller? = "name", count? = n, min? = n, max? = n, why? }
-- Counts traced calls of a function (optionally only those made directly by `caller`).
return {
  name = "assert_calls",
  describe = function(a)
    local who = a.caller and (" from " .. a.caller) or ""
    local n = a.count and ("= " .. a.count) or ((a.min and (">= " .. a.min) or "") .. (a.max and (" <= " .. a.max) or ""))
    return string.format("calls of %s%s %s", a["function"] or "?", who, n)
  end,
  run = function(ctx, a)
    assert(ctx.session, "no session: add a 'launch' step first")
    local r = ctx.session:query({ eventType = "function_enter", verbose = true, limit = 500 })
    local by_id = {}
    for _, e in ipairs(r.events) do by_id[e.id] = e end
    local n = 0
    for _, e in ipairs(r.events) do
      if e["function"] == a["function"] then
        local parent = by_id[e.parentEventId]
        if not a.caller or (parent and parent["function"] == a.caller) then n = n + 1 end
      end
    end
    local why = a.why and (" (" .. a.why .. ")") or ""
    if a.count and n ~= a.count then error(string.format("expected %d call(s), saw %d%s", a.count, n, why), 0) end
    if a.min and n < a.min then error(string.format("expected at least %d call(s), saw %d%s", a.min, n, why), 0) end
    if a.max and n > a.max then error(string.format("expected at most %d call(s), saw %d%s", a.max, n, why), 0) end
    return n .. " call(s)"
  end,
}
