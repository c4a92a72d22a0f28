-- { "sleep", ms = 500 } — let the program run (events keep arriving).
return {
  name = "sleep",
  describe = function(a) return "sleep " .. tostring(a.ms or 0) .. " ms" end,
  run = function(_, a) strobe.sleep(a.ms or 0) end,
}
