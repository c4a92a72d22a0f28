//! Writer-side encoding of an event into a compact `events` row (see `schema.rs`): code
//! sites and threads interned to integers, rarely set columns packed into `extra`.

use std::hash::{Hash, Hasher};

use rusqlite::{params, Connection};
use serde::{Deserialize, Serialize};

use super::event::Event;
use super::rawstmt::Binder;
use super::schema::{self, sql_err};
use crate::error::Result;

/// FxHash (rustc-hash): the interning maps hash a few short strings per event on the hot path.
pub(crate) type FxMap<K, V> = rustc_hash::FxHashMap<K, V>;
pub(crate) type FxSet<K> = rustc_hash::FxHashSet<K>;

fn fx<T: Hash + ?Sized>(v: &T) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    v.hash(&mut h);
    h.finish()
}

/// The interned (function name, raw name, source file, line) of an event.
#[derive(PartialEq, Eq)]
struct SiteKey {
    function_name: Option<Box<str>>,
    function_name_raw: Option<Box<str>>,
    source_file: Option<Box<str>>,
    line_number: Option<i64>,
}

impl SiteKey {
    fn borrowed(&self) -> (Option<&str>, Option<&str>, Option<&str>, Option<i64>) {
        (self.function_name.as_deref(), self.function_name_raw.as_deref(), self.source_file.as_deref(), self.line_number)
    }
}

/// A code site as borrowed parts: (function name, raw name, source file, line).
pub(crate) type SiteParts<'a> = (Option<&'a str>, Option<&'a str>, Option<&'a str>, Option<i64>);

fn site_of(ev: &Event) -> SiteParts<'_> {
    (ev.function_name.as_deref(), ev.function_name_raw.as_deref(), ev.source_file.as_deref(), ev.line_number)
}

type ThreadKey = (Option<i64>, Option<i64>, Option<Box<str>>);

fn thread_of(ev: &Event) -> (Option<i64>, Option<i64>, Option<&str>) {
    (ev.pid, ev.thread_id, ev.thread_name.as_deref())
}

/// Writer-side copies of `sites` and `threads`, keyed by the hash of the borrowed tuple so
/// that a lookup needs no allocation.
#[derive(Default)]
pub(crate) struct Interner {
    sites: FxMap<u64, Vec<(SiteKey, i64)>>,
    threads: FxMap<u64, Vec<(ThreadKey, i64)>>,
    next_site: i64,
    next_thread: i64,
}

impl Interner {
    pub(crate) fn load(conn: &Connection) -> Result<Interner> {
        let mut me = Interner { next_site: 1, next_thread: 1, ..Default::default() };
        let mut st = conn
            .prepare("SELECT id, function_name, function_name_raw, source_file, line_number FROM sites")
            .map_err(|e| sql_err("load sites", e))?;
        let rows = st
            .query_map([], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    SiteKey {
                        function_name: r.get::<_, Option<String>>(1)?.map(Into::into),
                        function_name_raw: r.get::<_, Option<String>>(2)?.map(Into::into),
                        source_file: r.get::<_, Option<String>>(3)?.map(Into::into),
                        line_number: r.get(4)?,
                    },
                ))
            })
            .map_err(|e| sql_err("load sites", e))?;
        for row in rows {
            let (id, key) = row.map_err(|e| sql_err("load sites", e))?;
            me.next_site = me.next_site.max(id + 1);
            me.sites.entry(fx(&key.borrowed())).or_default().push((key, id));
        }
        let mut st = conn.prepare("SELECT id, pid, thread_id, thread_name FROM threads").map_err(|e| sql_err("load threads", e))?;
        let rows = st
            .query_map([], |r| {
                Ok((r.get::<_, i64>(0)?, (r.get(1)?, r.get(2)?, r.get::<_, Option<String>>(3)?.map(Into::into))))
            })
            .map_err(|e| sql_err("load threads", e))?;
        for row in rows {
            let (id, key): (i64, ThreadKey) = row.map_err(|e| sql_err("load threads", e))?;
            me.next_thread = me.next_thread.max(id + 1);
            me.threads.entry(fx(&(key.0, key.1, key.2.as_deref()))).or_default().push((key, id));
        }
        Ok(me)
    }

    /// `sites.id` of the event's code site (None when it has none), inserting a new row.
    pub(crate) fn site(&mut self, conn: &Connection, ev: &Event) -> Result<Option<i64>> {
        self.site_parts(conn, site_of(ev))
    }

    /// `site` for a (function name, raw name, source file, line) not held in an `Event`.
    pub(crate) fn site_parts(&mut self, conn: &Connection, k: SiteParts<'_>) -> Result<Option<i64>> {
        if k == (None, None, None, None) {
            return Ok(None);
        }
        let bucket = self.sites.entry(fx(&k)).or_default();
        if let Some((_, id)) = bucket.iter().find(|(s, _)| s.borrowed() == k) {
            return Ok(Some(*id));
        }
        let id = self.next_site;
        conn.prepare_cached(
            "INSERT INTO sites (id, function_name, function_name_raw, source_file, line_number) VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .and_then(|mut st| st.execute(params![id, k.0, k.1, k.2, k.3]))
        .map_err(|e| sql_err("intern site", e))?;
        self.next_site += 1;
        let key = SiteKey {
            function_name: k.0.map(Into::into),
            function_name_raw: k.1.map(Into::into),
            source_file: k.2.map(Into::into),
            line_number: k.3,
        };
        bucket.push((key, id));
        Ok(Some(id))
    }

    /// `threads.id` of the event's (pid, thread id, thread name), inserting a new row.
    pub(crate) fn thread(&mut self, conn: &Connection, ev: &Event) -> Result<Option<i64>> {
        self.thread_parts(conn, thread_of(ev))
    }

    /// `thread` for a (pid, thread id, thread name) not held in an `Event`.
    pub(crate) fn thread_parts(&mut self, conn: &Connection, k: (Option<i64>, Option<i64>, Option<&str>)) -> Result<Option<i64>> {
        if k == (None, None, None) {
            return Ok(None);
        }
        let bucket = self.threads.entry(fx(&k)).or_default();
        if let Some((_, id)) = bucket.iter().find(|(t, _)| (t.0, t.1, t.2.as_deref()) == k) {
            return Ok(Some(*id));
        }
        let id = self.next_thread;
        conn.prepare_cached("INSERT INTO threads (id, pid, thread_id, thread_name) VALUES (?1, ?2, ?3, ?4)")
            .and_then(|mut st| st.execute(params![id, k.0, k.1, k.2]))
            .map_err(|e| sql_err("intern thread", e))?;
        self.next_thread += 1;
        bucket.push(((k.0, k.1, k.2.map(Into::into)), id));
        Ok(Some(id))
    }
}

