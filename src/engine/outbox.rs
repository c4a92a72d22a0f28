//! The agents' outboxes (agent/src/outbox.ts): shared memory a process's agent drains its
//! ring records into, mapped here too, so a fast-path batch reaches the daemon as a small
//! `events_bin` message naming where its bytes are (`outbox: [start, length]`), not through
//! Frida's channel and the Python host.
//!
//! An agent offers its outbox with `{type: "outbox", fd, size, token}`: the memfd is opened
//! as `/proc/PID/fd/FD`, must be a `strobe-outbox` memfd of that size holding that token, and
//! is mapped; the word at 16 set to 1 tells the agent to use it (an answer in the shared
//! memory: a message the agent did not ask for could be in Frida's queues when the program
//! forks, which crashes the child, agent/src/forksafe.ts). A batch is copied out as its
//! message is read, and the read cursor (the header's first word) moves past it, freeing that
//! room for the agent. The mapping is dropped when its
//! process ends (ingest.rs `process_end`), after every message of that process was read.

use std::fs::OpenOptions;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use memmap2::MmapMut;
use rustc_hash::FxHashMap;
use serde_json::Value;

/// Bytes before the ring: the read cursor (u64), the token (u64), the "mapped" word (u32),
/// then padding.
const HEADER: usize = 64;
const MAPPED: usize = 16;
/// Larger offers are refused (the agent asks for a few batches' worth: megabytes).
const MAX_SIZE: u64 = 1 << 30;

struct Outbox {
    map: MmapMut,
}

/// Each process's mapped outbox, by pid (a session's followed children have their own).
#[derive(Default)]
pub(crate) struct Outboxes {
    boxes: Mutex<FxHashMap<u32, Outbox>>,
}

impl Outboxes {
    /// Map the outbox `offer` describes (the agent's `outbox` message) for `pid`; why not, else.
    pub(crate) fn open(&self, pid: u32, offer: &Value) -> Result<(), String> {
        let fd = offer.get("fd").and_then(Value::as_u64).ok_or("no fd")?;
        let size = offer.get("size").and_then(Value::as_u64).filter(|s| (HEADER as u64 + 8..=MAX_SIZE).contains(s)).ok_or("bad size")?;
        let token = offer.get("token").and_then(Value::as_str).and_then(|t| t.parse::<u64>().ok()).ok_or("no token")?;
        let path = format!("/proc/{pid}/fd/{fd}");
        let target = std::fs::read_link(&path).map_err(|e| format!("{path}: {e}"))?;
        if !target.to_string_lossy().starts_with("/memfd:strobe-outbox") {
            return Err(format!("{path} is {}, not the outbox", target.display()));
        }
        let file = OpenOptions::new().read(true).write(true).open(&path).map_err(|e| format!("{path}: {e}"))?;
        if file.metadata().map(|m| m.len()).ok() != Some(size) {
            return Err(format!("{path} is not {size} bytes"));
        }
        // Safety: the agent writes only where the cursor says the daemon is done (copy_out
        // reads before it moves the cursor), and the mapping is only read through copies.
        let mut map = unsafe { MmapMut::map_mut(&file) }.map_err(|e| format!("mmap {path}: {e}"))?;
        if u64::from_le_bytes(map[8..16].try_into().unwrap()) != token {
            return Err(format!("{path} does not hold the token"));
        }
        // Safety: a u32 of the mapping only ever accessed as this atomic here (the agent
        // reads it with a u32 load).
        let mapped = unsafe { std::sync::atomic::AtomicU32::from_ptr(map.as_mut_ptr().add(MAPPED) as *mut u32) };
        mapped.store(1, Ordering::Release);
        self.boxes.lock().unwrap().insert(pid, Outbox { map });
        Ok(())
    }

    /// The bytes of the batch at logical offset `start` (`len` bytes) in `pid`'s outbox, which
    /// the agent may then reuse; None if there is no such outbox or the place is out of it.
    pub(crate) fn copy_out(&self, pid: u32, start: u64, len: u64) -> Option<Vec<u8>> {
        let mut boxes = self.boxes.lock().unwrap();
        let b = boxes.get_mut(&pid)?;
        let ring = (b.map.len() - HEADER) as u64;
        let at = start % ring;
        if len > ring - at {
            return None;
        }
        let from = HEADER + at as usize;
        let bytes = b.map[from..from + len as usize].to_vec();
        release_pages(&mut b.map, from, from + len as usize);
        // Safety: the first 8 bytes of the page-aligned mapping, only ever accessed as this
        // atomic here (the agent reads it with a u64 load).
        let cursor = unsafe { AtomicU64::from_ptr(b.map.as_mut_ptr() as *mut u64) };
        cursor.store(start + len, Ordering::Release);
        Some(bytes)
    }

    /// Unmap `pid`'s outbox (its process ended, or its agent is gone).
    pub(crate) fn close(&self, pid: u32) {
        self.boxes.lock().unwrap().remove(&pid);
    }
}

