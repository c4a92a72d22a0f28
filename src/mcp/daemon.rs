//! `strobe daemon`: serves MCP on `$STROBE_HOME/strobe.sock`, one connection per
//! client, and shuts down after a spell with no clients (30 minutes by default).

use std::fs::File;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::net::{UnixListener, UnixStream};

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
    // Private to this user whatever the umask: the db and log hold program output and memory.
    crate::paths::secure_home(&config.home)?;
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
    // Only this user may connect (the home is 0700 too; the peer check below is the last word).
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))?;
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
                // `strobe/eval` runs Lua (so any command) as us: same user only.
                if let Err(why) = check_peer(&stream) {
                    tracing::warn!("refused a connection: {why}");
                    refuse(stream, why);
                    continue;
                }
                active.fetch_add(1, Ordering::SeqCst);
                let conn = Connection::new(engine.clone(), lua.clone());
                let (active, last) = (active.clone(), last_activity.clone());
                tokio::spawn(async move {
                    let fd = std::os::fd::AsRawFd::as_raw_fd(&stream);
                    let (r, w) = stream.into_split();
                    // The fd stays open while `serve` holds both halves.
                    conn.serve(r, w, move || peer_hung_up(fd)).await;
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

/// The peer closed the socket both ways (POLLHUP), or it failed: not a mere shutdown of
/// its writing side, after which it may still read our answers.
pub(crate) fn peer_hung_up(fd: std::os::fd::RawFd) -> bool {
    let mut p = libc::pollfd { fd, events: 0, revents: 0 };
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n > 0 && p.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0
}

/// The connecting process must run as the daemon's own user (SO_PEERCRED).
fn check_peer(stream: &UnixStream) -> Result<(), String> {
    let cred = stream.peer_cred().map_err(|e| format!("cannot read the peer's credentials: {e}"))?;
    peer_uid_allowed(cred.uid(), unsafe { libc::geteuid() })
}

fn peer_uid_allowed(peer: u32, own: u32) -> Result<(), String> {
    if peer == own {
        Ok(())
    } else {
        Err(format!("uid {peer} may not use this daemon (it serves uid {own} only)"))
    }
}

/// Tell the refused client why (one JSON-RPC error), then close.
fn refuse(mut stream: UnixStream, why: String) {
    tokio::spawn(async move {
        let msg = super::protocol::error_response(&serde_json::Value::Null, super::protocol::INVALID_REQUEST, format!("Connection refused: {why}"));
        let _ = stream.write_all(format!("{msg}\n").as_bytes()).await;
        let _ = stream.shutdown().await;
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn peer_check_reads_real_credentials() {
        let (a, _b) = UnixStream::pair().unwrap();
        assert!(check_peer(&a).is_ok(), "our own uid is let in");
        let e = peer_uid_allowed(65534, 0).unwrap_err();
        assert!(e.contains("uid 65534"), "{e}");
    }
}
