-- { "check", title = "what it checks", fn = function(ctx) ... end } — any Lua assertion;
-- ctx.session is the launched session, ctx.vars a table shared by the steps.
return {
  name = "check",
  describe = function(a) return "check" end,
  run = function(ctx, a)
    assert(type(a.fn) == "function", "a check step needs fn = function(ctx) ... end")
    return a.fn(ctx)
  end,
}
