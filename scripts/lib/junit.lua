-- JUnit XML reports (pytest --junitxml, bun test --reporter=junit, deno test --junit-path):
-- their test cases and each case's verdict, for the adapters that read them.
local U = {}

-- Every <testcase> of a report decoded by strobe.xml.decode, in document order.
function U.cases(report)
  local out = {}
  local function walk(el)
    if el.tag == "testcase" then out[#out + 1] = el return end
    for _, c in ipairs(el.children or {}) do walk(c) end
  end
  walk(report)
  return out
end

-- "failed" and its <failure>/<error>, "skipped" and its <skipped>, or "passed".
function U.verdict(tc)
  local skipped
  for _, c in ipairs(tc.children or {}) do
    if c.tag == "failure" or c.tag == "error" then return "failed", c end
    if c.tag == "skipped" then skipped = c end
  end
  if skipped then return "skipped", skipped end
  return "passed"
end

return U
