//! Loading (and reloading) the script set: `lib/` modules for `require`, `tools/`,
//! `hints/` and `scenario/` definitions, and the test adapters of `adapters/`. Each file keeps its last good version: when a
//! new version fails to load, the old one stays and the error (file and line) is
//! reported. Versions that are replaced or deleted get their `on_unload` called, so
//! they can tear down what they registered.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::hash::{Hash, Hasher};

use mlua::{Function, Lua, Table};
use serde::Serialize;

use super::scripts::{ScriptFile, ScriptSources};
use super::tools::{self, LoadedTool, ToolInfo};

/// Script kinds whose files return a definition table.
const KINDS: [&str; 4] = ["tools", "hints", "scenario", "adapters"];

/// A script that failed to load, as tool responses report it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ScriptError {
    pub file: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    pub message: String,
}

impl std::fmt::Display for ScriptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{l}: {}", self.file, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

#[derive(Clone)]
struct GoodFile {
    def: Table,
    /// For tool scripts: the tool, checked and its schema compiled once, at load.
    tool: Option<LoadedTool>,
}

/// The source of the last version of each script file (by path) that loaded, shared
/// by every Lua worker: a worker started after a file broke still serves its last good
/// version, as the workers that saw it load do.
pub type LastGood = Arc<Mutex<HashMap<String, String>>>;

/// The loaded script set.
#[derive(Default)]
pub struct Loaded {
    pub tools: BTreeMap<String, LoadedTool>,
    pub errors: Vec<ScriptError>,
    good: BTreeMap<String, GoodFile>,
    libs: BTreeMap<String, Function>,
    fingerprint: Option<u64>,
    last_good: LastGood,
}

pub struct ReloadOutcome {
    /// Something on disk changed and was (re)loaded.
    pub reloaded: bool,
    /// The tool list (names, descriptions, schemas) differs from before.
    pub tools_changed: bool,
}

/// Turn a Lua error text into file, line and message.
fn script_error(file: &ScriptFile, text: &str) -> ScriptError {
    let text = text.split("\nstack traceback:").next().unwrap_or(text).trim();
    let text = text.strip_prefix("syntax error: ").or_else(|| text.strip_prefix("runtime error: ")).unwrap_or(text);
    // Lua shortens long chunk names to "...<tail of the path>", so match the tail.
    let re = regex::Regex::new(r"(?s)^(?:.*?\s)?(?:\.\.\.)?(\S+?):(\d+):\s*(.*)$").expect("valid regex");
    if let Some(c) = re.captures(text) {
        if file.origin.ends_with(&c[1]) {
            let line = c[2].parse::<u32>().ok();
            return ScriptError { file: file.origin.clone(), line, message: c[3].trim().to_string() };
        }
    }
    ScriptError { file: file.origin.clone(), line: None, message: text.to_string() }
}

fn fingerprint(files: &[ScriptFile]) -> u64 {
    let mut h = DefaultHasher::new();
    for f in files {
        (&f.name, &f.origin, &f.source).hash(&mut h);
    }
    h.finish()
}

/// Run a definition file and check its shape for its kind (a tool file gives its tool).
fn load_def(lua: &Lua, kind: &str, file: &ScriptFile) -> Result<(Table, Option<LoadedTool>), String> {
    let def: Table = lua
        .load(file.source.as_str())
        .set_name(format!("@{}", file.origin))
        .eval()
        .map_err(|e| e.to_string())?;
    let o = &file.origin;
    match kind {
        "tools" => {
            let tool = tools::from_def(lua, file, &def)?;
            return Ok((def, Some(tool)));
        }
        "hints" => {
            def.get::<Function>("rule").map_err(|_| format!("{o}: a hint returns {{ name, when, rule = function(ctx) ... end }}: 'rule' must be a function"))?;
            def.get::<String>("when").map_err(|_| format!("{o}: a hint needs a string 'when' (e.g. \"launch\", \"trace\")"))?;
        }
        "adapters" => {
            def.get::<String>("name").map_err(|_| format!("{o}: an adapter needs a string 'name' (e.g. \"cargo\")"))?;
            for f in ["detect", "suite_command", "parse_output"] {
                def.get::<Function>(f).map_err(|_| format!("{o}: an adapter needs '{f} = function(...) ... end' (see docs/lua-api.md, Test adapters)"))?;
            }
        }
        _ => {
            def.get::<String>("name").map_err(|_| format!("{o}: a scenario step needs a string 'name'"))?;
            def.get::<Function>("run").map_err(|_| format!("{o}: a scenario step needs 'run = function(ctx, args) ... end'"))?;
        }
    }
    Ok((def, None))
}

