// Crash capture. Frida's exception handler sees SIGSEGV/SIGBUS (access-violation), SIGABRT
// (abort, a failed assert), SIGFPE (arithmetic), SIGILL, SIGTRAP before the process dies.
// The agent reports one { type: "crash", ... } message per process and lets the signal take
// its course (the process dies as it would have without us).
//
// Measured facts this relies on (see DESIGN.md):
//  - a plain send() from the handler is lost: the process dies before it leaves; we send,
//    then wait for the host's { type: "crash-ack" } (script unload also releases the wait);
//  - the first entry of an ACCURATE backtrace taken from the handler's context is bogus
//    (a stack address); the faulting pc is prepended instead;
//  - events still buffered must be flushed before the crash message, so the timeline keeps
//    everything that led up to the crash.
//
// The message carries a snapshot of the crashing frame's stack (stackDump: 512 bytes below
// the frame pointer, 128 above, extended down to the stack pointer): the process is about to
// die, so the daemon evaluates the frame's DWARF locals (frame-base, CFA and register
// relative) from registers + snapshot, without a round trip.
//
// Other features (hardware breakpoints, single-stepping) need the same, single, exception
// handler: they register with addExceptionHook() and see every exception first.

import { enlargeSignalStacks } from "./altstack.js";
import { nowNs } from "./clock.js";
import { directCallTarget, followsCall, isCode, isReturn, rawFrame } from "./frames.js";
import { isHookFrame } from "./hook_frames.js";
import { patchNear } from "./quiesce.js";
import { threadName } from "./threads.js";

/** Returns true if it handled the exception (the thread then resumes). */
export type ExceptionHook = (details: ExceptionDetails) => boolean;

const exceptionHooks: ExceptionHook[] = [];
let installed = false;
let reported = false;

export function addExceptionHook(hook: ExceptionHook): void {
    exceptionHooks.push(hook);
}

/**
 * Install the process-wide exception handler. `isOwnProcess` must say false in a forked child
 * that has no connection to the host, where waiting for an ack would hang forever.
 * `flushAll` sends every buffered event (of every event path) immediately, now and later.
 */
export function installCrashHandler(isOwnProcess: () => boolean, flushAll: () => void): void {
    if (installed) return;
    installed = true;
    // The handler may run on the program's alternate signal stack (altstack.ts).
    const noRoom = enlargeSignalStacks();
    if (noRoom !== null) send({ type: "log", level: "warning", message: `crashes on threads with a small alternate signal stack may go unreported: ${noRoom}` });
    Process.setExceptionHandler(details => {
        for (const hook of exceptionHooks) {
            try {
                if (hook(details)) return true;
            } catch (_) {
                // a broken hook must not hide the crash
            }
        }
        if (reported || !isOwnProcess()) return false; // a fault while reporting: let it die
        reported = true;
        try {
            report(details, flushAll);
        } catch (e) {
            try {
                send({ type: "log", level: "error", message: `crash report failed: ${e}` });
            } catch (_) {
                // nothing more we can do
            }
        }
        return false;
    });
}

function report(details: ExceptionDetails, flushAll: () => void): void {
    const tid = Process.getCurrentThreadId();
    const ts = nowNs();
    flushAll(); // buffered events go out before the crash, and later ones at once
    const overflow = isStackOverflow(details);
    // Frida's unwinders never come back from an overflowed stack (measured: the process
    // dies in them); the frame-pointer chain is walked instead, its ends kept.
    const walk = overflow ? framePointerWalk(details.context) : null;
    const message = {
        type: "crash",
        tid,
        threadName: threadName(tid),
        ts,
        signal: signalOf(details),
        exceptionType: details.type,
        address: details.address.toString(),
        memory: details.memory
            ? { operation: details.memory.operation, address: details.memory.address.toString() }
            : null,
        registers: registers(details.context),
        frames: (walk !== null ? walk.frames : backtrace(details.context)).map((p) => (guessed.has(p.toString()) ? { ...rawFrame(p), guessed: true } : rawFrame(p))),
        stackOverflow: overflow,
        /** Frames left out of a deep (overflowed) stack: after the first KEEP_INNER frames. */
        omittedFrames: walk?.omitted ?? 0,
        stackDepth: walk?.depth ?? null,
        stackDump: stackDump(details.context),
        /** The crash lies in bytes a hook patched: how that patch went (quiesce.ts). */
        patch: safely(() => patchNear(details.context.pc)),
    };
    send(message);
    recv("crash-ack", () => {}).wait();
}

