//! Several Lua threads, so that no client waits behind another client's long script.
//! Each worker is an OS thread with its own Lua state and script set; a request goes to
//! the least busy worker that is neither stuck (inside one poll for longer than
//! `STUCK_AFTER`: a chunk computing without yielding) nor reserved (running a
//! debug_script or a REPL chunk). When every worker is stuck or reserved, a new one
//! starts, up to `MAX_WORKERS`.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// A worker inside one poll this long is busy computing; route around it.
pub const STUCK_AFTER: Duration = Duration::from_millis(50);
/// Workers at most (each holds a Lua state with the scripts: a few MB).
pub const MAX_WORKERS: usize = 8;

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn now_ms() -> u64 {
    epoch().elapsed().as_millis() as u64 + 1
}

/// What the router knows of a worker, updated by the worker's own thread.
#[derive(Default)]
pub struct WorkerLoad {
    inflight: AtomicUsize,
    /// `now_ms()` when the current poll began; 0 between polls.
    polling_since: AtomicU64,
    reserved: AtomicUsize,
}

impl WorkerLoad {
    fn stuck(&self, now: u64) -> bool {
        let since = self.polling_since.load(Ordering::Relaxed);
        since != 0 && now.saturating_sub(since) > STUCK_AFTER.as_millis() as u64
    }
    fn available(&self, now: u64) -> bool {
        !self.stuck(now) && self.reserved.load(Ordering::Relaxed) == 0
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<WorkerLoad>>> = const { RefCell::new(None) };
}

/// Mark this thread as the worker described by `load` (called once by the worker).
pub fn set_current(load: Arc<WorkerLoad>) {
    CURRENT.with(|c| *c.borrow_mut() = Some(load));
}

/// Keeps new requests away from this worker while it lives (a long script runs here).
pub struct Reservation(Option<Arc<WorkerLoad>>);

pub fn reserve_current() -> Reservation {
    let load = CURRENT.with(|c| c.borrow().clone());
    if let Some(l) = &load {
        l.reserved.fetch_add(1, Ordering::SeqCst);
    }
    Reservation(load)
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Some(l) = &self.0 {
            l.reserved.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// A request's future on a worker: its polls are timed for the router, and it counts
/// as in flight until done.
pub struct Tracked<F> {
    inner: Pin<Box<F>>,
    load: Arc<WorkerLoad>,
}

impl<F: Future> Tracked<F> {
    pub fn new(load: Arc<WorkerLoad>, inner: F) -> Tracked<F> {
        load.inflight.fetch_add(1, Ordering::SeqCst);
        Tracked { inner: Box::pin(inner), load }
    }
}

impl<F: Future> Future for Tracked<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.load.polling_since.store(now_ms(), Ordering::Relaxed);
        let r = self.inner.as_mut().poll(cx);
        self.load.polling_since.store(0, Ordering::Relaxed);
        r
    }
}

impl<F> Drop for Tracked<F> {
    fn drop(&mut self) {
        self.load.inflight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The workers, by index, with whatever handle `T` reaches each.
pub struct Pool<T> {
    workers: Mutex<Vec<(T, Arc<WorkerLoad>)>>,
}

impl<T: Clone> Pool<T> {
    pub fn new() -> Pool<T> {
        Pool { workers: Mutex::new(Vec::new()) }
    }

    pub fn add(&self, handle: T, load: Arc<WorkerLoad>) -> usize {
        let mut w = self.workers.lock().unwrap();
        w.push((handle, load));
        w.len() - 1
    }

    pub fn len(&self) -> usize {
        self.workers.lock().unwrap().len()
    }

    pub fn get(&self, index: usize) -> Option<T> {
        self.workers.lock().unwrap().get(index).map(|(h, _)| h.clone())
    }

    pub fn all(&self) -> Vec<T> {
        self.workers.lock().unwrap().iter().map(|(h, _)| h.clone()).collect()
    }

    /// The least loaded available worker, or `None` when all are stuck or reserved
    /// and the pool may grow; when it may not, the least loaded of all.
    pub fn pick(&self) -> Option<(usize, T)> {
        let w = self.workers.lock().unwrap();
        let now = now_ms();
        let load = |i: &usize| w[*i].1.inflight.load(Ordering::Relaxed);
        let best = (0..w.len()).filter(|i| w[*i].1.available(now)).min_by_key(load);
        let best = match best {
            Some(i) => Some(i),
            None if w.len() >= MAX_WORKERS => (0..w.len()).filter(|i| !w[*i].1.stuck(now)).min_by_key(load).or(Some(0)),
            None => None,
        };
        best.map(|i| (i, w[i].0.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_around_stuck_and_reserved_workers() {
        let pool: Pool<&'static str> = Pool::new();
        let (a, b) = (Arc::new(WorkerLoad::default()), Arc::new(WorkerLoad::default()));
        pool.add("a", a.clone());
        pool.add("b", b.clone());
        a.inflight.store(1, Ordering::SeqCst);
        assert_eq!(pool.pick().unwrap().1, "b");
        b.polling_since.store(now_ms().saturating_sub(1000).max(1), Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(2));
        b.polling_since.store(1, Ordering::SeqCst); // polling since the epoch: stuck
        std::thread::sleep(STUCK_AFTER + Duration::from_millis(5));
        assert_eq!(pool.pick().unwrap().1, "a");
        a.reserved.store(1, Ordering::SeqCst);
        assert!(pool.pick().is_none(), "both busy: the pool should grow");
    }
}
