//! The event INSERT, driven through SQLite's C API.
//!
//! rusqlite copies every bound string (`SQLITE_TRANSIENT`: malloc, memcpy, free) and wraps
//! each bind in a conversion; on the writer's hot path that was a sixth of the per-event
//! cost. Here strings are bound `SQLITE_STATIC` — borrowed — which is sound because the
//! only way to bind is `RawInsert::execute_with`, whose binder borrows the strings for
//! longer than the call, and SQLite reads bound values only while stepping: before every
//! step, each parameter the call did not bind is set back to NULL, so a string borrowed by
//! an earlier call is never read.
//!
//! Bindings are kept between executions (SQLite's reset leaves them): an integer equal to
//! what its parameter already holds is not bound again. A statement of 32 rows sees the
//! same session, site, thread and event type at most positions call after call, and each
//! bind is a library call that releases and re-initializes the parameter's value. Skipping
//! those, and `sqlite3_clear_bindings`, took the writer's binding work from 17 % to 6 % of
//! its instructions (callgrind; 4.4 % fewer per fast-path row, `docs/performance.md`).

use std::ffi::{c_int, CStr};
use std::marker::PhantomData;

use rusqlite::{ffi, Connection};

use crate::error::{Result, StrobeError};

pub(crate) struct RawInsert {
    db: *mut ffi::sqlite3,
    stmt: *mut ffi::sqlite3_stmt,
    /// What each parameter (0-based) holds now.
    held: Vec<Held>,
    /// One bit per parameter: not NULL now.
    non_null: Vec<u64>,
    /// One bit per parameter: bound (or found equal) by the current call.
    bound: Vec<u64>,
}

/// A parameter's value as far as the next bind needs to know it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Held {
    Null,
    Int(i64),
    /// A borrowed string (or a failed bind): never equal to anything, always bound again.
    Other,
}

// SAFETY: the statement is used only by the thread that owns it together with its
// connection (the writer); SQLite connections may move between threads.
unsafe impl Send for RawInsert {}

impl RawInsert {
    /// Prepare `sql` on `conn`. The caller must drop this before `conn` (the writer declares
    /// it first, so it is dropped first).
    pub(crate) fn prepare(conn: &Connection, sql: &str) -> Result<RawInsert> {
        // SAFETY: the handle is valid while `conn` lives; we do not close it.
        let db = unsafe { conn.handle() };
        let mut stmt = std::ptr::null_mut();
        let len = c_int::try_from(sql.len()).map_err(|_| StrobeError::internal("insert statement too long"))?;
        // SAFETY: `sql` is valid for `len` bytes; `stmt` receives the new statement.
        let rc = unsafe {
            ffi::sqlite3_prepare_v3(db, sql.as_ptr().cast(), len, ffi::SQLITE_PREPARE_PERSISTENT, &mut stmt, std::ptr::null_mut())
        };
        if rc != ffi::SQLITE_OK || stmt.is_null() {
            return Err(StrobeError::internal(format!("prepare insert: {}", errmsg(db))));
        }
        // SAFETY: `stmt` was just prepared.
        let params = unsafe { ffi::sqlite3_bind_parameter_count(stmt) } as usize;
        let words = params.div_ceil(64);
        Ok(RawInsert { db, stmt, held: vec![Held::Null; params], non_null: vec![0; words], bound: vec![0; words] })
    }

    /// Bind with `bind` (parameters it leaves alone are NULL), step once, reset; returns
    /// the rows changed.
    pub(crate) fn execute_with<'a>(&mut self, bind: impl FnOnce(&mut Binder<'_, 'a>)) -> Result<usize> {
        let mut b = Binder {
            stmt: self.stmt,
            rc: ffi::SQLITE_OK,
            held: &mut self.held,
            non_null: &mut self.non_null,
            bound: &mut self.bound,
            _marker: PhantomData,
        };
        bind(&mut b);
        let bind_rc = b.rc;
        self.null_the_rest();
        // SAFETY: `self.stmt` is a live statement of `self.db`; every string it holds was
        // bound by this call (`null_the_rest` cleared the others) and outlives it ('a).
        let result = unsafe {
            let r = if bind_rc != ffi::SQLITE_OK {
                Err(StrobeError::internal(format!("bind event: {}", errmsg(self.db))))
            } else {
                match ffi::sqlite3_step(self.stmt) {
                    ffi::SQLITE_DONE => Ok(ffi::sqlite3_changes64(self.db) as usize),
                    _ => Err(StrobeError::internal(format!("insert events: {}", errmsg(self.db)))),
                }
            };
            ffi::sqlite3_reset(self.stmt);
            r
        };
        result
    }

    /// Set every parameter the current call did not bind to NULL, and start the next call.
    fn null_the_rest(&mut self) {
        for (w, (non_null, bound)) in self.non_null.iter_mut().zip(self.bound.iter_mut()).enumerate() {
            let mut stale = *non_null & !*bound;
            while stale != 0 {
                let i = w * 64 + stale.trailing_zeros() as usize;
                stale &= stale - 1;
                // SAFETY: live statement; `i + 1` is one of its parameters. Binding NULL
                // cannot fail for an index in range.
                unsafe { ffi::sqlite3_bind_null(self.stmt, i as c_int + 1) };
                self.held[i] = Held::Null;
            }
            *non_null &= *bound;
            *bound = 0;
        }
    }
}

impl Drop for RawInsert {
    fn drop(&mut self) {
        // SAFETY: finalized once, while its connection is still open (see `prepare`).
        unsafe {
            ffi::sqlite3_finalize(self.stmt);
        }
    }
}

