//! `strobe mcp`: the stdio proxy an MCP client starts. It connects to the daemon's
//! socket, starting the daemon first when nobody answers (a stale socket or pid file
//! left by a crashed daemon is simply replaced), then relays lines both ways.
//!
//! It notices at once when the daemon dies: every request in flight gets a JSON-RPC
//! error, and the client's next request starts a fresh daemon, to which the proxy first
//! replays the client's `initialize` (`proxy_tracker.rs`). The end of stdin is the
//! client's shutdown: answers still on their way are relayed while the client reads
//! them; once it is gone too (stdout closed), the proxy exits, which closes the socket
//! and makes the daemon cancel the requests and stop the targets of this client.

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::unix::OwnedWriteHalf;
use tokio::net::UnixStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::lines::{next_line, too_long_message, Line, MAX_LINE_BYTES, NOT_UTF8_MESSAGE};
use super::protocol::{error_response, INVALID_REQUEST, PARSE_ERROR};
use super::proxy_tracker::{Tracker, REPLAY_ID};

/// How long a fresh daemon may take to answer the replayed `initialize`.
const REPLAY_TIMEOUT: Duration = Duration::from_secs(30);

/// One connection to the daemon: where requests go, and the task relaying its answers
/// (it ends when the daemon closes the socket or dies).
struct Link {
    to_daemon: OwnedWriteHalf,
    relay: JoinHandle<()>,
}