/// Give back the memory of the pages wholly inside `from..to` (a batch just copied out, before
/// the cursor moves past it: the agent writes nothing there until then) beyond the ring's
/// first quarter. A daemon that keeps up reads every batch from the ring's start (the agent
/// starts over there once everything was read), so the pages further on are touched only while
/// it lags; without this they would stay resident in both processes until the target ends
/// (ten lagging sessions: 40 MiB). The agent's next write there takes a fresh zeroed page.
fn release_pages(map: &mut MmapMut, from: usize, to: usize) {
    const PAGE: usize = 4096;
    let keep = HEADER + (map.len() - HEADER) / 4;
    let start = from.max(keep).next_multiple_of(PAGE);
    let end = to / PAGE * PAGE;
    if start < end {
        // Safety: a range of our own shared mapping, page-aligned, that nobody reads or
        // writes now (see above); MADV_REMOVE punches it out of the memfd for both processes.
        unsafe { libc::madvise(map.as_mut_ptr().add(start).cast(), end - start, libc::MADV_REMOVE) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

    /// An outbox as the agent makes one, in this process: a memfd named as the agent names
    /// it, `size` bytes, the token at 8.
    fn memfd(name: &str, size: u64, token: u64) -> std::fs::File {
        let name = std::ffi::CString::new(name).unwrap();
        let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0, "memfd_create");
        let mut file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        file.set_len(size).unwrap();
        file.write_all(&[0u8; 8]).unwrap();
        file.write_all(&token.to_le_bytes()).unwrap();
        file
    }

    fn offer(fd: i32, size: u64, token: u64) -> Value {
        serde_json::json!({ "fd": fd, "size": size, "token": token.to_string() })
    }

    #[test]
    fn a_batch_is_copied_out_and_the_cursor_moves_past_it() {
        let pid = std::process::id();
        let size = (HEADER + 4096) as u64;
        let file = memfd("strobe-outbox", size, 42);
        let boxes = Outboxes::default();
        boxes.open(pid, &offer(file.as_raw_fd(), size, 42)).expect("mapped");
        let mut agent = unsafe { MmapMut::map_mut(&file) }.unwrap();
        assert_eq!(agent[MAPPED], 1, "the agent is told");
        // The agent's side: a batch at logical 4096 + 10 (the ring's second lap), physically 10.
        agent[HEADER + 10..HEADER + 15].copy_from_slice(b"hello");
        assert_eq!(boxes.copy_out(pid, 4096 + 10, 5).as_deref(), Some(&b"hello"[..]));
        assert_eq!(u64::from_le_bytes(agent[0..8].try_into().unwrap()), 4096 + 15, "the read cursor");
        // Across the end, or of a process without an outbox: nothing.
        assert_eq!(boxes.copy_out(pid, 4090, 10), None);
        assert_eq!(boxes.copy_out(pid + 1, 0, 5), None);
        boxes.close(pid);
        assert_eq!(boxes.copy_out(pid, 10, 5), None, "closed");
    }

    /// Memory the memfd holds (st_blocks, in bytes).
    fn resident(file: &std::fs::File) -> u64 {
        use std::os::unix::fs::MetadataExt;
        file.metadata().unwrap().blocks() * 512
    }

    #[test]
    fn pages_past_the_rings_first_quarter_are_given_back_once_read() {
        let pid = std::process::id();
        let page = 4096;
        let size = (HEADER + 16 * page) as u64;
        let file = memfd("strobe-outbox", size, 5);
        let boxes = Outboxes::default();
        boxes.open(pid, &offer(file.as_raw_fd(), size, 5)).expect("mapped");
        let mut agent = unsafe { MmapMut::map_mut(&file) }.unwrap();
        // A batch in the first quarter, and one from the middle of page 6 to the middle of page 14.
        agent[HEADER..HEADER + 2 * page].fill(1);
        let (at, len) = (6 * page + 100, 8 * page);
        agent[HEADER + at..HEADER + at + len].fill(2);
        let before = resident(&file);
        assert!(before >= (11 * page) as u64, "{before}");
        assert_eq!(boxes.copy_out(pid, 0, 2 * page as u64).unwrap(), vec![1; 2 * page]);
        assert_eq!(resident(&file), before, "the first quarter stays");
        assert_eq!(boxes.copy_out(pid, at as u64, len as u64).unwrap(), vec![2; len], "copied before released");
        // The mapping starts HEADER bytes before the ring: pages 7..14 of it are wholly the
        // batch's (ring bytes 6 pages + 100 - 64 .. 14 pages + 100 - 64); its first and last
        // pages are shared with bytes the agent may still write, and stay.
        assert_eq!(resident(&file), before - (7 * page) as u64);
        assert!(agent[HEADER + at..7 * page].iter().all(|&b| b == 2), "the batch's first page kept");
        assert!(agent[HEADER + at + len - 10..HEADER + at + len].iter().all(|&b| b == 2), "and its last");
    }

    #[test]
    fn offers_that_are_not_the_agents_outbox_are_refused() {
        let pid = std::process::id();
        let size = (HEADER + 4096) as u64;
        let boxes = Outboxes::default();
        let other = memfd("something-else", size, 7);
        let err = boxes.open(pid, &offer(other.as_raw_fd(), size, 7)).unwrap_err();
        assert!(err.contains("not the outbox"), "{err}");
        let file = memfd("strobe-outbox", size, 7);
        let err = boxes.open(pid, &offer(file.as_raw_fd(), size, 8)).unwrap_err();
        assert!(err.contains("token"), "{err}");
        let err = boxes.open(pid, &offer(file.as_raw_fd(), size + 4096, 7)).unwrap_err();
        assert!(err.contains("bytes"), "{err}");
        assert!(boxes.open(pid, &offer(9999, size, 7)).is_err(), "no such descriptor");
        assert!(boxes.open(pid, &serde_json::json!({ "fd": "x" })).is_err());
        assert_eq!(boxes.copy_out(pid, 0, 1), None, "nothing mapped");
    }
}
