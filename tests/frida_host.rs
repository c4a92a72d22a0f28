//! The Frida host and the agent against real processes: a small C program compiled here,
//! spawned suspended, instrumented, and observed.
//!
//! Run: `cargo test --test frida_host -- --nocapture` (prints timings). The Python venv with
//! frida lives in `<repo>/target/strobe-cache`, created on first run (~20 s).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Once;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use strobe::error::ErrorCode;
use strobe::frida::{FridaRuntime, HostEvent};
use tokio::sync::mpsc;

const TARGET_C: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <pthread.h>
#include <sys/wait.h>

int add(int a, int b) { return a + b; }
int twice(int x) { return add(x, x); }

static void at_exit_handler(void) { add(5, 6); }

static void *worker(void *arg) {
    long base = (long)arg, s = 0;
    for (int i = 0; i < 200; i++) { s += twice((int)base + i); usleep(100); }
    return (void *)s;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "loop";
    if (strcmp(mode, "threads") == 0) {        /* 2 threads: twice() -> add(), then exit(0) */
        pthread_t a, b;
        pthread_create(&a, NULL, worker, (void *)1000L);
        pthread_create(&b, NULL, worker, (void *)2000L);
        pthread_join(a, NULL);
        pthread_join(b, NULL);
        printf("threads done\n");
        return 0;
    }
    if (strcmp(mode, "atexit") == 0) {         /* add(5, 6) from an atexit handler */
        atexit(at_exit_handler);
        add(1, 1);
        return 0;
    }
    if (strcmp(mode, "fork") == 0) {           /* the child calls add and exits 5 */
        add(1, 2);
        pid_t p = fork();
        if (p == 0) { add(10, 20); printf("child\n"); fflush(stdout); exit(5); }
        int st = 0;
        waitpid(p, &st, 0);
        printf("child status %d sig %d\n", WEXITSTATUS(st), WIFSIGNALED(st) ? WTERMSIG(st) : 0);
        add(3, 4);
        return 0;
    }
    if (strcmp(mode, "burst") == 0) {          /* N calls, then exit(7) at once */
        int n = argc > 2 ? atoi(argv[2]) : 100;
        long s = 0;
        for (int i = 0; i < n; i++) s += add(i, 1000);
        printf("burst done %ld\n", s);
        return 7;
    }
    if (strcmp(mode, "echo") == 0) {           /* one line from stdin, echoed */
        char line[256];
        printf("ready\n");
        fflush(stdout);
        if (fgets(line, sizeof line, stdin)) printf("got: %s", line);
        fflush(stdout);
        return 0;
    }
    printf("hello stdout\n");
    fflush(stdout);
    fprintf(stderr, "hello stderr\n");
    for (int i = 0;; i++) {
        int r = add(i, 2 * i + 1);
        if (i % 50 == 0) { printf("tick %d %d\n", i, r); fflush(stdout); }
        usleep(2000);
    }
}
"#;

fn cache_dir() -> PathBuf {
    static ONCE: Once = Once::new();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target").join("strobe-cache");
    ONCE.call_once(|| std::env::set_var("STROBE_CACHE_DIR", &dir));
    let from_env = strobe::paths::cache_dir();
    assert_eq!(from_env, dir);
    from_env
}

struct Target {
    _dir: tempfile::TempDir,
    path: PathBuf,
    /// Static (link-time) addresses of `add` and `twice`.
    add: u64,
    twice: u64,
    /// Lowest PT_LOAD address: the static image base the slide is computed from.
    image_base: u64,
}

fn build_target() -> Target {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("target.c");
    std::fs::write(&src, TARGET_C).unwrap();
    let path = dir.path().join("target");
    let out = Command::new("cc")
        .args(["-g", "-O0", "-fPIE", "-pie", "-pthread"])
        .arg(&src)
        .arg("-o")
        .arg(&path)
        .output()
        .expect("run cc");
    assert!(out.status.success(), "cc failed: {}", String::from_utf8_lossy(&out.stderr));

    use object::{Object, ObjectSegment, ObjectSymbol};
    let data = std::fs::read(&path).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let sym = |name: &str| file.symbols().find(|s| s.name() == Ok(name)).expect(name).address();
    let image_base = file.segments().map(|s| s.address()).min().unwrap_or(0);
    Target { _dir: dir, path: path.clone(), add: sym("add"), twice: sym("twice"), image_base }
}

