//! Retention: retained sessions (no longer live) are purged once older than a maximum
//! age, and the oldest go first while the database holds more than a byte budget.
//! Live sessions are never purged: the caller names them.
//!
//! Size is the database's used pages (`(page_count - freelist_count) * page_size`, plus
//! the WAL file): SQLite reuses freed pages, so the file does not shrink but what it
//! holds does, and that is what the budget bounds.

use std::collections::HashSet;

use super::schema::sql_err;
use super::{SessionRow, Store};
use crate::error::Result;

/// What to keep; both limits come from settings (`retention.maxAgeDays`, `retention.maxTotalBytes`).
#[derive(Debug, Clone, Copy)]
pub struct RetentionPolicy {
    pub max_age_secs: i64,
    pub max_total_bytes: i64,
}

/// What one retention pass did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PurgeReport {
    /// Sessions purged for their age.
    pub expired: Vec<String>,
    /// Sessions purged, oldest first, to get under the byte budget.
    pub for_space: Vec<String>,
    pub bytes_before: i64,
    pub bytes_after: i64,
}

impl Store {
    /// Bytes the database holds: used pages of the main file plus the WAL.
    pub fn used_bytes(&self) -> Result<i64> {
        let wal = std::fs::metadata(format!("{}-wal", self.path().display())).map(|m| m.len() as i64).unwrap_or(0);
        let pages = self.with_reader(|conn| {
            conn.query_row(
                "SELECT (SELECT page_count FROM pragma_page_count()) - (SELECT freelist_count FROM pragma_freelist_count()), \
                        (SELECT page_size FROM pragma_page_size())",
                [],
                |r| Ok(r.get::<_, i64>(0)? * r.get::<_, i64>(1)?),
            )
            .map_err(|e| sql_err("used_bytes", e))
        })?;
        Ok(pages + wal)
    }

    /// One retention pass at `now` (unix seconds). Sessions in `live` (and rows still
    /// marked "running") are never touched.
    pub fn enforce_retention(&self, policy: RetentionPolicy, now: i64, live: &HashSet<String>) -> Result<PurgeReport> {
        let mut report = PurgeReport::default();
        let mut retained: Vec<SessionRow> =
            self.list_sessions()?.into_iter().filter(|s| s.status != "running" && !live.contains(&s.id)).collect();
        // Oldest first: by end time (when it stopped being useful), then start.
        retained.sort_by_key(|s| (s.ended_at.unwrap_or(s.started_at), s.started_at));

        let cutoff = now.saturating_sub(policy.max_age_secs);
        let mut kept = Vec::new();
        for s in retained {
            if s.ended_at.unwrap_or(s.started_at) < cutoff {
                self.delete_session(&s.id)?;
                report.expired.push(s.id);
            } else {
                kept.push(s);
            }
        }

        self.flush();
        self.checkpoint();
        report.bytes_before = self.used_bytes()?;
        report.bytes_after = report.bytes_before;
        let mut oldest = kept.into_iter();
        while report.bytes_after > policy.max_total_bytes {
            let Some(s) = oldest.next() else {
                if report.bytes_after > policy.max_total_bytes {
                    tracing::warn!(
                        "event database holds {} bytes, over the {} byte retention budget, but only live sessions remain",
                        report.bytes_after,
                        policy.max_total_bytes
                    );
                }
                break;
            };
            self.delete_session(&s.id)?;
            report.for_space.push(s.id);
            self.checkpoint();
            report.bytes_after = self.used_bytes()?;
        }
        if !report.expired.is_empty() || !report.for_space.is_empty() {
            tracing::info!(
                "retention: purged {} expired and {} sessions for space ({} -> {} bytes)",
                report.expired.len(),
                report.for_space.len(),
                report.bytes_before,
                report.bytes_after
            );
        }
        Ok(report)
    }

    /// Move the WAL into the main file so freed pages show up in the page counts. SQLite
    /// reports `busy` when the copy could not complete (the writer's own backstop checkpoint
    /// was running, or a reader held an old snapshot): try again for up to a second.
    fn checkpoint(&self) {
        let _one_at_a_time = self.shared.checkpoint_lock.lock().unwrap_or_else(|p| p.into_inner());
        for _ in 0..50 {
            // Between two writer rounds (gate.rs): TRUNCATE waits for the writer otherwise.
            let r = self.shared.gate.control(|| {
                self.control.lock().unwrap().query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get::<_, i64>(0))
            });
            match r {
                Ok(0) => return,
                Ok(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
                Err(e) => {
                    tracing::debug!("retention checkpoint: {e}");
                    return;
                }
            }
        }
        tracing::debug!("retention checkpoint: still busy after a second; the WAL counts toward the size");
    }
}
