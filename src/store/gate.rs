//! Who may write next. SQLite's write lock is not fair: a connection that finds it taken
//! sleeps in its busy handler and polls, while the writer thread, committing round after
//! round under load, releases it for microseconds at a time. The control connection's
//! session-row writes (launch, stop) then starved for the whole busy timeout and failed with
//! "database is locked". The gate is taken around every write transaction; a waiting
//! control write goes before the writer's next round (which is at most one batch long).

use std::sync::{Condvar, Mutex};

#[derive(Default)]
struct State {
    writer_in: bool,
    control_in: bool,
    control_waiting: usize,
}

#[derive(Default)]
pub(crate) struct WriteGate {
    state: Mutex<State>,
    cv: Condvar,
}

impl WriteGate {
    /// The writer thread, before a write transaction: waits while a control write runs or waits.
    pub fn writer_enter(&self) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        while st.control_in || st.control_waiting > 0 {
            st = self.cv.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        st.writer_in = true;
    }

    pub fn writer_exit(&self) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).writer_in = false;
        self.cv.notify_all();
    }

    /// Any other connection's write: runs `f` once the writer's current round is committed.
    pub fn control<T>(&self, f: impl FnOnce() -> T) -> T {
        {
            let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
            st.control_waiting += 1;
            while st.writer_in || st.control_in {
                st = self.cv.wait(st).unwrap_or_else(|p| p.into_inner());
            }
            st.control_waiting -= 1;
            st.control_in = true;
        }
        struct Exit<'a>(&'a WriteGate);
        impl Drop for Exit<'_> {
            fn drop(&mut self) {
                self.0.state.lock().unwrap_or_else(|p| p.into_inner()).control_in = false;
                self.0.cv.notify_all();
            }
        }
        let _exit = Exit(self);
        f()
    }
}
