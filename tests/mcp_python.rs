//! Runs the MCP integration tests (`tests/mcp/*.py`): the official MCP Python SDK
//! drives a real `strobe mcp` proxy and daemon against real fixture programs.
//! The Python environment is created on first use under `target/py-test-venv`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A venv with the pinned test requirements, created once (file-locked: test binaries run in parallel).
fn test_python() -> PathBuf {
    let venv = repo().join("target").join("py-test-venv");
    std::fs::create_dir_all(repo().join("target")).unwrap();
    let lock = std::fs::File::create(repo().join("target").join("py-test-venv.lock")).unwrap();
    lock.lock().unwrap();
    let python = venv.join("bin").join("python");
    let reqs = repo().join("tests").join("mcp").join("requirements.txt");
    let marker = venv.join(".requirements");
    let wanted = std::fs::read_to_string(&reqs).unwrap();
    if std::fs::read_to_string(&marker).ok().as_deref() != Some(wanted.as_str()) {
        eprintln!("setting up the MCP test environment in {} (one-time)", venv.display());
        run(Command::new("python3").args(["-m", "venv"]).arg(&venv));
        run(Command::new(&python).args(["-m", "pip", "install", "-q", "-r"]).arg(&reqs));
        std::fs::write(&marker, wanted).unwrap();
    }
    python
}

fn run(cmd: &mut Command) {
    let status = cmd.status().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(status.success(), "{cmd:?} failed with {status}");
}

/// Files that load the machine on purpose (ten spinning targets) run alone: beside them, a
/// test whose target ends after a fixed number of rounds saw it exit before it was done.
const LOAD_FILES: [&str; 1] = ["test_store_load.py"];
static MACHINE: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn pytest(file: &str) {
    // (A failed test poisons the lock; the others still run.)
    let (_alone, _shared) = if LOAD_FILES.contains(&file) {
        (Some(MACHINE.write().unwrap_or_else(|e| e.into_inner())), None)
    } else {
        (None, Some(MACHINE.read().unwrap_or_else(|e| e.into_inner())))
    };
    let python = test_python();
    let target = repo().join("target");
    let status = Command::new(python)
        .args(["-m", "pytest", "-q", "-x", "-p", "no:cacheprovider"])
        .arg(Path::new("tests").join("mcp").join(file))
        .current_dir(repo())
        .env("STROBE_BIN", env!("CARGO_BIN_EXE_strobe"))
        .env("STROBE_FIXTURES", target.join("fixtures"))
        .env("STROBE_CACHE_DIR", target.join("strobe-cache"))
        .status()
        .expect("run pytest");
    assert!(status.success(), "pytest {file} failed: {status}");
}

#[test]
fn mcp_walking_skeleton() {
    pytest("test_walking_skeleton.py");
}

#[test]
fn mcp_tracing_links_across_hook_paths() {
    pytest("test_tracing_links.py");
}

#[test]
fn mcp_bad_input() {
    pytest("test_bad_input.py");
}

#[test]
fn mcp_stops() {
    pytest("test_stops.py");
}

#[test]
fn mcp_lifecycle() {
    pytest("test_lifecycle.py");
}

#[test]
fn mcp_scripts_hot_reload_trust_hints() {
    pytest("test_scripts.py");
}

#[test]
fn mcp_repl_through_a_pty() {
    pytest("test_repl.py");
}

#[test]
fn mcp_types_watches_memory() {
    pytest("test_types_watches_memory.py");
}

#[test]
fn mcp_breakpoints() {
    pytest("test_breakpoints.py");
}

#[test]
fn mcp_query_filters_settings_limits() {
    pytest("test_query.py");
}

#[test]
fn mcp_float_arguments() {
    pytest("test_floats.py");
}

#[test]
fn mcp_frames() {
    pytest("test_frames.py");
}

#[test]
fn mcp_staged_stops_and_launch_breakpoints() {
    pytest("test_staged.py");
}

#[test]
fn mcp_script_watchdog_compact_answers() {
    pytest("test_script.py");
}

#[test]
fn mcp_eval_expressions() {
    pytest("test_eval.py");
}

#[test]
fn mcp_traced_values() {
    pytest("test_traced_values.py");
}

#[test]
fn mcp_races_and_process_accounting() {
    pytest("test_races.py");
}

#[test]
fn mcp_store_under_load() {
    pytest("test_store_load.py");
}

#[test]
fn mcp_hardening() {
    pytest("test_hardening.py");
}

#[test]
fn mcp_inflight_cancel_disconnect_progress() {
    pytest("test_inflight.py");
}

#[test]
fn mcp_debug_test() {
    setup_toolchains();
    pytest("test_debug_test.py");
}

/// Toolchains the debug_test fixtures need (Google Test, Catch2, Go), installed by the
/// project's own script when missing.
fn setup_toolchains() {
    run(Command::new("bash").arg(repo().join("tests").join("setup").join("toolchains.sh")));
}

#[test]
fn mcp_tool_titles_annotations_structured_output() {
    pytest("test_tool_shapes.py");
}

#[test]
fn mcp_input_schemas_validated_by_json_schema() {
    pytest("test_input_schemas.py");
}

#[test]
fn mcp_fuzz_every_message_answered() {
    pytest("test_fuzz.py");
}

#[test]
fn mcp_typescript_sdk_client() {
    pytest("test_typescript_sdk.py");
}
