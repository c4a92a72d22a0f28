//! Python programs: Strobe hooks native functions through DWARF — the interpreter's C code and
//! C extensions (modules loaded by `import` or `ctypes`) — so a pattern naming Python code
//! matches nothing. Until Python tracing exists, such a pattern gets a plain explanation instead
//! of "typo or no symbols", while patterns naming native functions are hooked as anywhere else.

use std::io::Read;
use std::path::Path;

use super::trace::TraceResult;

/// Why patterns matched nothing in a Python target, and what to do instead.
pub(crate) fn not_yet(unmatched: &[&str]) -> String {
    format!(
        "Python functions cannot be traced yet: {} matched no native function. Strobe hooks C, C++ and Rust functions with debug info: the interpreter's and C extensions' (loaded by import or ctypes). The pattern stays active and hooks matching functions of extensions as they load. For Python code, read the program's output with debug_query (eventType 'stdout' or 'stderr'), or add print/logging calls.",
        unmatched.iter().map(|p| format!("'{p}'")).collect::<Vec<_>>().join(", ")
    )
}

/// In a Python target, patterns that matched no native function (yet) most likely name
/// Python code: say so, and mark the result for the hint rules.
pub(crate) fn explain_unmatched(result: &mut TraceResult) {
    let unmatched: Vec<&str> = result.matches_per_pattern.iter().filter(|(_, n)| *n == 0).map(|(p, _)| p.as_str()).collect();
    if unmatched.is_empty() {
        return;
    }
    let text = not_yet(&unmatched);
    result.warnings.push(text);
    result.python_target = true;
}

/// Whether `binary` is a Python interpreter (`python3`, `python3.11`) or a script whose
/// `#!` line runs one.
pub(crate) fn is_python(binary: &Path) -> bool {
    let name = binary.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default();
    if name.starts_with("python") || name.ends_with(".py") {
        return true;
    }
    let mut head = [0u8; 128];
    let n = std::fs::File::open(binary).and_then(|mut f| f.read(&mut head)).unwrap_or(0);
    let first = head[..n].split(|b| *b == b'\n').next().unwrap_or(&[]);
    first.starts_with(b"#!") && String::from_utf8_lossy(first).contains("python")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpreters_and_scripts_are_recognised() {
        assert!(is_python(Path::new("/usr/bin/python3.11")));
        assert!(is_python(Path::new("/opt/app/tool.py")));
        let dir = std::env::temp_dir().join(format!("strobe-py-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = dir.join("tool");
        std::fs::write(&script, "#!/usr/bin/env python3\nprint(1)\n").unwrap();
        assert!(is_python(&script));
        std::fs::write(&script, "#!/bin/sh\necho python\n").unwrap();
        assert!(!is_python(&script));
        assert!(!is_python(Path::new("/bin/ls")));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
