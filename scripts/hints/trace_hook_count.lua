-- How many hooks is safe, and how to read the events.
return {
  name = "trace_hook_count",
  when = "trace",
  priority = 40,
  rule = function(r)
    local n = r.hookedFunctions or 0
    if r.mode == "pending" or n == 0 then return nil end
    local stability
    if n < 50 then
      stability = "Under 50 hooks - excellent stability."
    elseif n < 500 then
      stability = "Moderate hook count - fine for most programs; narrow the patterns if the target slows down."
    else
      stability = "Many hooks - expect a visible slowdown and many events; narrow the patterns if you can."
    end
    return string.format("%d function(s) hooked. %s Query with debug_query({sessionId, eventType: 'function_enter', verbose: true}) (verbose: with arguments and return values).", n, stability)
  end,
}
