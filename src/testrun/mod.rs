//! Test runs for `debug_test`: the core owns the processes, their output and the stuck
//! detector; the Lua side (`scripts/lib/testrun.lua`, `adapters/*.lua`) decides which
//! command to run and what the output means. A run lives in a process-wide registry so
//! any Lua worker can answer `status` for it.

pub mod baseline; // per-test durations from earlier runs (currentTestBaselineMs)
pub mod proctree; // /proc: a run's process tree, CPU time, compilers in it
pub mod registry; // run ids → runs; what a run recorded so far
pub mod runner; // spawning the test command, collecting output, killing it
pub mod stacks; // every thread's backtrace (gdb -batch), for stuck reports
pub mod stuck; // the stuck detector: silence + CPU delta + stack comparison

pub use registry::{get, TestRun};
pub use runner::{start, RunSpec};
