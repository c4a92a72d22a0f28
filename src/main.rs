//! The `strobe` command: the daemon, the MCP stdio proxy, and scripts run in-process.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use strobe::engine::{Engine, EngineConfig};
use strobe::lua::{LuaHost, ScriptSources};

#[derive(Parser)]
#[command(name = "strobe", version, about = "An LLM-native debugger, programmable in Lua")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve MCP on $STROBE_HOME/strobe.sock (started automatically by `strobe mcp`).
    Daemon,
    /// MCP over stdio: point your MCP client at this; it starts the daemon when needed.
    Mcp,
    /// Run a Lua script with the `strobe` module, in-process (a debugging session or CI scenario).
    Run {
        /// The Lua file to run.
        script: PathBuf,
        /// Arguments for the script (`arg[1]`, `arg[2]`, ...).
        args: Vec<String>,
    },
    /// Interactive Lua prompt with the `strobe` module (in-process, or --connect to the daemon).
    Repl {
        /// Evaluate in the running daemon: see and drive the sessions an MCP client created.
        #[arg(long)]
        connect: bool,
    },
    /// Trust a project directory: its .strobe/scripts and .strobe/adapters load in the daemon.
    Trust {
        /// The project root (the directory that holds .strobe/).
        dir: PathBuf,
        /// Remove the directory from the trust list instead.
        #[arg(long)]
        revoke: bool,
    },
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("STROBE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("strobe: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let config = EngineConfig::from_env();
    // The in-process commands keep a database in the home too: private to this user.
    if matches!(cli.command, Command::Run { .. } | Command::Repl { connect: false }) {
        if let Err(e) = strobe::paths::secure_home(&config.home) {
            eprintln!("strobe: cannot secure {}: {e}", config.home.display());
            return ExitCode::FAILURE;
        }
    }
    let result: anyhow::Result<ExitCode> = rt.block_on(async {
        match cli.command {
            Command::Daemon => {
                init_logging();
                strobe::mcp::daemon::run(config).await?;
                Ok(ExitCode::SUCCESS)
            }
            Command::Mcp => {
                strobe::mcp::proxy::run(&config.home).await?;
                Ok(ExitCode::SUCCESS)
            }
            Command::Run { script, args } => {
                init_logging();
                let engine = Engine::new(config.clone())?;
                let lua = LuaHost::start(engine.clone(), ScriptSources::standard(&config.home))?;
                let outcome = lua.run_file(script, args).await;
                engine.stop_all().await;
                match outcome {
                    Ok(o) if o.failed > 0 => Ok(ExitCode::FAILURE),
                    Ok(_) => Ok(ExitCode::SUCCESS),
                    Err(e) => {
                        eprintln!("strobe run: {e}");
                        Ok(ExitCode::FAILURE)
                    }
                }
            }
            Command::Repl { connect } => {
                let filter = tracing_subscriber::EnvFilter::try_from_env("STROBE_LOG")
                    .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
                let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
                let home = config.home.clone();
                if connect {
                    let socket = home.join("strobe.sock");
                    let backend = strobe::repl::RemoteBackend::connect(&socket)?;
                    let banner = format!("strobe repl: connected to the daemon at {}", socket.display());
                    tokio::task::spawn_blocking(move || strobe::repl::run(&home, Box::new(backend), &banner)).await??;
                    return Ok(ExitCode::SUCCESS);
                }
                let engine = Engine::new(config.clone())?;
                let lua = LuaHost::start(engine.clone(), ScriptSources::standard(&home))?;
                let _ = lua.watch_scripts().await;
                let backend = strobe::repl::LocalBackend { lua, rt: tokio::runtime::Handle::current() };
                let banner = "strobe repl (in-process engine; `strobe repl --connect` joins the daemon)".to_string();
                let r = tokio::task::spawn_blocking(move || strobe::repl::run(&home, Box::new(backend), &banner)).await;
                engine.stop_all().await;
                r??;
                Ok(ExitCode::SUCCESS)
            }
            Command::Trust { dir, revoke } => {
                let canonical = strobe::lua::set_trusted(&config.home, &dir, revoke)
                    .map_err(|e| anyhow::anyhow!("cannot update the trust list for {}: {e}", dir.display()))?;
                if revoke {
                    println!("no longer trusted: {} (its .strobe scripts unload)", canonical.display());
                } else {
                    println!("trusted: {} (its .strobe/scripts and .strobe/adapters load in the daemon)", canonical.display());
                }
                Ok(ExitCode::SUCCESS)
            }
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("strobe: {e:#}");
            ExitCode::FAILURE
        }
    }
}
