//! What benchmarks ask of a traced session: a stdout line, and how many function events
//! are stored.

use std::time::{Duration, Instant};

use strobe::engine::Engine;
use strobe::store::{EventQuery, EventType};

/// The first stdout line containing `needle` (waits up to 15 minutes: a loaded machine).
pub async fn stdout_line(engine: &Engine, id: &str, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        let q = EventQuery { session_id: id.into(), event_type: Some(EventType::Stdout), limit: 50, ..Default::default() };
        if let Ok(r) = engine.query(&q) {
            if let Some(t) = r.events.iter().filter_map(|e| e.text.clone()).find(|t| t.contains(needle)) {
                return t;
            }
        }
        assert!(Instant::now() < deadline, "no {needle:?} from the target");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// function_enter + function_exit rows stored for the session.
#[allow(dead_code)] // not every benchmark counts rows
pub fn function_events(engine: &Engine, id: &str) -> i64 {
    let q = |t| EventQuery { session_id: id.into(), event_type: Some(t), limit: 1, ..Default::default() };
    engine.query(&q(EventType::FunctionEnter)).map(|r| r.total_count).unwrap_or(0) + engine.query(&q(EventType::FunctionExit)).map(|r| r.total_count).unwrap_or(0)
}

/// Rows of one event type stored for the session.
#[allow(dead_code)] // not every benchmark counts rows
pub fn events_of(engine: &Engine, id: &str, event_type: EventType) -> usize {
    let q = EventQuery { session_id: id.into(), event_type: Some(event_type), limit: 1, ..Default::default() };
    engine.query(&q).map(|r| r.total_count as usize).unwrap_or(0)
}