/** f's value, or null if it throws (a detail must not cost the report). */
function safely<T>(f: () => T): T | null {
    try {
        return f();
    } catch (_) {
        return null;
    }
}

/** Whether `fp` is a frame record on the stack: above sp, its return address follows a call. */
function chainsOn(fp: NativePointer, sp: NativePointer, top: NativePointer): boolean {
    try {
        return fp.compare(sp) >= 0 && fp.add(16).compare(top) <= 0 && isReturn(fp.add(8).readPointer());
    } catch (_) {
        return false;
    }
}

/** The stack's mapping at or just above sp (an overflowed sp lies in the guard below it). */
function stackAbove(sp: NativePointer): RangeDetails | null {
    for (let d = 0; d <= OVERFLOW_SLACK; d += Process.pageSize) {
        const r = Process.findRangeByAddress(sp.add(d));
        if (r !== null) return r;
    }
    return null;
}

/** Bytes above sp searched for a frame record when rbp is none. */
const RECORD_SCAN_BYTES = 64 * 1024;

/** The first frame record above sp: a slot holding a return address (the instruction before it
 *  is a call) with, below it, a saved rbp that points further up the same stack and is itself
 *  a frame record. */
function frameRecordNear(sp: NativePointer, base: NativePointer, top: NativePointer): NativePointer | null {
    const limit = top.compare(sp.add(RECORD_SCAN_BYTES)) < 0 ? top : sp.add(RECORD_SCAN_BYTES);
    try {
        for (let fp = sp; fp.add(16).compare(limit) <= 0; fp = fp.add(8)) {
            const saved = fp.readPointer();
            if (saved.compare(fp) <= 0 || saved.add(16).compare(top) > 0) continue;
            const ret = fp.add(8).readPointer();
            if (ret.compare(base) >= 0 && ret.compare(top) < 0) continue; // a stack address
            if (isReturn(ret) && chainsOn(saved, fp, top)) return fp;
        }
    } catch (_) {
        // unreadable: none found
    }
    return null;
}

/** A write or read fault this close to sp, on no mapping or the stack's guard, is the stack overflowing. */
const OVERFLOW_SLACK = 64 * 1024;
const KEEP_INNER = 48;
const KEEP_OUTER = 16;

function isStackOverflow(d: ExceptionDetails): boolean {
    if (d.type === "stack-overflow" || d.type === "guard-page") return true;
    if (d.type !== "access-violation" || !d.memory) return false;
    const distance = d.memory.address.sub(d.context.sp).toInt32();
    if (Math.abs(distance) > OVERFLOW_SLACK) return false;
    const r = Process.findRangeByAddress(d.memory.address);
    return r === null || r.protection.indexOf("r") < 0;
}

/** The return addresses of the frame-pointer chain: the first KEEP_INNER (pc first), the
 *  last KEEP_OUTER, and how many lie between. Stays inside the stack's mapping. */
function framePointerWalk(context: CpuContext): { frames: NativePointer[]; omitted: number; depth: number } {
    const inner: NativePointer[] = [context.pc];
    const outer: NativePointer[] = [];
    let depth = 1;
    try {
        // sp itself may lie below the mapped stack (that is the overflow): take the frame's.
        const fpReg = (context as X64CpuContext).rbp;
        const range = (fpReg !== undefined ? Process.findRangeByAddress(fpReg) : null) ?? stackAbove(context.sp);
        if (range !== null && fpReg !== undefined) {
            const top = range.base.add(range.size);
            let fp = fpReg;
            // Code without frame pointers at the crash (the hook image: a traced recursion
            // overflows inside its hook): rbp is no frame; start at the first frame record
            // above sp instead.
            if (!chainsOn(fp, context.sp, top)) {
                const from = context.sp.compare(range.base) > 0 ? context.sp : range.base;
                fp = frameRecordNear(from, range.base, top) ?? fp;
            }
            while (fp.compare(context.sp) >= 0 && fp.add(16).compare(top) <= 0) {
                const ret = fp.add(8).readPointer();
                const next = fp.readPointer();
                // The chain's end (libc's start code keeps no frame pointer). Hook code is
                // cloaked by Frida (no range): its frames are known return sites.
                const hook = isHookFrame(ret);
                if (!hook && !isCode(ret)) break;
                if (!hook) {
                    depth++;
                    if (inner.length < KEEP_INNER) inner.push(ret);
                    else {
                        outer.push(ret);
                        if (outer.length > KEEP_OUTER) outer.shift();
                    }
                }
                if (next.compare(fp) <= 0) break;
                fp = next;
            }
        }
    } catch (_) {
        // what was walked so far
    }
    return { frames: [...inner, ...outer], omitted: depth - inner.length - outer.length, depth };
}

