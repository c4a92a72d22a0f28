-- { "launch", command = "./app", args?, env?, projectRoot? } — start the program under Strobe.
-- Relative paths are relative to the scenario file; projectRoot defaults to its directory.
return {
  name = "launch",
  describe = function(a) return ("launch " .. (a.command or "?") .. " " .. table.concat(a.args or {}, " ")):gsub("%s+$", "") end,
  run = function(ctx, a)
    local s = strobe.launch({
      command = ctx.resolve(a.command),
      args = a.args,
      env = a.env,
      cwd = a.cwd and ctx.resolve(a.cwd) or nil,
      projectRoot = a.projectRoot and ctx.resolve(a.projectRoot) or ctx.dir,
    })
    ctx.session = s
    return "pid " .. s.pid
  end,
}
