//! The copied bytes of one natively captured record (`capture_plan.rs`), found by address.
//! The payload is a run of blocks `u64 address | u32 meta | bytes`; a decode reads each field
//! of each struct through here, so lookups must not scan every block: blocks are indexed by
//! start address (binary search, plus the block of the previous hit, since a struct's fields
//! are read one after another from the same copy). Blocks may overlap or nest (a struct copied
//! again inside a bigger copy, pointees shared by several paths): a read is served by any block
//! that holds all of it — they are copies of the same memory. A read that no single block
//! holds is what faulted in the target.
//!
//! The index lives in a reusable scratch (`Index`) so decoding a record allocates nothing here.

use std::cell::Cell;

use super::capture_plan::{BLOCK_HEADER, MAX_STRING};

/// Where argument (or return) registers are placed for reading: register i at
/// `REG_ADDR + 16 * i` (never a user-space address); its 16 bytes are that register and the
/// next (a value passed in two, as Rust's `&str`).
pub(super) const REG_ADDR: u64 = 0xffff_ff00_0000_0000;
/// The label of the copy of xmm register i in a payload: `XMM_ADDR + 16 * i` (capture_types.h
/// CAP_XMM_ADDR; a kernel address, never a pointee's).
pub(super) const XMM_ADDR: u64 = 0xffff_fe00_0000_0000;
/// The label of a stack argument's copy: `STACK_ADDR + ` its offset from the first
/// (capture_types.h CAP_STACK_ADDR).
pub(super) const STACK_ADDR: u64 = 0xffff_fd00_0000_0000;
pub(super) const META_CSTRING: u32 = 1 << 30;
pub(super) const META_TERMINATED: u32 = 1 << 31;
const META_LEN: u32 = (1 << 30) - 1;
/// Most words a view's registers hold: six integer argument registers, then two words for
/// each small struct the decoder puts together from xmm registers (capture_decode.rs, at
/// most one per xmm argument register).
pub(super) const MAX_REGS: usize = 6 + 2 * 8;

/// A struct copy: `[start, end)` of target memory, at `at` in the payload.
#[derive(Clone, Copy, Debug)]
struct Block {
    start: u64,
    end: u64,
    at: usize,
}

/// A C string: its address, where its stored bytes are in the payload, and the length the
/// hook scanned (beyond MAX_STRING only the first MAX_STRING bytes are stored).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct CString {
    pub addr: u64,
    at: usize,
    stored: usize,
    pub len: usize,
    pub terminated: bool,
}

/// Reusable storage of a view's index (keep one per decoding thread).
#[derive(Default)]
pub(super) struct Index {
    /// Sorted by start address.
    blocks: Vec<Block>,
    /// `reach[i]`: the highest end of `blocks[..=i]` (stops the backward search early).
    reach: Vec<u64>,
    /// Sorted by address, payload order kept among equal addresses.
    strings: Vec<CString>,
}

/// One record's registers and payload, indexed.
pub(super) struct View<'a> {
    regs: [u8; 8 * MAX_REGS],
    nregs: usize,
    payload: &'a [u8],
    index: &'a Index,
    /// The block of the last successful read.
    last: Cell<usize>,
}

/// The header of the block at `at` in `payload`, if whole: its address (a span's key) and meta.
pub(super) fn block_header(payload: &[u8], at: usize) -> Option<(u64, u32)> {
    let h = payload.get(at..at + BLOCK_HEADER as usize)?;
    Some((u64::from_le_bytes(h[..8].try_into().unwrap()), u32::from_le_bytes(h[8..].try_into().unwrap())))
}

/// The first `n` bytes of the block copied from exactly `addr` (an xmm register's copy), if
/// the payload holds one.
pub(super) fn block_at(payload: &[u8], addr: u64, n: usize) -> Option<&[u8]> {
    let mut at = 0usize;
    while let Some((start, meta)) = block_header(payload, at) {
        let (len, stored) = block_len(meta);
        let data = at + BLOCK_HEADER as usize;
        if start == addr && meta & META_CSTRING == 0 && len >= n {
            return payload.get(data..data + n);
        }
        at = data + stored;
    }
    None
}

