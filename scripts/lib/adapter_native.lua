-- What the C/C++ adapters (gtest, Catch2) share: recognising a test binary by the
-- framework's symbols, paths relative to the project, and the failing test's source.
local N = {}

-- Does the binary at `path` carry `marker` (a symbol or string of the framework)?
function N.binary_has(path, marker)
  if not path or not strobe.fs.exists(path) then return false end
  local ok, bytes = pcall(strobe.fs.read, path)
  return ok and bytes:find(marker, 1, true) ~= nil
end

-- Does the project's build mention `word` (CMakeLists.txt, meson.build, Makefile)?
function N.build_mentions(root, words)
  for _, f in ipairs({ "CMakeLists.txt", "meson.build", "Makefile", "BUILD", "conanfile.txt", "vcpkg.json" }) do
    local ok, text = pcall(strobe.fs.read, root .. "/" .. f)
    if ok then
      for _, w in ipairs(words) do
        if text:find(w, 1, true) then return true end
      end
    end
  end
  return false
end

function N.relative(root, path)
  if path and path:sub(1, #root + 1) == root .. "/" then return path:sub(#root + 2) end
  return path
end

function N.build_system(root)
  if strobe.fs.exists(root .. "/CMakeLists.txt") then return "cmake" end
  if strobe.fs.exists(root .. "/meson.build") then return "meson" end
  if strobe.fs.exists(root .. "/Makefile") then return "make" end
  return "unknown"
end

function N.test_files(root)
  local out, seen = {}, {}
  for _, pat in ipairs({ "/tests/**/*.cpp", "/test/**/*.cpp", "/tests/**/*.cc", "/test/**/*.cc", "/src/**/*_test.cpp", "/src/**/*_test.cc" }) do
    for _, f in ipairs(strobe.fs.glob(root .. pat)) do
      if not seen[f] then seen[f] = true out[#out + 1] = f end
    end
  end
  table.sort(out)
  return out
end

-- The binary path as given (relative to the project root when not absolute).
function N.binary(ctx)
  local c = ctx.command
  if c and c:sub(1, 1) ~= "/" and strobe.fs.exists(ctx.root .. "/" .. c) then return ctx.root .. "/" .. c end
  return c
end

-- Line-buffered stdout (progress while the tests run), where coreutils' stdbuf exists.
function N.line_buffered(cmd)
  if strobe.fs.exists("/usr/bin/stdbuf") then
    table.insert(cmd, 1, "-oL")
    table.insert(cmd, 1, "/usr/bin/stdbuf")
  end
  return cmd
end

-- Under Frida the binary itself is launched (stdbuf would be the traced process).
function N.traced(spec)
  if spec.cmd[1] == "/usr/bin/stdbuf" then
    table.remove(spec.cmd, 1)
    table.remove(spec.cmd, 1)
  end
  return spec
end

-- The parts every native adapter shares: build system, test files, the traced command.
function N.mixin(A)
  A.build_system = N.build_system
  A.test_files = N.test_files
  A.traced_command = function(ctx, test)
    return N.traced(test and A.single_test_command(ctx, test) or A.suite_command(ctx))
  end
  return A
end

return N
