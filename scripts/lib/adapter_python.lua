-- What the Python adapters (pytest, unittest) share: which interpreter runs a project's
-- tests, its build system, its test files, and Python stacks from faulthandler dumps.
local P = {}

local function has_uv(env)
  local path = (env and env.PATH) or nil
  local cmd = { "sh", "-c", "command -v uv" }
  local ok, r = pcall(strobe.exec, { cmd = cmd, env = path and { PATH = path } or {} })
  return ok and r.ok
end

-- The command prefix that runs the project's Python: {"uv", "run", "python"} for a uv
-- project (when uv is installed), its virtualenv's python, or python3.
function P.interpreter(root, env)
  if strobe.fs.exists(root .. "/uv.lock") and has_uv(env) then return { "uv", "run", "--frozen", "python" } end
  for _, v in ipairs({ ".venv", "venv" }) do
    local python = root .. "/" .. v .. "/bin/python"
    if strobe.fs.exists(python) then return { python } end
  end
  return { "python3" }
end

-- The same, as a developer would type it in the project's directory.
function P.interpreter_text(root)
  if strobe.fs.exists(root .. "/uv.lock") then return { "uv", "run", "python" } end
  for _, v in ipairs({ ".venv", "venv" }) do
    if strobe.fs.exists(root .. "/" .. v .. "/bin/python") then return { v .. "/bin/python" } end
  end
  return { "python3" }
end

function P.build_system(root)
  if strobe.fs.exists(root .. "/uv.lock") then return "uv" end
  if strobe.fs.exists(root .. "/poetry.lock") then return "poetry" end
  if strobe.fs.exists(root .. "/pyproject.toml") then return "pyproject" end
  return "pip"
end

-- Test files under the usual places (never inside a virtualenv).
function P.test_files(root)
  local out, seen = {}, {}
  for _, pat in ipairs({ "/test_*.py", "/*_test.py", "/tests/**/test_*.py", "/tests/**/*_test.py", "/test/**/test_*.py" }) do
    for _, f in ipairs(strobe.fs.glob(root .. pat)) do
      if not seen[f] then seen[f] = true out[#out + 1] = f end
    end
  end
  table.sort(out)
  return out
end

-- faulthandler's dump ("Thread 0x... (most recent call first):" then
-- '  File "x.py", line 12 in func') as threads with frames, innermost first.
function P.faulthandler_stacks(text)
  local threads, cur = {}, nil
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    local th = line:match("^(Thread 0x%x+)") or line:match("^(Current thread 0x%x+)")
    if th then
      cur = { thread = th, frames = {} }
      threads[#threads + 1] = cur
    else
      local file, ln, fn = line:match('^%s+File "(.-)", line (%d+) in (.+)$')
      if file and cur then cur.frames[#cur.frames + 1] = ("%s (%s:%s)"):format(fn, file, ln) end
    end
  end
  return threads
end

-- The parts every Python adapter shares: build system, test files, Python stacks of a
-- stuck test (both adapters register faulthandler on SIGUSR1, sent by the detector).
function P.mixin(A)
  A.build_system = P.build_system
  A.test_files = P.test_files
  A.stuck_stacks = function(stdout, stderr) return P.faulthandler_stacks(stderr) end
  return A
end

return P
