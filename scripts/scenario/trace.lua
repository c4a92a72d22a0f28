-- { "trace", add = { "parser::*" }, remove?, allowNone? } — hook functions on the running process.
return {
  name = "trace",
  describe = function(a) return "trace " .. table.concat(a.add or {}, ", ") end,
  run = function(ctx, a)
    assert(ctx.session, "no session: add a 'launch' step first")
    local r = ctx.session:trace({ add = a.add, remove = a.remove })
    if r.hookedFunctions == 0 and not a.allowNone then
      error("0 functions hooked: " .. (strobe.hint("trace", r) or ""), 0)
    end
    return r.hookedFunctions .. " hooked"
  end,
}
