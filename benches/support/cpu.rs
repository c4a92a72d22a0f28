//! Where a benchmark's CPU time goes (Linux `/proc`; zeros elsewhere): the store's writer
//! thread, the rest of this process (tokio workers: ingest and decoding), the Frida host
//! process, and the host's exited children (the traced target is the host's child: its
//! CPU — the hooked loop and the agent's drain — shows up there once it has exited).

/// CPU seconds.
#[derive(Clone, Copy, Default, Debug)]
pub struct CpuSplit {
    pub writer: f64,
    pub daemon_other: f64,
    /// The Frida host's own threads (Python and frida-core).
    pub host: f64,
    /// The host's reaped children: the target, after it exits.
    pub target: f64,
    /// The host's live children: the target while it runs (every thread: the workload, the
    /// agent's drain, Frida's).
    pub target_live: f64,
}

fn stat_fields(path: &std::path::Path) -> Option<(String, Vec<String>)> {
    let stat = std::fs::read_to_string(path).ok()?;
    let (head, rest) = stat.rsplit_once(')')?;
    let comm = head.split_once('(')?.1.to_string();
    Some((comm, rest.split_whitespace().map(str::to_string).collect()))
}

/// utime + stime (fields 14 and 15) in seconds; with `children`, cutime + cstime instead.
fn secs(f: &[String], children: bool) -> f64 {
    let get = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (if children { get(13) + get(14) } else { get(11) + get(12) }) / 100.0
}

#[allow(dead_code)] // benches/tracing.rs samples once before and once after
pub fn sample() -> CpuSplit {
    Processes::find().sample()
}

/// The Frida host processes (this process's children) and their children (the targets),
/// found once: sampling them again is then a few reads, cheap enough to repeat every few ms.
pub struct Processes {
    hosts: Vec<String>,
    targets: Vec<String>,
}

impl Processes {
    pub fn find() -> Processes {
        let me = std::process::id().to_string();
        let procs: Vec<(String, Vec<String>)> = std::fs::read_dir("/proc")
            .map(|dir| dir.flatten().filter_map(|p| Some((p.file_name().into_string().ok()?, stat_fields(&p.path().join("stat"))?.1))).collect())
            .unwrap_or_default();
        let hosts: Vec<String> = procs.iter().filter(|(_, f)| f.get(1) == Some(&me)).map(|(pid, _)| pid.clone()).collect();
        let targets = procs.iter().filter(|(_, f)| f.get(1).is_some_and(|pp| hosts.contains(pp))).map(|(pid, _)| pid.clone()).collect();
        Processes { hosts, targets }
    }

    pub fn sample(&self) -> CpuSplit {
        let mut s = CpuSplit::default();
        if let Ok(dir) = std::fs::read_dir("/proc/self/task") {
            for t in dir.flatten() {
                if let Some((comm, f)) = stat_fields(&t.path().join("stat")) {
                    if comm == "strobe-store-wr" {
                        s.writer += secs(&f, false);
                    } else {
                        s.daemon_other += secs(&f, false);
                    }
                }
            }
        }
        let stat = |pid: &String| stat_fields(&std::path::Path::new("/proc").join(pid).join("stat")).map(|(_, f)| f);
        for f in self.hosts.iter().filter_map(stat) {
            s.host += secs(&f, false);
            s.target += secs(&f, true);
        }
        for f in self.targets.iter().filter_map(stat) {
            s.target_live += secs(&f, false);
        }
        s
    }
}

impl std::ops::Sub for CpuSplit {
    type Output = CpuSplit;
    fn sub(self, o: CpuSplit) -> CpuSplit {
        CpuSplit {
            writer: self.writer - o.writer,
            daemon_other: self.daemon_other - o.daemon_other,
            host: self.host - o.host,
            target: self.target - o.target,
            target_live: self.target_live - o.target_live,
        }
    }
}
