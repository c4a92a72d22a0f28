//! Hot reload: a `notify` watcher on every script directory (and the trust list), a
//! debounce so an editor's burst of writes gives one reload, and a callback that asks
//! the Lua thread to reload. Directories that do not exist yet are watched through
//! their nearest existing parent, so creating `$STROBE_HOME/scripts/tools/` works too.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use notify::{RecursiveMode, Watcher as _};

use super::scripts::{ScriptSources, TRUST_FILE};

/// Quiet time after the last change before reloading.
pub const DEBOUNCE: Duration = Duration::from_millis(200);

pub struct ScriptWatcher {
    watcher: notify::RecommendedWatcher,
    watched: BTreeMap<PathBuf, RecursiveMode>,
    /// Paths whose changes matter; other events (the database in `$STROBE_HOME`) are ignored.
    interesting: Arc<Mutex<Vec<PathBuf>>>,
}

impl ScriptWatcher {
    /// Start watching; `on_change` runs on a background thread after each debounced burst.
    pub fn start(on_change: impl Fn() + Send + 'static) -> notify::Result<ScriptWatcher> {
        let interesting: Arc<Mutex<Vec<PathBuf>>> = Arc::default();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let filter = interesting.clone();
        let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            let Ok(ev) = res else { return };
            if matches!(ev.kind, notify::EventKind::Access(_)) {
                return;
            }
            let roots = filter.lock().unwrap();
            let relevant = ev.paths.iter().any(|p| roots.iter().any(|r| p.starts_with(r) || r.starts_with(p)));
            if relevant {
                let _ = tx.send(());
            }
        })?;
        std::thread::Builder::new()
            .name("strobe-reload".into())
            .spawn(move || {
                while rx.recv().is_ok() {
                    // Debounce: wait until the burst is over.
                    loop {
                        match rx.recv_timeout(DEBOUNCE) {
                            Ok(()) => continue,
                            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => break,
                            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return,
                        }
                    }
                    on_change();
                }
            })
            .map_err(|e| notify::Error::generic(&e.to_string()))?;
        Ok(ScriptWatcher { watcher, watched: BTreeMap::new(), interesting })
    }

    /// Watch what `sources` reads now (called after each reload: trust or project roots may have changed).
    pub fn update(&mut self, sources: &ScriptSources) {
        let mut interesting: Vec<PathBuf> = sources.layers().into_iter().map(|(_, d)| d).collect();
        if let Some(home) = &sources.home {
            interesting.push(home.join(TRUST_FILE));
        }
        // Untrusted project dirs matter too: trusting one while the daemon runs takes effect at once.
        let mut want: BTreeMap<PathBuf, RecursiveMode> = BTreeMap::new();
        for p in &interesting {
            let (dir, mode) = if p.is_dir() {
                (p.clone(), RecursiveMode::Recursive)
            } else {
                (nearest_existing_parent(p), RecursiveMode::NonRecursive)
            };
            // A recursive watch covers a non-recursive one on the same directory.
            let entry = want.entry(dir).or_insert(mode);
            if mode == RecursiveMode::Recursive {
                *entry = RecursiveMode::Recursive;
            }
        }
        *self.interesting.lock().unwrap() = interesting;
        let stale: Vec<PathBuf> =
            self.watched.iter().filter(|(d, m)| want.get(*d) != Some(*m)).map(|(d, _)| d.clone()).collect();
        for d in stale {
            let _ = self.watcher.unwatch(&d);
            self.watched.remove(&d);
        }
        for (d, m) in want {
            if self.watched.contains_key(&d) {
                continue;
            }
            match self.watcher.watch(&d, m) {
                Ok(()) => {
                    self.watched.insert(d, m);
                }
                Err(e) => tracing::warn!("cannot watch {} for script changes: {e}", d.display()),
            }
        }
    }
}

fn nearest_existing_parent(p: &Path) -> PathBuf {
    let mut cur = p.parent();
    while let Some(c) = cur {
        if c.is_dir() {
            return c.to_path_buf();
        }
        cur = c.parent();
    }
    PathBuf::from("/")
}
