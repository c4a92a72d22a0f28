//! Where scripts come from, lowest priority first:
//! 1. the built-in `scripts/` and `adapters/` (embedded in the binary; read from the
//!    source tree in development builds, so edits need no rebuild),
//! 2. `$STROBE_HOME/scripts` and `$STROBE_HOME/adapters`,
//! 3. `<projectRoot>/.strobe/scripts` and `.strobe/adapters` — only for project roots the
//!    user trusts (`strobe trust <dir>`), because a cloned repository must not run code
//!    in the daemon by surprise.
//!
//! A later file with the same relative name (e.g. `tools/debug_query.lua`) overrides an
//! earlier one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use include_dir::{include_dir, Dir};

static BUILTIN_SCRIPTS: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/scripts");
static BUILTIN_ADAPTERS: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/adapters");

/// The trust list, in `$STROBE_HOME`.
pub const TRUST_FILE: &str = "trusted.json";

/// One script, ready to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptFile {
    /// Relative name, e.g. `tools/debug_launch.lua` or `adapters/cargo.lua`.
    pub name: String,
    /// What error messages show: a real path when the file is on disk.
    pub origin: String,
    pub source: String,
}

#[derive(Debug, Clone)]
pub struct ScriptSources {
    /// Read built-in `scripts/` from here instead of the embedded copy.
    pub builtin_dir: Option<PathBuf>,
    /// Read built-in `adapters/` from here instead of the embedded copy.
    pub builtin_adapters_dir: Option<PathBuf>,
    /// `$STROBE_HOME`: its `scripts/` and `adapters/` layer over the built-ins, and it
    /// holds the trust list.
    pub home: Option<PathBuf>,
    /// Project roots the daemon has heard of (from a tool's `projectRoot` argument).
    /// Only trusted ones contribute scripts.
    pub project_roots: Vec<PathBuf>,
}

impl ScriptSources {
    /// Built-ins (disk in debug builds or with `STROBE_SCRIPTS_DIR`), then `$STROBE_HOME`.
    pub fn standard(home: &Path) -> ScriptSources {
        let dev_root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let builtin_dir = match std::env::var_os("STROBE_SCRIPTS_DIR") {
            Some(d) if !d.is_empty() => Some(PathBuf::from(d)),
            _ => (cfg!(debug_assertions) && dev_root.join("scripts").is_dir()).then(|| dev_root.join("scripts")),
        };
        let builtin_adapters_dir =
            (cfg!(debug_assertions) && dev_root.join("adapters").is_dir()).then(|| dev_root.join("adapters"));
        ScriptSources { builtin_dir, builtin_adapters_dir, home: Some(home.to_path_buf()), project_roots: Vec::new() }
    }

    /// Only the built-ins (for tests and tools that must not see user scripts).
    pub fn builtin_only() -> ScriptSources {
        let mut s = ScriptSources::standard(Path::new("/nonexistent"));
        s.home = None;
        s
    }

    /// The disk directories that hold scripts, lowest priority first, as
    /// `(kind, dir)` where kind is `scripts` or `adapters`. Untrusted project roots are left out.
    pub fn layers(&self) -> Vec<(&'static str, PathBuf)> {
        let mut out = Vec::new();
        if let Some(d) = &self.builtin_dir {
            out.push(("scripts", d.clone()));
        }
        if let Some(d) = &self.builtin_adapters_dir {
            out.push(("adapters", d.clone()));
        }
        if let Some(h) = &self.home {
            out.push(("scripts", h.join("scripts")));
            out.push(("adapters", h.join("adapters")));
        }
        for root in self.trusted_project_roots() {
            out.push(("scripts", root.join(".strobe").join("scripts")));
            out.push(("adapters", root.join(".strobe").join("adapters")));
        }
        out
    }

    /// Known project roots that the user trusts.
    pub fn trusted_project_roots(&self) -> Vec<PathBuf> {
        let Some(home) = &self.home else { return Vec::new() };
        let trusted = read_trusted(home);
        self.project_roots.iter().filter(|r| trusted.contains(&canonical(r))).cloned().collect()
    }

    /// Known project roots that have a `.strobe/` directory but are not trusted: their
    /// scripts are skipped, and tool responses say how to enable them.
    pub fn untrusted_project_dirs(&self) -> Vec<PathBuf> {
        let trusted = self.trusted_project_roots();
        self.project_roots.iter().filter(|r| !trusted.contains(r) && r.join(".strobe").is_dir()).cloned().collect()
    }

