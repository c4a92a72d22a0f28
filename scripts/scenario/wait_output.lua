-- { "wait_output", text = "ready", stream? = "stdout" | "stderr", timeoutMs? = 15000 }
return {
  name = "wait_output",
  describe = function(a) return string.format("wait for %s %q", a.stream or "stdout", a.text or "") end,
  run = function(ctx, a)
    assert(ctx.session, "no session: add a 'launch' step first")
    local e = ctx.session:wait_for({ eventType = a.stream or "stdout", text = a.text, timeoutMs = a.timeoutMs or 15000 })
    if not e then
      error(string.format("no %s line containing %q within %d ms", a.stream or "stdout", a.text or "", a.timeoutMs or 15000), 0)
    end
  end,
}
