-- Rust: `cargo test`. Output is machine-readable on both levels: cargo's
-- `--message-format=json` (compiler diagnostics, built artifacts) and libtest's
-- `--format json` events. libtest's JSON is unstable-only, so runs set RUSTC_BOOTSTRAP=1
-- (a stable toolchain then accepts `-Z unstable-options`); cargo keys its build cache on
-- it, so the first debug_test run of a project rebuilds it once.
local A = {
  name = "cargo",
  language = "rust",
  build_system = "cargo",
}

local LIBTEST = { "-Z", "unstable-options", "--format", "json", "--report-time" }
local ENV = { RUSTC_BOOTSTRAP = "1", RUST_BACKTRACE = "1", CARGO_TERM_COLOR = "never" }

function A.detect(root)
  return strobe.fs.exists(root .. "/Cargo.toml") and 90 or 0
end

local function level_args(level)
  if level == "unit" then return { "--lib", "--bins" } end
  if level == "integration" or level == "e2e" then return { "--test", "*" } end
  return {}
end

local function command(ctx, level, filter)
  local cmd = { "cargo", "test", "--no-fail-fast", "--message-format=json" }
  for _, a in ipairs(level_args(level)) do cmd[#cmd + 1] = a end
  cmd[#cmd + 1] = "--"
  if filter then cmd[#cmd + 1] = filter end
  for _, a in ipairs(LIBTEST) do cmd[#cmd + 1] = a end
  return { cmd = cmd, env = ENV }
end

function A.suite_command(ctx, level)
  return command(ctx, level, nil)
end

function A.single_test_command(ctx, test)
  return command(ctx, ctx.level, test)
end

-- Each JSON line of stdout, decoded (cargo's messages and libtest's events share stdout).
local events = require("jsonlines").decode

function A.progress(stdout)
  local p = { passed = 0, failed = 0, skipped = 0, phase = "compiling" }
  local running = {}
  local suites, done = 0, 0
  for _, e in ipairs(events(stdout)) do
    if e.type == "suite" then
      p.phase = "running"
      if e.event == "started" then suites = suites + 1 else done = done + 1 end
    elseif e.type == "test" then
      if e.event == "started" then running[e.name] = true
      else
        running[e.name] = nil
        if e.event == "ok" then p.passed = p.passed + 1
        elseif e.event == "failed" or e.event == "timeout" then p.failed = p.failed + 1
        elseif e.event == "ignored" then p.skipped = p.skipped + 1 end
      end
    end
  end
  p.currentTest = next(running)
  if suites > 0 and suites == done and not p.currentTest then p.phase = "suites_finished" end
  return p
end

-- "thread 'x' panicked at src/lib.rs:10:5:\nmessage\nnote: ..." (Rust ≥ 1.73) or the older
-- "panicked at 'message', src/lib.rs:10:5".
local function panic_of(text)
  local file, line, rest = text:match("panicked at ([^\n]-):(%d+):%d+:\n(.*)")
  if file then
    local msg = rest:match("^(.-)\nstack backtrace:") or rest
    msg = msg:match("^(.-)\nnote: ") or msg
    return file, tonumber(line), (msg:gsub("%s+$", ""))
  end
  local msg2, f2, l2 = text:match("panicked at '(.-)', ([^\n]-):(%d+):%d+")
  return f2, tonumber(l2), msg2
end

-- RUST_BACKTRACE=1 frames: "  12: crate::module::func\n             at ./src/lib.rs:5:9".
local is_user_frame

local function stack_of(text)
  local frames = {}
  local bt = text:match("stack backtrace:\n(.*)")
  if not bt then return frames end
  local cur
  for line in bt:gmatch("[^\n]+") do
    local func = line:match("^%s+%d+: (.+)$")
    if func then
      cur = { ["function"] = func:gsub("::h%x+$", "") }
      frames[#frames + 1] = cur
    else
      local file, ln = line:match("^%s+at (.-):(%d+):%d+$")
      if file and cur then cur.file, cur.line = file:gsub("^%./", ""), tonumber(ln) end
    end
  end
  local user = {}
  for _, f in ipairs(frames) do
    if is_user_frame(f) then user[#user + 1] = f end
  end
  return user
end

-- Frames of the project's own code: not the standard library, libtest, the panic machinery or
-- a dependency. A method named with its self type in brackets (`<slab::Slab<i32>>::insert`:
-- v0 names, which the RUSTC_BOOTSTRAP builds get) counts when its file is the project's.
function is_user_frame(f)
  local fn = f["function"] or ""
  if fn:match("^std::") or fn:match("^core::") or fn:match("^alloc::") or fn:match("^test::")
    or fn:match("^rust_") or fn:match("^__") then
    return false
  end
  if f.file and (f.file:match("^/rustc/") or f.file:find("/.cargo/registry/", 1, true)) then
    return false
  end
  return not fn:match("^<") or (f.file ~= nil and not fn:match("^<std::") and not fn:match("^<core::") and not fn:match("^<alloc::"))
end

-- A frame's function as a trace pattern: `<slab::Slab<i32>>::insert_at` → `slab::Slab::insert_at`
-- (every instantiation; src/symbols/pattern.rs matches v0 names by their self type's path), a
-- trait method `<a::B<T> as c::D>::f` → `a::B::f`.
local function pattern_of(fn)
  local self_ty, rest = fn:match("^<(.-)>::([^<>]+)$")
  if self_ty then
    self_ty = self_ty:gsub(" as .*$", "")
    fn = self_ty .. "::" .. rest
  end
  -- Generic arguments dropped: a segment without them matches every instantiation.
  local out, depth = {}, 0
  for c in fn:gmatch(".") do
    if c == "<" then depth = depth + 1
    elseif c == ">" then depth = math.max(0, depth - 1)
    elseif depth == 0 then out[#out + 1] = c end
  end
  return table.concat(out)
end

local function diagnostics(evts)
  local out, seen = {}, {}
  for _, e in ipairs(evts) do
    -- The lib and its test harness build report the same error: keep one.
    if e.reason == "compiler-message" and e.message and e.message.level == "error" and not seen[e.message.rendered or ""] then
      seen[e.message.rendered or ""] = true
      local span
      for _, s in ipairs(e.message.spans or {}) do
        if s.is_primary then span = s break end
      end
      out[#out + 1] = {
        file = span and span.file_name, line = span and span.line_start, column = span and span.column_start,
        message = e.message.message, code = e.message.code and e.message.code.code or nil,
        rendered = e.message.rendered,
      }
    end
  end
  return out
end

function A.parse_output(stdout, stderr, exit, ctx)
  local evts = events(stdout)
  local r = { summary = { passed = 0, failed = 0, skipped = 0 }, failures = {}, durations = {} }
  local started = {}
  for _, e in ipairs(evts) do
    if e.type == "test" then
      if e.event == "started" then started[e.name] = true else started[e.name] = nil end
      if e.exec_time then r.durations[e.name] = e.exec_time * 1000 end
      if e.event == "ok" then r.summary.passed = r.summary.passed + 1
      elseif e.event == "ignored" then r.summary.skipped = r.summary.skipped + 1
      elseif e.event == "failed" or e.event == "timeout" then
        r.summary.failed = r.summary.failed + 1
        local text = e.stdout or ""
        local file, line, message = panic_of(text)
        r.failures[#r.failures + 1] = {
          name = e.name, file = file, line = line, message = message or text, stack = stack_of(text),
          output = text,
        }
      end
    end
  end
  r.unfinished = next(started)
  if r.unfinished and exit ~= 0 and not (ctx and ctx.killed) then
    -- The process died inside a test (abort, signal, stack overflow): that test failed.
    local last = stderr:match("([^\n]+)\n?$") or ""
    r.summary.failed = r.summary.failed + 1
    r.failures[#r.failures + 1] = {
      name = r.unfinished, message = "the test process died while this test ran: " .. last, stack = {},
    }
  end
  r.compileErrors = diagnostics(evts)
  if #r.compileErrors == 0 and exit ~= 0 and r.summary.passed + r.summary.failed + r.summary.skipped == 0 then
    r.details = stderr:sub(-4000)
  end
  return r
end

-- The modules of the failing code: the panicking frames' paths, `a::b::f` → `a::b::*`,
-- and the functions themselves. The test's own module is left out when others exist.
function A.suggest_traces(failure)
  local out, seen = {}, {}
  local function add(p) if not seen[p] then seen[p] = true out[#out + 1] = p end end
  local test_suffix = "::" .. failure.name
  for _, f in ipairs(failure.stack or {}) do
    local fn = pattern_of((f["function"]:gsub("::{closure#%d+}", "")))
    local is_test = fn:sub(-#test_suffix) == test_suffix or fn == failure.name
    if not is_test then
      add(fn)
      local mod = fn:match("^(.*)::[^:]+$")
      if mod then add(mod .. "::*") end
    end
  end
  return out
end

function A.rerun_command(failure)
  return ("cargo test -- %s --exact"):format(failure.name)
end

function A.test_files(root)
  local files = strobe.fs.glob(root .. "/tests/**/*.rs")
  for _, f in ipairs(strobe.fs.glob(root .. "/src/**/*.rs")) do
    local text = strobe.fs.read(f)
    if text:find("#%[test%]") or text:find("#%[cfg%(test%)%]") then files[#files + 1] = f end
  end
  table.sort(files)
  return files
end

function A.no_tests_hint()
  return "cargo ran no test: add #[test] functions (in src/ under #[cfg(test)] or in tests/), or check the 'test' filter."
end

-- Under Frida the test binary runs itself (not cargo): build it first, then find the
-- binary that holds `test`.
function A.traced_command(ctx, test)
  local env = {}
  for k, v in pairs(ENV) do env[k] = v end
  for k, v in pairs(ctx.env or {}) do env[k] = v end
  local build = strobe.exec{ cmd = { "cargo", "test", "--no-run", "--message-format=json" }, cwd = ctx.root, env = env }
  local exes = {}
  for _, e in ipairs(events(build.stdout)) do
    if e.reason == "compiler-artifact" and e.executable and e.profile and e.profile.test then
      exes[#exes + 1] = e.executable
    end
  end
  if #exes == 0 then
    strobe.error("VALIDATION_ERROR", "cargo built no test binary for the traced run: " .. build.stderr:sub(-2000))
  end
  local chosen = exes[1]
  if test then
    for _, exe in ipairs(exes) do
      local l = strobe.exec{ cmd = { exe, test, "--list" }, cwd = ctx.root, env = env }
      if l.stdout:find(": test", 1, true) then chosen = exe break end
    end
  end
  local cmd = { chosen }
  if test then cmd[#cmd + 1] = test end
  for _, a in ipairs(LIBTEST) do cmd[#cmd + 1] = a end
  cmd[#cmd + 1] = "--test-threads=1"
  return { cmd = cmd, env = ENV, cwd = ctx.root }
end

return A
