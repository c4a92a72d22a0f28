//! stdout/stderr arrive in whatever pieces the target's `write()` calls made (a full stdio
//! buffer cuts lines anywhere); the timeline stores one event per line. A piece's trailing
//! partial line waits here for its newline — or, if none comes, is stored as it is once its
//! stream has been quiet for `FLUSH_AFTER` (a prompt without newline), when its stream closes,
//! or when it grows past `MAX_PENDING` bytes.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// How long a partial line waits for more output of its stream. A busy 2-core machine can
/// deschedule a writer for over 100 ms between two `write()`s of one stdio buffer (a line
/// was split in CI at 100 ms); a prompt showing up a second late costs an LLM nothing.
pub(super) const FLUSH_AFTER: Duration = Duration::from_secs(1);
/// A line longer than this is stored in pieces of this size.
const MAX_PENDING: usize = 64 * 1024;

/// One finished line (with its newline, if it had one) of stream `fd` of process `pid`;
/// `ts` is when its first byte arrived.
pub(super) struct Line {
    pub pid: u32,
    pub fd: u8,
    pub ts: i64,
    pub text: String,
}

struct Pending {
    bytes: Vec<u8>,
    ts: i64,
    since: Instant,
}

#[derive(Default)]
pub(super) struct LineBuffers {
    pending: HashMap<(u32, u8), Pending>,
    /// Streams that brought output and have not closed yet.
    open: HashSet<(u32, u8)>,
}

impl LineBuffers {
    /// The lines `data` completes (the earlier partial line first); its tail waits.
    pub(super) fn push(&mut self, pid: u32, fd: u8, data: &[u8], ts: i64) -> Vec<Line> {
        self.open.insert((pid, fd));
        let mut out = Vec::new();
        let mut rest = data;
        while let Some(nl) = rest.iter().position(|b| *b == b'\n') {
            let (line, tail) = rest.split_at(nl + 1);
            let (bytes, first_ts) = match self.pending.remove(&(pid, fd)) {
                Some(mut p) => {
                    p.bytes.extend_from_slice(line);
                    (p.bytes, p.ts)
                }
                None => (line.to_vec(), ts),
            };
            out.push(Line { pid, fd, ts: first_ts, text: String::from_utf8_lossy(&bytes).into_owned() });
            rest = tail;
        }
        if !rest.is_empty() {
            let p = self.pending.entry((pid, fd)).or_insert_with(|| Pending { bytes: Vec::new(), ts, since: Instant::now() });
            p.bytes.extend_from_slice(rest);
            p.since = Instant::now(); // quiet time counts from the latest piece
            if p.bytes.len() >= MAX_PENDING {
                out.extend(self.take(pid, Some(fd)));
            }
        }
        out
    }

    /// Stream `fd` of `pid` closed: its partial line, stored as it is.
    pub(super) fn close(&mut self, pid: u32, fd: u8) -> Vec<Line> {
        self.open.remove(&(pid, fd));
        self.take(pid, Some(fd))
    }

    /// Has `pid` a stream that brought output and is still open?
    pub(super) fn streams_open(&self, pid: u32) -> bool {
        self.open.iter().any(|k| k.0 == pid)
    }

    /// Partial lines of `pid` (of stream `fd`, or all of its streams), stored as they are;
    /// without `fd` the process is gone, and so are its streams.
    pub(super) fn take(&mut self, pid: u32, fd: Option<u8>) -> Vec<Line> {
        if fd.is_none() {
            self.open.retain(|k| k.0 != pid);
        }
        let keys: Vec<(u32, u8)> = self.pending.keys().filter(|k| k.0 == pid && fd.is_none_or(|f| f == k.1)).copied().collect();
        keys.into_iter().filter_map(|k| self.line_of(k)).collect()
    }

    /// Partial lines whose stream has been quiet for `FLUSH_AFTER` or longer.
    pub(super) fn expired(&mut self, now: Instant) -> Vec<Line> {
        let keys: Vec<(u32, u8)> = self.pending.iter().filter(|(_, p)| now.duration_since(p.since) >= FLUSH_AFTER).map(|(k, _)| *k).collect();
        keys.into_iter().filter_map(|k| self.line_of(k)).collect()
    }

    /// When the oldest partial line is due, if any waits.
    pub(super) fn next_due(&self) -> Option<Instant> {
        self.pending.values().map(|p| p.since + FLUSH_AFTER).min()
    }

    fn line_of(&mut self, key: (u32, u8)) -> Option<Line> {
        let p = self.pending.remove(&key)?;
        Some(Line { pid: key.0, fd: key.1, ts: p.ts, text: String::from_utf8_lossy(&p.bytes).into_owned() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(lines: &[Line]) -> Vec<&str> {
        lines.iter().map(|l| l.text.as_str()).collect()
    }

    #[test]
    fn lines_cut_by_writes_are_joined() {
        let mut b = LineBuffers::default();
        assert_eq!(texts(&b.push(1, 1, b"line 1\nli", 10)), ["line 1\n"]);
        assert_eq!(texts(&b.push(1, 2, b"err", 11)), Vec::<&str>::new());
        let joined = b.push(1, 1, b"ne 2\nline 3\n", 12);
        assert_eq!(texts(&joined), ["line 2\n", "line 3\n"]);
        assert_eq!(joined[0].ts, 10, "a line is stamped when its first byte came");
        assert_eq!(texts(&b.take(1, None)), ["err"]);
        assert!(b.next_due().is_none());
    }

    #[test]
    fn a_line_growing_in_pieces_waits_from_its_latest_piece() {
        let mut b = LineBuffers::default();
        b.push(3, 1, b"li", 0);
        let first_due = b.next_due().unwrap();
        std::thread::sleep(Duration::from_millis(5));
        b.push(3, 1, b"ne", 1);
        assert!(b.expired(first_due).is_empty(), "the second piece restarts the wait");
        assert_eq!(texts(&b.push(3, 1, b" 7\n", 2)), ["line 7\n"]);
    }

    #[test]
    fn a_stream_is_open_from_its_first_output_until_it_closes() {
        let mut b = LineBuffers::default();
        assert!(!b.streams_open(4), "no output yet: nothing to wait for");
        b.push(4, 1, b"tail without newline", 0);
        b.push(4, 2, b"e\n", 0);
        assert!(b.streams_open(4));
        assert_eq!(texts(&b.close(4, 1)), ["tail without newline"]);
        assert!(b.streams_open(4), "stderr is still open");
        assert!(b.close(4, 2).is_empty());
        assert!(!b.streams_open(4));
        b.push(4, 1, b"x", 0);
        assert_eq!(texts(&b.take(4, None)), ["x"]);
        assert!(!b.streams_open(4), "a process that is gone has no open streams");
    }

    #[test]
    fn a_partial_line_is_stored_after_the_timeout() {
        let mut b = LineBuffers::default();
        b.push(7, 1, b"prompt> ", 0);
        assert!(b.expired(Instant::now()).is_empty());
        let due = b.next_due().unwrap();
        assert_eq!(texts(&b.expired(due)), ["prompt> "]);
    }
}