/// The rarely set columns, as stored in `events.extra`.
#[derive(Serialize, Deserialize, Default, Debug, PartialEq)]
pub(crate) struct Extra<'a> {
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub watch_values: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unwound: Option<bool>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub fault_address: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub registers: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub backtrace: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub locals: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub breakpoint_id: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub logpoint_message: Option<std::borrow::Cow<'a, str>>,
}

/// `extra` of an event: None when none of its rare columns is set.
pub(crate) fn encode_extra(ev: &Event) -> Option<String> {
    fn b(s: &Option<String>) -> Option<std::borrow::Cow<'_, str>> {
        s.as_deref().map(std::borrow::Cow::Borrowed)
    }
    let x = Extra {
        watch_values: b(&ev.watch_values),
        sampled: ev.sampled,
        unwound: ev.unwound,
        signal: b(&ev.signal),
        fault_address: b(&ev.fault_address),
        registers: b(&ev.registers),
        backtrace: b(&ev.backtrace),
        locals: b(&ev.locals),
        breakpoint_id: b(&ev.breakpoint_id),
        logpoint_message: b(&ev.logpoint_message),
    };
    if x == Extra::default() {
        return None;
    }
    Some(serde_json::to_string(&x).expect("strings and bools serialize"))
}

/// Integer references and packed columns of one row, resolved before binding.
#[derive(Default)]
pub(crate) struct RowRefs {
    pub key: i64,
    pub site: Option<i64>,
    pub thread: Option<i64>,
    pub extra: Option<String>,
}

/// Bind one event's columns (order of `schema::EVENT_COLUMNS`) after parameter `base`.
pub(crate) fn bind_row<'a>(b: &mut Binder<'_, 'a>, base: usize, ev: &'a Event, r: &'a RowRefs) {
    b.int(base + 1, ev.id);
    b.int(base + 2, r.key);
    b.int(base + 3, ev.timestamp_ns);
    b.int(base + 4, schema::kind_code(ev.event_type));
    b.opt_int(base + 5, r.site);
    b.opt_int(base + 6, r.thread);
    b.opt_int(base + 7, ev.duration_ns);
    b.opt_int(base + 8, ev.parent_event_id);
    b.opt_text(base + 9, ev.return_value.as_deref());
    match &ev.capture {
        // A typed enter stored as captured: its record in the `arguments` column, as a blob.
        Some(raw) => b.blob(base + 10, raw),
        None => b.opt_text(base + 10, ev.arguments.as_deref()),
    }
    b.opt_text(base + 11, ev.text.as_deref());
    b.opt_text(base + 12, r.extra.as_deref());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::event::EventType;

    #[test]
    fn extra_round_trips_and_is_absent_for_plain_events() {
        let mut e = Event::new("s", EventType::FunctionEnter, 1);
        assert_eq!(encode_extra(&e), None);
        e.sampled = Some(false);
        e.registers = Some(r#"{"rip":"0x1","note":"quote \" and \\ backslash"}"#.into());
        e.logpoint_message = Some("x = 1\nnext".into());
        let text = encode_extra(&e).unwrap();
        let back: Extra<'_> = serde_json::from_str(&text).unwrap();
        assert_eq!(back.sampled, Some(false));
        assert_eq!(back.registers.as_deref(), e.registers.as_deref());
        assert_eq!(back.logpoint_message.as_deref(), e.logpoint_message.as_deref());
        assert_eq!(back.signal, None);
    }
}
