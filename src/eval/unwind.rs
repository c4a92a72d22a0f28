//! Caller frames, gdb's `frame N`/`up`: the registers of frame N+1 computed from frame N's
//! with the binary's `.eh_frame` (the CFA rule and the saved-register rules at the PC).
//! Registers the CFI does not describe keep their value (callee-saved by the ABI).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use gimli::{CfaRule, EhFrame, RegisterRule, UnwindSection};
use object::{Object, ObjectSection};

use super::Memory;

/// x86-64 DWARF register numbers → Frida's names (16 = the return address column).
const DWARF_REGS: [&str; 17] = [
    "rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "rip",
];

pub fn dwarf_register_name(n: u16) -> Option<&'static str> {
    DWARF_REGS.get(n as usize).copied()
}

/// The registers of one frame (runtime values) and whether its PC is a return address.
#[derive(Debug, Clone)]
pub struct FrameRegs {
    pub regs: BTreeMap<String, u64>,
    /// Frames above the innermost hold a return address: look up `pc - 1` (gdb's rule).
    pub caller: bool,
}

impl FrameRegs {
    pub fn pc(&self) -> u64 {
        self.regs.get("rip").or_else(|| self.regs.get("pc")).copied().unwrap_or(0)
    }
    /// The PC to look up scopes, lines and location lists with.
    pub fn lookup_pc(&self) -> u64 {
        if self.caller { self.pc().saturating_sub(1) } else { self.pc() }
    }
}

/// The `.eh_frame` of one binary, kept in memory (cached per path).
pub struct Unwinder {
    data: Vec<u8>,
}

impl Unwinder {
    pub fn cached(path: &Path) -> Result<Arc<Unwinder>, String> {
        static CACHE: OnceLock<Mutex<HashMap<PathBuf, (Option<std::time::SystemTime>, Arc<Unwinder>)>>> = OnceLock::new();
        let cache = CACHE.get_or_init(Default::default);
        let stamp = std::fs::metadata(path).ok().and_then(|m| m.modified().ok());
        if let Some((s, u)) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(path) {
            if *s == stamp {
                return Ok(u.clone());
            }
        }
        let data = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let u = Arc::new(Unwinder { data });
        cache.lock().unwrap_or_else(|e| e.into_inner()).insert(path.to_path_buf(), (stamp, u.clone()));
        Ok(u)
    }

    /// The CFA rule at static `pc`: (register name, offset).
    pub fn cfa_rule(&self, pc: u64) -> Option<(&'static str, i64)> {
        self.with_row(pc, |row| match row.cfa() {
            CfaRule::RegisterAndOffset { register, offset } => Some((dwarf_register_name(register.0)?, *offset)),
            CfaRule::Expression(_) => None,
        })
        .flatten()
    }

    fn with_row<T>(&self, pc: u64, f: impl FnOnce(&gimli::UnwindTableRow<usize>) -> T) -> Option<T> {
        let obj = object::File::parse(&*self.data).ok()?;
        let section = obj.section_by_name(".eh_frame")?;
        let mut bases = gimli::BaseAddresses::default().set_eh_frame(section.address());
        if let Some(text) = obj.section_by_name(".text") {
            bases = bases.set_text(text.address());
        }
        let mut eh = EhFrame::new(section.data().ok()?, gimli::LittleEndian);
        eh.set_address_size(8);
        let mut ctx = gimli::UnwindContext::new();
        let row = eh.unwind_info_for_address(&bases, &mut ctx, pc, EhFrame::cie_from_offset).ok()?;
        Some(f(row))
    }

    /// The caller of `frame`, or None at the outermost frame (or where the CFI ends).
    /// `slide` maps static addresses of this binary to runtime ones.
    pub fn caller(&self, frame: &FrameRegs, slide: u64, mem: &dyn Memory) -> Option<FrameRegs> {
        let static_pc = frame.lookup_pc().checked_sub(slide)?;
        let regs = &frame.regs;
        let rules = self.with_row(static_pc, |row| {
            let cfa = match row.cfa() {
                CfaRule::RegisterAndOffset { register, offset } => {
                    let base = *regs.get(dwarf_register_name(register.0)?)?;
                    base.wrapping_add_signed(*offset)
                }
                CfaRule::Expression(_) => return None,
            };
            let saved: Vec<(u16, RegisterRule<usize>)> = row.registers().map(|(r, rule)| (r.0, rule.clone())).collect();
            Some((cfa, saved))
        })??;
        let (cfa, saved) = rules;
        let mut out = regs.clone();
        // Caller-saved registers are unknown in the caller: drop them rather than show stale values.
        for r in ["rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11"] {
            out.remove(r);
        }
        out.insert("rsp".into(), cfa);
        let mut return_address = None;
        for (reg, rule) in saved {
            let value = match rule {
                RegisterRule::Offset(o) => mem.read_u64(cfa.wrapping_add_signed(o)).ok(),
                RegisterRule::ValOffset(o) => Some(cfa.wrapping_add_signed(o)),
                RegisterRule::Register(r) => dwarf_register_name(r.0).and_then(|n| regs.get(n).copied()),
                RegisterRule::SameValue => dwarf_register_name(reg).and_then(|n| regs.get(n).copied()),
                _ => None,
            };
            let Some(name) = dwarf_register_name(reg) else { continue };
            match (name, value) {
                ("rip", v) => return_address = v,
                (n, Some(v)) => {
                    out.insert(n.into(), v);
                }
                (n, None) => {
                    out.remove(n);
                }
            }
        }
        // x86-64 CIEs put the return address at CFA-8 even when no rule says so.
        let ra = return_address.or_else(|| mem.read_u64(cfa.wrapping_sub(8)).ok())?;
        if ra == 0 {
            return None;
        }
        out.insert("rip".into(), ra);
        Some(FrameRegs { regs: out, caller: true })
    }
}
