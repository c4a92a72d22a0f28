//! `strobe mcp`: the stdio proxy an MCP client starts. It connects to the daemon's
//! socket, starting the daemon first when nobody answers (a stale socket or pid file
//! left by a crashed daemon is simply replaced), then copies bytes both ways.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;

pub async fn run(home: &Path) -> anyhow::Result<()> {
    let socket = home.join("strobe.sock");
    let stream = match UnixStream::connect(&socket).await {
        Ok(s) => s,
        Err(_) => {
            start_daemon(home)?;
            wait_for_socket(&socket, Duration::from_secs(30)).await?
        }
    };
    let (mut sock_r, mut sock_w) = stream.into_split();
    let to_daemon = async {
        let mut stdin = tokio::io::stdin();
        let _ = tokio::io::copy(&mut stdin, &mut sock_w).await;
        let _ = sock_w.shutdown().await;
    };
    let from_daemon = async {
        let mut stdout = tokio::io::stdout();
        let _ = tokio::io::copy(&mut sock_r, &mut stdout).await;
        let _ = stdout.flush().await;
    };
    // The client closing stdin ends the session; the daemon answering EOF ends it too.
    tokio::select! {
        _ = async { tokio::join!(to_daemon, from_daemon) } => {}
    }
    Ok(())
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
