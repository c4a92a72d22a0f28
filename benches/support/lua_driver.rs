//! The Lua benchmark driver (benches/real/lua_drv.c over the Lua 5.4 sources of the `lua-src`
//! crate, built `-g -O2` as distributions build them).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::sqlite_driver::{crate_dir, repo};

/// Lua 5.4's sources in the lua-src crate of this workspace's dependency tree (mlua's vendored Lua).
fn lua_dir() -> PathBuf {
    let root = crate_dir("lua-src");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root).unwrap().flatten().map(|e| e.path()).filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("lua-5.4"))).collect();
    dirs.sort();
    dirs.pop().expect("Lua 5.4 sources in lua-src")
}

/// The driver, built once (`-fpatchable-function-entry=5`: entry nops uftrace patches; the
/// same binary for every row).
pub fn build_lua_driver() -> PathBuf {
    let dir = repo().join("target").join("bench-real");
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("lua_drv");
    let src = repo().join("benches/real/lua_drv.c");
    let newer = |a: &Path, b: &Path| a.metadata().and_then(|m| m.modified()).ok() > b.metadata().and_then(|m| m.modified()).ok();
    if !exe.exists() || newer(&src, &exe) {
        let lua = lua_dir();
        eprintln!("building {} (Lua {} -g -O2, about 15 s)", exe.display(), lua.display());
        let sources: Vec<PathBuf> = std::fs::read_dir(&lua).unwrap().flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "c") && !p.ends_with("lua.c") && !p.ends_with("luac.c")).collect();
        let st = Command::new("cc")
            .args(["-g", "-O2", "-fpatchable-function-entry=5", "-DLUA_USE_LINUX", "-I"])
            .arg(&lua)
            .arg("-o")
            .arg(&exe)
            .arg(&src)
            .args(&sources)
            .args(["-lm", "-ldl"])
            .status()
            .expect("cc");
        assert!(st.success(), "building the Lua driver failed");
    }
    exe
}
