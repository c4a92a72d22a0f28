//! Helpers shared by integration tests: the compiled fixture programs.
#![allow(dead_code)]

pub mod busy;
pub mod events;
pub mod harness;

use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// `tests/fixtures` (sources and build.sh).
pub fn fixtures_src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("fixtures")
}

/// Directory holding the compiled fixtures (`c_sample`, `cpp_sample`, `rust_sample`,
/// `c_sample_nodebug`), built on first use by `tests/fixtures/build.sh` into
/// `target/fixtures`. A file lock serializes builds across parallel test binaries.
#[allow(clippy::incompatible_msrv)] // File::lock: stable since 1.89, the toolchain used here
pub fn fixtures_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let out = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("target")
            .join("fixtures");
        fs::create_dir_all(&out).unwrap_or_else(|e| panic!("create {}: {e}", out.display()));
        let lock_path = out.join(".build.lock");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .unwrap_or_else(|e| panic!("open {}: {e}", lock_path.display()));
        lock.lock()
            .unwrap_or_else(|e| panic!("lock {}: {e}", lock_path.display()));
        let script = fixtures_src_dir().join("build.sh");
        let output = Command::new("bash")
            .arg(&script)
            .arg(&out)
            .output()
            .unwrap_or_else(|e| {
                panic!("cannot run {} (is bash installed?): {e}", script.display())
            });
        drop(lock); // releases the lock
        if !output.status.success() {
            panic!(
                "{} failed ({}):\n{}{}",
                script.display(),
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        out
    })
    .clone()
}

/// Path of one compiled fixture, e.g. `fixture("c_sample")`.
pub fn fixture(name: &str) -> PathBuf {
    let path = fixtures_dir().join(name);
    assert!(path.exists(), "fixture {} was not built", path.display());
    path
}

/// 1-based number of the first line of `tests/fixtures/<rel>` containing `needle`.
pub fn line_of(rel: &str, needle: &str) -> u32 {
    let path = fixtures_src_dir().join(rel);
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let index = text
        .lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle:?} not found in {}", path.display()));
    index as u32 + 1
}
