//! Which caller a Lua call serves: an MCP connection, or the process's own front end
//! (`strobe run`, the in-process REPL). Tool handlers never name it; the runtime sets it
//! around each request (a task-local, so concurrent requests of different connections on
//! the one Lua thread each see their own), and `strobe.*` functions that stage things for
//! the next launch read it. A client cannot pass another's.

use std::future::Future;

use crate::engine::StageScope;

tokio::task_local! {
    static CALLER: StageScope;
}

/// Run `f` on behalf of `scope`.
pub(crate) async fn serving<F: Future>(scope: StageScope, f: F) -> F::Output {
    CALLER.scope(scope, f).await
}

/// The caller of the running Lua code (`Local` outside any request: `strobe run`).
pub(crate) fn current() -> StageScope {
    CALLER.try_with(|s| *s).unwrap_or_default()
}
