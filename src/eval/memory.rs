//! Reading a live target's memory from the daemon. The target runs as the daemon's user
//! (we spawned it), so `process_vm_readv` works without ptrace; every read is checked, and a
//! fault is an error naming the address, never a crash on either side.

use std::cell::RefCell;
use std::collections::HashMap;

/// Target memory, by runtime address.
pub trait Memory {
    /// Fill `buf` from `addr`; an error says which address could not be read.
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), String>;

    /// The function whose code holds `addr`, as gdb prints a function pointer's target
    /// (`cmp_int`, `unixOpen+16`); None where memory is not a process's.
    fn code_symbol(&self, _addr: u64) -> Option<String> {
        None
    }

    fn read_vec(&self, addr: u64, len: usize) -> Result<Vec<u8>, String> {
        let mut v = vec![0u8; len];
        self.read(addr, &mut v)?;
        Ok(v)
    }

    fn read_u64(&self, addr: u64) -> Result<u64, String> {
        let mut b = [0u8; 8];
        self.read(addr, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }
}

const PAGE: u64 = 4096;

/// A live process's memory, read a page at a time and cached for the life of this value:
/// one evaluation sees one consistent snapshot of each page and pays one syscall per page.
pub struct ProcessMemory {
    pid: u32,
    pages: RefCell<HashMap<u64, Option<Box<[u8]>>>>,
    /// The process's file mappings, read at the first `code_symbol`.
    maps: RefCell<Option<Vec<Mapping>>>,
}

/// A line of /proc/PID/maps that maps a file.
pub(crate) struct Mapping {
    pub start: u64,
    pub end: u64,
    pub offset: u64,
    pub exec: bool,
    pub path: String,
}

/// The file mappings of /proc/PID/maps text.
pub(crate) fn parse_maps(text: &str) -> Vec<Mapping> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (lo, hi) = f.next()?.split_once('-')?;
            let perms = f.next()?;
            let offset = u64::from_str_radix(f.next()?, 16).ok()?;
            let path = f.nth(2).filter(|p| p.starts_with('/'))?;
            let hex = |v: &str| u64::from_str_radix(v, 16).ok();
            Some(Mapping { start: hex(lo)?, end: hex(hi)?, offset, exec: perms.contains('x'), path: path.to_string() })
        })
        .collect()
}

impl ProcessMemory {
    pub fn new(pid: u32) -> ProcessMemory {
        ProcessMemory { pid, pages: RefCell::new(HashMap::new()), maps: RefCell::new(None) }
    }

    /// Drop cached pages (after a write).
    pub fn forget(&self) {
        self.pages.borrow_mut().clear();
    }

    fn page(&self, base: u64) -> Option<Box<[u8]>> {
        if let Some(p) = self.pages.borrow().get(&base) {
            return p.clone();
        }
        let mut buf = vec![0u8; PAGE as usize].into_boxed_slice();
        let ok = read_remote(self.pid, base, &mut buf) == Some(PAGE as usize);
        let page = ok.then_some(buf);
        self.pages.borrow_mut().insert(base, page.clone());
        page
    }
}

impl Memory for ProcessMemory {
    fn code_symbol(&self, addr: u64) -> Option<String> {
        let mut maps = self.maps.borrow_mut();
        let maps = maps.get_or_insert_with(|| parse_maps(&std::fs::read_to_string(format!("/proc/{}/maps", self.pid)).unwrap_or_default()));
        let m = maps.iter().find(|m| m.exec && addr >= m.start && addr < m.end)?;
        // The file's first mapping (offset 0) is where its lowest loaded address went.
        let first = maps.iter().filter(|f| f.path == m.path && f.offset == 0).map(|f| f.start).min()?;
        let table = crate::symbols::ElfSymbols::cached(std::path::Path::new(&m.path));
        table.describe(addr.wrapping_sub(first).wrapping_add(table.image_base))
    }

    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), String> {
        let unreadable = || format!("unreadable memory 0x{addr:x}");
        if buf.is_empty() {
            return Ok(());
        }
        addr.checked_add(buf.len() as u64).ok_or_else(unreadable)?;
        let mut done = 0usize;
        while done < buf.len() {
            let at = addr + done as u64;
            let base = at & !(PAGE - 1);
            let page = self.page(base).ok_or_else(|| format!("unreadable memory 0x{at:x}"))?;
            let off = (at - base) as usize;
            let n = (PAGE as usize - off).min(buf.len() - done);
            buf[done..done + n].copy_from_slice(&page[off..off + n]);
            done += n;
        }
        Ok(())
    }
}

/// One `process_vm_readv`; the number of bytes read, or None.
fn read_remote(pid: u32, addr: u64, buf: &mut [u8]) -> Option<usize> {
    let local = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    let remote = libc::iovec { iov_base: addr as *mut libc::c_void, iov_len: buf.len() };
    // SAFETY: `local` covers `buf`, which we own; the kernel checks the remote range.
    let n = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, &remote, 1, 0) };
    (n >= 0).then_some(n as usize)
}

/// Write `bytes` at `addr` in process `pid` (data pages only: code is read-only).
pub fn write_remote(pid: u32, addr: u64, bytes: &[u8]) -> Result<(), String> {
    let local = libc::iovec { iov_base: bytes.as_ptr() as *mut libc::c_void, iov_len: bytes.len() };
    let remote = libc::iovec { iov_base: addr as *mut libc::c_void, iov_len: bytes.len() };
    // SAFETY: `local` covers `bytes`; the kernel checks the remote range.
    let n = unsafe { libc::process_vm_writev(pid as libc::pid_t, &local, 1, &remote, 1, 0) };
    if n as usize == bytes.len() {
        Ok(())
    } else {
        Err(format!("cannot write {} bytes at 0x{addr:x}: {}", bytes.len(), std::io::Error::last_os_error()))
    }
}

/// Plain bytes as memory (a value already copied out of the target, e.g. a register).
impl Memory for [u8] {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), String> {
        let start = addr as usize;
        match self.get(start..start.saturating_add(buf.len())) {
            Some(s) if addr <= usize::MAX as u64 => {
                buf.copy_from_slice(s);
                Ok(())
            }
            _ => Err(format!("unreadable memory 0x{addr:x}")),
        }
    }
}
