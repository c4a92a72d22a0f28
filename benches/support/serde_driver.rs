//! The Rust benchmark driver (benches/real/serde_drv.rs over the serde_json of this
//! workspace's dependency tree), built as a debug build the way `cargo build` makes one.

use std::path::PathBuf;
use std::process::Command;

use crate::sqlite_driver::repo;

/// serde_json's version in Cargo.lock (cached offline: the workspace depends on it).
fn serde_json_version() -> String {
    let lock = std::fs::read_to_string(repo().join("Cargo.lock")).expect("Cargo.lock");
    let at = lock.find("name = \"serde_json\"\nversion = \"").expect("serde_json in Cargo.lock") + "name = \"serde_json\"\nversion = \"".len();
    lock[at..].split('"').next().unwrap().to_string()
}

/// The driver, built once into target/bench-real/serde_drv (a package of its own, with the
/// workspace's lock file: offline, the same serde_json).
pub fn build_serde_driver() -> PathBuf {
    let dir = repo().join("target").join("bench-real").join("serde_drv");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    let manifest = format!(
        "[package]\nname = \"serde_drv\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nserde_json = \"={}\"\n\n[workspace]\n",
        serde_json_version()
    );
    let write_if_changed = |path: PathBuf, text: &str| {
        if std::fs::read_to_string(&path).ok().as_deref() != Some(text) {
            std::fs::write(&path, text).unwrap();
        }
    };
    write_if_changed(dir.join("Cargo.toml"), &manifest);
    write_if_changed(dir.join("src/main.rs"), &std::fs::read_to_string(repo().join("benches/real/serde_drv.rs")).unwrap());
    if !dir.join("Cargo.lock").exists() {
        std::fs::copy(repo().join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    }
    let st = Command::new(env!("CARGO")).args(["build", "--offline", "--quiet"]).current_dir(&dir).env_remove("RUSTFLAGS").env_remove("CARGO_TARGET_DIR").status().expect("cargo build");
    assert!(st.success(), "building the serde_json driver failed");
    dir.join("target/debug/serde_drv")
}
