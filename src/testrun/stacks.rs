//! Every thread's backtrace of a process, symbolized, for a stuck report: `gdb -batch`
//! attaches, prints `thread apply all bt` and detaches (the process goes on). gdb reads
//! DWARF, demangles Rust and C++, and shows the kernel wait of a blocked thread as its
//! innermost frame; it is the reference debugger on these machines.

use std::process::{Command, Stdio};
use std::time::Duration;

use super::registry::ThreadStack;

/// Frames kept per thread.
const MAX_FRAMES: usize = 24;

pub fn capture(pid: u32, timeout: Duration) -> Vec<ThreadStack> {
    let child = Command::new("gdb")
        .args(["-batch", "-nx", "-p", &pid.to_string(), "-ex", "set pagination off", "-ex", "set print frame-arguments none"])
        .args(["-ex", &format!("thread apply all bt {MAX_FRAMES}")])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let Ok(child) = child else { return Vec::new() };
    let (tx, rx) = std::sync::mpsc::channel();
    let child_id = child.id();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(timeout) {
        Ok(Ok(out)) => parse_gdb(pid, &String::from_utf8_lossy(&out.stdout)),
        _ => {
            // SAFETY: kill on a pid we spawned.
            unsafe { libc::kill(child_id as i32, libc::SIGKILL) };
            Vec::new()
        }
    }
}

/// `Thread 2 (Thread 0x7f.. (LWP 12) "name"):` headers, then `#N  0x... in func (...) at file:line` frames.
fn parse_gdb(pid: u32, text: &str) -> Vec<ThreadStack> {
    let frame = regex::Regex::new(r"^#\d+\s+(?:0x[0-9a-f]+ in )?(.+?)(?: \(.*?\))?(?: at (\S+:\d+)| from (\S+))?$").expect("valid regex");
    let mut out: Vec<ThreadStack> = Vec::new();
    for line in text.lines() {
        if line.starts_with("Thread ") {
            let name = line.split('"').nth(1).unwrap_or("").to_string();
            let lwp = line.split("LWP ").nth(1).and_then(|s| s.split(')').next()).unwrap_or("?");
            out.push(ThreadStack { pid, thread: format!("{lwp} {name}").trim().to_string(), frames: Vec::new() });
        } else if let (Some(t), Some(c)) = (out.last_mut(), frame.captures(line)) {
            let func = c[1].to_string();
            let at = c.get(2).or(c.get(3)).map(|m| format!(" at {}", m.as_str())).unwrap_or_default();
            t.frames.push(format!("{func}{at}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gdb_output_becomes_threads_and_frames() {
        let text = "Thread 2 (Thread 0x7f (LWP 43) \"worker\"):\n#0  0x00007f in __futex_abstimed_wait_common () from /lib/x86_64-linux-gnu/libc.so.6\n#1  0x0000555 in hang::spin (n=3) at src/lib.rs:12\n\nThread 1 (Thread 0x7e (LWP 42) \"main\"):\n#0  main () at src/main.rs:3\n";
        let t = parse_gdb(42, text);
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].thread, "43 worker");
        assert_eq!(t[0].frames[1], "hang::spin at src/lib.rs:12");
        assert_eq!(t[1].frames[0], "main at src/main.rs:3");
    }
}
