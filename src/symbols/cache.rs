//! Process-wide cache of [`SymbolIndex`]es, keyed by canonical path and invalidated
//! when the file's size or modification time changes (e.g. after a rebuild).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use super::SymbolIndex;
use crate::error::{Result, StrobeError};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
}

/// Shared symbol indexes. `Send + Sync`; loading happens outside the lock, so two
/// first requests for the same binary may both parse it (the last one is kept).
#[derive(Default)]
pub struct SymbolCache {
    entries: Mutex<HashMap<PathBuf, (Stamp, Arc<SymbolIndex>)>>,
}

impl SymbolCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// The index of `path`, from the cache if the file is unchanged since it was loaded.
    pub fn get(&self, path: &Path) -> Result<Arc<SymbolIndex>> {
        let canonical = std::fs::canonicalize(path).map_err(|e| {
            StrobeError::validation(format!(
                "Cannot read binary '{}': {e}. Check that the path exists and is readable.",
                path.display()
            ))
        })?;
        let stamp = stamp(&canonical)?;
        if let Some((s, index)) = self.lock().get(&canonical) {
            if *s == stamp {
                return Ok(Arc::clone(index));
            }
        }
        let index = Arc::new(SymbolIndex::load(&canonical)?);
        // The file may have changed while it was being read; the next call re-checks.
        self.lock().insert(canonical, (stamp, Arc::clone(&index)));
        Ok(index)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, (Stamp, Arc<SymbolIndex>)>> {
        // A panic while holding the lock cannot leave the map inconsistent.
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn stamp(path: &Path) -> Result<Stamp> {
    let meta = std::fs::metadata(path).map_err(|e| {
        StrobeError::validation(format!("Cannot read binary '{}': {e}.", path.display()))
    })?;
    Ok(Stamp {
        len: meta.len(),
        modified: meta.modified().ok(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    #[test]
    fn cache_is_send_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<SymbolCache>();
    }

    #[test]
    fn missing_file_is_a_validation_error() {
        let err = SymbolCache::new()
            .get(Path::new("/nonexistent/strobe-binary"))
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::ValidationError);
        assert!(
            err.message.contains("/nonexistent/strobe-binary"),
            "{}",
            err.message
        );
    }
}
