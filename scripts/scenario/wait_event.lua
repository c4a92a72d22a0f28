-- { "wait_event", eventType = "function_exit", ["function"] = "name", timeoutMs? = 15000 }
return {
  name = "wait_event",
  describe = function(a) return string.format("wait for %s %s", a.eventType or "event", a["function"] or "") end,
  run = function(ctx, a)
    assert(ctx.session, "no session: add a 'launch' step first")
    local q = { eventType = a.eventType, timeoutMs = a.timeoutMs or 15000 }
    if a["function"] then q["function"] = { equals = a["function"] } end
    if not ctx.session:wait_for(q) then
      error(string.format("no %s event for %s within %d ms", a.eventType or "", a["function"] or "any function", q.timeoutMs), 0)
    end
  end,
}
