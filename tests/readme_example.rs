//! The README's main command: `strobe run examples/checkout/investigate.lua` debugs a
//! real program under Frida and names its bug. This keeps that promise tested.

use std::path::PathBuf;
use std::process::Command;

#[test]
fn checkout_investigation_finds_the_double_discount() {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_strobe"))
        .args(["run", "examples/checkout/investigate.lua"])
        .current_dir(&repo)
        .env("STROBE_HOME", home.path())
        .env("STROBE_CACHE_DIR", repo.join("target").join("strobe-cache"))
        .output()
        .expect("run strobe");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "strobe run failed\nstdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("checkout service ready"), "the program's output is read first:\n{stdout}");
    assert!(stdout.contains("3 functions hooked"), "{stdout}");
    assert!(
        stdout.contains("FOUND: order_total calls apply_discount(") && stdout.contains(", 20) on the running total"),
        "the bulk line (quantity 20) is found discounted twice:\n{stdout}"
    );
    assert!(!home.path().join("strobe.sock").exists(), "strobe run is in-process: no daemon socket");
}
