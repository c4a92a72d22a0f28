-- The scenario runner behind `strobe run <scenario.lua>`. A scenario file returns
--   { name = "...", steps = { { "launch", command = "./app" }, { "wait_output", text = "ready" }, ... } }
-- Each step names a step kind (scripts/scenario/<kind>.lua, so users can add kinds) and
-- carries its arguments. The runner prints one line per step and a closing
-- "N passed, N failed[, N skipped]" line; after a failure it skips the rest and prints
-- the session's last output and events, which usually explain it.
local M = {}

local function describe(kind, step, args)
  if step.title then return step.title end
  if kind and kind.describe then
    local ok, text = pcall(kind.describe, args)
    if ok and text then return text end
  end
  return step[1]
end

-- The step's arguments: everything but the kind name and the title.
local function step_args(step)
  local args = {}
  for k, v in pairs(step) do
    if k ~= 1 and k ~= "title" then args[k] = v end
  end
  return args
end

local function short(err)
  err = tostring(err)
  err = err:gsub("\nstack traceback:.*$", ""):gsub("^runtime error: ", "")
  return err
end

-- The last output lines and traced calls of the session: what a reader needs after a failure.
local function print_context(ctx)
  local s = ctx.session
  if not s then return end
  -- The newest `n` events of a type (queries page from the oldest, so skip ahead).
  local function newest(t, n, verbose)
    local total = s:query({ eventType = t, limit = 1 }).totalCount
    local r = s:query({ eventType = t, limit = n, offset = math.max(0, total - n), verbose = verbose })
    return r.events
  end
  local ok, out = pcall(function()
    local lines = {}
    for _, stream in ipairs({ "stdout", "stderr" }) do
      for _, e in ipairs(newest(stream, 10)) do table.insert(lines, e) end
    end
    table.sort(lines, function(a, b) return a.eventId < b.eventId end)
    local events = {}
    for _, t in ipairs({ "function_enter", "function_exit", "crash" }) do
      for _, e in ipairs(newest(t, 12, true)) do table.insert(events, e) end
    end
    table.sort(events, function(a, b) return a.eventId < b.eventId end)
    return { lines = lines, events = events }
  end)
  if not ok then
    print("  (cannot read the session's events: " .. short(out) .. ")")
    return
  end
  print("--- last output of " .. s.id .. ":")
  for i = math.max(1, #out.lines - 9), #out.lines do
    local e = out.lines[i]
    print(string.format("  %s| %s", e.eventType, (e.text or ""):gsub("\n$", "")))
  end
  if #out.events > 0 then
    print("--- last traced events:")
    for i = math.max(1, #out.events - 11), #out.events do
      local e = out.events[i]
      local detail = ""
      if e.eventType == "function_enter" and e.arguments then
        detail = "(" .. table.concat(e.arguments, ", ") .. ")"
      elseif e.eventType == "function_exit" and e.returnValue ~= nil then
        detail = " -> " .. tostring(e.returnValue)
      end
      print(string.format("  %-14s %s%s", e.eventType, e["function"] or "?", detail))
    end
  end
end

-- Run `def` (from `path`); returns { passed, failed, skipped }.
function M.run(def, path)
  local kinds = strobe.scenario_steps()
  local ctx = {
    dir = (path:match("^(.*)/[^/]*$") or "."),
    path = path,
    vars = {},
  }
  -- Resolve a path relative to the scenario file.
  function ctx.resolve(p)
    if p:sub(1, 1) == "/" then return p end
    return ctx.dir .. "/" .. p
  end
  print(string.format("scenario: %s (%s)", def.name or path, path))
  local passed, failed, skipped = 0, 0, 0
  for i, step in ipairs(def.steps) do
    local kind = kinds[step[1]]
    local args = step_args(step)
    local title = describe(kind, step, args)
    if failed > 0 then
      skipped = skipped + 1
      print(string.format("  skip %2d  %s", i, title))
    elseif not kind then
      local names = {}
      for name in pairs(kinds) do table.insert(names, name) end
      table.sort(names)
      failed = failed + 1
      print(string.format("  FAIL %2d  unknown step kind '%s' (known: %s; add one in scripts/scenario/)",
        i, tostring(step[1]), table.concat(names, ", ")))
    else
      local t0 = strobe.time.monotonic_ms()
      local ok, detail = pcall(kind.run, ctx, args)
      local ms = math.floor(strobe.time.monotonic_ms() - t0)
      if ok then
        passed = passed + 1
        local extra = detail and (" - " .. tostring(detail)) or ""
        print(string.format("  ok   %2d  %s%s (%d ms)", i, title, extra, ms))
      else
        failed = failed + 1
        print(string.format("  FAIL %2d  %s: %s", i, title, short(detail)))
        print_context(ctx)
      end
    end
  end
  if ctx.session then
    pcall(function() ctx.session:stop() end)
  end
  print(string.format("%d passed, %d failed, %d skipped", passed, failed, skipped))
  return { passed = passed, failed = failed, skipped = skipped }
end

return M