/// The length a struct copy's or C string's meta gives, and the bytes that follow its header
/// (a C string scanned beyond MAX_STRING keeps MAX_STRING).
pub(super) fn block_len(meta: u32) -> (usize, usize) {
    let len = (meta & META_LEN) as usize;
    (len, if meta & META_CSTRING != 0 { len.min(MAX_STRING) } else { len })
}

impl Index {
    /// Index `payload` (its blocks up to the first truncated one) and view it with `regs`.
    pub fn view<'a>(&'a mut self, regs: &[u64], payload: &'a [u8]) -> View<'a> {
        self.blocks.clear();
        self.reach.clear();
        self.strings.clear();
        let mut at = 0usize;
        while let Some((addr, meta)) = block_header(payload, at) {
            let (len, stored) = block_len(meta);
            let data = at + BLOCK_HEADER as usize;
            if payload.len() - data < stored {
                break;
            }
            if meta & META_CSTRING != 0 {
                self.strings.push(CString { addr, at: data, stored, len, terminated: meta & META_TERMINATED != 0 });
            } else if let Some(end) = addr.checked_add(len as u64) {
                self.blocks.push(Block { start: addr, end, at: data });
            }
            at = data + stored;
        }
        self.blocks.sort_unstable_by_key(|b| (b.start, b.end));
        let mut reach = 0;
        self.reach.extend(self.blocks.iter().map(|b| {
            reach = reach.max(b.end);
            reach
        }));
        self.strings.sort_by_key(|s| s.addr);
        let mut r = [0u8; 8 * MAX_REGS];
        let nregs = regs.len().min(MAX_REGS);
        for (i, w) in regs.iter().take(nregs).enumerate() {
            r[8 * i..8 * i + 8].copy_from_slice(&w.to_le_bytes());
        }
        View { regs: r, nregs, payload, index: self, last: Cell::new(usize::MAX) }
    }
}

impl<'a> View<'a> {
    /// The `n` bytes at `addr`, or `Err` when no register or block holds them all.
    pub fn bytes(&self, addr: u64, n: u64) -> Result<&[u8], ()> {
        let end = addr.checked_add(n).ok_or(())?;
        if addr >= REG_ADDR {
            let (i, off) = (((addr - REG_ADDR) / 16) as usize, (addr - REG_ADDR) % 16);
            // A value may span two registers (Rust's `&str`: pointer, then length).
            if off + n <= 16 && 8 * i as u64 + off + n <= 8 * self.nregs as u64 {
                let from = 8 * i + off as usize;
                return Ok(&self.regs[from..from + n as usize]);
            }
        }
        let blocks = &self.index.blocks;
        let hit = |b: &Block| &self.payload[b.at + (addr - b.start) as usize..b.at + (end - b.start) as usize];
        if let Some(b) = blocks.get(self.last.get()) {
            if b.start <= addr && end <= b.end {
                return Ok(hit(b));
            }
        }
        // Blocks starting at or before addr, latest first, while one of them may reach `end`.
        let mut i = blocks.partition_point(|b| b.start <= addr);
        while i > 0 && self.index.reach[i - 1] >= end {
            i -= 1;
            if blocks[i].end >= end {
                self.last.set(i);
                return Ok(hit(&blocks[i]));
            }
        }
        Err(())
    }

    /// Up to 8 bytes at `addr` as a little-endian integer.
    pub fn u64_at(&self, addr: u64, n: u64) -> Result<u64, ()> {
        let b = self.bytes(addr, n)?;
        let mut w = [0u8; 8];
        w[..b.len()].copy_from_slice(b);
        Ok(u64::from_le_bytes(w))
    }

    /// The first C string copied from `addr`, and its stored bytes.
    pub fn cstring(&self, addr: u64) -> Option<(&CString, &[u8])> {
        let strings = &self.index.strings;
        let s = strings.get(strings.partition_point(|s| s.addr < addr)).filter(|s| s.addr == addr)?;
        Some((s, &self.payload[s.at..s.at + s.stored]))
    }
}

