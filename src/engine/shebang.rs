//! Scripts launched by their `#!` line: Frida spawns ELF executables only ("unable to parse
//! executable"), so a script starts the way the kernel would start it — its interpreter, the
//! line's optional argument, the script's path, then the arguments. `#!/usr/bin/env NAME` runs
//! NAME found on PATH directly, so the session is the interpreter's process from its first
//! instruction (no exec to follow).

use std::io::Read;
use std::path::{Path, PathBuf};

/// For an executable text file starting with `#!`: the program to spawn and the argv that
/// comes before the user's arguments. `None` for anything else (an ELF binary).
pub(crate) fn interpreter_of(script: &Path) -> Option<(PathBuf, Vec<String>)> {
    let mut head = [0u8; 256];
    let n = std::fs::File::open(script).and_then(|mut f| f.read(&mut head)).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = String::from_utf8_lossy(line.split(|b| *b == b'\n').next()?).trim().to_string();
    // As Linux does: the interpreter, then the rest of the line as one argument.
    let (interpreter, arg) = match line.split_once(char::is_whitespace) {
        Some((i, rest)) => (i.to_string(), Some(rest.trim().to_string()).filter(|a| !a.is_empty())),
        None => (line, None),
    };
    let script = script.display().to_string();
    if Path::new(&interpreter).file_name().is_some_and(|f| f == "env") {
        let name = arg?;
        let found = super::launch::resolve_command(name.split_whitespace().next()?, Path::new("/")).ok()?;
        return Some((found.clone(), vec![found.display().to_string(), script]));
    }
    let interpreter = super::canonical_or_same(Path::new(&interpreter));
    let mut argv = vec![interpreter.display().to_string()];
    argv.extend(arg);
    argv.push(script);
    Some((interpreter, argv))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_start_through_their_interpreter() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("tool");
        std::fs::write(&script, "#!/bin/sh -e\necho hi\n").unwrap();
        let (interp, argv) = interpreter_of(&script).unwrap();
        assert_eq!(interp, super::super::canonical_or_same(Path::new("/bin/sh")));
        assert_eq!(argv[1..], ["-e".to_string(), script.display().to_string()]);
        std::fs::write(&script, "#!/usr/bin/env sh\necho hi\n").unwrap();
        let (interp, argv) = interpreter_of(&script).unwrap();
        assert!(interp.is_file() && interp.file_name().unwrap().to_string_lossy().contains("sh"), "{interp:?}");
        assert_eq!(argv.len(), 2);
        assert_eq!(argv[1], script.display().to_string());
        assert!(interpreter_of(Path::new("/bin/ls")).is_none(), "an ELF binary");
    }
}
