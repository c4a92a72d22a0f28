-- A CI scenario that catches the real bug in checkout.c: bulk lines are discounted
-- twice. It fails (exit status 1) until order_total stops calling apply_discount.
--   strobe run examples/checkout/bulk_discount.lua
return {
  name = "bulk lines get 10% off, once",
  steps = {
    { "exec", cmd = { "cc", "-g", "-O0", "-o", "checkout", "checkout.c" } },
    { "launch", command = "checkout" },
    { "wait_output", text = "order 3" },
    { "trace", add = { "order_total", "line_total", "apply_discount" } },
    { "wait_event", eventType = "function_exit", ["function"] = "order_total" },
    { "sleep", ms = 700 },
    -- 20 pens at 1.50 with 10% off (27.00) + a notebook (4.00) + a stapler (9.00)
    { "assert_output", contains = "order 2: total 40.00", why = "20 pens at 1.50 less 10%, 4.00 and 9.00" },
    { "assert_calls", ["function"] = "apply_discount", caller = "order_total", count = 0,
      why = "the discount belongs to line_total alone" },
  },
}
