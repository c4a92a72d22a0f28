//! What the request being served carries besides its arguments: a cancellation token
//! (cancelled by `notifications/cancelled` or by the client going away) and, when the
//! client asked for them (`_meta.progressToken`), a sink for `notifications/progress`.
//!
//! The MCP connection makes one [`Inflight`] per request and runs the request inside
//! [`Inflight::scope`] (a task-local, so it reaches the Lua worker's call and the engine
//! futures it awaits, and nothing else). Code where a request may wait long calls
//! [`check`] / [`or_cancelled`] (the engine's pause waits, `strobe.sleep`, ...) and
//! reports progress with [`progress`] or [`heartbeat`]; the Lua watchdog interrupts a
//! cancelled chunk at its next instruction check. Outside a request all of these do
//! nothing, so the core stays usable from `strobe run` and tests.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use crate::error::{ErrorCode, StrobeError};

/// How often a long wait sends a heartbeat progress notification.
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(1);

/// One request in flight: its cancellation and its progress reporter.
#[derive(Clone, Default)]
pub struct Inflight {
    pub cancel: CancellationToken,
    progress: Option<Arc<Reporter>>,
}

/// Sends `notifications/progress` for one request's token, each value above the last
/// (the spec requires progress to increase).
struct Reporter {
    token: Value,
    out: UnboundedSender<String>,
    started: Instant,
    state: Mutex<ReporterState>,
}

#[derive(Default)]
struct ReporterState {
    last: Option<f64>,
    /// The request reported its own progress: heartbeats (elapsed seconds, another
    /// scale) would confuse it, so they stop.
    explicit: bool,
}

tokio::task_local! {
    static CURRENT: Inflight;
}

impl Inflight {
    /// A request that reports progress for `token` (when the client sent one) on `out`.
    pub fn new(token: Option<Value>, out: &UnboundedSender<String>) -> Inflight {
        let progress = token.map(|token| {
            Arc::new(Reporter { token, out: out.clone(), started: Instant::now(), state: Mutex::default() })
        });
        Inflight { cancel: CancellationToken::new(), progress }
    }

    /// Run `f` as this request: [`check`], [`progress`] and friends inside it act on it.
    pub async fn scope<F: Future>(self, f: F) -> F::Output {
        CURRENT.scope(self, f).await
    }
}

impl Reporter {
    fn send(&self, progress: f64, total: Option<f64>, message: Option<&str>, explicit: bool) -> bool {
        let mut st = self.state.lock().unwrap();
        if !explicit && st.explicit {
            return false;
        }
        if st.last.is_some_and(|last| progress <= last) || !progress.is_finite() {
            return false;
        }
        st.last = Some(progress);
        st.explicit |= explicit;
        let mut params = json!({ "progressToken": self.token, "progress": progress });
        if let Some(t) = total.filter(|t| t.is_finite()) {
            params["total"] = json!(t);
        }
        if let Some(m) = message {
            params["message"] = json!(m);
        }
        let msg = json!({ "jsonrpc": "2.0", "method": "notifications/progress", "params": params });
        self.out.send(msg.to_string()).is_ok()
    }
}

fn current() -> Option<Inflight> {
    CURRENT.try_with(Inflight::clone).ok()
}

/// The request being served was cancelled (false outside a request).
pub fn is_cancelled() -> bool {
    CURRENT.try_with(|c| c.cancel.is_cancelled()).unwrap_or(false)
}

/// The error a cancelled request ends with (the client never sees it).
pub fn cancelled_error() -> StrobeError {
    StrobeError::new(ErrorCode::Cancelled, "the client cancelled this request (or disconnected); its work was stopped")
}

/// `Err(CANCELLED)` once the request being served is cancelled: call it in wait loops.
pub fn check() -> Result<(), StrobeError> {
    if is_cancelled() {
        Err(cancelled_error())
    } else {
        Ok(())
    }
}

/// `f`, or `Err(CANCELLED)` as soon as the request is cancelled (dropping `f`: only for
/// futures that may be dropped midway, like a sleep or a child process wait).
pub async fn or_cancelled<F: Future>(f: F) -> Result<F::Output, StrobeError> {
    let Some(cur) = current() else { return Ok(f.await) };
    tokio::select! {
        biased;
        _ = cur.cancel.cancelled() => Err(cancelled_error()),
        out = f => Ok(out),
    }
}

/// Report progress of the request being served (`progress` must grow from one report to
/// the next; a value not above the last is dropped). False when nothing was sent: no
/// request, or its client asked for no progress.
pub fn progress(progress: f64, total: Option<f64>, message: Option<&str>) -> bool {
    let Some(cur) = current() else { return false };
    match &cur.progress {
        Some(r) if !cur.cancel.is_cancelled() => r.send(progress, total, message, true),
        _ => false,
    }
}

/// A sign of life from a long wait: progress is the seconds since the request began,
/// with `message` saying what it waits for. Silent once the request reported its own
/// progress.
pub fn heartbeat(message: &str) {
    if let Some(cur) = current() {
        if let Some(r) = cur.progress.as_ref().filter(|_| !cur.cancel.is_cancelled()) {
            let secs = (r.started.elapsed().as_secs_f64() * 10.0).round() / 10.0;
            r.send(secs, None, Some(message), false);
        }
    }
}

/// Await `f`, sending a [`heartbeat`] with `message()` every [`HEARTBEAT_EVERY`] while
/// it runs. Not a cancellation point: `f` runs to its end.
pub async fn with_heartbeat<F: Future>(f: F, message: impl Fn() -> String) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + HEARTBEAT_EVERY, HEARTBEAT_EVERY);
    loop {
        tokio::select! {
            out = &mut f => return out,
            _ = tick.tick() => heartbeat(&message()),
        }
    }
}

/// Paces heartbeats from a polling loop: `due()` is true at most once per
/// [`HEARTBEAT_EVERY`].
pub struct Pace(Instant);

impl Pace {
    pub fn new() -> Pace {
        Pace(Instant::now())
    }
    pub fn due(&mut self) -> bool {
        if self.0.elapsed() >= HEARTBEAT_EVERY {
            self.0 = Instant::now();
            true
        } else {
            false
        }
    }
}

impl Default for Pace {
    fn default() -> Self {
        Pace::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn progress_grows_heartbeats_yield_to_explicit_reports_and_cancel_silences() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let req = Inflight::new(Some(json!("tok")), &tx);
        let cancel = req.cancel.clone();
        req.scope(async {
            heartbeat("waiting");
            assert!(progress(1.0, Some(3.0), Some("one")));
            assert!(!progress(1.0, Some(3.0), None), "not above the last");
            heartbeat("ignored: the request reports its own progress");
            assert!(check().is_ok());
            cancel.cancel();
            assert_eq!(check().unwrap_err().code, ErrorCode::Cancelled);
            assert!(!progress(2.0, None, None), "no progress after cancellation");
            assert!(or_cancelled(std::future::pending::<()>()).await.is_err());
        })
        .await;
        let got: Vec<Value> = std::iter::from_fn(|| rx.try_recv().ok()).map(|s| serde_json::from_str(&s).unwrap()).collect();
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0]["params"]["message"], "waiting");
        assert_eq!(got[1]["params"], json!({ "progressToken": "tok", "progress": 1.0, "total": 3.0, "message": "one" }));
        assert!(!is_cancelled(), "outside a request nothing is cancelled");
    }
}
