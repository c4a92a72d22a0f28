//! The live descendants of a process, read from /proc. `stop` kills them with the target:
//! a child Frida never reported (a fork it failed to gate, or one made while children are
//! not followed) is still the debuggee's, and must not outlive the session.

use std::collections::{HashMap, HashSet};

/// Parent pid of every process visible in /proc.
fn parents() -> HashMap<u32, u32> {
    let mut out = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else { return out };
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        if let Some(ppid) = parent_from_stat(&stat) {
            out.insert(pid, ppid);
        }
    }
    out
}

/// The fields of a /proc/PID/stat line after the command name, from the state on. The name
/// (field 2, in parentheses) may itself hold spaces and parentheses: they end at the last ')'.
fn fields_after_name(stat: &str) -> Option<std::str::SplitWhitespace<'_>> {
    Some(stat[stat.rfind(')')? + 1..].split_whitespace())
}

/// The ppid field of a /proc/PID/stat line.
fn parent_from_stat(stat: &str) -> Option<u32> {
    let mut fields = fields_after_name(stat)?;
    fields.next()?; // state
    fields.next()?.parse().ok()
}

/// Every live process descended from `root` (children, grandchildren, ...), parents first.
pub(crate) fn descendants(root: u32) -> Vec<u32> {
    let parents = parents();
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for (&pid, &ppid) in &parents {
        children.entry(ppid).or_default().push(pid);
    }
    let mut out = Vec::new();
    let mut seen = HashSet::from([root]);
    let mut queue = vec![root];
    while let Some(p) = queue.pop() {
        for &c in children.get(&p).map(Vec::as_slice).unwrap_or(&[]) {
            if seen.insert(c) {
                out.push(c);
                queue.push(c);
            }
        }
    }
    out
}

/// SIGKILL `root`, its descendants and `children` (reported children that may have left
/// the tree), read before the root dies (its orphans move to init). Returns the pids killed.
pub(crate) fn kill_family(root: u32, children: &[u32]) -> Vec<u32> {
    let mut family = vec![root];
    family.extend(descendants(root));
    family.extend(children.iter().filter(|c| !family.contains(c)).collect::<Vec<_>>());
    family
        .into_iter()
        // SAFETY: kill(2) with a pid and a signal number touches no memory of ours.
        .filter(|&pid| running(pid) && unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) } == 0)
        .collect()
}

/// Whether `pid` is still running: it exists and is not a zombie.
pub(crate) fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => fields_after_name(&stat).and_then(|mut f| f.next()).is_some_and(|state| state != "Z"),
        Err(_) => false,
    }
}

/// Whether `pid` is stopped by a job-control signal (SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU):
/// state `T`. (A ptrace stop is `t`.)
pub(crate) fn job_stopped(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .is_some_and(|stat| fields_after_name(&stat).and_then(|mut f| f.next()) == Some("T"))
}

/// Wait (up to `timeout`) until none of `pids` is running; the ones still running.
pub(crate) async fn wait_gone(pids: &[u32], timeout: std::time::Duration) -> Vec<u32> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let left: Vec<u32> = pids.iter().copied().filter(|&p| running(p)).collect();
        if left.is_empty() || tokio::time::Instant::now() >= deadline {
            return left;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn stat_parsing_survives_odd_command_names() {
        assert_eq!(parent_from_stat("42 (a) b (c)) S 17 42 42 0"), Some(17));
        assert_eq!(parent_from_stat("42 (plain) R 1 42"), Some(1));
        assert_eq!(parent_from_stat("garbage"), None);
    }

    #[test]
    fn finds_children_and_grandchildren() {
        // sh -> sleep (grandchild of this test process through the shell).
        let mut sh = Command::new("sh").args(["-c", "sleep 30 & sleep 30; wait"]).spawn().unwrap();
        let me = std::process::id();
        let mut found = Vec::new();
        for _ in 0..100 {
            found = descendants(me);
            if found.len() >= 3 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let shell = sh.id();
        let _ = Command::new("pkill").args(["-P", &shell.to_string()]).status();
        let _ = sh.kill();
        let _ = sh.wait();
        assert!(found.contains(&shell), "{found:?}");
        assert!(!running(shell), "killed and reaped");
        assert!(running(me));
        assert!(found.len() >= 3, "the shell's two sleeps are descendants too: {found:?}");
    }
}
