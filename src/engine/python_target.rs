//! Python programs: Strobe hooks native functions through DWARF, so a pattern naming Python
//! code matches nothing in the interpreter. Until Python tracing exists, tracing in a
//! Python target says so plainly instead of reporting typos or missing symbols.

use std::io::Read;
use std::path::Path;

/// What `debug_trace` and `debug_launch` say when patterns meet a Python target.
pub(crate) const NOT_YET: &str = "Python functions cannot be traced yet: Strobe hooks native (C, C++, Rust) functions through their debug info, and this target runs Python code. The patterns were not applied. Read the program's output with debug_query (eventType 'stdout' or 'stderr'), or add print/logging calls to the Python code.";

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
