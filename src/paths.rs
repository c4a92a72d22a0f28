//! Where Strobe keeps its files. Everything per-user lives under `STROBE_HOME`
//! (default `~/.strobe`); the Python venv and compiled agents live in a cache shared by
//! every `STROBE_HOME` (`STROBE_CACHE_DIR`, default `$XDG_CACHE_HOME/strobe` or `~/.cache/strobe`).

use std::path::PathBuf;

fn home_dir() -> PathBuf {
    std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/tmp"))
}

/// `$STROBE_HOME`, or `~/.strobe`.
pub fn strobe_home() -> PathBuf {
    match std::env::var_os("STROBE_HOME") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => home_dir().join(".strobe"),
    }
}

/// Shared cache for the Frida Python environment and compiled agents.
pub fn cache_dir() -> PathBuf {
    if let Some(p) = std::env::var_os("STROBE_CACHE_DIR").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    if let Some(p) = std::env::var_os("XDG_CACHE_HOME").filter(|p| !p.is_empty()) {
        return PathBuf::from(p).join("strobe");
    }
    home_dir().join(".cache").join("strobe")
}

pub fn socket_path() -> PathBuf {
    strobe_home().join("strobe.sock")
}
pub fn pid_path() -> PathBuf {
    strobe_home().join("strobe.pid")
}
pub fn db_path() -> PathBuf {
    strobe_home().join("strobe.db")
}
pub fn log_path() -> PathBuf {
    strobe_home().join("daemon.log")
}