impl Loaded {
    /// A script set that shares last good versions with others (the daemon's workers).
    pub fn sharing(last_good: LastGood) -> Loaded {
        Loaded { last_good, ..Default::default() }
    }

    /// The last good version of `file` this worker never loaded itself (it started after
    /// the file broke), from the sources other workers loaded.
    fn last_good_of(&self, lua: &Lua, kind: &str, file: &ScriptFile) -> Option<GoodFile> {
        let source = self.last_good.lock().unwrap().get(&file.origin).cloned()?;
        let old = ScriptFile { source, ..file.clone() };
        load_def(lua, kind, &old).ok().map(|(def, tool)| GoodFile { def, tool })
    }

    /// (Re)load everything from `sources`. Cheap when nothing changed on disk.
    pub fn reload(&mut self, lua: &Lua, sources: &ScriptSources) -> ReloadOutcome {
        let libs = sources.list("lib");
        let kinds: Vec<(&str, Vec<ScriptFile>)> = KINDS.iter().map(|k| (*k, sources.list(k))).collect();
        let mut all = libs.clone();
        for (_, files) in &kinds {
            all.extend(files.iter().cloned());
        }
        let fp = fingerprint(&all);
        if self.fingerprint == Some(fp) {
            return ReloadOutcome { reloaded: false, tools_changed: false };
        }
        self.fingerprint = Some(fp);
        let before: Vec<ToolInfo> = self.tools.values().map(|t| t.info.clone()).collect();
        let mut errors = Vec::new();

        self.reload_libs(lua, &libs, &mut errors);

        let mut good = BTreeMap::new();
        for (kind, files) in &kinds {
            for file in files {
                match load_def(lua, kind, file) {
                    Ok((def, tool)) => {
                        self.last_good.lock().unwrap().insert(file.origin.clone(), file.source.clone());
                        good.insert(file.name.clone(), GoodFile { def, tool });
                    }
                    Err(e) => {
                        let mut err = script_error(file, &e);
                        let old = self.good.get(&file.name).cloned().or_else(|| self.last_good_of(lua, kind, file));
                        if let Some(old) = old {
                            err.message.push_str(" (the last good version stays loaded)");
                            good.insert(file.name.clone(), old);
                        }
                        errors.push(err);
                    }
                }
            }
        }
        // Tear down versions that were replaced or deleted.
        for (name, old) in &self.good {
            let kept = good.get(name).is_some_and(|g| g.def.to_pointer() == old.def.to_pointer());
            if !kept {
                if let Ok(Some(f)) = old.def.get::<Option<Function>>("on_unload") {
                    if let Err(e) = f.call::<()>(()) {
                        tracing::warn!("on_unload of {name} failed: {e}");
                    }
                }
            }
        }
        self.good = good;
        self.tools = self.build_tools(&mut errors);
        if let Err(e) = self.publish_registries(lua) {
            errors.push(ScriptError { file: "scripts".into(), line: None, message: e.to_string() });
        }
        for e in &errors {
            tracing::error!("script error: {e}");
        }
        self.errors = errors;
        let after: Vec<ToolInfo> = self.tools.values().map(|t| t.info.clone()).collect();
        ReloadOutcome { reloaded: true, tools_changed: before != after }
    }

