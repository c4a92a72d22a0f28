//! The writer's side of `raw_batch.rs`: one batch of integer trace records into `events`,
//! the same rows `Writer::write_events` would write for `RawTraceBatch::to_events`. Per
//! batch: the session key, each site and thread interned once, the pid noted once. Per row:
//! integer binds, argument / return text bound from the batch's `TraceTexts` (formatted by
//! the producer's thread: the writer is the one serial stage of ingestion), and
//! counter bumps in small arrays (folded into `event_counts`, `thread_counts` and
//! `null_return_counts` once per batch) and in the id-bucket run (`counters.rs`).

use std::collections::HashSet;

use rusqlite::Connection;

use super::event::EventType;
use super::raw_batch::{RawTraceBatch, RawTraceRecord, TraceTexts};
use super::counters::is_null_return;
use super::rawstmt::RawInsert;
use super::schema::{self, EVENT_COLUMN_COUNT};
use super::writer::{State, Writer, ROWS_PER_STATEMENT};
use crate::error::{Result, StrobeError};

/// A batch's rows per (site index, enter/exit), (thread index, enter/exit), and its exits
/// returning null (`counters::is_null_return`: `"0x0"`, `null`) per site index.
struct Counts {
    sites: Vec<i64>,
    threads: Vec<i64>,
    nulls: Vec<i64>,
}

/// Ids of a batch's sites and threads in `sites` / `threads`.
struct Resolved {
    key: i64,
    sites: Vec<Option<i64>>,
    threads: Vec<Option<i64>>,
}

impl Writer {
    pub(super) fn write_trace_batch(&mut self, batch: RawTraceBatch, texts: TraceTexts) {
        if batch.records.is_empty() && batch.capture_rows.is_empty() {
            return;
        }
        if !batch.is_consistent() {
            tracing::error!("event store: trace batch with a site or thread index out of range; {} events lost", batch.records.len());
            return;
        }
        if let Err(e) = self.begin() {
            tracing::error!("event store: cannot begin a transaction, {} events lost: {e}", batch.records.len());
            return;
        }
        let conn = &self.conn;
        let st = &mut self.st;
        let res = match resolve(st, conn, &batch) {
            Ok(r) => r,
            Err(e) => {
                tracing::error!("event store: {e}; {} trace events lost", batch.records.len());
                return;
            }
        };
        if let Err(e) = super::captures::write(conn, res.key, &batch.capture_rows) {
            tracing::error!("event store: {e}; typed captures of this batch may print <unreadable …>");
        }
        // The raw capture of each record stored as captured (None: stored as text).
        let mut captures: Vec<Option<&[u8]>> = Vec::new();
        if !batch.captures.is_empty() {
            captures.resize(batch.records.len(), None);
            for (i, raw) in &batch.captures {
                if let Some(slot) = captures.get_mut(*i as usize) {
                    *slot = Some(raw);
                }
            }
        }
        // Rows per (site, enter/exit), per (thread, enter/exit) and null returns per site,
        // added to the transaction's counters at the end.
        let mut counts = Counts {
            sites: vec![0; res.sites.len() * 2],
            threads: vec![0; res.threads.len() * 2],
            nulls: vec![0; res.sites.len()],
        };
        let mut rest: &[RawTraceRecord] = &batch.records;
        let mut first = 0;
        while !rest.is_empty() {
            let n = if rest.len() >= ROWS_PER_STATEMENT { ROWS_PER_STATEMENT } else { 1 };
            let (chunk, tail) = rest.split_at(n);
            rest = tail;
            let stmt = if n > 1 { &mut self.insert_many } else { &mut self.insert_one };
            let chunk_texts = (first, &texts, captures.get(first..first + n).unwrap_or(&[]));
            first += n;
            if let Err(e) = insert_chunk(st, conn, stmt, &res, chunk, chunk_texts, &mut counts) {
                st.row_errors += 1;
                if st.row_errors <= 10 || st.row_errors.is_power_of_two() {
                    tracing::warn!("event store: {e} ({} failed inserts so far)", st.row_errors);
                }
            }
        }
        let enter = schema::kind_code(EventType::FunctionEnter);
        let exit = schema::kind_code(EventType::FunctionExit);
        for (i, n) in counts.sites.into_iter().enumerate().filter(|(_, n)| *n > 0) {
            let kind = if i % 2 == 1 { exit } else { enter };
            *st.txn_counts.entry((res.key, kind, res.sites[i / 2].unwrap_or(0))).or_default() += n;
        }
        for (i, n) in counts.threads.into_iter().enumerate().filter(|(_, n)| *n > 0) {
            st.txn_more.thread(res.key, if i % 2 == 1 { exit } else { enter }, res.threads[i / 2].unwrap_or(0), n);
        }
        for (i, n) in counts.nulls.into_iter().enumerate().filter(|(_, n)| *n > 0) {
            st.txn_more.null_returns(res.key, res.sites[i].unwrap_or(0), n);
        }
    }
}

