//! The typed capture's comparisons of kept spans with memory, the hand-written loops in
//! agent/native/capture_read.h that decide whether a replayed sub-walk travels as a
//! reference (`strobe_safe_diff_list` and `strobe_safe_diff_list_avx2`) and where a block's
//! changed words are (`strobe_safe_diff`), compiled with the system C compiler into a harness
//! (tests/fixtures/c/compare_harness.c): checked against memcmp on 200,000 random block lists
//! and 200,000 random blocks, and on blocks running into an unreadable page — every fault at
//! a labelled load, resumed to a refusal, as the agent's exception hook does in a target.

use std::path::Path;
use std::process::Command;

#[test]
fn the_span_comparison_agrees_with_memcmp_and_refuses_unreadable_blocks() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("compare_harness");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let built = Command::new(&cc)
        .args(["-O1", "-std=gnu11", "-Wall", "-Werror", "-Wno-unused-function", "-I"])
        .arg(root.join("agent/native"))
        .arg("-o")
        .arg(&exe)
        .arg(root.join("tests/fixtures/c/compare_harness.c"))
        .output()
        .expect("run the C compiler");
    assert!(built.status.success(), "compiling the harness failed:\n{}", String::from_utf8_lossy(&built.stderr));
    let run = Command::new(&exe).output().unwrap();
    let out = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{out}{}", String::from_utf8_lossy(&run.stderr));
    assert!(out.contains("sse: compared 200000 lists, 0 wrong"), "{out}");
    assert!(out.contains("one block: compared 200000 blocks, 0 wrong"), "{out}");
    assert!(out.contains("one block: cut"), "{out}");
    assert!(out.contains("sse: cut") && out.contains(" 0 not refused"), "{out}");
    // The AVX2 loop is checked wherever the machine has it (CI's does; say so when not).
    if !out.contains("avx2: not on this CPU") {
        assert!(out.contains("avx2: compared 200000 lists, 0 wrong"), "{out}");
        assert!(out.contains("avx2: cut"), "{out}");
    }
    println!("{out}");
}
