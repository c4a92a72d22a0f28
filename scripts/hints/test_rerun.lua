-- debug_test: the rerun command when the adapter gives none — the debug_test call itself.
return {
  name = "test_rerun",
  when = "test_rerun",
  rule = function(ctx)
    return ("debug_test({action: 'run', projectRoot: '%s', test: '%s'})"):format(ctx.root or ".", ctx.failure.name)
  end,
}
