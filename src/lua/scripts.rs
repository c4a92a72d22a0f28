//! Where scripts come from: the built-in `scripts/` (embedded in the binary; read from
//! the source tree instead in development builds, so edits need no rebuild), then
//! `$STROBE_HOME/scripts`. A later file with the same relative name overrides an
//! earlier one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use include_dir::{include_dir, Dir};

static BUILTIN: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/scripts");

/// One script, ready to run.
#[derive(Debug, Clone)]
pub struct ScriptFile {
    /// Relative name, e.g. `tools/debug_launch.lua`.
    pub name: String,
    /// What error messages show: a real path when the file is on disk.
    pub origin: String,
    pub source: String,
}

#[derive(Debug, Clone)]
pub struct ScriptSources {
    /// Read built-ins from here instead of the embedded copy.
    pub builtin_dir: Option<PathBuf>,
    /// Directories layered over the built-ins, lowest priority first.
    pub overlays: Vec<PathBuf>,
}

impl ScriptSources {
    /// Built-ins (disk in debug builds or with `STROBE_SCRIPTS_DIR`), then `$STROBE_HOME/scripts`.
    pub fn standard(home: &Path) -> ScriptSources {
        let builtin_dir = match std::env::var_os("STROBE_SCRIPTS_DIR") {
            Some(d) if !d.is_empty() => Some(PathBuf::from(d)),
            _ => {
                let dev = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts");
                (cfg!(debug_assertions) && dev.is_dir()).then_some(dev)
            }
        };
        ScriptSources { builtin_dir, overlays: vec![home.join("scripts")] }
    }

    /// All `*.lua` files under `subdir` (e.g. "tools"), merged by name.
    pub fn list(&self, subdir: &str) -> Vec<ScriptFile> {
        let mut merged: BTreeMap<String, ScriptFile> = BTreeMap::new();
        match &self.builtin_dir {
            Some(dir) => read_disk(dir, subdir, &mut merged),
            None => {
                if let Some(d) = BUILTIN.get_dir(subdir) {
                    for f in d.files() {
                        let rel = f.path().to_string_lossy().to_string();
                        if rel.ends_with(".lua") {
                            if let Some(text) = f.contents_utf8() {
                                merged.insert(
                                    rel.clone(),
                                    ScriptFile { name: rel.clone(), origin: format!("scripts/{rel}"), source: text.to_string() },
                                );
                            }
                        }
                    }
                }
            }
        }
        for dir in &self.overlays {
            read_disk(dir, subdir, &mut merged);
        }
        merged.into_values().collect()
    }
}

fn read_disk(root: &Path, subdir: &str, out: &mut BTreeMap<String, ScriptFile>) {
    let Ok(entries) = std::fs::read_dir(root.join(subdir)) else { return };
    let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "lua")).collect();
    paths.sort();
    for p in paths {
        let name = format!("{subdir}/{}", p.file_name().unwrap().to_string_lossy());
        match std::fs::read_to_string(&p) {
            Ok(source) => {
                out.insert(name.clone(), ScriptFile { name, origin: p.display().to_string(), source });
            }
            Err(e) => tracing::warn!("cannot read script {}: {e}", p.display()),
        }
    }
}
