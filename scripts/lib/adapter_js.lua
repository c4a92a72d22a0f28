-- What the JavaScript adapters (mocha, jest) share: package.json, V8 stack frames.
local J = {}

function J.read_json(path)
  local ok, text = pcall(strobe.fs.read, path)
  if not ok then return nil end
  local ok2, v = pcall(strobe.json.decode, text)
  return ok2 and v or nil
end

-- Does package.json depend on `name` or run it as its test script?
function J.uses(root, name)
  local pkg = J.read_json(root .. "/package.json")
  if not pkg then return false end
  return (pkg.devDependencies or {})[name] or (pkg.dependencies or {})[name]
    or (pkg.scripts and (pkg.scripts.test or ""):find(name, 1, true)) and true or false
end

-- `score` when one of the framework's config files exists or package.json uses it.
function J.detect(root, name, config_files, score)
  for _, f in ipairs(config_files) do
    if strobe.fs.exists(root .. "/" .. f) then return score end
  end
  return J.uses(root, name) and score or 0
end

-- "    at fn (file.js:3:33)" frames, innermost first, outside node's internals and
-- node_modules; paths relative to `root`.
function J.stack_of(text, root)
  local frames = {}
  for line in (text or ""):gmatch("[^\n]+") do
    local fn, file, ln = line:match("^%s+at (.-) %((.-):(%d+):%d+%)$")
    if not fn then file, ln = line:match("^%s+at (.-):(%d+):%d+$") end
    if file and not file:find("^node:") and not file:find("node_modules", 1, true) then
      if root and file:sub(1, #root + 1) == root .. "/" then file = file:sub(#root + 2) end
      frames[#frames + 1] = { ["function"] = fn or "<anonymous>", file = file, line = tonumber(ln) }
    end
  end
  return frames
end

return J
