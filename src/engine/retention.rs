//! Retention for the engine: the daemon purges retained sessions past
//! `retention.maxAgeDays` and, oldest first, while the database is over
//! `retention.maxTotalBytes` — at start and then periodically. Live sessions are safe.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use super::{now_unix, Engine};
use crate::error::Result;
use crate::store::{PurgeReport, RetentionPolicy};

/// Default time between retention passes (`STROBE_RETENTION_INTERVAL_SECS` overrides it).
const RETENTION_INTERVAL: Duration = Duration::from_secs(3600);

impl Engine {
    /// One retention pass with the global settings (retention is daemon-wide).
    pub fn enforce_retention(&self) -> Result<PurgeReport> {
        let settings = self.settings_for(None);
        for w in &settings.warnings {
            tracing::warn!("settings: {w}");
        }
        let policy = RetentionPolicy {
            max_age_secs: settings.retention_max_age_secs(),
            max_total_bytes: settings.retention_max_total_bytes(),
        };
        let live: HashSet<String> = self.sessions.lock().unwrap().keys().cloned().collect();
        self.store.enforce_retention(policy, now_unix(), &live)
    }

    /// Run a retention pass now and then every interval, off the async threads (purging
    /// waits on the store's writer). Stops when the engine is dropped.
    pub fn spawn_retention_task(self: &Arc<Engine>) {
        let every = std::env::var("STROBE_RETENTION_INTERVAL_SECS")
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .filter(|s| *s > 0)
            .map(Duration::from_secs)
            .unwrap_or(RETENTION_INTERVAL);
        let weak = Arc::downgrade(self);
        self.runtime.spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                let Some(engine) = weak.upgrade() else { return };
                match tokio::task::spawn_blocking(move || engine.enforce_retention()).await {
                    Ok(Err(e)) => tracing::warn!("retention pass failed: {e}"),
                    Err(e) => tracing::warn!("retention pass panicked: {e}"),
                    Ok(Ok(_)) => {}
                }
            }
        });
    }
}