    /// All `*.lua` files of `subdir` (e.g. "tools", "hints"; "adapters" for adapters), merged by name.
    pub fn list(&self, subdir: &str) -> Vec<ScriptFile> {
        let (kind, sub) = if subdir == "adapters" { ("adapters", "") } else { ("scripts", subdir) };
        let mut merged: BTreeMap<String, ScriptFile> = BTreeMap::new();
        let embedded_dir = if kind == "adapters" { &self.builtin_adapters_dir } else { &self.builtin_dir };
        if embedded_dir.is_none() {
            let embedded = if kind == "adapters" { &BUILTIN_ADAPTERS } else { &BUILTIN_SCRIPTS };
            read_embedded(embedded, kind, sub, &mut merged);
        }
        for (k, dir) in self.layers() {
            if k == kind {
                read_disk(&dir, sub, &mut merged);
            }
        }
        merged.into_values().collect()
    }
}

fn read_embedded(root: &Dir<'static>, kind: &str, sub: &str, out: &mut BTreeMap<String, ScriptFile>) {
    let dir = if sub.is_empty() { Some(root) } else { root.get_dir(sub) };
    let Some(d) = dir else { return };
    for f in d.files() {
        let rel = f.path().to_string_lossy().to_string();
        if let (true, Some(text)) = (rel.ends_with(".lua"), f.contents_utf8()) {
            let name = relative_name(sub, &rel);
            out.insert(name.clone(), ScriptFile { name, origin: format!("{kind}/{rel}"), source: text.to_string() });
        }
    }
}

/// `tools/x.lua` for scripts; `adapters/x.lua` for adapters.
fn relative_name(sub: &str, file: &str) -> String {
    let base = file.rsplit('/').next().unwrap_or(file);
    if sub.is_empty() {
        format!("adapters/{base}")
    } else {
        format!("{sub}/{base}")
    }
}

fn read_disk(root: &Path, sub: &str, out: &mut BTreeMap<String, ScriptFile>) {
    let dir = if sub.is_empty() { root.to_path_buf() } else { root.join(sub) };
    let Ok(entries) = std::fs::read_dir(&dir) else { return };
    let mut paths: Vec<PathBuf> =
        entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "lua") && p.is_file()).collect();
    paths.sort();
    for p in paths {
        let name = relative_name(sub, &p.file_name().unwrap_or_default().to_string_lossy());
        match std::fs::read_to_string(&p) {
            Ok(source) => {
                out.insert(name.clone(), ScriptFile { name, origin: p.display().to_string(), source });
            }
            Err(e) => tracing::warn!("cannot read script {}: {e}", p.display()),
        }
    }
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// The trusted directories listed in `$STROBE_HOME/trusted.json` (`{"trusted": [...]}`).
pub fn read_trusted(home: &Path) -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string(home.join(TRUST_FILE)) else { return Vec::new() };
    let parsed: serde_json::Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!("{} is not valid JSON ({e}); no project is trusted", home.join(TRUST_FILE).display());
            return Vec::new();
        }
    };
    parsed
        .get("trusted")
        .and_then(|t| t.as_array())
        .map(|a| a.iter().filter_map(|v| v.as_str()).map(PathBuf::from).collect())
        .unwrap_or_default()
}

/// Add (or with `revoke`, remove) `dir` in the trust list; returns the canonical path.
pub fn set_trusted(home: &Path, dir: &Path, revoke: bool) -> std::io::Result<PathBuf> {
    let dir = std::fs::canonicalize(dir)?;
    let mut list = read_trusted(home);
    list.retain(|d| d != &dir);
    if !revoke {
        list.push(dir.clone());
    }
    list.sort();
    std::fs::create_dir_all(home)?;
    let body = serde_json::json!({ "trusted": list });
    let tmp = home.join(format!("{TRUST_FILE}.tmp"));
    std::fs::write(&tmp, serde_json::to_string_pretty(&body).unwrap_or_default())?;
    std::fs::rename(&tmp, home.join(TRUST_FILE))?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_layers_override_and_untrusted_projects_are_skipped() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let project = tmp.path().join("proj");
        std::fs::create_dir_all(home.join("scripts/tools")).unwrap();
        std::fs::create_dir_all(project.join(".strobe/scripts/tools")).unwrap();
        std::fs::write(home.join("scripts/tools/debug_query.lua"), "-- home").unwrap();
        std::fs::write(project.join(".strobe/scripts/tools/mine.lua"), "-- project").unwrap();
        let mut s = ScriptSources::standard(&home);
        s.project_roots.push(project.clone());
        let names = |s: &ScriptSources| s.list("tools").into_iter().map(|f| (f.name, f.source)).collect::<Vec<_>>();
        let before = names(&s);
        assert!(before.contains(&("tools/debug_query.lua".into(), "-- home".into())));
        assert!(!before.iter().any(|(n, _)| n == "tools/mine.lua"));
        assert_eq!(s.untrusted_project_dirs(), vec![project.clone()]);
        set_trusted(&home, &project, false).unwrap();
        assert!(names(&s).iter().any(|(n, _)| n == "tools/mine.lua"));
        set_trusted(&home, &project, true).unwrap();
        assert!(!names(&s).iter().any(|(n, _)| n == "tools/mine.lua"));
    }
}