pub async fn run(home: &Path) -> anyhow::Result<()> {
    let socket = home.join("strobe.sock");
    let tracker = Arc::new(Mutex::new(Tracker::default()));
    let (to_client, mut client_rx) = mpsc::unbounded_channel::<String>();
    let stdout_task = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(mut line) = client_rx.recv().await {
            line.push('\n');
            if stdout.write_all(line.as_bytes()).await.is_err() || stdout.flush().await.is_err() {
                break;
            }
        }
    });
    let mut link = Some(connect(home, &socket, &tracker, &to_client, None).await?);
    let mut stdin = BufReader::new(tokio::io::stdin());
    loop {
        let relay_done = async {
            match link.as_mut() {
                Some(l) => {
                    let _ = (&mut l.relay).await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            line = next_line(&mut stdin, MAX_LINE_BYTES) => {
                let line = match line {
                    Ok(Some(Line::Text(line))) => line,
                    Ok(Some(Line::TooLong(n))) => {
                        let _ = to_client.send(error_response(&serde_json::Value::Null, INVALID_REQUEST, too_long_message(n)).to_string());
                        continue;
                    }
                    Ok(Some(Line::NotUtf8)) => {
                        let _ = to_client.send(error_response(&serde_json::Value::Null, PARSE_ERROR, NOT_UTF8_MESSAGE).to_string());
                        continue;
                    }
                    Ok(None) | Err(_) => break,
                };
                if link.is_none() && !is_request(&line) {
                    continue; // a notification (a cancel, say) is not worth a fresh daemon
                }
                if link.is_none() {
                    match reconnect(home, &socket, &tracker, &to_client).await {
                        Ok(l) => link = Some(l),
                        Err(e) => {
                            eprintln!("strobe mcp: cannot restart the strobe daemon: {e}");
                            tracker.lock().unwrap().client_sent(&line);
                            answer_lost(&tracker, &to_client);
                            drop(to_client);
                            let _ = stdout_task.await;
                            return Err(e);
                        }
                    }
                }
                tracker.lock().unwrap().client_sent(&line);
                let l = link.as_mut().expect("connected above");
                // A failed write means the daemon died: its relay ends and answers for it.
                let _ = l.to_daemon.write_all(format!("{line}\n").as_bytes()).await;
            }
            _ = relay_done => {
                eprintln!("strobe mcp: the strobe daemon closed the connection; the next request starts a fresh one");
                answer_lost(&tracker, &to_client);
                link = None;
            }
        }
    }
    // The client ended its input: relay the answers still due while it reads them.
    if let Some(mut l) = link {
        let _ = l.to_daemon.shutdown().await;
        let mut check = tokio::time::interval(Duration::from_millis(100));
        loop {
            tokio::select! {
                _ = &mut l.relay => {
                    answer_lost(&tracker, &to_client);
                    break;
                }
                _ = check.tick() => if stdout_gone() { break },
            }
        }
        // Closes the socket now: the daemon cancels what is left and stops the targets.
        l.relay.abort();
    }
    drop(to_client);
    let _ = tokio::time::timeout(Duration::from_secs(5), stdout_task).await;
    Ok(())
}

/// The line asks for an answer (it has an id), or is not JSON-RPC we can read (the
/// daemon's job to answer): anything but a notification.
fn is_request(line: &str) -> bool {
    match serde_json::from_str::<serde_json::Value>(line) {
        Ok(v) => v.is_array() || v.get("id").is_some() || v.get("method").is_none(),
        Err(_) => true,
    }
}

/// Error replies for the requests the daemon will never answer.
fn answer_lost(tracker: &Mutex<Tracker>, to_client: &mpsc::UnboundedSender<String>) {
    for reply in tracker.lock().unwrap().daemon_died() {
        let _ = to_client.send(reply);
    }
}

/// The client closed its end of our stdout (a pipe without reader reports POLLERR).
fn stdout_gone() -> bool {
    super::daemon::peer_hung_up(1)
}

/// Connect to a fresh daemon after the last one died, replaying the client's
/// `initialize`. The dead daemon's socket may still take a connection for a moment
/// while its process is torn down: such a link dies at once, so try again.
async fn reconnect(
    home: &Path,
    socket: &Path,
    tracker: &Arc<Mutex<Tracker>>,
    to_client: &mpsc::UnboundedSender<String>,
) -> anyhow::Result<Link> {
    let start = Instant::now();
    loop {
        let replay = tracker.lock().unwrap().replay();
        match connect(home, socket, tracker, to_client, replay).await {
            Ok(link) => return Ok(link),
            Err(e) if start.elapsed() > REPLAY_TIMEOUT => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// Connect to the daemon (starting it if nobody answers) and relay its answers; with
/// `replay`, first re-initialize the connection as the client had, waiting for the answer.
async fn connect(
    home: &Path,
    socket: &Path,
    tracker: &Arc<Mutex<Tracker>>,
    to_client: &mpsc::UnboundedSender<String>,
    replay: Option<[String; 2]>,
) -> anyhow::Result<Link> {
    let stream = match UnixStream::connect(socket).await {
        Ok(s) => s,
        Err(_) => {
            start_daemon(home)?;
            wait_for_socket(socket, Duration::from_secs(30)).await?
        }
    };
    let (sock_r, mut to_daemon) = stream.into_split();
    let (replayed_tx, replayed_rx) = oneshot::channel();
    let relay = tokio::spawn(relay(sock_r, tracker.clone(), to_client.clone(), replayed_tx));
    if let Some(lines) = replay {
        to_daemon.write_all(format!("{}\n", lines[0]).as_bytes()).await?;
        match tokio::time::timeout(REPLAY_TIMEOUT, replayed_rx).await {
            Ok(Ok(())) => {}
            _ => anyhow::bail!("the fresh daemon did not answer the replayed initialize ({REPLAY_ID})"),
        }
        to_daemon.write_all(format!("{}\n", lines[1]).as_bytes()).await?;
    }
    Ok(Link { to_daemon, relay })
}

/// Copy the daemon's lines to the client, noting the answered requests; the answer to
/// the replayed `initialize` is the proxy's own.
async fn relay(
    sock_r: tokio::net::unix::OwnedReadHalf,
    tracker: Arc<Mutex<Tracker>>,
    to_client: mpsc::UnboundedSender<String>,
    replayed: oneshot::Sender<()>,
) {
    let mut replayed = Some(replayed);
    let mut reader = BufReader::new(sock_r);
    while let Ok(Some(line)) = next_line(&mut reader, usize::MAX).await {
        let Line::Text(line) = line else { continue };
        if tracker.lock().unwrap().daemon_sent(&line) {
            let _ = to_client.send(line);
        } else if let Some(tx) = replayed.take() {
            let _ = tx.send(());
        }
    }
}

fn start_daemon(home: &Path) -> anyhow::Result<()> {
    crate::paths::secure_home(home)?; // the log is created 0600 before the daemon writes to it
    let exe = std::env::current_exe()?;
    let log = std::fs::OpenOptions::new().append(true).open(home.join("daemon.log"))?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("daemon").stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log);
    // Its own session: the daemon must outlive this proxy and its client's signals.
    use std::os::unix::process::CommandExt;
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    cmd.spawn()?;
    Ok(())
}

async fn wait_for_socket(socket: &Path, limit: Duration) -> anyhow::Result<UnixStream> {
    let start = Instant::now();
    loop {
        match UnixStream::connect(socket).await {
            Ok(s) => return Ok(s),
            Err(e) if start.elapsed() > limit => {
                anyhow::bail!("the strobe daemon did not start within {limit:?} ({e}); see {}", socket.with_file_name("daemon.log").display())
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}