struct Harness {
    rt: FridaRuntime,
    rx: mpsc::UnboundedReceiver<HostEvent>,
    /// Everything received so far, in order.
    seen: Vec<HostEvent>,
}

impl Harness {
    async fn start() -> Harness {
        let cache = cache_dir();
        let (tx, rx) = mpsc::unbounded_channel();
        let t = Instant::now();
        let rt = FridaRuntime::start(&cache, tx).await.expect("start Frida runtime");
        println!(
            "[timing] runtime start {:?} (python env {:?}, host {:?}, agent {:?})",
            t.elapsed(),
            rt.timings.python_env,
            rt.timings.host_start,
            rt.timings.agent_build
        );
        Harness { rt, rx, seen: Vec::new() }
    }

    /// Receive events until `done(all events so far)` holds; panics after `timeout`.
    async fn wait_until(&mut self, what: &str, timeout: Duration, mut done: impl FnMut(&[HostEvent]) -> bool) {
        let deadline = tokio::time::Instant::now() + timeout;
        while !done(&self.seen) {
            match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                Ok(Some(ev)) => self.seen.push(ev),
                Ok(None) => panic!("event channel closed while waiting for {what}"),
                Err(_) => panic!("timed out after {timeout:?} waiting for {what}; got {} events: {}", self.seen.len(), summary(&self.seen)),
            }
        }
    }

    /// Receive whatever arrives within `d`.
    async fn collect_for(&mut self, d: Duration) {
        let deadline = tokio::time::Instant::now() + d;
        while let Ok(Some(ev)) = tokio::time::timeout_at(deadline, self.rx.recv()).await {
            self.seen.push(ev);
        }
    }
}

