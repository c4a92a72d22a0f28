//! MCP over JSON-RPC 2.0: the protocol handler, per-connection state, the daemon that
//! serves `$STROBE_HOME/strobe.sock`, and the stdio proxy (`strobe mcp`).

pub mod connection;
pub mod daemon;
mod id_scan;
pub mod lines;
mod pending;
pub mod protocol;
pub mod proxy;
mod proxy_tracker;
