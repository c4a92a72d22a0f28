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

/// Sessions launched on behalf of each MCP connection (through any tool, script or REPL
/// chunk), so that its cleanup stops them even when the call that launched one never
/// answered (cancelled, or its client gone).
static LAUNCHED: std::sync::Mutex<Vec<(StageScope, String)>> = std::sync::Mutex::new(Vec::new());

/// Record that the current caller launched session `id`.
pub(crate) fn note_launched(id: &str) {
    let scope = current();
    if scope != StageScope::Local {
        LAUNCHED.lock().unwrap().push((scope, id.to_string()));
    }
}

/// The sessions launched for `scope`, forgotten here.
pub(crate) fn take_launched(scope: StageScope) -> Vec<String> {
    let mut all = LAUNCHED.lock().unwrap();
    let (mine, rest): (Vec<_>, Vec<_>) = all.drain(..).partition(|(s, _)| *s == scope);
    *all = rest;
    mine.into_iter().map(|(_, id)| id).collect()
}
