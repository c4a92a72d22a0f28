//! `strobe daemon`: serves MCP on `$STROBE_HOME/strobe.sock`, one connection per
//! client, and shuts down after a spell with no clients (30 minutes by default).

use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::net::UnixListener;

use super::connection::Connection;
use crate::engine::{Engine, EngineConfig};
use crate::lua::{LuaHost, ScriptSources};

pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(30 * 60);

fn idle_timeout() -> Duration {
    std::env::var("STROBE_IDLE_TIMEOUT_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_IDLE_TIMEOUT)
}

/// Run the daemon until idle or signalled. Returns Ok(false) when another daemon
/// already owns this `STROBE_HOME`.
pub async fn run(config: EngineConfig) -> anyhow::Result<bool> {
    std::fs::create_dir_all(&config.home)?;
    // One daemon per home: the lock is released by the OS if we die.
    let lock = File::create(config.home.join("strobe.lock"))?;
    if lock.try_lock().is_err() {
        tracing::info!("another daemon already serves {}", config.home.display());
        return Ok(false);
    }
    let socket = config.home.join("strobe.sock");
    let pid_file = config.home.join("strobe.pid");
    let _ = std::fs::remove_file(&socket); // stale: we hold the lock, so nobody serves it
    let listener = UnixListener::bind(&socket)?;
    std::fs::write(&pid_file, format!("{}\n", std::process::id()))?;

    let engine = Engine::new(config.clone())?;
    // Purge expired retained sessions now and periodically (settings: retention.*).
    engine.spawn_retention_task();
    let lua = LuaHost::start(engine.clone(), ScriptSources::standard(&config.home))?;
    if let Err(e) = lua.watch_scripts().await {
        tracing::warn!("script hot reload is off: {e}");
    }
    // Start Frida (and install it on first use) now, not on the first launch.
    {
        let engine = engine.clone();
        tokio::spawn(async move {
            if let Err(e) = engine.warm_up().await {
                tracing::warn!("Frida warm-up failed (launches will retry): {e}");
            }
        });
    }

    let active = Arc::new(AtomicUsize::new(0));
    let last_activity = Arc::new(Mutex::new(Instant::now()));
    let timeout = idle_timeout();
    let mut tick = tokio::time::interval(Duration::from_secs(1).min(timeout));
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tracing::info!("strobe daemon listening on {} (pid {})", socket.display(), std::process::id());

    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                active.fetch_add(1, Ordering::SeqCst);
                let conn = Connection::new(engine.clone(), lua.clone());
                let (active, last) = (active.clone(), last_activity.clone());
                tokio::spawn(async move {
                    let (r, w) = stream.into_split();
                    conn.serve(r, w).await;
                    *last.lock().unwrap() = Instant::now();
                    active.fetch_sub(1, Ordering::SeqCst);
                });
            }
            _ = tick.tick() => {
                let idle = last_activity.lock().unwrap().elapsed();
                if active.load(Ordering::SeqCst) == 0 && idle >= timeout && engine.live_session_ids().is_empty() {
                    tracing::info!("idle for {:?}; shutting down", idle);
                    break;
                }
            }
            _ = tokio::signal::ctrl_c() => break,
            _ = sigterm.recv() => break,
        }
    }
    engine.stop_all().await;
    engine.store().flush();
    remove_if_ours(&socket, &pid_file);
    drop(lock);
    Ok(true)
}

fn remove_if_ours(socket: &Path, pid_file: &Path) {
    let ours = std::fs::read_to_string(pid_file).ok().and_then(|s| s.trim().parse::<u32>().ok()) == Some(std::process::id());
    if ours {
        let _ = std::fs::remove_file(socket);
        let _ = std::fs::remove_file(pid_file);
    }
}
