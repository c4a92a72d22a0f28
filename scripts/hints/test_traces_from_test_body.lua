-- debug_test: when a failure's stack holds no function of the code under test (the
-- assertion failed in the test itself), suggest the functions the test body calls, read
-- from the source between the test's start and the failing line.
local KEYWORDS = {
  ["if"] = true, ["for"] = true, ["while"] = true, ["match"] = true, ["return"] = true, ["fn"] = true,
  ["Some"] = true, ["Ok"] = true, ["Err"] = true, ["vec"] = true, ["sizeof"] = true, ["switch"] = true,
  ["catch"] = true, ["def"] = true, ["print"] = true, ["len"] = true, ["func"] = true,
}

local function callees(root, failure)
  if not (failure.file and failure.line) then return {} end
  local path = failure.file:sub(1, 1) == "/" and failure.file or (root .. "/" .. failure.file)
  local ok, text = pcall(strobe.fs.read, path)
  if not ok then return {} end
  local lines = {}
  for l in (text .. "\n"):gmatch("([^\n]*)\n") do lines[#lines + 1] = l end
  local short = failure.name:match("([%w_]+)$") or failure.name
  local names, seen = {}, {}
  for i = failure.line, math.max(1, failure.line - 40), -1 do
    local l = lines[i] or ""
    for name in l:gmatch("([%a_][%w_:]*)%s*%(") do
      local base = name:match("([%w_]+)$") or name
      local is_macro = l:find(name .. "!", 1, true) or base:match("^[%u%d_]+$") -- Rust macro!, C/C++ MACRO(
      if not KEYWORDS[base] and not is_macro and not base:match("^assert") and base ~= short and not seen[name] then
        seen[name] = true
        names[#names + 1] = name
      end
    end
    -- Stop at the test's own definition.
    if l:find(short, 1, true) and i < failure.line then break end
    if l:match("^%s*TEST") or l:match("^%s*fn ") or l:match("^%s*def ") or l:match("^%s*func ") then break end
  end
  return names
end

return {
  name = "test_traces_from_test_body",
  when = "test_traces",
  rule = function(ctx)
    local f = ctx.failure
    if ctx.language ~= "rust" and ctx.language ~= "cpp" and ctx.language ~= "c" then return nil end
    -- Only when the stack names nothing but the test itself.
    for _, fr in ipairs(f.stack or {}) do
      local fn = type(fr) == "table" and fr["function"] or tostring(fr)
      if not fn:find(f.name:match("([%w_]+)$") or f.name, 1, true) then return nil end
    end
    local crate
    for _, fr in ipairs(f.stack or {}) do
      local fn = type(fr) == "table" and fr["function"] or ""
      crate = crate or fn:match("^([%w_]+)::")
    end
    local out = {}
    for _, name in ipairs(callees(ctx.root, f)) do
      if name:find("::", 1, true) then
        out[#out + 1] = name -- already qualified (C++ calc::divide)
      elseif ctx.language == "c" then
        out[#out + 1] = name
      elseif crate then
        out[#out + 1] = crate .. "::**::" .. name
      else
        out[#out + 1] = "**::" .. name
      end
    end
    return #out > 0 and out or nil
  end,
}
