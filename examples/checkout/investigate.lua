-- A debugging session on examples/checkout, written as a Strobe Lua script:
--   strobe run examples/checkout/investigate.lua
-- It builds the program, launches it under Frida, reads its output, traces the
-- pricing functions while the program runs, and works out where the money goes.

local here = arg[0]:match("^(.*)/[^/]*$") or "."
local binary = here .. "/checkout"

print("== building " .. binary)
local build = strobe.exec({ cmd = { "cc", "-g", "-O0", "-o", binary, here .. "/checkout.c" } })
assert(build.ok, "build failed:\n" .. build.stderr)

print("== launching (no traces yet: output first)")
local session = strobe.launch({ command = binary, projectRoot = here })
assert(session:wait_for({ eventType = "stdout", text = "order 3", timeoutMs = 15000 }), "no output from the program")
for _, e in ipairs(session:query({ eventType = "stdout", limit = 4 }).events) do
  io.write("   stdout| ", e.text)
end

print("== the output alone does not say why order 2 is cheap; tracing the pricing code")
local t = session:trace({ add = { "order_total", "line_total", "apply_discount" } })
print(string.format("   %d functions hooked", t.hookedFunctions))
assert(session:wait_for({ eventType = "function_exit", ["function"] = { equals = "order_total" }, timeoutMs = 10000 }),
  "no calls traced")
strobe.sleep(700)

-- Who calls apply_discount? Each enter event names its parent call.
local calls = session:query({ eventType = "function_enter", verbose = true, limit = 500 }).events
local by_id = {}
for _, e in ipairs(calls) do by_id[e.id] = e end
local callers, example = {}, nil
for _, e in ipairs(calls) do
  if e["function"] == "apply_discount" then
    local parent = by_id[e.parentEventId]
    local caller = parent and parent["function"] or "?"
    callers[caller] = (callers[caller] or 0) + 1
    -- Arguments come by parameter name, typed from DWARF: {amount_cents = ..., quantity = ...}.
    if caller == "order_total" and e.arguments.quantity >= 10 then example = example or e end
  end
end
print("== apply_discount callers:")
for caller, n in pairs(callers) do print(string.format("   %-12s %d calls", caller, n)) end

session:stop()

if example then
  local amount, qty = example.arguments.amount_cents, example.arguments.quantity
  print(string.format(
    "FOUND: order_total calls apply_discount(%d, %d) on the running total after line_total already discounted the line.",
    amount, qty))
  print("       Bulk lines are discounted twice (and everything before them once more). Fix: drop the second apply_discount in order_total.")
else
  error("investigation failed: no apply_discount call from order_total was seen")
end
