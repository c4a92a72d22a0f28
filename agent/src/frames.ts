// Raw stack frames for the daemon to symbolize (src/engine/backtrace.rs): each return
// address with its module and module-relative offset, and Frida's nearest symbol for code
// the daemon cannot read. Shared by pauses (pause.ts) and crashes (crash.ts). Hook frames
// (hook_frames.ts) are left out.

import { isHookFrame, returnAddressAt } from "./hook_frames.js";

export interface RawFrame {
    /** Runtime address. */
    address: string;
    module: string | null;
    modulePath: string | null;
    /** address - module base, hex. */
    offset: string | null;
    /** Nearest ELF symbol, when the daemon has no DWARF for the module. */
    symbol: string | null;
}

/** The function name a frame in the agent's hook code gets. */
const HOOK_FRAME_NAME = "<Strobe trace hook>";

export function isCode(p: NativePointer): boolean {
    try {
        const r = Process.findRangeByAddress(p);
        return r !== null && r.protection.indexOf("x") >= 0;
    } catch (_) {
        return false;
    }
}

export function rawFrame(address: NativePointer): RawFrame {
    const f: RawFrame = { address: address.toString(), module: null, modulePath: null, offset: null, symbol: null };
    try {
        const m = Process.findModuleByAddress(address);
        if (m !== null) {
            f.module = m.name;
            f.modulePath = m.path;
            f.offset = "0x" + address.sub(m.base).toString(16);
        }
    } catch (_) {
        // unmapped: the address alone
    }
    if (isHookFrame(address)) {
        // Where a crash inside a hook happened (its callers are left out): named, not "??".
        f.symbol = HOOK_FRAME_NAME;
        return f;
    }
    try {
        const s = DebugSymbol.fromAddress(address);
        if (s.name !== null && !s.name.startsWith("0x")) f.symbol = s.name;
    } catch (_) {
        // no symbol
    }
    return f;
}

/**
 * The frames of a thread stopped at `cpu` (a breakpoint or step probe): the pc, then the
 * return addresses. An accurate backtrace from a mid-function context can start with a
 * stack address or with the pc itself: neither is a caller.
 */
export function stackFrames(cpu: CpuContext, max: number): RawFrame[] {
    let callers: NativePointer[] = [];
    try {
        callers = Thread.backtrace(cpu, Backtracer.ACCURATE).filter((p) => isCode(p) && !isHookFrame(p));
    } catch (_) {
        callers = [];
    }
    if (callers.length > 0 && callers[0].equals(cpu.pc)) callers.shift();
    // At a function's first instruction the unwinder repeats the caller and stops there
    // (measured in shared libraries: [leaf, entry, entry]). The caller's frame pointer is
    // still in rbp: continue with the frame-pointer chain while it gives return addresses.
    const dup = callers.findIndex((p, i) => i > 0 && p.equals(callers[i - 1]));
    if (dup > 0) callers.length = dup;
    // It also stops early at a function's entry (main's caller, a thread's start_thread
    // missing): the frame-pointer chain goes on from where it stopped, when it passes there
    // (or starts right after it: at an entry, rbp is still the caller's).
    const chain = framePointerChain((cpu as X64CpuContext).rbp, max);
    const last = callers.length > 0 ? callers[callers.length - 1] : null;
    const at = last === null ? -1 : chain.findIndex((p) => p.equals(last));
    if (at >= 0) callers.push(...chain.slice(at + 1));
    else if (dup > 0 || callers.length === 1) callers.push(...chain.filter((p) => !callers.some((q) => q.equals(p))));
    return [cpu.pc, ...callers].slice(0, max).map(rawFrame);
}

/** Return addresses along saved frame pointers from `fp`, while they follow a call. */
function framePointerChain(fp: NativePointer | undefined, max: number): NativePointer[] {
    const out: NativePointer[] = [];
    try {
        while (fp !== undefined && !fp.isNull() && out.length < max) {
            // A traced caller's slot holds Frida's leave trampoline: its real return address.
            const ret = returnAddressAt(fp.add(8));
            if (!isReturn(ret)) break;
            if (!isHookFrame(ret)) out.push(ret);
            const next = fp.readPointer();
            if (next.compare(fp) <= 0) break; // the stack grows down: callers are above
            fp = next;
        }
    } catch (_) {
        // unreadable frame: stop here
    }
    return out;
}

/** Whether `p` is a return address: after a call in code, or in the agent's hook code (which
 *  Frida cloaks: no range is found for it). */
export function isReturn(p: NativePointer): boolean {
    return isHookFrame(p) || (isCode(p) && followsCall(p));
}

/** Where the direct call (`call rel32`) whose return address is p goes; null for any other. */
export function directCallTarget(p: NativePointer): NativePointer | null {
    try {
        if (p.sub(5).readU8() !== 0xe8) return null;
        return p.add(p.sub(4).readS32());
    } catch (_) {
        return null;
    }
}

/** Whether the instruction before `p` is a call (`call rel32`, or `call r/m64` in its 2, 3,
 *  6 or 7 byte forms): `p` is then a return address, not a stale code pointer. */
export function followsCall(p: NativePointer): boolean {
    try {
        const b = new Uint8Array(p.sub(7).readByteArray(7)!);
        if (b[2] === 0xe8) return true;
        const indirect = (at: number, mod: (m: number) => boolean) => b[at] === 0xff && ((b[at + 1] >> 3) & 7) === 2 && mod(b[at + 1] >> 6);
        return indirect(5, (m) => m === 3) || indirect(4, (m) => m === 0 || m === 1) || indirect(1, (m) => m === 2 || m === 0) || indirect(0, (m) => m === 2);
    } catch (_) {
        return false;
    }
}

