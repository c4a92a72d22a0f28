//! The Python environment the Frida host runs in: a venv with the pinned `frida` package,
//! created once in the shared cache directory (`cache_dir/python-frida-<version>/`).
//!
//! Creation is guarded by a file lock, so parallel tests and daemons wait for one another,
//! and marked complete only after `import frida` succeeds, so a half-created venv is redone.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Instant;

use crate::error::{ErrorCode, Result, StrobeError};

/// The Frida version Strobe is built and tested against.
pub const FRIDA_VERSION: &str = "17.26.0";

/// Environment variable naming the Python interpreter used to create the venv (default `python3`).
pub const PYTHON_ENV_VAR: &str = "STROBE_PYTHON";

const MARKER: &str = ".strobe-complete";

/// The venv directory for the pinned Frida version.
pub fn venv_dir(cache_dir: &Path) -> PathBuf {
    cache_dir.join(format!("python-frida-{FRIDA_VERSION}"))
}

fn venv_python(venv: &Path) -> PathBuf {
    venv.join("bin").join("python")
}

/// Make sure `cache_dir/python-frida-<version>/` holds a venv with `frida==<version>`,
/// creating it if needed (one-time, ~20 s, needs network access to PyPI or a pip mirror),
/// and return its Python executable. Blocking: call it from `spawn_blocking` in async code.
pub fn ensure_python_env(cache_dir: &Path) -> Result<PathBuf> {
    let venv = venv_dir(cache_dir);
    let python = venv_python(&venv);
    if venv.join(MARKER).is_file() && python.exists() {
        return Ok(python);
    }

    std::fs::create_dir_all(cache_dir).map_err(|e| {
        StrobeError::internal(format!("cannot create the Strobe cache directory {}: {e}", cache_dir.display()))
    })?;
    let lock_path = cache_dir.join(format!("python-frida-{FRIDA_VERSION}.lock"));
    let lock = File::create(&lock_path)
        .map_err(|e| StrobeError::internal(format!("cannot create lock file {}: {e}", lock_path.display())))?;
    lock.lock().map_err(|e| StrobeError::internal(format!("cannot lock {}: {e}", lock_path.display())))?;

    // Someone else may have finished while we waited for the lock.
    if venv.join(MARKER).is_file() && python.exists() {
        return Ok(python);
    }
    let started = Instant::now();
    if venv.exists() {
        std::fs::remove_dir_all(&venv).map_err(|e| {
            StrobeError::internal(format!("cannot remove the incomplete Python environment {}: {e}", venv.display()))
        })?;
    }

    let base = std::env::var_os(PYTHON_ENV_VAR)
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("python3"));
    check_base_python(&base)?;

    eprintln!(
        "strobe: installing frida {FRIDA_VERSION} into {} (one-time, ~20 s)",
        venv.display()
    );
    super::set_setup_phase(Some(format!("installing the Frida Python package {FRIDA_VERSION} (first use only, 10-20 s)")));
    let out = run(Command::new(&base).arg("-m").arg("venv").arg(&venv), &base)?;
    if !out.status.success() {
        let _ = std::fs::remove_dir_all(&venv);
        return Err(setup_error(format!(
            "`{} -m venv {}` failed ({}):\n{}\nOn Debian/Ubuntu the venv module is a separate package: apt-get install python3-venv.",
            base.display(),
            venv.display(),
            out.status,
            tail(&out, 20)
        )));
    }

    let spec = format!("frida=={FRIDA_VERSION}");
    let out = run(
        Command::new(&python)
            .args(["-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--quiet", &spec])
            .env("PIP_NO_INPUT", "1"),
        &python,
    )?;
    if !out.status.success() {
        return Err(setup_error(format!(
            "`pip install {spec}` into {} failed ({}):\n{}\nThe Frida host needs the `frida` Python package from PyPI: check network access (or set PIP_INDEX_URL to a mirror) and retry.",
            venv.display(),
            out.status,
            tail(&out, 30)
        )));
    }

    let out = run(
        Command::new(&python).args(["-c", "import sys, frida; sys.stdout.write(frida.__version__)"]),
        &python,
    )?;
    let got = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || got != FRIDA_VERSION {
        return Err(setup_error(format!(
            "the new Python environment {} cannot import frida {FRIDA_VERSION} (got {got:?}, {}):\n{}",
            venv.display(),
            out.status,
            tail(&out, 20)
        )));
    }

    std::fs::write(venv.join(MARKER), format!("frida {FRIDA_VERSION}\n"))
        .map_err(|e| StrobeError::internal(format!("cannot write {}: {e}", venv.join(MARKER).display())))?;
    eprintln!("strobe: frida {FRIDA_VERSION} ready ({:.1} s)", started.elapsed().as_secs_f64());
    drop(lock);
    Ok(python)
}

fn setup_error(message: String) -> StrobeError {
    StrobeError::new(ErrorCode::FridaAttachFailed, format!("Cannot set up Frida: {message}"))
}

fn check_base_python(base: &Path) -> Result<()> {
    let out = Command::new(base)
        .args(["-c", "import sys; sys.stdout.write('%d.%d' % sys.version_info[:2])"])
        .stdin(Stdio::null())
        .output();
    let out = match out {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(setup_error(format!(
                "Python interpreter '{}' not found. Strobe drives Frida through its Python package and needs Python 3.9+: install it (e.g. `apt-get install python3 python3-venv`) or set {PYTHON_ENV_VAR} to a Python 3.9+ interpreter.",
                base.display()
            )))
        }
        Err(e) => return Err(setup_error(format!("cannot run '{}': {e}", base.display()))),
    };
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let parsed: Option<(u32, u32)> = version.split_once('.').and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)));
    match parsed {
        Some((major, minor)) if (major, minor) >= (3, 9) => Ok(()),
        _ => Err(setup_error(format!(
            "'{}' reports Python version {version:?}; Strobe needs Python 3.9+ (install e.g. `apt-get install python3 python3-venv`, or set {PYTHON_ENV_VAR}).",
            base.display()
        ))),
    }
}

fn run(cmd: &mut Command, program: &Path) -> Result<Output> {
    cmd.stdin(Stdio::null())
        .output()
        .map_err(|e| setup_error(format!("cannot run '{}': {e}", program.display())))
}

fn tail(out: &Output, lines: usize) -> String {
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_python_says_what_to_install() {
        let err = check_base_python(Path::new("/nonexistent/python3")).unwrap_err();
        assert!(err.message.contains("Python 3.9+"), "{err}");
        assert!(err.message.contains("apt-get install python3"), "{err}");
        assert!(err.message.contains(PYTHON_ENV_VAR), "{err}");
    }

    #[test]
    fn rejects_a_non_python() {
        // `true` runs, prints nothing: not a usable Python.
        let err = check_base_python(Path::new("true")).unwrap_err();
        assert!(err.message.contains("Python 3.9+"), "{err}");
    }
}
