//! The event INSERT, driven through SQLite's C API.
//!
//! rusqlite copies every bound string (`SQLITE_TRANSIENT`: malloc, memcpy, free) and wraps
//! each bind in a conversion; on the writer's hot path that was a sixth of the per-event
//! cost. Here strings are bound `SQLITE_STATIC` — borrowed — which is sound because the
//! only way to bind is `RawInsert::execute_with`, whose binder borrows the strings for
//! longer than the call, and which clears every binding before it returns.

use std::ffi::{c_int, CStr};
use std::marker::PhantomData;

use rusqlite::{ffi, Connection};

use crate::error::{Result, StrobeError};

pub(crate) struct RawInsert {
    db: *mut ffi::sqlite3,
    stmt: *mut ffi::sqlite3_stmt,
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
        Ok(RawInsert { db, stmt })
    }

    /// Bind with `bind`, step once, reset, clear all bindings; returns the rows changed.
    pub(crate) fn execute_with<'a>(&mut self, bind: impl FnOnce(&mut Binder<'_, 'a>)) -> Result<usize> {
        let mut b = Binder { stmt: self.stmt, rc: ffi::SQLITE_OK, _marker: PhantomData };
        bind(&mut b);
        let bind_rc = b.rc;
        // SAFETY: `self.stmt` is a live statement of `self.db`; every borrowed string bound
        // above outlives this call ('a), and the bindings are cleared before we return.
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
            ffi::sqlite3_clear_bindings(self.stmt);
            r
        };
        result
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
    _marker: PhantomData<(&'s mut RawInsert, &'a str)>,
}

impl<'a> Binder<'_, 'a> {
    fn check(&mut self, rc: c_int) {
        if rc != ffi::SQLITE_OK && self.rc == ffi::SQLITE_OK {
            self.rc = rc;
        }
    }

    pub(crate) fn int(&mut self, i: usize, v: i64) {
        // SAFETY: live statement; an out-of-range index only returns SQLITE_RANGE.
        let rc = unsafe { ffi::sqlite3_bind_int64(self.stmt, i as c_int, v) };
        self.check(rc);
    }

    /// `None` binds nothing: bindings start out NULL (cleared after every execution).
    pub(crate) fn opt_int(&mut self, i: usize, v: Option<i64>) {
        if let Some(v) = v {
            self.int(i, v);
        }
    }

    pub(crate) fn opt_text(&mut self, i: usize, v: Option<&'a str>) {
        if let Some(s) = v {
            // SAFETY: `s` lives for 'a, beyond `execute_with`, which clears the binding.
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
            self.check(rc);
        }
    }
}