fn resolve(st: &mut State, conn: &Connection, batch: &RawTraceBatch) -> Result<Resolved> {
    let key = st.session_key(conn, &batch.session_id)?;
    let mut sites = Vec::with_capacity(batch.sites.len());
    for s in &batch.sites {
        let parts = (Some(s.function_name.as_str()), Some(s.function_name_raw.as_str()), s.source_file.as_deref(), s.line_number);
        sites.push(st.interner.site_parts(conn, parts)?);
    }
    let mut threads = Vec::with_capacity(batch.threads.len());
    for t in &batch.threads {
        threads.push(st.interner.thread_parts(conn, (Some(batch.pid), Some(t.thread_id), t.thread_name.as_deref()))?);
    }
    st.note_pid(conn, key, batch.pid)?;
    Ok(Resolved { key, sites, threads })
}

/// One INSERT of `chunk.len()` rows (the statement is prepared for exactly that many).
fn insert_chunk(
    st: &mut State,
    conn: &Connection,
    stmt: &mut RawInsert,
    res: &Resolved,
    chunk: &[RawTraceRecord],
    (first, texts, captures): (usize, &TraceTexts, &[Option<&[u8]>]),
    counts: &mut Counts,
) -> Result<()> {
    let enter = schema::kind_code(EventType::FunctionEnter);
    let exit = schema::kind_code(EventType::FunctionExit);
    let inserted = stmt.execute_with(|b| {
        for (i, r) in chunk.iter().enumerate() {
            let text = texts.get(first + i);
            // Columns in the order of `schema::EVENT_COLUMNS`; unbound ones stay NULL.
            let base = i * EVENT_COLUMN_COUNT;
            b.int(base + 1, r.id);
            b.int(base + 2, res.key);
            b.int(base + 3, r.timestamp_ns);
            b.int(base + 4, if r.exit { exit } else { enter });
            b.opt_int(base + 5, res.sites[r.site as usize]);
            b.opt_int(base + 6, res.threads[r.thread as usize]);
            if r.parent_event_id != 0 {
                b.int(base + 8, r.parent_event_id);
            }
            if r.exit {
                b.int(base + 7, r.duration_ns);
                b.opt_text(base + 9, (!r.unwound_exit()).then_some(text));
            } else if let Some(Some(raw)) = captures.get(i) {
                b.blob(base + 10, raw);
            } else {
                b.opt_text(base + 10, Some(text));
            }
            if let Some(extra) = r.extra() {
                b.opt_text(base + 12, Some(extra));
            }
        }
    })?;
    let (mut lo, mut hi) = (i64::MAX, i64::MIN);
    for (i, r) in chunk.iter().enumerate() {
        lo = lo.min(r.id);
        hi = hi.max(r.id);
        counts.sites[r.site as usize * 2 + r.exit as usize] += 1;
        counts.threads[r.thread as usize * 2 + r.exit as usize] += 1;
        // The stored text decides, as for `returnValue.isNull` (a typed `0` is not null).
        if r.exit && (r.unwound_exit() || is_null_return(Some(texts.get(first + i)))) {
            counts.nulls[r.site as usize] += 1;
        }
        st.txn_more.row(res.key, r.id, if r.exit { exit } else { enter });
    }
    st.txn_events += chunk.len();
    st.txn_max_id = st.txn_max_id.max(hi);
    st.txn_touched.insert(res.key);
    let range = st.txn_ids.entry(res.key).or_insert((lo, hi));
    *range = (range.0.min(lo), range.1.max(hi));
    let ks = st.sessions.get_mut(&res.key).expect("session_key registers the key");
    if let Some(c) = ks.count.as_mut() {
        *c += chunk.len() as i64;
    }
    ks.note_alive(lo);
    if inserted < chunk.len() {
        // Some ids already existed: the rows decide the counters (see `State::insert_rows`).
        for c in [&mut counts.sites, &mut counts.threads, &mut counts.nulls] {
            c.iter_mut().for_each(|c| *c = 0);
        }
        st.recount(conn, HashSet::from([res.key]))?;
        return Err(StrobeError::internal(format!(
            "{} of {} trace events not stored: their id already exists (ids come from Store::next_event_id)",
            chunk.len() - inserted,
            chunk.len()
        )));
    }
    Ok(())
}