    /// `require("x")` finds `lib/x.lua` through `package.preload`; cached modules are
    /// dropped so the next `require` sees the new version.
    fn reload_libs(&mut self, lua: &Lua, libs: &[ScriptFile], errors: &mut Vec<ScriptError>) {
        let package: mlua::Result<Table> = lua.globals().get("package");
        let Ok(package) = package else {
            errors.push(ScriptError { file: "lib".into(), line: None, message: "the Lua 'package' library is missing".into() });
            return;
        };
        let (Ok(preload), Ok(loaded)) = (package.get::<Table>("preload"), package.get::<Table>("loaded")) else { return };
        let mut new_libs = BTreeMap::new();
        for file in libs {
            let stem = file.name.trim_start_matches("lib/").trim_end_matches(".lua").to_string();
            let compile = |source: &str| lua.load(source).set_name(format!("@{}", file.origin)).into_function();
            match compile(&file.source) {
                Ok(f) => {
                    self.last_good.lock().unwrap().insert(file.origin.clone(), file.source.clone());
                    new_libs.insert(stem, f);
                }
                Err(e) => {
                    let mut err = script_error(file, &e.to_string());
                    let shared = || self.last_good.lock().unwrap().get(&file.origin).and_then(|src| compile(src).ok());
                    if let Some(old) = self.libs.get(&stem).cloned().or_else(shared) {
                        err.message.push_str(" (the last good version stays loaded)");
                        new_libs.insert(stem, old);
                    }
                    errors.push(err);
                }
            }
        }
        let stems: BTreeSet<String> = self.libs.keys().chain(new_libs.keys()).cloned().collect();
        for stem in stems {
            let _ = loaded.set(stem.as_str(), mlua::Value::Nil);
            let _ = preload.set(stem.as_str(), new_libs.get(&stem).cloned());
        }
        self.libs = new_libs;
    }

    fn build_tools(&self, errors: &mut Vec<ScriptError>) -> BTreeMap<String, LoadedTool> {
        let mut out: BTreeMap<String, LoadedTool> = BTreeMap::new();
        for (name, g) in self.good.iter().filter(|(n, _)| n.starts_with("tools/")) {
            if let Some(t) = g.tool.clone() {
                if let Some(prev) = out.get(&t.info.name) {
                    errors.push(ScriptError {
                        file: name.clone(),
                        line: None,
                        message: format!("tool '{}' is also defined by {}; this file wins", t.info.name, prev.info.origin),
                    });
                }
                out.insert(t.info.name.clone(), t);
            }
        }
        out
    }

    /// Hints (sorted by priority, then file) and scenario steps (by name) go to named
    /// registry values that `strobe.hints` and `strobe.scenario_steps` read.
    fn publish_registries(&self, lua: &Lua) -> mlua::Result<()> {
        let mut hints: Vec<(i64, &String, &Table)> = self
            .good
            .iter()
            .filter(|(n, _)| n.starts_with("hints/"))
            .map(|(n, g)| (g.def.get::<Option<i64>>("priority").ok().flatten().unwrap_or(100), n, &g.def))
            .collect();
        hints.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
        let list = lua.create_table()?;
        for (i, (_, _, def)) in hints.iter().enumerate() {
            list.set(i + 1, (*def).clone())?;
        }
        lua.set_named_registry_value(super::hints::HINTS_KEY, list)?;
        let steps = lua.create_table()?;
        for (_, g) in self.good.iter().filter(|(n, _)| n.starts_with("scenario/")) {
            steps.set(g.def.get::<String>("name")?, g.def.clone())?;
        }
        lua.set_named_registry_value(super::hints::STEPS_KEY, steps)?;
        let adapters = lua.create_table()?;
        for (_, g) in self.good.iter().filter(|(n, _)| n.starts_with("adapters/")) {
            adapters.set(g.def.get::<String>("name")?, g.def.clone())?;
        }
        lua.set_named_registry_value(super::test::ADAPTERS_KEY, adapters)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lua_errors_become_file_and_line() {
        let f = ScriptFile { name: "tools/x.lua".into(), origin: "/s/tools/x.lua".into(), source: String::new() };
        let e = script_error(&f, "syntax error: /s/tools/x.lua:7: 'end' expected near <eof>");
        assert_eq!((e.line, e.message.as_str()), (Some(7), "'end' expected near <eof>"));
        let e = script_error(&f, "runtime error: /s/tools/x.lua:2: boom\nstack traceback:\n\t[C]: in ?");
        assert_eq!((e.line, e.message.as_str()), (Some(2), "boom"));
        let e = script_error(&f, "syntax error: ...tools/x.lua:4: '}' expected near 'oops'");
        assert_eq!((e.line, e.message.as_str()), (Some(4), "'}' expected near 'oops'"));
    }
}
