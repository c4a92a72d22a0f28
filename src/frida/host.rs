//! The Frida host child process (`agent/host.py`, run by the venv's Python) and the framed
//! protocol over its stdin/stdout:
//!
//! ```text
//! u32 LE header_len, u32 LE payload_len, header (UTF-8 JSON object), payload (raw bytes)
//! ```
//!
//! Requests carry `id` and `op`; replies echo the `id` with `ok`. Frames without an `id` are
//! events (`output`, `message`, `detached`, ...), turned into [`HostEvent`]s. The host's stderr
//! is its log, forwarded to `tracing` (target `strobe::frida::host`).

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::{mpsc, oneshot, watch};

use crate::error::{ErrorCode, Result, StrobeError};

/// The host program, embedded so the binary is self-contained.
pub const HOST_SCRIPT: &str = include_str!("../../agent/host.py");

/// Default time limit for a request (spawn, attach, RPC ...). Generous: it only exists so a
/// wedged target cannot hang a caller forever.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// How long `start` waits for the host's `ready` frame (Python start + `import frida`).
pub const START_TIMEOUT: Duration = Duration::from_secs(60);

const MAX_HEADER: u32 = 64 << 20;
const MAX_PAYLOAD: u32 = 1 << 30;
const STDERR_TAIL: usize = 30;

/// Something the host reported without being asked.
#[derive(Debug, Clone, PartialEq)]
pub enum HostEvent {
    /// Target output from the device `output` signal (fd 1 = stdout, 2 = stderr). An empty
    /// `data` means that stream was closed.
    Output { pid: u32, fd: u8, data: Vec<u8> },
    /// The agent's `send(message, data)`: `message` is the agent's payload (e.g.
    /// `{"type":"events","events":[...]}`), `data` its binary part if any. Script errors
    /// arrive as `{"type":"script_error",...}`, console output as `{"type":"log",...}`.
    AgentMessage { pid: u32, message: Value, data: Option<Vec<u8>> },
    /// The Frida session for `pid` ended (`process-terminated`, `application-requested`, ...).
    Detached { pid: u32, reason: String },
    /// A fork (`origin` "fork", new `pid`) or exec ("exec", same pid, new image at `path`) of
    /// an attached process. It is suspended until someone resumes it.
    ChildAdded { pid: u32, parent_pid: u32, origin: String, path: Option<String> },
    /// How `pid` ended, when the host could still see it (best effort, before `Detached`):
    /// an exit code, or the number of the signal that killed it.
    ExitStatus { pid: u32, code: Option<i32>, signal: Option<i32> },
    /// The host process is gone; every pending and later request fails.
    HostExited { status: String },
}

type Reply = Result<(Value, Vec<u8>)>;

struct Pending {
    waiters: HashMap<u64, oneshot::Sender<Reply>>,
    /// Set once the host is gone: the reason every new request fails with.
    closed: Option<String>,
}

/// A running Frida host. `Send + Sync`; share it in an `Arc`. Dropping it closes the host's
/// stdin, upon which the host detaches, kills the processes it spawned, and exits.
pub struct FridaHost {
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    pending: Arc<Mutex<Pending>>,
    next_id: AtomicU64,
    alive: Arc<AtomicBool>,
    pid: Option<u32>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    exited: watch::Receiver<Option<String>>,
    ready: Value,
}

impl std::fmt::Debug for FridaHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FridaHost").field("pid", &self.pid).field("alive", &self.is_alive()).finish()
    }
}

/// Write the embedded host script to `cache_dir/host-<hash>.py` (once per content) and
/// return its path.
pub fn host_script_path(cache_dir: &Path) -> Result<PathBuf> {
    let hash = hex16(&Sha256::digest(HOST_SCRIPT.as_bytes()));
    let path = cache_dir.join(format!("host-{hash}.py"));
    if path.is_file() {
        return Ok(path);
    }
    std::fs::create_dir_all(cache_dir)
        .map_err(|e| StrobeError::internal(format!("cannot create {}: {e}", cache_dir.display())))?;
    write_atomically(&path, HOST_SCRIPT.as_bytes())?;
    Ok(path)
}

