-- Making answers small: cut nested values at a depth, keep chosen fields, join output
-- lines, and fit a list into a byte budget. Used by debug_query; handy in scripts.
local M = {}

local function is_array(t)
  return getmetatable(t) == getmetatable(strobe.json.array()) or (#t > 0 and next(t, #t) == nil)
end

-- A value with tables below `depth` levels replaced by a note ("{5 fields}", "[12 items]").
function M.cut(v, depth)
  if type(v) ~= "table" then
    return v
  end
  local array = is_array(v)
  if depth <= 0 then
    local n = 0
    for _ in pairs(v) do
      n = n + 1
    end
    return array and ("[" .. n .. " items]") or ("{" .. n .. " fields}")
  end
  local out = array and strobe.json.array() or {}
  for k, x in pairs(v) do
    out[k] = M.cut(x, depth - 1)
  end
  return out
end

-- Only the named fields of each event (keeping JSON nulls).
function M.pick(e, fields)
  local out = {}
  for _, f in ipairs(fields) do
    out[f] = e[f]
  end
  return out
end

-- Consecutive stdout (or stderr) events of one process become one event whose text is
-- theirs joined; `lines` counts them, `lastId` is the last one's id. `eids` (optional)
-- are the events' numeric ids; the second result has each joined event's last one.
function M.join_output(events, eids)
  eids = eids or {}
  local out, out_eids = strobe.json.array(), {}
  local cur
  for i, e in ipairs(events) do
    local output = e.eventType == "stdout" or e.eventType == "stderr"
    if output and cur and cur.eventType == e.eventType and cur.pid == e.pid then
      cur.text = cur.text .. (e.text or "")
      cur.lines = cur.lines + 1
      cur.lastId = e.id
      out_eids[#out] = eids[i]
    else
      cur = nil
      if output then
        cur = {}
        for k, v in pairs(e) do
          cur[k] = v
        end
        cur.text = e.text or ""
        cur.lines = 1
      end
      out[#out + 1] = cur or e
      out_eids[#out] = eids[i]
    end
  end
  return out, out_eids
end

local function size(v)
  return #strobe.json.encode(v)
end

-- An event too big on its own: its large values become size notes, then its text is cut.
local function shrink(e, budget)
  local out = {}
  for k, v in pairs(e) do
    out[k] = v
  end
  for _, k in ipairs({ "arguments", "returnValue", "locals", "watchValues", "backtrace", "registers" }) do
    if out[k] ~= nil and out[k] ~= strobe.json.null and size(out[k]) > 256 then
      out[k] = string.format("<%d bytes: query this event alone with argDepth, fields or a larger maxBytes>", size(out[k]))
    end
  end
  if type(out.text) == "string" and size(out) > budget then
    local keep = math.max(0, #out.text - (size(out) - budget) - 64)
    out.text = out.text:sub(1, keep) .. string.format("<... %d bytes cut>", #out.text - keep)
  end
  return out
end

-- The longest prefix of `events` whose JSON fits in `budget` bytes (an event that does
-- not fit alone is shrunk). Returns the kept list and how many were left out.
function M.fit(events, budget)
  local out = strobe.json.array()
  local used = 2
  for i, e in ipairs(events) do
    local n = size(e) + 1
    if used + n > budget then
      if i == 1 then
        e = shrink(e, budget - used - 1)
        n = size(e) + 1
        if used + n <= budget then
          out[1] = e
          return out, #events - 1
        end
      end
      return out, #events - #out
    end
    out[#out + 1] = e
    used = used + n
  end
  return out, 0
end

return M
