-- debug_test: extra suggestions from a failure's message (rule-based, no AI).
local RULES = {
  { "overflow", "Arithmetic overflow: rerun traced with the failing function's pattern and look at its arguments (debug_query with verbose: true)." },
  { "[Ss]egmentation fault", "A crash: rerun traced; Strobe records the crash with registers and backtrace (debug_query eventType 'crash')." },
  { "SIGSEGV", "A crash: rerun traced; Strobe records the crash with registers and backtrace (debug_query eventType 'crash')." },
  { "[Tt]imed? ?out", "A timeout: rerun traced and see which call waits (debug_query with minDurationNs)." },
  { "[Cc]onnection refused", "A service the test needs is not running: start it or mock it." },
  { "No such file", "A missing file: the test's working directory is projectRoot; check relative paths." },
  { "left: .*right:", "Two values differ: trace the function that computed the left-hand value to see its inputs." },
}

return {
  name = "test_failure_messages",
  when = "test_failure",
  rule = function(ctx)
    local msg = ctx.failure.message or ""
    for _, r in ipairs(RULES) do
      if msg:find(r[1]) then return r[2] end
    end
    if ctx.language == "python" then
      return "Python functions cannot be traced yet: a traced rerun helps only for native code the test calls (C extensions)."
    end
    return nil
  end,
}