pub(crate) fn hex16(digest: &[u8]) -> String {
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// Write `bytes` to a temporary file next to `path`, then rename it into place.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension(format!("tmp-{}-{}", std::process::id(), next_tmp_suffix()));
    std::fs::write(&tmp, bytes).map_err(|e| StrobeError::internal(format!("cannot write {}: {e}", tmp.display())))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        StrobeError::internal(format!("cannot rename {} to {}: {e}", tmp.display(), path.display()))
    })
}

fn next_tmp_suffix() -> u64 {
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// What an LLM can do when the agent did not answer (docs/performance.md, "Parked is not
/// enough": a hot JS logpoint on a loaded machine delays requests for a minute).
const RPC_TIMEOUT_HINT: &str = ". The change may still land later. A logpoint, breakpoint condition or JavaScript-path trace on a function that busy threads call nonstop can keep the agent from answering: see them with debug_session (action: status), give the logpoint a condition, or end the session with debug_session (action: stop)";

fn host_gone_error(reason: &str) -> StrobeError {
    StrobeError::internal(format!("the Frida host is not running ({reason}); start a new session to restart it"))
}

impl FridaHost {
    /// Start `python -u host_script` and wait for its `ready` frame. Events go to `events`.
    pub async fn start(python: &Path, host_script: &Path, events: mpsc::UnboundedSender<HostEvent>) -> Result<FridaHost> {
        let mut cmd = Command::new(python);
        cmd.arg("-u")
            .arg(host_script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .env("PYTHONUNBUFFERED", "1")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            // Not in our process group: a Ctrl-C at the terminal must not kill the host
            // behind the daemon's back. The host exits when its stdin closes.
            .process_group(0)
            .kill_on_drop(false);
        let mut child: Child = cmd.spawn().map_err(|e| {
            StrobeError::new(
                ErrorCode::FridaAttachFailed,
                format!("cannot start the Frida host ({} {}): {e}", python.display(), host_script.display()),
            )
        })?;
        let pid = child.id();
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");

        let pending = Arc::new(Mutex::new(Pending { waiters: HashMap::new(), closed: None }));
        let alive = Arc::new(AtomicBool::new(true));
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        let (exited_tx, exited_rx) = watch::channel(None);
        let (ready_tx, ready_rx) = oneshot::channel::<Value>();

        // stderr -> tracing, keeping the last lines for error messages.
        let stderr_done = {
            let tail = stderr_tail.clone();
            let (done_tx, done_rx) = oneshot::channel::<()>();
            tokio::spawn(async move {
                let mut lines = BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    if line.starts_with("strobe-host: op ") || line.contains("Traceback") {
                        tracing::warn!(target: "strobe::frida::host", "{line}");
                    } else {
                        tracing::debug!(target: "strobe::frida::host", "{line}");
                    }
                    let mut t = tail.lock().unwrap();
                    if t.len() == STDERR_TAIL {
                        t.pop_front();
                    }
                    t.push_back(line);
                }
                let _ = done_tx.send(());
            });
            done_rx
        };

        // stdout -> replies and events; at EOF, fail everything and report the exit.
        {
            let pending = pending.clone();
            let alive = alive.clone();
            let tail = stderr_tail.clone();
            tokio::spawn(async move {
                let mut ready_tx = Some(ready_tx);
                let mut reader = BufReader::with_capacity(1 << 16, stdout);
                let end = loop {
                    match read_frame(&mut reader).await {
                        Ok(Some((header, payload))) => {
                            dispatch(header, payload, &pending, &events, &mut ready_tx);
                        }
                        Ok(None) => break "its output closed".to_string(),
                        Err(e) => break format!("protocol error: {e}"),
                    }
                };
                alive.store(false, Ordering::SeqCst);
                // Collect the exit status (the process normally exits right after its stdout).
                let status = match tokio::time::timeout(Duration::from_secs(5), child.wait()).await {
                    Ok(Ok(s)) => s.to_string(),
                    Ok(Err(e)) => format!("unknown exit status: {e}"),
                    Err(_) => {
                        let _ = child.start_kill();
                        let _ = child.wait().await;
                        format!("{end}; killed")
                    }
                };
                // Give the stderr reader a moment to capture the last words.
                let _ = tokio::time::timeout(Duration::from_millis(500), stderr_done).await;
                let last = tail.lock().unwrap().iter().rev().take(5).rev().cloned().collect::<Vec<_>>().join(" | ");
                let status = if last.is_empty() { status } else { format!("{status}; last log: {last}") };
                tracing::debug!(target: "strobe::frida::host", "host exited: {status} ({end})");
                let waiters = {
                    let mut p = pending.lock().unwrap();
                    p.closed = Some(format!("the host exited: {status}"));
                    std::mem::take(&mut p.waiters)
                };
                for (_, w) in waiters {
                    let _ = w.send(Err(host_gone_error(&format!("it exited: {status}"))));
                }
                drop(ready_tx);
                let _ = exited_tx.send(Some(status.clone()));
                let _ = events.send(HostEvent::HostExited { status });
            });
        }

        let mut host = FridaHost {
            stdin: tokio::sync::Mutex::new(Some(stdin)),
            pending,
            next_id: AtomicU64::new(1),
            alive,
            pid,
            stderr_tail,
            exited: exited_rx,
            ready: Value::Null,
        };
        let ready = match tokio::time::timeout(START_TIMEOUT, ready_rx).await {
            Ok(Ok(v)) => v,
            Ok(Err(_)) => {
                // The host exited before it was ready; wait for the status to be recorded.
                let mut rx = host.exited.clone();
                let _ = tokio::time::timeout(Duration::from_secs(6), rx.wait_for(|s| s.is_some())).await;
                let status = host.exited.borrow().clone().unwrap_or_else(|| "unknown".into());
                let log = host.stderr_tail.lock().unwrap().iter().cloned().collect::<Vec<_>>().join("\n");
                let hint = if log.contains("No module named") || log.contains("cannot import frida") {
                    " The Python environment lacks the frida package: delete the python-frida-* directory in the Strobe cache (STROBE_CACHE_DIR) to recreate it."
                } else {
                    ""
                };
                return Err(StrobeError::new(
                    ErrorCode::FridaAttachFailed,
                    format!("the Frida host exited during start-up ({status}).{hint}\n{log}"),
                ));
            }
            Err(_) => {
                host.close_stdin().await;
                return Err(StrobeError::new(
                    ErrorCode::FridaAttachFailed,
                    format!("the Frida host did not become ready within {} s", START_TIMEOUT.as_secs()),
                ));
            }
        };
        tracing::debug!(target: "strobe::frida::host", "host ready: {ready}");
        host.ready = ready;
        Ok(host)
    }

    /// The `ready` frame: `{frida, python, pid, protocol}`.
    pub fn info(&self) -> &Value {
        &self.ready
    }

    /// The host's process id (for diagnostics and tests).
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }

    /// The last lines the host wrote to stderr.
    pub fn recent_log(&self) -> Vec<String> {
        self.stderr_tail.lock().unwrap().iter().cloned().collect()
    }

    /// Send a request and wait (up to [`DEFAULT_TIMEOUT`]) for its reply: the reply header
    /// (with `id` and `ok`) and payload. A failed reply becomes an error with the host's
    /// `code` if it gave one, else `INTERNAL_ERROR`.
    pub async fn request(&self, header: Value, payload: Option<Vec<u8>>) -> Result<(Value, Vec<u8>)> {
        self.request_timeout(header, payload, DEFAULT_TIMEOUT).await
    }

    pub async fn request_timeout(&self, header: Value, payload: Option<Vec<u8>>, timeout: Duration) -> Result<(Value, Vec<u8>)> {
        let Value::Object(mut header) = header else {
            return Err(StrobeError::internal("Frida host request header must be a JSON object"));
        };
        let op = header.get("op").and_then(Value::as_str).unwrap_or("?").to_string();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        header.insert("id".into(), json!(id));
        let (tx, rx) = oneshot::channel();
        {
            let mut p = self.pending.lock().unwrap();
            if let Some(reason) = &p.closed {
                return Err(host_gone_error(reason));
            }
            p.waiters.insert(id, tx);
        }
        let header_bytes = serde_json::to_vec(&Value::Object(header))
            .map_err(|e| StrobeError::internal(format!("cannot encode a Frida host request: {e}")))?;
        let payload = payload.unwrap_or_default();
        if let Err(e) = self.write_frame(&header_bytes, &payload).await {
            self.pending.lock().unwrap().waiters.remove(&id);
            return Err(e);
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) => Err(host_gone_error("it exited")),
            Err(_) => {
                self.pending.lock().unwrap().waiters.remove(&id);
                // An agent call (rpc) says what the LLM can do about it.
                let next = if op == "rpc" { RPC_TIMEOUT_HINT } else { "" };
                Err(StrobeError::internal(format!(
                    "the Frida host did not answer '{op}' within {} s{next}",
                    timeout.as_secs_f64()
                )))
            }
        }
    }

    async fn write_frame(&self, header: &[u8], payload: &[u8]) -> Result<()> {
        if header.len() as u64 > MAX_HEADER as u64 || payload.len() as u64 > MAX_PAYLOAD as u64 {
            return Err(StrobeError::internal("Frida host request too large"));
        }
        let mut buf = Vec::with_capacity(8 + header.len() + payload.len());
        buf.extend_from_slice(&(header.len() as u32).to_le_bytes());
        buf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        buf.extend_from_slice(header);
        buf.extend_from_slice(payload);
        let mut guard = self.stdin.lock().await;
        let Some(stdin) = guard.as_mut() else {
            return Err(host_gone_error("it was shut down"));
        };
        let res = async {
            stdin.write_all(&buf).await?;
            stdin.flush().await
        }
        .await;
        res.map_err(|e| {
            let reason = self.pending.lock().unwrap().closed.clone().unwrap_or_else(|| format!("write failed: {e}"));
            host_gone_error(&reason)
        })
    }

    async fn close_stdin(&self) {
        self.stdin.lock().await.take();
    }

    /// Close the host's stdin (it detaches, kills what it spawned, and exits) and wait up to
    /// `timeout` for it to exit. Returns the exit status if it exited in time.
    pub async fn shutdown(&self, timeout: Duration) -> Option<String> {
        self.close_stdin().await;
        let mut rx = self.exited.clone();
        let done = tokio::time::timeout(timeout, rx.wait_for(|s| s.is_some())).await.is_ok();
        if done {
            self.exited.borrow().clone()
        } else {
            None
        }
    }

    /// Spawn `argv` suspended, with stdout/stderr piped to [`HostEvent::Output`]. `env` is the
    /// complete environment of the new process; an empty slice means the host's own
    /// (= the daemon's). A bare `argv[0]` is looked up in `PATH` (from `env` when given).
    pub async fn spawn(&self, argv: &[String], cwd: Option<&Path>, env: &[(String, String)]) -> Result<u32> {
        let program = argv.first().cloned().unwrap_or_default();
        if program.is_empty() {
            return Err(StrobeError::validation("spawn: argv is empty"));
        }
        let mut header = json!({ "op": "spawn", "argv": argv });
        if let Some(cwd) = cwd {
            header["cwd"] = json!(cwd.to_string_lossy());
        }
        if !env.is_empty() {
            let map: serde_json::Map<String, Value> = env.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
            header["env"] = Value::Object(map);
        }
        let (reply, _) = self.request(header, None).await.map_err(|e| {
            attach_failed(e, |m| {
                format!("Failed to spawn '{program}': {m}. Check the path exists and is executable.")
            })
        })?;
        reply_pid(&reply)
    }

    /// Attach to `pid`, load the agent (`agent_js`, compiled), and call its `init(init)`
    /// export (`init` = `{sessionId, imageBase}`).
    pub async fn attach(&self, pid: u32, agent_js: &str, init: Value) -> Result<()> {
        self.attach_info(pid, agent_js, init).await.map(|_| ())
    }

    /// [`attach`](Self::attach), returning what the agent's `init` returned:
    /// `{pid, arch, platform, mainModule: {name, path, base, size}, slide, monotonicNs}`.
    pub async fn attach_info(&self, pid: u32, agent_js: &str, init: Value) -> Result<Value> {
        let header = json!({ "op": "attach", "pid": pid, "init": init });
        let (mut reply, _) = self.request(header, Some(agent_js.as_bytes().to_vec())).await.map_err(|e| {
            attach_failed(e, |m| {
                format!(
                    "Failed to attach to pid {pid}: {m}. Check the process is still running, and ptrace permissions: /proc/sys/kernel/yama/ptrace_scope (1 allows only descendants; Strobe's spawned targets qualify)."
                )
            })
        })?;
        Ok(reply.get_mut("info").map(Value::take).unwrap_or(Value::Null))
    }

    /// Call the agent's RPC export `method`. `args`: a JSON array is spread into positional
    /// arguments, `null` means none, anything else is the single argument.
    pub async fn rpc(&self, pid: u32, method: &str, args: Value) -> Result<Value> {
        let header = json!({ "op": "rpc", "pid": pid, "method": method, "args": args });
        let (mut reply, _) = self.request(header, None).await.map_err(|e| {
            StrobeError::new(e.code, format!("agent call '{method}' in pid {pid} failed: {}", e.message))
        })?;
        Ok(reply.get_mut("result").map(Value::take).unwrap_or(Value::Null))
    }

    pub async fn resume(&self, pid: u32) -> Result<()> {
        self.simple("resume", pid).await
    }

    /// Kill `pid`. Killing a process that is already gone succeeds.
    pub async fn kill(&self, pid: u32) -> Result<()> {
        self.simple("kill", pid).await
    }

    /// Drain the agent (its `dispose` export), unload it and detach; the process keeps running.
    pub async fn detach(&self, pid: u32) -> Result<()> {
        self.simple("detach", pid).await
    }

    /// Post a message to the agent's `recv()` (e.g. `{type: "resume-<tid>"}` wakes a paused thread).
    pub async fn post(&self, pid: u32, message: Value) -> Result<()> {
        self.request(json!({ "op": "post", "pid": pid, "message": message }), None).await.map(|_| ())
    }

    /// Write `data` to the target's stdin (there is no way to send EOF).
    pub async fn input(&self, pid: u32, data: &[u8]) -> Result<()> {
        self.request(json!({ "op": "input", "pid": pid }), Some(data.to_vec()))
            .await
            .map(|_| ())
            .map_err(|e| StrobeError::new(e.code, format!("cannot write to the stdin of pid {pid}: {}", e.message)))
    }

    /// Compile a TypeScript agent with `frida.Compiler` (full type check); returns the bundle.
    pub async fn compile(&self, project_root: &Path, entry: &str) -> Result<String> {
        let header = json!({ "op": "compile", "project_root": project_root.to_string_lossy(), "entry": entry });
        let (_, payload) = self
            .request(header, None)
            .await
            .map_err(|e| StrobeError::new(e.code, format!("agent compilation failed: {}", e.message)))?;
        String::from_utf8(payload).map_err(|_| StrobeError::internal("compiled agent is not UTF-8"))
    }

    pub async fn ping(&self) -> Result<Value> {
        self.request(json!({ "op": "ping" }), None).await.map(|(h, _)| h)
    }

    async fn simple(&self, op: &str, pid: u32) -> Result<()> {
        self.request(json!({ "op": op, "pid": pid }), None)
            .await
            .map(|_| ())
            .map_err(|e| StrobeError::new(e.code, format!("{op} pid {pid} failed: {}", e.message)))
    }
}