const BELOW_FP = 512;
const ABOVE_FP = 128;
/** A frame larger than this (or a frame pointer far from sp: -O2 code) gets sp-relative bytes. */
const MAX_DUMP = 4096;

/** { address, bytes (hex) } of the crashing frame's stack, or null if unreadable. */
function stackDump(context: CpuContext): { address: string; bytes: string } | null {
    try {
        return readStack(context);
    } catch (_) {
        return null; // a corrupt sp/fp: the report goes out without locals
    }
}

function readStack(context: CpuContext): { address: string; bytes: string } | null {
    const x64 = context as X64CpuContext;
    const sp = context.sp;
    const fp = x64.rbp !== undefined ? x64.rbp : sp;
    let start = fp.sub(BELOW_FP);
    let end = fp.add(ABOVE_FP);
    if (sp.compare(start) < 0) start = sp;
    if (fp.compare(sp) < 0 || end.sub(start).compare(ptr(MAX_DUMP)) > 0) {
        start = sp;
        end = sp.add(BELOW_FP + ABOVE_FP);
    }
    // The end may run past the stack's top page: shrink to what is mapped.
    const range = Process.findRangeByAddress(start);
    if (range === null) return null;
    const rangeEnd = range.base.add(range.size);
    if (end.compare(rangeEnd) > 0) end = rangeEnd;
    const size = end.sub(start).toInt32();
    if (size <= 0) return null;
    const bytes = new Uint8Array(start.readByteArray(size)!);
    return { address: start.toString(), bytes: Array.from(bytes, b => b.toString(16).padStart(2, "0")).join("") };
}

function signalOf(d: ExceptionDetails): string {
    switch (d.type) {
        case "abort":
            return "SIGABRT";
        case "access-violation":
            return isBusError(d) ? "SIGBUS" : "SIGSEGV";
        case "guard-page":
        case "stack-overflow":
            return "SIGSEGV";
        case "illegal-instruction":
            return "SIGILL";
        case "arithmetic":
            return "SIGFPE";
        case "breakpoint":
        case "single-step":
            return "SIGTRAP";
        default:
            return "UNKNOWN";
    }
}

/**
 * Frida reports SIGSEGV and SIGBUS alike. A fault on memory that is mapped with the needed
 * permission cannot be a SIGSEGV: it is a SIGBUS (e.g. a file mapping past the file's end).
 */
function isBusError(d: ExceptionDetails): boolean {
    if (!d.memory) return false;
    try {
        const range = Process.findRangeByAddress(d.memory.address);
        if (range === null) return false;
        const need = d.memory.operation === "write" ? "w" : d.memory.operation === "execute" ? "x" : "r";
        return range.protection.indexOf(need) >= 0;
    } catch (_) {
        return false;
    }
}

/** Registers as hex strings; vector registers (xmm0-15, ArrayBuffers) as their bytes in
 *  memory order, "0x"-less (the daemon shows them as bytes and doubles, crash_report.rs). */
function registers(context: CpuContext): Record<string, string> {
    const out: Record<string, string> = {};
    try {
        const plain = JSON.parse(JSON.stringify(context)) as Record<string, unknown>;
        for (const k of Object.keys(plain)) {
            const v = (context as unknown as Record<string, unknown>)[k];
            out[k] = v instanceof ArrayBuffer ? Array.from(new Uint8Array(v), (b) => b.toString(16).padStart(2, "0")).join("") : String(v);
        }
    } catch (_) {
        out.pc = context.pc.toString();
        out.sp = context.sp.toString();
    }
    return out;
}

/** Frames of the last backtrace() found by scanning the stack, not by unwinding. */
const guessed = new Set<string>();

