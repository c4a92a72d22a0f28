//! Reading a live session's events through the engine: paged queries and the waits that
//! tracing tests share.

use std::time::{Duration, Instant};

use strobe::engine::Engine;
use strobe::store::{Event, EventQuery, EventType};

/// Every event of `event_type` (all types: None) after the cursor, paging 500 at a time.
pub fn query_all(engine: &Engine, id: &str, event_type: Option<EventType>, after: Option<i64>) -> Vec<Event> {
    let mut out = Vec::new();
    let mut cursor = after;
    loop {
        let q = EventQuery { session_id: id.into(), event_type, after_event_id: cursor, limit: 500, ..Default::default() };
        let r = engine.query(&q).expect("query");
        out.extend(r.events);
        if !r.has_more {
            return out;
        }
        cursor = r.last_event_id;
    }
}

/// The first stdout line containing `needle`, waiting up to `timeout` for it.
pub async fn wait_for_stdout(engine: &Engine, id: &str, needle: &str, timeout: Duration) -> String {
    let deadline = Instant::now() + timeout;
    loop {
        let lines = query_all(engine, id, Some(EventType::Stdout), None);
        if let Some(e) = lines.iter().find(|e| e.text.as_deref().is_some_and(|t| t.contains(needle))) {
            return e.text.clone().unwrap();
        }
        assert!(Instant::now() < deadline, "no stdout line containing {needle:?} within {timeout:?}: {lines:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Wait until the session is no longer running (60 s at most), then flush the store.
pub async fn wait_for_exit(engine: &Engine, id: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while engine.status(id).unwrap().status == "running" {
        assert!(Instant::now() < deadline, "session {id} did not exit");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    engine.store().flush();
}

/// Function enter and exit events, in id order.
pub fn trace_events(engine: &Engine, id: &str) -> Vec<Event> {
    let mut v = query_all(engine, id, Some(EventType::FunctionEnter), None);
    v.extend(query_all(engine, id, Some(EventType::FunctionExit), None));
    v.sort_by_key(|e| e.id);
    v
}