impl Drop for FridaHost {
    fn drop(&mut self) {
        // Dropping stdin closes the pipe; the host cleans up and exits on EOF.
        if let Ok(mut g) = self.stdin.try_lock() {
            g.take();
        }
    }
}

/// Spawn/attach failures are `FRIDA_ATTACH_FAILED` (unless the host already named a more
/// precise code, e.g. `PROCESS_EXITED`), except when the host itself is gone.
fn attach_failed(e: StrobeError, message: impl FnOnce(&str) -> String) -> StrobeError {
    let code = if e.code == ErrorCode::InternalError && !e.message.contains("Frida host is not running") {
        ErrorCode::FridaAttachFailed
    } else {
        e.code
    };
    StrobeError::new(code, message(&e.message))
}

fn reply_pid(reply: &Value) -> Result<u32> {
    reply
        .get("pid")
        .and_then(Value::as_u64)
        .and_then(|p| u32::try_from(p).ok())
        .ok_or_else(|| StrobeError::internal(format!("Frida host spawn reply without pid: {reply}")))
}

async fn read_frame<R: AsyncRead + Unpin>(r: &mut R) -> std::io::Result<Option<(Value, Vec<u8>)>> {
    let mut head = [0u8; 8];
    match r.read_exact(&mut head).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let hlen = u32::from_le_bytes(head[0..4].try_into().unwrap());
    let plen = u32::from_le_bytes(head[4..8].try_into().unwrap());
    if hlen > MAX_HEADER || plen > MAX_PAYLOAD {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, format!("frame too large ({hlen}, {plen})")));
    }
    let mut header = vec![0u8; hlen as usize];
    r.read_exact(&mut header).await?;
    let mut payload = vec![0u8; plen as usize];
    r.read_exact(&mut payload).await?;
    let header: Value = serde_json::from_slice(&header)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("bad frame header: {e}")))?;
    Ok(Some((header, payload)))
}

