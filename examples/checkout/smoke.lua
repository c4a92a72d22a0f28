-- A CI scenario that passes: the checkout service starts, prices a plain order
-- correctly, and its pricing code runs.
--   strobe run examples/checkout/smoke.lua      (exit status 0)
return {
  name = "checkout service smoke test",
  steps = {
    { "exec", cmd = { "cc", "-g", "-O0", "-o", "checkout", "checkout.c" } },
    { "launch", command = "checkout" },
    { "wait_output", text = "order 3" },
    { "assert_output", contains = "order 1: total 16.00", why = "2 pens, a notebook and a stapler" },
    { "trace", add = { "line_total" } },
    { "wait_event", eventType = "function_exit", ["function"] = "line_total" },
    { "sleep", ms = 500 },
    { "assert_calls", ["function"] = "line_total", min = 3 },
  },
}
