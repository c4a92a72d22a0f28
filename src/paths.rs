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

/// Make `home` private to this user: the directory 0700, and the files that hold program
/// output, arguments and memory (the database with its WAL/SHM, the daemon log) 0600,
/// whatever the umask. Created when missing; tightened when an older run left them open.
/// SQLite gives the WAL and SHM files it creates the database file's mode.
pub fn secure_home(home: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    std::fs::create_dir_all(home)?;
    std::fs::set_permissions(home, std::fs::Permissions::from_mode(0o700))?;
    for name in ["strobe.db", "daemon.log"] {
        // Create with 0600 (never wider, even for a moment); chmod covers existing files.
        std::fs::OpenOptions::new().create(true).append(true).mode(0o600).open(home.join(name))?;
    }
    for name in ["strobe.db", "strobe.db-wal", "strobe.db-shm", "daemon.log"] {
        match std::fs::set_permissions(home.join(name), std::fs::Permissions::from_mode(0o600)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &std::path::Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn secure_home_tightens_an_open_home() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("h");
        std::fs::create_dir(&home).unwrap();
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o777)).unwrap();
        std::fs::write(home.join("strobe.db-wal"), "").unwrap();
        std::fs::set_permissions(home.join("strobe.db-wal"), std::fs::Permissions::from_mode(0o666)).unwrap();
        super::secure_home(&home).unwrap();
        assert_eq!(mode(&home), 0o700);
        for f in ["strobe.db", "strobe.db-wal", "daemon.log"] {
            assert_eq!(mode(&home.join(f)), 0o600, "{f}");
        }
    }
}