fn summary(evs: &[HostEvent]) -> String {
    evs.iter()
        .rev()
        .take(8)
        .map(|e| match e {
            HostEvent::Output { pid, fd, data } => format!("output({pid},{fd},{:?})", String::from_utf8_lossy(data)),
            HostEvent::AgentMessage { message, .. } => {
                let s = message.to_string();
                format!("message({})", &s[..s.len().min(200)])
            }
            other => format!("{other:?}"),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn output_text(evs: &[HostEvent], want_pid: u32, want_fd: u8) -> String {
    let mut s = Vec::new();
    for e in evs {
        if let HostEvent::Output { pid, fd, data } = e {
            if *pid == want_pid && *fd == want_fd {
                s.extend_from_slice(data);
            }
        }
    }
    String::from_utf8_lossy(&s).into_owned()
}

/// All trace events (enter/exit) from the agent for `pid`, in arrival order.
/// Call records (enter/exit) only: the stream also carries thread-name records.
fn trace_events(evs: &[HostEvent], want_pid: u32) -> Vec<Value> {
    let mut out = Vec::new();
    for e in evs {
        if let HostEvent::AgentMessage { pid, message, .. } = e {
            if *pid == want_pid && message["type"] == "events" {
                let calls = message["events"].as_array().unwrap().iter().filter(|r| r["k"] == "enter" || r["k"] == "exit");
                out.extend(calls.cloned());
            }
        }
    }
    out
}

fn agent_messages(evs: &[HostEvent], want_pid: u32, ty: &str) -> Vec<Value> {
    evs.iter()
        .filter_map(|e| match e {
            HostEvent::AgentMessage { pid, message, .. } if *pid == want_pid && message["type"] == ty => Some(message.clone()),
            _ => None,
        })
        .collect()
}

fn detached(evs: &[HostEvent], want_pid: u32) -> Option<String> {
    evs.iter().find_map(|e| match e {
        HostEvent::Detached { pid, reason } if *pid == want_pid => Some(reason.clone()),
        _ => None,
    })
}

fn hex(s: &Value) -> u64 {
    let s = s.as_str().expect("hex string");
    u64::from_str_radix(s.trim_start_matches("0x"), 16).expect("hex")
}

fn count_enters(evs: &[HostEvent], pid: u32) -> usize {
    trace_events(evs, pid).iter().filter(|e| e["k"] == "enter").count()
}

async fn spawn_attached(h: &Harness, t: &Target, args: &[&str]) -> (u32, Duration, Duration) {
    let mut argv = vec![t.path.display().to_string()];
    argv.extend(args.iter().map(|s| s.to_string()));
    let env: Vec<(String, String)> = std::env::vars().collect();
    let t0 = Instant::now();
    let pid = h.rt.host().spawn(&argv, Some(t.path.parent().unwrap()), &env).await.expect("spawn");
    let spawn = t0.elapsed();
    let t1 = Instant::now();
    let init = json!({ "sessionId": "test-session", "imageBase": format!("0x{:x}", t.image_base) });
    let info = h.rt.host().attach_info(pid, h.rt.agent_js(), init).await.expect("attach");
    let attach = t1.elapsed();
    assert_eq!(info["pid"], json!(pid), "init info: {info}");
    assert_ne!(info["slide"], json!("0x0"), "a PIE target is loaded at a random base: {info}");
    println!("[timing] {args:?}: spawn {spawn:?}, attach+load+init {attach:?}");
    (pid, spawn, attach)
}

/// Tests that count every event turn sampling off: on a slow machine (CI's 2 cores) a JS-path
/// loop can outlast one 100 ms cost window, and cost sampling then rightly records 1 call in
/// 100 (2,085 of 2,500 calls arrived in one CI run). tracing_cost_sampling.rs tests sampling.
async fn sampling_off(h: &Harness, pid: u32) {
    let off = json!({ "hotCallsPerSec": 0, "costShare": 0 });
    h.rt.host().rpc(pid, "tracingConfig", off).await.expect("tracingConfig");
}

fn add_hook(t: &Target, arg_count: u32) -> Value {
    json!([{ "action": "add", "functions": [{ "id": 1, "address": format!("0x{:x}", t.add), "name": "add", "argCount": arg_count }] }])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawn_output_hooks_remove_kill() {
    let t = build_target();
    let mut h = Harness::start().await;
    let (pid, spawn, attach) = spawn_attached(&h, &t, &[]).await;

    let t_resume = Instant::now();
    h.rt.host().resume(pid).await.expect("resume");
    h.wait_until("hello on stdout", Duration::from_secs(10), |evs| output_text(evs, pid, 1).contains("hello stdout"))
        .await;
    let first_output = t_resume.elapsed();
    h.wait_until("hello on stderr", Duration::from_secs(10), |evs| output_text(evs, pid, 2).contains("hello stderr"))
        .await;
    assert!(!output_text(&h.seen, pid, 1).contains("hello stderr"), "stderr text leaked into fd 1");
    assert!(!output_text(&h.seen, pid, 2).contains("hello stdout"), "stdout text leaked into fd 2");
    assert_eq!(agent_messages(&h.seen, pid, "agent_loaded").len(), 1);
    assert_eq!(agent_messages(&h.seen, pid, "initialized")[0]["sessionId"], "test-session");
    println!("[timing] spawn {spawn:?}, attach+load+init {attach:?}, resume to first output {first_output:?}");

    // Hook `add` (static address + ASLR slide), plus two that must fail without crashing.
    let t_hook = Instant::now();
    let reply = h
        .rt
        .host()
        .rpc(
            pid,
            "hooks",
            json!([{ "action": "add", "functions": [
                { "id": 1, "address": format!("0x{:x}", t.add), "name": "add", "argCount": 2 },
                { "id": 2, "address": "0x10", "name": "in_elf_header" },
                { "id": 3, "address": "not-hex", "name": "garbage" },
            ] }]),
        )
        .await
        .expect("hooks add");
    println!("[timing] hooks add {:?}: {reply}", t_hook.elapsed());
    assert_eq!(reply["activeCount"], 1);
    assert_eq!(reply["installed"], json!([1]));
    let failed: HashSet<u64> = reply["failed"].as_array().unwrap().iter().map(|f| f["id"].as_u64().unwrap()).collect();
    assert_eq!(failed, HashSet::from([2, 3]), "{reply}");
    assert!(reply["failed"][0]["error"].as_str().unwrap().contains("not executable"), "{reply}");

    // Re-adding is a no-op.
    let again = h.rt.host().rpc(pid, "hooks", add_hook(&t, 2)).await.unwrap();
    assert_eq!(again["activeCount"], 1, "{again}");

    let t_events = Instant::now();
    h.wait_until("40 add calls traced", Duration::from_secs(10), |evs| {
        trace_events(evs, pid).iter().filter(|e| e["k"] == "exit").count() >= 40
    })
    .await;
    println!("[timing] hooks reply to 40 traced calls {:?}", t_events.elapsed());

    let evs = trace_events(&h.seen, pid);
    let mut enters: HashMap<u64, &Value> = HashMap::new();
    let mut checked = 0;
    let mut last_ts = 0.0;
    for e in &evs {
        assert_eq!(e["fn"], 1);
        assert_eq!(e["tid"], json!(pid), "single-threaded target: tid == pid");
        assert!(e["parent"].is_null(), "add calls nothing hooked: {e}");
        let ts = e["ts"].as_f64().unwrap();
        assert!(ts >= last_ts, "timestamps go backwards: {e}");
        last_ts = ts;
        let call = e["call"].as_u64().unwrap();
        match e["k"].as_str().unwrap() {
            "enter" => {
                let args = e["args"].as_array().unwrap();
                assert_eq!(args.len(), 2);
                let (a, b) = (hex(&args[0]), hex(&args[1]));
                assert_eq!(b, 2 * a + 1, "args of add(i, 2i+1): {e}");
                enters.insert(call, e);
            }
            "exit" => {
                let Some(enter) = enters.get(&call) else { continue };
                let a = hex(&enter["args"][0]);
                assert_eq!(hex(&e["ret"]), 3 * a + 1, "add({a}, {}) returned {e}", 2 * a + 1);
                let dur = e["dur"].as_f64().unwrap();
                assert!((0.0..1e9).contains(&dur), "duration {dur}");
                assert_eq!(dur, ts - enter["ts"].as_f64().unwrap());
                checked += 1;
            }
            k => panic!("unknown kind {k}"),
        }
    }
    assert!(checked >= 40, "checked {checked} enter/exit pairs");
    // Time: the agent's clock is CLOCK_MONOTONIC, like ours.
    let now = mono_ns();
    assert!(last_ts <= now && now - last_ts < 5e9, "agent ts {last_ts} vs daemon monotonic {now}");

    // Remove: after the reply, no new call may start being traced.
    let reply = h
        .rt
        .host()
        .rpc(pid, "hooks", json!([{ "action": "remove", "functions": [{ "id": 1, "address": "0x0", "name": "add" }] }]))
        .await
        .expect("hooks remove");
    assert_eq!(reply["activeCount"], 0, "{reply}");
    assert_eq!(reply["removed"], json!([1]), "{reply}");
    // The reply follows every event flushed before it, so the channel already holds them.
    while let Ok(ev) = h.rx.try_recv() {
        h.seen.push(ev);
    }
    let enters_before = count_enters(&h.seen, pid);
    let ticks_before = output_text(&h.seen, pid, 1).matches("tick").count();
    h.collect_for(Duration::from_millis(400)).await;
    assert_eq!(count_enters(&h.seen, pid), enters_before, "enter events after hooks were removed");
    assert!(output_text(&h.seen, pid, 1).matches("tick").count() > ticks_before, "target stopped running");

    let status = h.rt.host().rpc(pid, "status", Value::Null).await.unwrap();
    assert_eq!(status["activeCount"], 0, "{status}");

    // Kill: the session ends.
    h.rt.host().kill(pid).await.expect("kill");
    h.wait_until("Detached after kill", Duration::from_secs(10), |evs| detached(evs, pid).is_some()).await;
    println!("kill -> detached reason {:?}", detached(&h.seen, pid).unwrap());
    let err = h.rt.host().rpc(pid, "status", Value::Null).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::ProcessExited, "{err}");
    // Killing again is harmless.
    h.rt.host().kill(pid).await.expect("second kill");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_at_exit_are_drained_and_exit_code_reported() {
    let t = build_target();
    let mut h = Harness::start().await;
    const N: usize = 2500;
    let (pid, _, _) = spawn_attached(&h, &t, &["burst", &N.to_string()]).await;
    sampling_off(&h, pid).await;
    let reply = h.rt.host().rpc(pid, "hooks", add_hook(&t, 2)).await.expect("hooks");
    assert_eq!(reply["installed"], json!([1]), "{reply}");
    let t0 = Instant::now();
    h.rt.host().resume(pid).await.unwrap();
    h.wait_until("detached at exit", Duration::from_secs(20), |evs| detached(evs, pid).is_some()).await;
    h.collect_for(Duration::from_millis(200)).await;
    let evs = trace_events(&h.seen, pid);
    let enters = evs.iter().filter(|e| e["k"] == "enter").count();
    let exits = evs.iter().filter(|e| e["k"] == "exit").count();
    println!("[timing] burst of {N} traced calls + exit: {:?}", t0.elapsed());
    assert_eq!((enters, exits), (N, N), "every event of a process that exits at once arrives");
    let calls: HashSet<u64> = evs.iter().map(|e| e["call"].as_u64().unwrap()).collect();
    assert_eq!(calls.len(), N, "call ids are unique");
    assert!(output_text(&h.seen, pid, 1).contains("burst done"));
    let exit = agent_messages(&h.seen, pid, "process_exit");
    assert_eq!(exit.len(), 1, "{exit:?}");
    assert_eq!(exit[0]["code"], 7);
    assert_eq!(detached(&h.seen, pid).unwrap(), "process-terminated");

    // Calls made after exit() began (atexit handlers, destructors) arrive too.
    let (pid, _, _) = spawn_attached(&h, &t, &["atexit"]).await;
    h.rt.host().rpc(pid, "hooks", add_hook(&t, 2)).await.unwrap();
    h.rt.host().resume(pid).await.unwrap();
    h.wait_until("atexit target exits", Duration::from_secs(20), |evs| detached(evs, pid).is_some()).await;
    h.collect_for(Duration::from_millis(100)).await;
    let evs = trace_events(&h.seen, pid);
    let args: Vec<u64> = evs.iter().filter(|e| e["k"] == "enter").map(|e| hex(&e["args"][0])).collect();
    assert_eq!(args, vec![1, 5], "the atexit handler's add(5, 6) is traced");
    let rets: Vec<u64> = evs.iter().filter(|e| e["k"] == "exit").map(|e| hex(&e["ret"])).collect();
    assert_eq!(rets, vec![2, 11]);
    assert!(agent_messages(&h.seen, pid, "sync").is_empty(), "sync is host-internal");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_input_and_detach_keeps_target_running() {
    let t = build_target();
    let mut h = Harness::start().await;

    // Input.
    let (pid, _, _) = spawn_attached(&h, &t, &["echo"]).await;
    h.rt.host().resume(pid).await.unwrap();
    h.wait_until("ready", Duration::from_secs(10), |evs| output_text(evs, pid, 1).contains("ready")).await;
    h.rt.host().input(pid, b"hello from strobe\n").await.expect("input");
    h.wait_until("echo", Duration::from_secs(10), |evs| output_text(evs, pid, 1).contains("got: hello from strobe"))
        .await;
    h.wait_until("echo exits", Duration::from_secs(10), |evs| detached(evs, pid).is_some()).await;
    assert_eq!(agent_messages(&h.seen, pid, "process_exit")[0]["code"], 0);

    // Detach drains and leaves the process running.
    let (pid, _, _) = spawn_attached(&h, &t, &[]).await;
    h.rt.host().rpc(pid, "hooks", add_hook(&t, 2)).await.unwrap();
    h.rt.host().resume(pid).await.unwrap();
    h.wait_until("traced calls", Duration::from_secs(10), |evs| count_enters(evs, pid) >= 10).await;
    h.rt.host().detach(pid).await.expect("detach");
    h.wait_until("Detached after detach", Duration::from_secs(10), |evs| detached(evs, pid).is_some()).await;
    println!("detach -> detached reason {:?}", detached(&h.seen, pid).unwrap());
    let enters = count_enters(&h.seen, pid);
    let ticks = output_text(&h.seen, pid, 1).matches("tick").count();
    h.collect_for(Duration::from_millis(400)).await;
    assert_eq!(count_enters(&h.seen, pid), enters, "no events after detach");
    assert!(output_text(&h.seen, pid, 1).matches("tick").count() > ticks, "target runs on after detach");
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("process still exists");
    assert!(!state.contains(") Z "), "target is a zombie: {state}");
    let err = h.rt.host().rpc(pid, "status", Value::Null).await.unwrap_err();
    assert!(err.message.contains("not attached"), "{err}");
    h.rt.host().kill(pid).await.expect("kill detached target");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawn_failures_are_clear() {
    let h = Harness::start().await;
    let err = h.rt.host().spawn(&["/nonexistent/strobe-target".into()], None, &[]).await.unwrap_err();
    println!("missing: {err}");
    assert_eq!(err.code, ErrorCode::FridaAttachFailed);
    assert!(err.message.contains("does not exist"), "{err}");
    assert!(err.message.contains("/nonexistent/strobe-target"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let not_exec = dir.path().join("data.txt");
    std::fs::write(&not_exec, "hi").unwrap();
    let err = h.rt.host().spawn(&[not_exec.display().to_string()], None, &[]).await.unwrap_err();
    println!("not executable: {err}");
    assert_eq!(err.code, ErrorCode::FridaAttachFailed);
    assert!(err.message.contains("not executable"), "{err}");

    let err = h.rt.host().attach(999_999_999, h.rt.agent_js(), json!({})).await.unwrap_err();
    println!("attach to missing pid: {err}");
    assert!(matches!(err.code, ErrorCode::FridaAttachFailed | ErrorCode::ProcessExited), "{err}");
    assert!(h.rt.host().is_alive());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_killed_from_outside() {
    let mut h = Harness::start().await;
    let t = Instant::now();
    h.rt.host().ping().await.expect("ping");
    println!("[timing] ping round trip {:?}", t.elapsed());
    let host_pid = h.rt.host().pid().unwrap();
    unsafe {
        libc::kill(host_pid as i32, libc::SIGKILL);
    }
    h.wait_until("HostExited", Duration::from_secs(10), |evs| evs.iter().any(|e| matches!(e, HostEvent::HostExited { .. })))
        .await;
    let status = h.seen.iter().find_map(|e| match e {
        HostEvent::HostExited { status } => Some(status.clone()),
        _ => None,
    });
    println!("host exited: {status:?}");
    assert!(status.unwrap().contains("signal"), "status names the signal");
    assert!(!h.rt.host().is_alive());
    let err = tokio::time::timeout(Duration::from_secs(5), h.rt.host().ping()).await.expect("no hang").unwrap_err();
    println!("after death: {err}");
    assert!(err.message.contains("not running"), "{err}");
    let err = h.rt.host().spawn(&["/bin/true".into()], None, &[]).await.unwrap_err();
    assert!(err.message.contains("not running"), "{err}");
}

fn mono_ns() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_thread_call_stacks_give_parents() {
    let t = build_target();
    let mut h = Harness::start().await;
    let (pid, _, _) = spawn_attached(&h, &t, &["threads"]).await;
    sampling_off(&h, pid).await;
    let reply = h
        .rt
        .host()
        .rpc(
            pid,
            "hooks",
            json!([{ "action": "add", "functions": [
                { "id": 1, "address": format!("0x{:x}", t.add), "name": "add", "argCount": 2 },
                { "id": 2, "address": format!("0x{:x}", t.twice), "name": "twice", "argCount": 1 },
            ] }]),
        )
        .await
        .unwrap();
    assert_eq!(reply["activeCount"], 2, "{reply}");
    h.rt.host().resume(pid).await.unwrap();
    h.wait_until("threads exit", Duration::from_secs(20), |evs| detached(evs, pid).is_some()).await;
    let evs = trace_events(&h.seen, pid);
    // call id -> (fn, tid, args[0])
    let mut calls: HashMap<u64, (u64, u64, u64)> = HashMap::new();
    let mut tids = HashSet::new();
    let mut add_enters = 0;
    for e in evs.iter().filter(|e| e["k"] == "enter") {
        let (call, f, tid) = (e["call"].as_u64().unwrap(), e["fn"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
        calls.insert(call, (f, tid, hex(&e["args"][0])));
        tids.insert(tid);
        if f == 1 {
            add_enters += 1;
            let parent = e["parent"].as_u64().unwrap_or_else(|| panic!("add called from twice has a parent: {e}"));
            let (pf, ptid, px) = calls[&parent];
            assert_eq!((pf, ptid), (2, tid), "parent is the twice() call on the same thread: {e}");
            assert_eq!(hex(&e["args"][0]), px, "add(x, x) under twice(x)");
        } else {
            assert!(e["parent"].is_null(), "{e}");
        }
    }
    assert_eq!(add_enters, 400, "2 threads x 200 calls");
    assert_eq!(tids.len(), 2, "two worker threads: {tids:?}");
    assert!(!tids.contains(&(pid as u64)), "the main thread calls nothing hooked");
    for e in evs.iter().filter(|e| e["k"] == "exit" && e["fn"] == 2) {
        let x = calls[&e["call"].as_u64().unwrap()].2;
        assert_eq!(hex(&e["ret"]), 2 * x, "{e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forked_child_does_not_hang_at_exit() {
    let t = build_target();
    let mut h = Harness::start().await;
    let (pid, _, _) = spawn_attached(&h, &t, &["fork"]).await;
    h.rt.host().rpc(pid, "hooks", add_hook(&t, 2)).await.unwrap();
    h.rt.host().resume(pid).await.unwrap();
    h.wait_until("parent exits", Duration::from_secs(20), |evs| detached(evs, pid).is_some()).await;
    assert!(output_text(&h.seen, pid, 1).contains("child status 5"), "{}", output_text(&h.seen, pid, 1));
    let exits = agent_messages(&h.seen, pid, "process_exit");
    assert_eq!(exits.len(), 1, "only the parent reports its exit: {exits:?}");
    assert_eq!(exits[0]["code"], 0);
    // The parent's calls are traced (the child's are not: no child gating yet).
    let args: Vec<u64> = trace_events(&h.seen, pid)
        .iter()
        .filter(|e| e["k"] == "enter")
        .map(|e| hex(&e["args"][0]))
        .collect();
    assert_eq!(args, vec![1, 3]);
}

fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(s) => s.contains(") Z ") || s.contains(") X "),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_shutdown_kills_what_it_spawned() {
    let t = build_target();
    let mut h = Harness::start().await;
    let (running, _, _) = spawn_attached(&h, &t, &[]).await;
    h.rt.host().resume(running).await.unwrap();
    h.wait_until("running target prints", Duration::from_secs(10), |evs| output_text(evs, running, 1).contains("tick"))
        .await;
    let suspended = h.rt.host().spawn(&[t.path.display().to_string()], None, &[]).await.unwrap();
    assert!(!process_gone(running) && !process_gone(suspended));
    let status = h.rt.host().shutdown(Duration::from_secs(10)).await;
    println!("host shutdown: {status:?}");
    assert!(status.unwrap().contains("exit status: 0"));
    let deadline = Instant::now() + Duration::from_secs(5);
    while !(process_gone(running) && process_gone(suspended)) {
        assert!(Instant::now() < deadline, "spawned targets survived the host");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(h.rt.host().ping().await.is_err());
}

/// Throughput of the JSON event path (agent -> host -> Rust). Run with `--ignored`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn bench_event_throughput() {
    let t = build_target();
    let mut h = Harness::start().await;
    const N: usize = 200_000;
    let (pid, _, _) = spawn_attached(&h, &t, &["burst", &N.to_string()]).await;
    h.rt.host().rpc(pid, "hooks", add_hook(&t, 2)).await.unwrap();
    let t0 = Instant::now();
    h.rt.host().resume(pid).await.unwrap();
    h.wait_until("exit", Duration::from_secs(120), |evs| detached(evs, pid).is_some()).await;
    let dt = t0.elapsed();
    let n = trace_events(&h.seen, pid).len();
    println!("[bench] {N} traced calls, {n} events in {dt:?}: {:.0} events/s, {:.2} µs per call", n as f64 / dt.as_secs_f64(), dt.as_secs_f64() * 1e6 / N as f64);
    assert_eq!(n, 2 * N);
}