fn dispatch(
    header: Value,
    payload: Vec<u8>,
    pending: &Mutex<Pending>,
    events: &mpsc::UnboundedSender<HostEvent>,
    ready_tx: &mut Option<oneshot::Sender<Value>>,
) {
    if let Some(id) = header.get("id").and_then(Value::as_u64) {
        let waiter = pending.lock().unwrap().waiters.remove(&id);
        let Some(waiter) = waiter else {
            tracing::debug!(target: "strobe::frida::host", "reply to abandoned request {id}");
            return;
        };
        let reply = if header.get("ok").and_then(Value::as_bool) == Some(true) {
            Ok((header, payload))
        } else {
            let text = header.get("error").and_then(Value::as_str).unwrap_or("unknown error").to_string();
            let code = header
                .get("code")
                .and_then(Value::as_str)
                .and_then(ErrorCode::parse)
                .unwrap_or(ErrorCode::InternalError);
            Err(StrobeError::new(code, text))
        };
        let _ = waiter.send(reply);
        return;
    }
    let pid = header.get("pid").and_then(Value::as_u64).and_then(|p| u32::try_from(p).ok()).unwrap_or(0);
    let event = match header.get("event").and_then(Value::as_str) {
        Some("output") => {
            let fd = header.get("fd").and_then(Value::as_u64).unwrap_or(1) as u8;
            HostEvent::Output { pid, fd, data: payload }
        }
        Some("message") => {
            let has_data = header.get("has_data").and_then(Value::as_bool).unwrap_or(!payload.is_empty());
            let mut message = match header {
                Value::Object(mut m) => m.remove("message").unwrap_or(Value::Null),
                _ => Value::Null,
            };
            expand_events(&mut message);
            HostEvent::AgentMessage { pid, message, data: has_data.then_some(payload) }
        }
        Some("raw_message") => {
            let raw_len = header.get("raw_len").and_then(Value::as_u64).unwrap_or(payload.len() as u64) as usize;
            let has_data = header.get("has_data").and_then(Value::as_bool).unwrap_or(false);
            if raw_len > payload.len() {
                tracing::warn!(target: "strobe::frida::host", "raw_message with raw_len {raw_len} > payload {}", payload.len());
                return;
            }
            let mut message = match serde_json::from_slice::<Value>(&payload[..raw_len]) {
                Ok(raw) => frida_message_body(raw),
                Err(e) => {
                    tracing::warn!(target: "strobe::frida::host", "undecodable agent message from pid {pid}: {e}");
                    return;
                }
            };
            expand_events(&mut message);
            let data = has_data.then(|| payload[raw_len..].to_vec());
            HostEvent::AgentMessage { pid, message, data }
        }
        Some("detached") => {
            let reason = header.get("reason").and_then(Value::as_str).unwrap_or("unknown").to_string();
            if let Some(crash) = header.get("crash").filter(|c| !c.is_null()) {
                tracing::warn!(target: "strobe::frida::host", "pid {pid} crashed: {crash}");
            }
            HostEvent::Detached { pid, reason }
        }
        Some("child_added") => HostEvent::ChildAdded {
            pid,
            parent_pid: header.get("parent_pid").and_then(Value::as_u64).and_then(|p| u32::try_from(p).ok()).unwrap_or(0),
            origin: header.get("origin").and_then(Value::as_str).unwrap_or("unknown").to_string(),
            path: header.get("path").and_then(Value::as_str).map(str::to_string),
        },
        Some("exit_status") => HostEvent::ExitStatus {
            pid,
            code: header.get("code").and_then(Value::as_i64).map(|c| c as i32),
            signal: header.get("signal").and_then(Value::as_i64).map(|c| c as i32),
        },
        Some("ready") => {
            if let Some(tx) = ready_tx.take() {
                let _ = tx.send(header);
            }
            return;
        }
        other => {
            tracing::debug!(target: "strobe::frida::host", "unhandled host event {other:?}: {header}");
            return;
        }
    };
    let _ = events.send(event);
}

