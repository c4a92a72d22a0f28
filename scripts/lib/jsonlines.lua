-- The JSON objects of a line-oriented stream (cargo/libtest, go test -json): other lines
-- (plain output interleaved with the events) are skipped.
local J = {}

function J.decode(text)
  local out = {}
  for line in text:gmatch("[^\n]+") do
    if line:sub(1, 1) == "{" then
      local ok, v = pcall(strobe.json.decode, line)
      if ok and type(v) == "table" then out[#out + 1] = v end
    end
  end
  return out
end

return J
