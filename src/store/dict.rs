//! Reader-side copy of the interned `sites` and `threads` tables (append-only, like the
//! tables), and decoding of compact rows back into `Event`s.

use std::sync::{Arc, RwLock};

use rusqlite::Connection;

use super::event::Event;
use super::intern::Extra;
use super::schema::{self, sql_err};
use crate::error::Result;

pub(crate) struct Site {
    pub function_name: Option<String>,
    pub function_name_raw: Option<String>,
    pub source_file: Option<String>,
    pub line_number: Option<i64>,
}

pub(crate) struct Thread {
    pub pid: Option<i64>,
    pub thread_id: Option<i64>,
    pub thread_name: Option<String>,
}

/// Index = id; `None` for ids not (yet) seen.
#[derive(Default)]
pub(crate) struct Dict {
    sites: Vec<Option<Arc<Site>>>,
    threads: Vec<Option<Arc<Thread>>>,
}

fn get<T>(v: &[Option<Arc<T>>], id: Option<i64>) -> Option<&T> {
    v.get(usize::try_from(id?).ok()?)?.as_deref()
}

fn ids<T>(v: &[Option<Arc<T>>], pred: impl Fn(&T) -> bool) -> Vec<i64> {
    v.iter().enumerate().filter_map(|(id, x)| x.as_deref().filter(|x| pred(x)).map(|_| id as i64)).collect()
}

fn put<T>(v: &mut Vec<Option<Arc<T>>>, id: i64, x: T) {
    let i = id as usize;
    if v.len() <= i {
        v.resize_with(i + 1, || None);
    }
    v[i] = Some(Arc::new(x));
}

impl Dict {
    pub(crate) fn site_ids(&self, pred: impl Fn(&Site) -> bool) -> Vec<i64> {
        ids(&self.sites, pred)
    }

    pub(crate) fn thread_ids(&self, pred: impl Fn(&Thread) -> bool) -> Vec<i64> {
        ids(&self.threads, pred)
    }

    /// Load rows committed since the last refresh (call inside the query's read snapshot).
    pub(crate) fn refresh(lock: &RwLock<Dict>, conn: &Connection) -> Result<()> {
        let (known_sites, known_threads) = {
            let d = lock.read().unwrap();
            (d.sites.len().max(1) as i64, d.threads.len().max(1) as i64)
        };
        let mut st = conn
            .prepare_cached(
                "SELECT id, function_name, function_name_raw, source_file, line_number FROM sites WHERE id >= ?1 ORDER BY id",
            )
            .map_err(|e| sql_err("query: sites", e))?;
        let sites = st
            .query_map([known_sites], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    Site {
                        function_name: r.get(1)?,
                        function_name_raw: r.get(2)?,
                        source_file: r.get(3)?,
                        line_number: r.get(4)?,
                    },
                ))
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(|e| sql_err("query: sites", e))?;
        let mut st = conn
            .prepare_cached("SELECT id, pid, thread_id, thread_name FROM threads WHERE id >= ?1 ORDER BY id")
            .map_err(|e| sql_err("query: threads", e))?;
        let threads = st
            .query_map([known_threads], |r| {
                Ok((r.get::<_, i64>(0)?, Thread { pid: r.get(1)?, thread_id: r.get(2)?, thread_name: r.get(3)? }))
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(|e| sql_err("query: threads", e))?;
        if sites.is_empty() && threads.is_empty() {
            return Ok(());
        }
        let mut d = lock.write().unwrap();
        for (id, s) in sites {
            put(&mut d.sites, id, s);
        }
        for (id, t) in threads {
            put(&mut d.threads, id, t);
        }
        Ok(())
    }

    /// Decode a row selected with `schema::EVENT_COLUMNS`.
    pub(crate) fn row_to_event(&self, r: &rusqlite::Row<'_>, session_id: &str) -> rusqlite::Result<Event> {
        let kind: i64 = r.get(3)?;
        let event_type = schema::kind_from_code(kind).ok_or_else(|| {
            rusqlite::Error::FromSqlConversionFailure(3, rusqlite::types::Type::Integer, format!("unknown event kind {kind}").into())
        })?;
        let mut e = Event::new(session_id, event_type, r.get(2)?);
        e.id = r.get(0)?;
        if let Some(s) = get(&self.sites, r.get(4)?) {
            e.function_name = s.function_name.clone();
            e.function_name_raw = s.function_name_raw.clone();
            e.source_file = s.source_file.clone();
            e.line_number = s.line_number;
        }
        if let Some(t) = get(&self.threads, r.get(5)?) {
            e.pid = t.pid;
            e.thread_id = t.thread_id;
            e.thread_name = t.thread_name.clone();
        }
        e.duration_ns = r.get(6)?;
        e.parent_event_id = r.get(7)?;
        e.return_value = r.get(8)?;
        match r.get_ref(9)? {
            rusqlite::types::ValueRef::Blob(raw) => e.capture = Some(raw.to_vec()),
            _ => e.arguments = r.get(9)?,
        }
        e.text = r.get(10)?;
        if let Some(extra) = r.get_ref(11)?.as_str_or_null()? {
            let x: Extra<'_> = serde_json::from_str(extra).map_err(|err| {
                rusqlite::Error::FromSqlConversionFailure(11, rusqlite::types::Type::Text, Box::new(err))
            })?;
            let own = |c: Option<std::borrow::Cow<'_, str>>| c.map(|c| c.into_owned());
            e.watch_values = own(x.watch_values);
            e.sampled = x.sampled;
            e.unwound = x.unwound;
            e.signal = own(x.signal);
            e.fault_address = own(x.fault_address);
            e.registers = own(x.registers);
            e.backtrace = own(x.backtrace);
            e.locals = own(x.locals);
            e.breakpoint_id = own(x.breakpoint_id);
            e.logpoint_message = own(x.logpoint_message);
        }
        Ok(e)
    }
}
