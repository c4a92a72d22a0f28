//! `strobe.fs`: read, write, list, exists, is_dir, mkdir, remove, glob — the file
//! helpers adapters and scenarios need. Failures are `VALIDATION_ERROR`s naming the path.

use std::path::{Path, PathBuf};

use mlua::{Lua, Table};

use super::lua_err;
use crate::error::StrobeError;

/// A glob walk stops after this many directory entries, so `/**` cannot hang a script.
const GLOB_MAX_ENTRIES: usize = 200_000;

fn fail(what: &str, path: &str, e: impl std::fmt::Display) -> mlua::Error {
    lua_err(StrobeError::validation(format!("strobe.fs.{what}: {path}: {e}")))
}

pub fn register(lua: &Lua, strobe: &Table) -> mlua::Result<()> {
    let fs = lua.create_table()?;
    fs.set(
        "read",
        lua.create_function(|lua, path: String| {
            let bytes = std::fs::read(&path).map_err(|e| fail("read", &path, e))?;
            lua.create_string(bytes)
        })?,
    )?;
    // strobe.fs.write(path, text, {append = true}?) creates missing parent directories.
    fs.set(
        "write",
        lua.create_function(|_, (path, text, opts): (String, mlua::String, Option<Table>)| {
            let append = opts.map(|o| o.get::<Option<bool>>("append")).transpose()?.flatten().unwrap_or(false);
            if let Some(parent) = Path::new(&path).parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent).map_err(|e| fail("write", &path, e))?;
            }
            let r = if append {
                use std::io::Write;
                std::fs::OpenOptions::new().create(true).append(true).open(&path).and_then(|mut f| f.write_all(&text.as_bytes()))
            } else {
                std::fs::write(&path, text.as_bytes())
            };
            r.map_err(|e| fail("write", &path, e))
        })?,
    )?;
    fs.set(
        "list",
        lua.create_function(|lua, dir: String| {
            let mut names: Vec<String> = std::fs::read_dir(&dir)
                .map_err(|e| fail("list", &dir, e))?
                .flatten()
                .map(|e| e.file_name().to_string_lossy().to_string())
                .collect();
            names.sort();
            lua.create_sequence_from(names)
        })?,
    )?;
    fs.set("exists", lua.create_function(|_, path: String| Ok(Path::new(&path).exists()))?)?;
    fs.set("is_dir", lua.create_function(|_, path: String| Ok(Path::new(&path).is_dir()))?)?;
    fs.set(
        "mkdir",
        lua.create_function(|_, path: String| std::fs::create_dir_all(&path).map_err(|e| fail("mkdir", &path, e)))?,
    )?;
    // Removes a file or an empty directory (never a tree: scripts should not rm -rf by accident).
    fs.set(
        "remove",
        lua.create_function(|_, path: String| {
            let p = Path::new(&path);
            let r = if p.is_dir() { std::fs::remove_dir(p) } else { std::fs::remove_file(p) };
            r.map_err(|e| fail("remove", &path, e))
        })?,
    )?;
    fs.set(
        "glob",
        lua.create_function(|lua, pattern: String| {
            let found = glob(&pattern).map_err(|e| fail("glob", &pattern, e))?;
            lua.create_sequence_from(found)
        })?,
    )?;
    strobe.set("fs", fs)?;
    Ok(())
}

/// Paths matching `pattern` (`*` within a path segment, `**` across them, `?`, `[ab]`, `{a,b}`), sorted.
pub fn glob(pattern: &str) -> Result<Vec<String>, String> {
    let matcher = globset::GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map_err(|e| e.to_string())?
        .compile_matcher();
    // Walk from the longest literal prefix directory.
    let mut base = PathBuf::new();
    for comp in Path::new(pattern).components() {
        let s = comp.as_os_str().to_string_lossy();
        if s.contains(['*', '?', '[', '{']) {
            break;
        }
        base.push(comp);
    }
    if base.as_os_str().is_empty() {
        base.push(".");
    }
    let strip_dot = !pattern.starts_with("./");
    let mut out = Vec::new();
    let mut stack = vec![base];
    let mut seen = 0usize;
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            seen += 1;
            if seen > GLOB_MAX_ENTRIES {
                return Err(format!("more than {GLOB_MAX_ENTRIES} entries under the pattern's directory; use a narrower pattern"));
            }
            let path = e.path();
            let text = path.to_string_lossy();
            let text = if strip_dot { text.strip_prefix("./").unwrap_or(&text).to_string() } else { text.to_string() };
            if matcher.is_match(&text) {
                out.push(text);
            }
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::glob;

    #[test]
    fn glob_matches_within_and_across_directories() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().display().to_string();
        for f in ["a.lua", "b.txt", "sub/c.lua", "sub/deep/d.lua"] {
            let p = tmp.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "").unwrap();
        }
        assert_eq!(glob(&format!("{d}/*.lua")).unwrap(), vec![format!("{d}/a.lua")]);
        assert_eq!(glob(&format!("{d}/**/*.lua")).unwrap().len(), 3);
        assert!(glob("[").is_err());
    }
}