fn errmsg(db: *mut ffi::sqlite3) -> String {
    // SAFETY: sqlite3_errmsg returns a NUL-terminated string owned by the connection.
    unsafe { CStr::from_ptr(ffi::sqlite3_errmsg(db)).to_string_lossy().into_owned() }
}

/// Binds parameters (1-based) of one `execute_with` call; strings are borrowed for `'a`.
pub(crate) struct Binder<'s, 'a> {
    stmt: *mut ffi::sqlite3_stmt,
    rc: c_int,
    held: &'s mut [Held],
    non_null: &'s mut [u64],
    bound: &'s mut [u64],
    _marker: PhantomData<&'a str>,
}

impl<'a> Binder<'_, 'a> {
    /// Record what 1-based parameter `i` holds after a bind that returned `rc` (an index out
    /// of range has nothing to record; its bind reported `SQLITE_RANGE`).
    fn note(&mut self, i: usize, rc: c_int, held: Held) {
        if rc != ffi::SQLITE_OK && self.rc == ffi::SQLITE_OK {
            self.rc = rc;
        }
        if let Some(slot) = i.checked_sub(1).and_then(|k| self.held.get_mut(k)) {
            *slot = if rc == ffi::SQLITE_OK { held } else { Held::Other };
            let (w, bit) = ((i - 1) / 64, 1u64 << ((i - 1) % 64));
            self.non_null[w] |= bit;
            self.bound[w] |= bit;
        }
    }

    pub(crate) fn int(&mut self, i: usize, v: i64) {
        if let Some(k) = i.checked_sub(1).filter(|k| self.held.get(*k) == Some(&Held::Int(v))) {
            // Already holds it since an earlier call: only mark it as part of this one.
            self.bound[k / 64] |= 1u64 << (k % 64);
            return;
        }
        // SAFETY: live statement; an out-of-range index only returns SQLITE_RANGE.
        let rc = unsafe { ffi::sqlite3_bind_int64(self.stmt, i as c_int, v) };
        self.note(i, rc, Held::Int(v));
    }

    /// `None` binds nothing: a parameter not bound by a call is NULL when it steps.
    pub(crate) fn opt_int(&mut self, i: usize, v: Option<i64>) {
        if let Some(v) = v {
            self.int(i, v);
        }
    }

    pub(crate) fn opt_text(&mut self, i: usize, v: Option<&'a str>) {
        if let Some(s) = v {
            // SAFETY: `s` lives for 'a, beyond `execute_with`; a later call rebinds or
            // NULLs this parameter before it steps again.
            let rc = unsafe {
                ffi::sqlite3_bind_text64(
                    self.stmt,
                    i as c_int,
                    s.as_ptr().cast(),
                    s.len() as u64,
                    ffi::SQLITE_STATIC(),
                    ffi::SQLITE_UTF8 as u8,
                )
            };
            self.note(i, rc, Held::Other);
        }
    }

    pub(crate) fn blob(&mut self, i: usize, v: &'a [u8]) {
        // SAFETY: as `opt_text`: `v` outlives the call and is rebound or NULLed before reuse.
        let rc = unsafe { ffi::sqlite3_bind_blob64(self.stmt, i as c_int, v.as_ptr().cast(), v.len() as u64, ffi::SQLITE_STATIC()) };
        self.note(i, rc, Held::Other);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(conn: &Connection) -> Vec<(Option<i64>, Option<String>, Option<i64>)> {
        let mut s = conn.prepare("SELECT a, b, c FROM t ORDER BY rowid").unwrap();
        s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap().map(|r| r.unwrap()).collect()
    }

    /// Bindings kept between calls must never leak into a call that did not bind them, and a
    /// value equal to one held earlier (before a NULL in between) must still be stored.
    #[test]
    fn a_call_sees_only_its_own_bindings() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (a INTEGER, b TEXT, c INTEGER)").unwrap();
        let mut ins = RawInsert::prepare(&conn, "INSERT INTO t (a, b, c) VALUES (?, ?, ?)").unwrap();
        let first = String::from("first");
        let second = String::from("second");
        let calls: [(Option<i64>, Option<&str>, Option<i64>); 6] = [
            (Some(1), Some(&first), Some(2)),
            (Some(1), None, None),          // b and c were set by the last call: now NULL
            (Some(1), None, Some(2)),       // c equal to what it held two calls ago
            (None, Some(&second), Some(2)), // a back to NULL, a new string
            (Some(7), Some(&second), Some(2)),
            (None, None, None),
        ];
        for (a, b, c) in calls {
            let n = ins
                .execute_with(|bd| {
                    bd.opt_int(1, a);
                    bd.opt_text(2, b);
                    bd.opt_int(3, c);
                })
                .unwrap();
            assert_eq!(n, 1);
        }
        let want: Vec<_> = calls.iter().map(|(a, b, c)| (*a, b.map(str::to_string), *c)).collect();
        assert_eq!(rows(&conn), want);
    }

    #[test]
    fn a_bad_index_is_an_error_and_the_next_call_still_works() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (a INTEGER, b TEXT, c INTEGER)").unwrap();
        let mut ins = RawInsert::prepare(&conn, "INSERT INTO t (a, b, c) VALUES (?, ?, ?)").unwrap();
        let err = ins.execute_with(|bd| {
            bd.int(1, 5);
            bd.int(9, 5);
        });
        assert!(err.is_err(), "parameter 9 does not exist");
        assert_eq!(ins.execute_with(|bd| bd.int(3, 4)).unwrap(), 1);
        assert_eq!(rows(&conn), vec![(None, None, Some(4))]);
    }
}
