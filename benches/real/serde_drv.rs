// Benchmark driver (benches/rust_real.rs): serde_json, a crate nobody on the project wrote,
// parses a 200-object JSON document `iterations` times. Built in debug mode (as `cargo
// build` builds a program being debugged) against the serde_json of this workspace's
// dependency tree. Usage: serde_drv ITERATIONS [wait]; with "wait" it prints "ready", reads
// a line, runs, prints "workload ns=… cpu_ns=…", and reads one more line before exiting.
use std::io::BufRead;

/// This thread's CPU time in ns (the kernel's scheduler statistics: ns, unlike utime).
fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat").ok().and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok())).unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let iterations: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(20);
    let wait = args.get(2).map(String::as_str) == Some("wait");
    let mut doc = String::from("[");
    for i in 0..200 {
        if i > 0 {
            doc.push(',');
        }
        doc.push_str(&format!("{{\"id\":{i},\"name\":\"item {i}\",\"tags\":[\"a\",\"b\"],\"ok\":true}}"));
    }
    doc.push(']');
    let mut line = String::new();
    if wait {
        println!("ready");
        std::io::stdin().lock().read_line(&mut line).unwrap();
    }
    let (t0, c0) = (std::time::Instant::now(), cpu_ns());
    let mut checksum = 0usize;
    for _ in 0..iterations {
        let v: serde_json::Value = serde_json::from_str(&doc).unwrap();
        checksum += v.as_array().map_or(0, Vec::len);
    }
    let (ns, cpu) = (t0.elapsed().as_nanos(), cpu_ns() - c0);
    println!("workload ns={ns} iterations={iterations} checksum={checksum} cpu_ns={cpu}");
    if wait {
        line.clear();
        std::io::stdin().lock().read_line(&mut line).unwrap();
    }
}
