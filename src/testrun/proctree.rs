//! A run's process tree read from /proc: who descends from the runner, how much CPU the
//! tree used, and whether a compiler is among them (then the run is still compiling).

use std::collections::HashMap;

#[derive(Debug, Clone)]
pub struct Proc {
    pub pid: u32,
    pub ppid: u32,
    pub comm: String,
    /// utime + stime, in clock ticks.
    pub cpu_ticks: u64,
}

/// `/proc/<pid>/stat`: comm is in parentheses and may hold spaces, so split after the last ')'.
fn read_stat(pid: u32) -> Option<Proc> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text[open + 1..close].to_string();
    let rest: Vec<&str> = text[close + 2..].split_whitespace().collect();
    // rest[0] = state, rest[1] = ppid, rest[11] = utime, rest[12] = stime
    if rest.first() == Some(&"Z") {
        return None;
    }
    let ppid = rest.get(1)?.parse().ok()?;
    let utime: u64 = rest.get(11)?.parse().ok()?;
    let stime: u64 = rest.get(12)?.parse().ok()?;
    Some(Proc { pid, ppid, comm, cpu_ticks: utime + stime })
}

/// `root` and every live descendant.
pub fn tree(root: u32) -> Vec<Proc> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    let all: Vec<Proc> = dir.flatten().filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok()).filter_map(read_stat).collect();
    let mut children: HashMap<u32, Vec<&Proc>> = HashMap::new();
    for p in &all {
        children.entry(p.ppid).or_default().push(p);
    }
    let mut out = Vec::new();
    let mut todo = vec![root];
    while let Some(pid) = todo.pop() {
        if let Some(p) = all.iter().find(|p| p.pid == pid) {
            out.push(p.clone());
        }
        for c in children.get(&pid).into_iter().flatten() {
            todo.push(c.pid);
        }
    }
    out
}

/// Processes of the tree without children of their own: the ones actually running tests.
pub fn leaves(tree: &[Proc]) -> Vec<&Proc> {
    tree.iter().filter(|p| !tree.iter().any(|c| c.ppid == p.pid)).collect()
}

/// Compilers and linkers: while one runs, silence means building, not a stuck test.
pub fn compiling(tree: &[Proc]) -> bool {
    const BUILDERS: [&str; 12] = ["rustc", "cc1", "cc1plus", "ld", "collect2", "compile", "link", "cc", "gcc", "g++", "clang", "tsc"];
    tree.iter().any(|p| BUILDERS.contains(&p.comm.as_str()) || p.comm.starts_with("ld."))
}

pub fn clock_ticks_per_sec() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as u64 } else { 100 }
}

/// Where each thread of `pid` is, cheaply: its state, kernel wait channel and (blocked
/// in a syscall) the syscall with its user stack pointer and PC. Two equal signatures a
/// few seconds apart mean nothing moved; a running thread shows as "running".
pub fn thread_signature(pid: u32) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    let mut out: Vec<String> = dir
        .flatten()
        .map(|e| {
            let t = e.path();
            let read = |f: &str| std::fs::read_to_string(t.join(f)).unwrap_or_default().trim().to_string();
            let stat = read("stat");
            let state = stat.rfind(')').and_then(|i| stat[i + 2..].split_whitespace().next()).unwrap_or("?").to_string();
            format!("{} {state} {} {}", e.file_name().to_string_lossy(), read("wchan"), read("syscall"))
        })
        .collect();
    out.sort();
    out
}

/// Some thread is at exactly the same place in both signatures (same tid, state, wait
/// channel, syscall with its arguments and user PC/SP).
pub fn a_thread_stayed(before: &[String], now: &[String]) -> bool {
    before.iter().any(|t| now.contains(t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blocked_thread_of_this_process_keeps_its_signature() {
        // The test thread sleeps in a syscall; its signature does not change.
        let handle = std::thread::spawn(|| std::thread::sleep(std::time::Duration::from_secs(2)));
        std::thread::sleep(std::time::Duration::from_millis(200));
        let a = thread_signature(std::process::id());
        std::thread::sleep(std::time::Duration::from_millis(300));
        let b = thread_signature(std::process::id());
        assert!(a_thread_stayed(&a, &b), "{a:?} / {b:?}");
        assert!(!a_thread_stayed(&a, &[]));
        handle.join().unwrap();
    }
}