/// Append a block as the hook writes it (tests).
#[cfg(test)]
pub(super) fn push_block(payload: &mut Vec<u8>, addr: u64, meta: u32, bytes: &[u8]) {
    payload.extend_from_slice(&addr.to_le_bytes());
    payload.extend_from_slice(&meta.to_le_bytes());
    payload.extend_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use super::push_block as block;
    use super::*;

    #[test]
    fn reads_are_served_by_any_block_that_holds_them() {
        let mut p = Vec::new();
        block(&mut p, 0x2000, 4, &[20, 21, 22, 23]); // nested in the next one, copied first
        block(&mut p, 0x1ff0, 32, &(0..32).collect::<Vec<u8>>());
        block(&mut p, 0x3000, 4, &[1, 2, 3, 4]); // adjacent to the next one
        block(&mut p, 0x3004, 4, &[5, 6, 7, 8]);
        block(&mut p, 0x4000, 8, &[9; 8]); // overlapping the next one
        block(&mut p, 0x4004, 8, &[7; 8]);
        block(&mut p, 0x5000, 2 | META_CSTRING | META_TERMINATED, b"hi"); // a C string and a struct at one address
        block(&mut p, 0x5000, 4, b"hi\0x");
        let mut index = Index::default();
        let v = index.view(&[0x1122, 7], &p);
        assert_eq!(v.bytes(0x2000, 2), Ok(&[20u8, 21][..]), "inside the nested copy");
        assert_eq!(v.bytes(0x2002, 8), Ok(&[18u8, 19, 20, 21, 22, 23, 24, 25][..]), "beyond the nested copy: the bigger one");
        assert_eq!(v.bytes(0x1ff0, 1), Ok(&[0u8][..]));
        assert!(v.bytes(0x200e, 4).is_err(), "past the end of the bigger copy");
        assert!(v.bytes(0x1fef, 2).is_err(), "before its start");
        assert_eq!(v.bytes(0x3000, 4), Ok(&[1u8, 2, 3, 4][..]));
        assert_eq!(v.bytes(0x3004, 4), Ok(&[5u8, 6, 7, 8][..]));
        assert!(v.bytes(0x3002, 4).is_err(), "a read across two adjacent copies was not one read in the target");
        assert_eq!(v.bytes(0x4002, 4), Ok(&[9u8; 4][..]));
        assert_eq!(v.bytes(0x4006, 6), Ok(&[7u8; 6][..]));
        assert!(v.bytes(0x4002, 10).is_err());
        assert_eq!(v.bytes(0x5000, 4), Ok(&b"hi\0x"[..]), "the struct copy, not the string");
        let (s, bytes) = v.cstring(0x5000).unwrap();
        assert_eq!((bytes, s.len, s.terminated), (&b"hi"[..], 2, true));
        assert!(v.cstring(0x3000).is_none(), "a struct copy is not a string");
        assert_eq!(v.u64_at(REG_ADDR, 8), Ok(0x1122));
        assert_eq!(v.u64_at(REG_ADDR + 16, 4), Ok(7));
        assert!(v.bytes(REG_ADDR + 32, 8).is_err(), "no third register");
        assert_eq!(v.u64_at(REG_ADDR + 8, 8), Ok(7), "a two-register value's second word (Rust's &str length)");
        assert!(v.bytes(REG_ADDR + 24, 8).is_err(), "nor the word after the last register");
        assert!(v.bytes(u64::MAX - 1, 4).is_err(), "no wrap-around");
    }

    #[test]
    fn a_truncated_payload_keeps_its_whole_blocks() {
        let mut p = Vec::new();
        block(&mut p, 0x1000, 4, &[1, 2, 3, 4]);
        block(&mut p, 0x2000, 8, &[1, 2, 3]); // cut short
        let mut index = Index::default();
        let v = index.view(&[], &p);
        assert_eq!(v.bytes(0x1001, 2), Ok(&[2u8, 3][..]));
        assert!(v.bytes(0x2000, 1).is_err());
    }
}
