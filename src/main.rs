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
                    Ok(()) => Ok(ExitCode::SUCCESS),
                    Err(e) => {
                        eprintln!("strobe run: {e}");
                        Ok(ExitCode::FAILURE)
                    }
                }
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
