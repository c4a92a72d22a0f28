//! How long each test took in earlier runs (per project), so a status poll can say
//! whether the current test is slower than usual. Kept in memory for the daemon's life.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

static DURATIONS: LazyLock<Mutex<HashMap<(String, String), u64>>> = LazyLock::new(Mutex::default);

pub fn record(project: &str, test: &str, ms: u64) {
    DURATIONS.lock().unwrap().insert((project.to_string(), test.to_string()), ms);
}

pub fn lookup(project: &str, test: &str) -> Option<u64> {
    DURATIONS.lock().unwrap().get(&(project.to_string(), test.to_string())).copied()
}
