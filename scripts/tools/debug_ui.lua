-- MCP tool: debug_ui — UI observation (accessibility tree, screenshots). It needs macOS's
-- accessibility and screen-capture APIs; on other platforms it says so with UI_NOT_AVAILABLE.
return {
  name = "debug_ui",
  title = "Observe the UI (macOS)",
  -- Reads the UI only.
  annotations = { readOnlyHint = true, destructiveHint = false, idempotentHint = true, openWorldHint = false },
  description = [[Query the UI state of a running process: accessibility tree and/or screenshot (macOS only; elsewhere it returns UI_NOT_AVAILABLE — use debug_query for output and traces instead).]],
  inputSchema = {
    type = "object",
    required = { "sessionId" },
    additionalProperties = false,
    properties = {
      sessionId = { type = "string", minLength = 1 },
      mode = { type = "string", enum = { "tree", "screenshot", "both" }, description = "Default: tree" },
      vision = { type = "boolean", description = "AI vision for custom-drawn widgets (needs vision.enabled in settings)" },
      verbose = { type = "boolean", description = "JSON instead of compact text" },
    },
  },
  handler = function(args)
    -- An unknown session is the caller's first problem, whatever the platform.
    strobe.session(args.sessionId)
    local settings = strobe.settings({ sessionId = args.sessionId })
    if args.vision and not settings.values["vision.enabled"] then
      strobe.error("VALIDATION_ERROR", "vision: true needs \"vision.enabled\": true in settings.json ($STROBE_HOME or <projectRoot>/.strobe). Call again without vision, or enable it.")
    end
    strobe.error("UI_NOT_AVAILABLE", "UI observation needs macOS (accessibility and screen-capture APIs); this daemon runs on another platform. Use debug_query (stdout/stderr, traced calls) to observe the program instead.")
  end,
}
