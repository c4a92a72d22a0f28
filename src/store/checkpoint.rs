//! WAL checkpoints off the writer thread. SQLite's automatic checkpoint runs inside the
//! committing connection: every few commits the writer itself copied the WAL into the main
//! file (a read and a write of every page, ~9% of its CPU per row under tracing load, on the
//! one serial thread of ingestion). Here a second connection does that copy, `PASSIVE`
//! (never blocks the writer or readers), whenever the writer has committed `EVENTS_PER_CHECKPOINT`
//! more events. The writer keeps an automatic checkpoint with a larger threshold
//! (`BACKSTOP_PAGES`) as a backstop: a passive checkpoint racing a busy writer rarely
//! leaves the log fully copied at the moment the writer starts its next transaction, which
//! is when SQLite can rewind the log; the backstop (mostly already copied, so cheap) does,
//! so the WAL file stays bounded. Every checkpointer holds `Shared::checkpoint_lock`, so the
//! retention pass's own `TRUNCATE` checkpoint waits for a background one instead of failing
//! with SQLITE_BUSY (its size measurement would then count a WAL it meant to empty).

use std::path::PathBuf;
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;

use rusqlite::Connection;

use super::schema::{self, sql_err};
use super::Shared;
use crate::error::{Result, StrobeError};

/// Committed events between two background checkpoints (about one full writer batch).
const EVENTS_PER_CHECKPOINT: usize = 16_384;
/// The writer's own `wal_autocheckpoint`, in pages (8 KiB): 128 MiB of log.
pub(crate) const BACKSTOP_PAGES: i64 = 16_384;

pub(crate) struct Checkpointer {
    tx: Option<SyncSender<()>>,
    handle: Option<JoinHandle<()>>,
    since_last: usize,
}

impl Checkpointer {
    /// Start the checkpoint thread on the database of `writer` (the writer's connection), and
    /// raise the writer's own automatic checkpoint to the backstop.
    pub(crate) fn start(writer: &Connection, shared: Arc<Shared>) -> Result<Checkpointer> {
        let Some(path) = writer.path().filter(|p| !p.is_empty()).map(PathBuf::from) else {
            // No file (in memory): nothing to copy; SQLite's own behaviour stays.
            return Ok(Checkpointer { tx: None, handle: None, since_last: 0 });
        };
        writer
            .execute_batch(&format!("PRAGMA wal_autocheckpoint = {BACKSTOP_PAGES};"))
            .map_err(|e| sql_err("wal_autocheckpoint", e))?;
        let conn = schema::open_reader(&path, false)?;
        // Capacity 1: a request while one is pending is redundant (it copies everything).
        let (tx, rx) = mpsc::sync_channel::<()>(1);
        let handle = std::thread::Builder::new()
            .name("strobe-store-ckpt".into())
            .spawn(move || {
                while rx.recv().is_ok() {
                    let _one_at_a_time = shared.checkpoint_lock.lock().unwrap_or_else(|p| p.into_inner());
                    if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
                        tracing::debug!("event store: background checkpoint: {e}");
                    }
                }
            })
            .map_err(|e| StrobeError::internal(format!("Cannot start the event store checkpoint thread: {e}")))?;
        Ok(Checkpointer { tx: Some(tx), handle: Some(handle), since_last: 0 })
    }

    /// `n` more events are committed; ask for a checkpoint once enough accumulated.
    pub(crate) fn committed(&mut self, n: usize) {
        self.since_last += n;
        if self.since_last < EVENTS_PER_CHECKPOINT {
            return;
        }
        if let Some(tx) = &self.tx {
            match tx.try_send(()) {
                Ok(()) | Err(TrySendError::Full(())) => self.since_last = 0,
                Err(TrySendError::Disconnected(())) => self.tx = None,
            }
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        // Closing the channel ends the thread; wait so its connection is closed with the store.
        self.tx = None;
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