function backtrace(context: CpuContext): NativePointer[] {
    let frames: NativePointer[] = [];
    try {
        frames = Thread.backtrace(context, Backtracer.ACCURATE);
    } catch (_) {
        try {
            frames = Thread.backtrace(context, Backtracer.FUZZY);
        } catch (_) {
            frames = [];
        }
    }
    // The first entry is not a frame (see the header: a stack address, measured); keep only
    // code addresses, after the faulting pc.
    const rest = frames.filter((p) => isCode(p) && !isHookFrame(p));
    if (rest.length > 0 && rest[0].equals(context.pc)) rest.shift();
    // The program's code: the main module and libraries outside the system's directories
    // (code of a -g shared library is the program's too; engine/modules.rs).
    const main = Process.mainModule;
    const inMain = (p: NativePointer) => {
        if (p.compare(main.base) >= 0 && p.compare(main.base.add(main.size)) < 0) return true;
        const m = Process.findModuleByAddress(p);
        return m !== null && !/^\/(usr\/)?lib(64|32)?\//.test(m.path) && !m.name.startsWith("frida-") && m.path.startsWith("/");
    };
    // It also stops at code without unwind info, such as a replaceFast wrapper's frame
    // (wrappers.ts): its last frame is then in the program or in no module, where a complete
    // unwind ends in libc's start code.
    const last = rest.length > 0 ? rest[rest.length - 1] : context.pc;
    const stoppedEarly = inMain(last) || Process.findModuleByAddress(last) === null;
    if ((!rest.some(inMain) && !inMain(context.pc)) || stoppedEarly) {
        // Accurate unwinding stops inside libc after a noreturn call (__assert_fail, measured):
        // continue with the program's return addresses found on the stack.
        // Between the last frame found and the program's next one, library frames count when
        // they are return addresses (the instruction before is a call): free() under an
        // abort. They are marked `guessed`: the daemon drops stale ones (backtrace.rs).
        try {
            const seen = new Set([context.pc, ...rest].map(p => p.toString()));
            const lastFound = rest.length > 0 ? rest[rest.length - 1].toString() : null;
            let between = lastFound === null;
            let pending: NativePointer[] = [];
            for (const p of Thread.backtrace(context, Backtracer.FUZZY)) {
                if (p.toString() === lastFound) between = true;
                if (seen.has(p.toString()) || isHookFrame(p)) continue;
                seen.add(p.toString());
                if (inMain(p)) {
                    // None lies between a program frame and its caller's call to it (stale
                    // return addresses of earlier calls: _IO_file_write under release_twice).
                    const prev = rest.length > 0 ? rest[rest.length - 1] : null;
                    if (prev !== null && inMain(prev) && calls(directCallTarget(p), prev)) pending = [];
                    for (const q of pending) guessed.add(q.toString());
                    rest.push(...pending, p);
                    pending = [];
                    between = false;
                } else if (between && followsCall(p)) {
                    pending.push(p);
                }
            }
        } catch (_) {
            // keep what we have
        }
        if (rest.length > 0 && inMain(rest[rest.length - 1])) scanStackToMain(context, rest, inMain);
    }
    return [context.pc, ...rest].slice(0, 64);
}

/** Whether target (a direct call's) is the start of the function that holds frame pc. */
function calls(target: NativePointer | null, pc: NativePointer): boolean {
    if (target === null) return false;
    const at = DebugSymbol.fromAddress(pc), to = DebugSymbol.fromAddress(target);
    return at.name !== null && at.name === to.name && at.moduleName === to.moduleName;
}

/** Bytes of stack scanned past the fuzzy backtracer's reach. */
const STACK_SCAN_BYTES = 256 * 1024;

/**
 * The fuzzy backtracer reads a bounded part of the stack: under an abort in a glibc with deep
 * message buffers (__libc_message) the program's outer frames lie beyond it, and the
 * backtrace ended at the frame that called free(). Past the slot holding the last frame
 * found, the program's return addresses (the instruction before is a call) are its callers,
 * up to `main`.
 */
function scanStackToMain(context: CpuContext, rest: NativePointer[], inMain: (p: NativePointer) => boolean): void {
    try {
        const sp = context.sp;
        const range = Process.findRangeByAddress(sp);
        if (range === null) return;
        const end = range.base.add(range.size);
        const limit = end.compare(sp.add(STACK_SCAN_BYTES)) < 0 ? end : sp.add(STACK_SCAN_BYTES);
        const seen = new Set([context.pc, ...rest].map((p) => p.toString()));
        const last = rest[rest.length - 1];
        let after = false;
        for (let at = sp; at.add(8).compare(limit) <= 0 && rest.length < 64; at = at.add(8)) {
            const w = at.readPointer();
            if (!after) {
                after = w.equals(last);
                continue;
            }
            if (seen.has(w.toString()) || !isCode(w) || !inMain(w) || !followsCall(w)) continue;
            seen.add(w.toString());
            rest.push(w);
            if (DebugSymbol.fromAddress(w).name === "main") return;
        }
    } catch (_) {
        // keep what we have
    }
}
