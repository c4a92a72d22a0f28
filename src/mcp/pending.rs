//! The requests of one connection still in flight, by id, so that
//! `notifications/cancelled` can reach the one it names and a client that went away
//! can have all of its requests cancelled.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::inflight::Inflight;

#[derive(Default)]
pub struct Pending {
    /// Request id (as JSON text) → (registration serial, its token).
    map: Mutex<HashMap<String, (u64, CancellationToken)>>,
}

/// A tracked request; dropping it (the request finished) forgets it.
pub struct Tracked {
    pending: Arc<Pending>,
    key: String,
    serial: u64,
}

impl Pending {
    /// Track request `id`, served as `req`. A later request reusing the id replaces it.
    pub fn track(self: &Arc<Self>, id: &Value, req: &Inflight) -> Tracked {
        static SERIAL: AtomicU64 = AtomicU64::new(1);
        let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
        let key = id.to_string();
        self.map.lock().unwrap().insert(key.clone(), (serial, req.cancel.clone()));
        Tracked { pending: self.clone(), key, serial }
    }

    /// Cancel request `id` if it is still in flight (an unknown or finished id is
    /// ignored, as the MCP spec says).
    pub fn cancel(&self, id: &Value) {
        if let Some((_, token)) = self.map.lock().unwrap().get(&id.to_string()) {
            tracing::debug!("request {id} cancelled by the client");
            token.cancel();
        }
    }

    pub fn cancel_all(&self) {
        for (_, token) in self.map.lock().unwrap().values() {
            token.cancel();
        }
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        let mut map = self.pending.map.lock().unwrap();
        if map.get(&self.key).is_some_and(|(s, _)| *s == self.serial) {
            map.remove(&self.key);
        }
    }
}

/// The request a `notifications/cancelled` names (`params.requestId`).
pub fn cancelled_request_id(msg: &Value) -> Option<Value> {
    (msg.get("method")?.as_str()? == "notifications/cancelled" && msg.get("id").is_none())
        .then(|| msg.pointer("/params/requestId").cloned())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cancels_the_named_request_until_it_finished() {
        let pending = Arc::new(Pending::default());
        let (a, b) = (Inflight::default(), Inflight::default());
        let ta = pending.track(&json!(1), &a);
        let _tb = pending.track(&json!("x"), &b);
        let msg = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}});
        pending.cancel(&cancelled_request_id(&msg).unwrap());
        assert!(a.cancel.is_cancelled() && !b.cancel.is_cancelled());
        drop(ta);
        let c = Inflight::default();
        let _tc = pending.track(&json!(1), &c);
        pending.cancel_all();
        assert!(b.cancel.is_cancelled() && c.cancel.is_cancelled());
    }
}