/// Frida's message (`{"type":"send","payload":...}`, `{"type":"log",...}`,
/// `{"type":"error",...}`) -> what [`HostEvent::AgentMessage`] carries.
fn frida_message_body(raw: Value) -> Value {
    let Value::Object(mut m) = raw else { return json!({ "type": "frida_unknown", "raw": raw }) };
    match m.get("type").and_then(Value::as_str) {
        Some("send") => m.remove("payload").unwrap_or(Value::Null),
        Some("log") => json!({
            "type": "log",
            "level": m.remove("level").unwrap_or(Value::Null),
            "message": m.remove("payload").unwrap_or(Value::Null),
        }),
        Some("error") => json!({
            "type": "script_error",
            "description": m.remove("description").unwrap_or(Value::Null),
            "stack": m.remove("stack").unwrap_or(Value::Null),
            "fileName": m.remove("fileName").unwrap_or(Value::Null),
            "lineNumber": m.remove("lineNumber").unwrap_or(Value::Null),
        }),
        other => {
            let t = format!("frida_{}", other.unwrap_or("unknown"));
            json!({ "type": t, "raw": Value::Object(m) })
        }
    }
}

/// The agent sends trace events as arrays (`format: "array-v1"`, much cheaper to serialize
/// in the target); expand them in place into the documented objects:
///
/// ```text
/// [0, fn, call, parent, tid, ts, arg0, arg1, ...] -> {k:"enter", fn, call, parent, tid, ts, args:[...]}
/// [1, fn, call, parent, tid, ts, ret, dur]        -> {k:"exit",  fn, call, parent, tid, ts, ret, dur}
/// [2, tid, name]                                  -> {k:"thread", tid, name}
/// [3, fn, on, every, ts]                          -> {k:"sampling", fn, on, every, ts} (cost sampling)
/// [10, fn, call, parent, tid, ts, args, watch]     -> {k:"enter", .., args, watch}   (typed)
/// [11, fn, call, parent, tid, ts, ret, dur, watch, args?] -> {k:"exit", .., ret, dur, watch, args?} (typed;
///     args: pointer parameters read again at exit, `argumentsAtExit`)
/// ```
pub fn expand_events(message: &mut Value) {
    let Some(obj) = message.as_object_mut() else { return };
    if obj.get("type").and_then(Value::as_str) != Some("events") || obj.get("format").and_then(Value::as_str) != Some("array-v1") {
        return;
    }
    obj.remove("format");
    let Some(Value::Array(events)) = obj.get_mut("events") else { return };
    for ev in events.iter_mut() {
        let Value::Array(a) = ev else { continue };
        if a.len() == 3 && a[0].as_u64() == Some(2) {
            // [2, tid, name]: the thread's name from here on (agent/src/threads.ts).
            let name = a.pop().unwrap_or(Value::Null);
            let tid = a.pop().unwrap_or(Value::Null);
            *ev = json!({ "k": "thread", "tid": tid, "name": name });
            continue;
        }
        if a.len() == 5 && a[0].as_u64() == Some(3) {
            // [3, fn, on, every, ts]: cost sampling switched (agent/src/cost_sampling.ts).
            *ev = json!({ "k": "sampling", "fn": a[1], "on": a[2], "every": a[3], "ts": a[4] });
            continue;
        }
        if a.len() < 6 {
            continue;
        }
        let mut it = std::mem::take(a).into_iter();
        let kind = it.next().and_then(|k| k.as_u64());
        let mut m = serde_json::Map::with_capacity(8);
        m.insert("k".into(), json!(if matches!(kind, Some(0 | 10)) { "enter" } else { "exit" }));
        m.insert("fn".into(), it.next().unwrap_or(Value::Null));
        m.insert("call".into(), it.next().unwrap_or(Value::Null));
        m.insert("parent".into(), it.next().unwrap_or(Value::Null));
        m.insert("tid".into(), it.next().unwrap_or(Value::Null));
        m.insert("ts".into(), it.next().unwrap_or(Value::Null));
        if kind == Some(0) {
            m.insert("args".into(), Value::Array(it.collect()));
        } else if kind == Some(10) {
            // Typed records (agent/src/watches.ts): [10, .., args object, watch values].
            m.insert("args".into(), it.next().unwrap_or(Value::Null));
            m.insert("watch".into(), it.next().unwrap_or(Value::Null));
        } else if kind == Some(11) {
            // [11, .., ret, dur, watch values, pointer parameters at exit?]
            m.insert("ret".into(), it.next().unwrap_or(Value::Null));
            m.insert("dur".into(), it.next().unwrap_or(Value::Null));
            m.insert("watch".into(), it.next().unwrap_or(Value::Null));
            if let Some(args) = it.next().filter(|a| !a.is_null()) {
                m.insert("args".into(), args);
            }
        } else {
            m.insert("ret".into(), it.next().unwrap_or(Value::Null));
            m.insert("dur".into(), it.next().unwrap_or(Value::Null));
        }
        *ev = Value::Object(m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_array_events() {
        let mut m = json!({ "type": "events", "format": "array-v1", "events": [
            [0, 3, 10, null, 77, 1234.0, "0x1", "0x2"],
            [1, 3, 10, null, 77, 1300.0, "0x3", 66.0],
            [3, 3, 1, 100, 1400.0],
        ] });
        expand_events(&mut m);
        assert_eq!(
            m,
            json!({ "type": "events", "events": [
                { "k": "enter", "fn": 3, "call": 10, "parent": null, "tid": 77, "ts": 1234.0, "args": ["0x1", "0x2"] },
                { "k": "exit", "fn": 3, "call": 10, "parent": null, "tid": 77, "ts": 1300.0, "ret": "0x3", "dur": 66.0 },
                { "k": "sampling", "fn": 3, "on": 1, "every": 100, "ts": 1400.0 },
            ] })
        );
        assert_eq!(frida_message_body(json!({"type":"send","payload":{"type":"x"}})), json!({"type":"x"}));
        assert_eq!(
            frida_message_body(json!({"type":"log","level":"info","payload":"hi"})),
            json!({"type":"log","level":"info","message":"hi"})
        );
        assert_eq!(frida_message_body(json!({"type":"error","description":"Error: boom"}))["type"], "script_error");
        let mut other = json!({ "type": "log", "events": [[0]] });
        let before = other.clone();
        expand_events(&mut other);
        assert_eq!(other, before);
    }
}
