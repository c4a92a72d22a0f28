-- { "assert_output", contains? = "text", not_contains? = "text", matches? = "regex", stream? }
-- Checks the session's output so far (stdout and stderr unless stream is given).
local function output_text(s, stream)
  local parts = {}
  for _, t in ipairs(stream and { stream } or { "stdout", "stderr" }) do
    local after = nil
    repeat
      local r = s:query({ eventType = t, limit = 500, afterEventId = after })
      for _, e in ipairs(r.events) do table.insert(parts, e.text or "") end
      after = r.lastEventId
    until not r.hasMore or #r.events == 0
  end
  return table.concat(parts)
end

return {
  name = "assert_output",
  describe = function(a)
    if a.contains then return string.format("output contains %q", a.contains) end
    if a.not_contains then return string.format("output lacks %q", a.not_contains) end
    return string.format("output matches /%s/", a.matches or "")
  end,
  run = function(ctx, a)
    assert(ctx.session, "no session: add a 'launch' step first")
    local text = output_text(ctx.session, a.stream)
    if a.contains and not text:find(a.contains, 1, true) then
      error(string.format("no output line contains %q%s", a.contains, a.why and (" (" .. a.why .. ")") or ""), 0)
    end
    if a.not_contains and text:find(a.not_contains, 1, true) then
      error(string.format("the output contains %q%s", a.not_contains, a.why and (" (" .. a.why .. ")") or ""), 0)
    end
    if a.matches and not strobe.regex.new(a.matches):match(text) then
      error(string.format("the output does not match /%s/", a.matches), 0)
    end
  end,
}
