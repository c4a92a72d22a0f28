//! Strobe: an LLM-native debugger. The Rust core (sessions, symbols, Frida, storage)
//! provides primitives; the surface (MCP tools, hints, scenarios) is Lua in `scripts/`.

pub mod error;
/// The request being served: its cancellation and progress notifications.
pub mod inflight;
pub mod paths;
/// SQLite event store: schema, batched writer thread, queries.
pub mod store;
/// DWARF function index and trace patterns.
pub mod symbols;
/// debug_eval: expressions over a paused frame, target memory, the JSON value model.
pub mod eval;
/// The Frida host child process and the agent it injects.
pub mod frida;
/// JSON-schema subset checks for tool arguments.
pub mod schema;
/// Sessions over processes: launch, trace, query, stop.
pub mod engine;
/// The embedded Lua runtime: the `strobe` module and script loading.
pub mod lua;
/// debug_test runs: processes, output, stuck detection (the policy is Lua, `adapters/`).
pub mod testrun;
/// MCP: protocol, connections, daemon, stdio proxy.
pub mod mcp;
/// Layered settings (defaults, `$STROBE_HOME/settings.json`, project file).
pub mod settings;
/// `strobe repl`: the interactive Lua prompt, in-process or connected to the daemon.
pub mod repl;
