// Unwind information for the wrapper path's own frames (wrappers.ts), registered with the
// program's unwinder, so that a C++ exception thrown by (or through) a wrapped function
// reaches the caller's `catch` instead of aborting the process: without it the unwinder finds
// no FDE for the wrapper's return address, gives up, and `__cxa_throw` calls std::terminate.
//
// Every frame the wrapper path puts between a traced function and its caller keeps a frame
// pointer and touches no callee-saved register but rbp: TinyCC's code (the chunk wrappers,
// strobe_wrapped_call) begins with `push rbp; mov rbp, rsp` and never allocates rbx or
// r12–r15, and the register-saving stubs push only caller-saved registers after the same two
// instructions. So at every call they make, one rule holds: CFA = rbp + 16, the return
// address at CFA − 8, the caller's rbp at CFA − 16. One CIE states it; each code range gets
// an FDE with no instructions of its own.
//
// The FDEs go to libgcc's `__register_frame` in the program's libgcc_s (the unwinder C++ and
// Rust code uses on Linux), looked up again until found: a program without it throws no C++
// exceptions through these frames, and one that loads it later registers then. Called only
// with the program's threads running (before a park: an unwinder of older libgcc holds a
// mutex a parked thread could own). Registered memory is never freed, as the wrappers are not.

interface Range {
    start: NativePointer;
    end: NativePointer;
    described: boolean;
}

const ranges: Range[] = [];
/** FDE blocks handed to the unwinder: kept alive for as long as the process runs. */
const registered: NativePointer[] = [];
let registerFrame: NativeFunction<void, [NativePointer]> | null = null;
let lookups = 0;
/** Lookups of `__register_frame` before giving up on a process that never loads libgcc_s. */
const MAX_LOOKUPS = 64;

/** Wrapper code in [start, end): described to the unwinder at the next describeWrapperFrames. */
export function noteWrapperCode(start: NativePointer, end: NativePointer): void {
    if (!ranges.some((r) => r.start.equals(start) && r.end.equals(end))) ranges.push({ start, end, described: false });
}

/**
 * Register an FDE for every noted range not yet described. Returns whether the unwinder
 * knows every range noted so far (false: no libgcc_s in the process, or registration failed).
 */
export function describeWrapperFrames(): boolean {
    if (ranges.every((r) => r.described)) return true;
    const reg = findRegisterFrame();
    if (reg === null) return false;
    for (const r of ranges) {
        if (r.described) continue;
        const block = fdeBlock(r.start, r.end);
        reg(block);
        registered.push(block);
        r.described = true;
    }
    return true;
}

/** Whether the unwinder can step over a return address at `p` (inside a described range). */
export function wrapperFrameDescribed(p: NativePointer): boolean {
    return ranges.some((r) => r.described && p.compare(r.start) >= 0 && p.compare(r.end) < 0);
}

/** How many code ranges are noted and described (status). */
export function wrapperUnwindStats(): object {
    return { ranges: ranges.length, described: ranges.filter((r) => r.described).length, unwinder: registerFrame !== null };
}

function findRegisterFrame(): NativeFunction<void, [NativePointer]> | null {
    if (registerFrame !== null || lookups >= MAX_LOOKUPS) return registerFrame;
    lookups++;
    const m = Process.findModuleByName("libgcc_s.so.1");
    const at = m?.findExportByName("__register_frame") ?? null;
    if (at !== null) registerFrame = new NativeFunction(at, "void", ["pointer"]);
    return registerFrame;
}

// DWARF call frame instructions and registers (x86-64 numbering: rbp 6, return address 16).
const DW_CFA_DEF_CFA = 0x0c;
const DW_CFA_OFFSET = 0x80;
const REG_RBP = 6;
const REG_RA = 16;

/** An .eh_frame section for [start, end): one CIE, one FDE, the zero terminator. */
function fdeBlock(start: NativePointer, end: NativePointer): NativePointer {
    const cie = padded([
        0, 0, 0, 0, // CIE id
        1, // version
        0x7a, 0x52, 0, // "zR"
        1, // code alignment
        0x78, // data alignment −8 (SLEB128)
        REG_RA,
        1, // augmentation data: one byte
        0x00, // FDE addresses: absolute, 8 bytes
        DW_CFA_DEF_CFA, REG_RBP, 16, // CFA = rbp + 16
        DW_CFA_OFFSET | REG_RA, 1, // return address at CFA − 8
        DW_CFA_OFFSET | REG_RBP, 2, // caller's rbp at CFA − 16
    ]);
    // The FDE's CIE pointer: bytes from that field back to the CIE's start.
    const ciePointer = cie.length + 4;
    const fde = padded([...u32(ciePointer), ...addressBytes(start), ...addressBytes(end.sub(start)), 0 /* no augmentation data */]);
    const bytes = [...cie, ...fde, 0, 0, 0, 0];
    const block = Memory.alloc(bytes.length);
    block.writeByteArray(bytes);
    return block;
}

/** A CIE or FDE body with its length in front, padded with DW_CFA_nop to 8-byte entries. */
function padded(body: number[]): number[] {
    const out = [...body];
    while ((out.length + 4) % 8 !== 0) out.push(0);
    return [...u32(out.length), ...out];
}

function u32(v: number): number[] {
    return [v & 0xff, (v >> 8) & 0xff, (v >> 16) & 0xff, (v >>> 24) & 0xff];
}

/** An address as the 8 little-endian bytes of machine code or an FDE. */
export function addressBytes(p: NativePointer): number[] {
    let v = uint64(p.toString());
    const out: number[] = [];
    for (let i = 0; i < 8; i++) {
        out.push(v.and(0xff).toNumber());
        v = v.shr(8);
    }
    return out;
}
