-- { "exec", cmd = { "cc", "-g", "-o", "app", "app.c" }, cwd? } — a build step; fails on a non-zero exit.
-- Runs in the scenario file's directory unless cwd is given.
return {
  name = "exec",
  describe = function(a) return "exec " .. table.concat(a.cmd or {}, " ") end,
  run = function(ctx, a)
    local r = strobe.exec({ cmd = a.cmd, cwd = a.cwd and ctx.resolve(a.cwd) or ctx.dir, env = a.env })
    if not r.ok then
      error(string.format("exit status %s\n%s%s", tostring(r.status), r.stdout, r.stderr), 0)
    end
  end,
}
