// Hardware execution breakpoints (x86 debug registers, 4 per thread), for code addresses an
// inline hook must not patch. The exception handler (shared, see crash.ts) runs on a signal
// frame, which the kernel places below the 128-byte red zone, so a leaf function's locals
// survive (Frida's mid-function trampolines clobber them: measured, see docs/performance.md).
//
// To continue past a hit, the instruction runs from a relocated copy (see displacedCopy).

import { addExceptionHook } from "./crash.js";

export const SLOTS = 4;

export interface HwPoint {
    addr: NativePointer;
    slot: number;
    /** null: every thread (a breakpoint); a thread id: that thread only (a step hook). */
    threadId: number | null;
    onHit: (cpu: CpuContext) => void;
    active: boolean;
}

const points: HwPoint[] = [];
let installed = false;

// The program's threads, as the thread observer reports them (existing ones when it is
// attached, then each new one). Not Process.enumerateThreads(): that reads every thread's
// registers, Frida's own threads included, through a ptrace helper per thread, and each such
// attach can leave a SIGSTOP behind that later stops the whole process (measured: 9 ptrace
// stops per call in a one-thread program; sessions stalled ≈ 15 s, docs/performance.md).
const threads = new Map<number, StableThreadDetails>();

function thread(tid: number): StableThreadDetails | undefined {
    return threads.get(tid);
}

function install(): void {
    if (installed) return;
    installed = true;
    addExceptionHook(onException);
    Process.attachThreadObserver({
        onAdded(t) {
            threads.set(t.id, t);
            // Not from inside the callback: changing a thread's registers there deadlocks (measured).
            setTimeout(() => armNewThread(t.id), 0);
        },
        onRemoved(t) {
            threads.delete(t.id);
        },
    });
}

function armNewThread(id: number): void {
    const details = thread(id);
    if (details === undefined) return;
    for (const p of points) {
        if (p.active && p.threadId === null) {
            try {
                details.setHardwareBreakpoint(p.slot, p.addr);
            } catch (_) {
                // a thread that is already gone
            }
        }
    }
}

function usedSlots(tid: number | null): Set<number> {
    const used = new Set<number>();
    for (const p of points) {
        if (p.active && (p.threadId === null || tid === null || p.threadId === tid)) used.add(p.slot);
    }
    return used;
}

/** Arm a hardware breakpoint; throws when no debug register is free. */
export function hwAttach(addr: NativePointer, onHit: (cpu: CpuContext) => void, threadId: number | null): HwPoint {
    install();
    const used = usedSlots(threadId);
    // Breakpoints take slots from 0 up, step hooks from 3 down, so they rarely collide.
    const order = threadId === null ? [0, 1, 2, 3] : [3, 2, 1, 0];
    const slot = order.find((s) => !used.has(s));
    if (slot === undefined) throw new Error(`all ${SLOTS} hardware breakpoint slots are in use`);
    displacedCopy(addr); // prepared now: no allocation inside the exception handler
    const p: HwPoint = { addr, slot, threadId, onHit, active: true };
    const targets = threadId === null ? [...threads.values()] : [thread(threadId)].filter((t) => t !== undefined);
    if (targets.length === 0) throw new Error(`thread ${threadId} not found`);
    for (const t of targets) t!.setHardwareBreakpoint(slot, addr);
    points.push(p);
    return p;
}

export function hwDetach(p: HwPoint): void {
    if (!p.active) return;
    p.active = false;
    points.splice(points.indexOf(p), 1);
    const targets = p.threadId === null ? [...threads.values()] : [thread(p.threadId)].filter((t) => t !== undefined);
    for (const t of targets) {
        try {
            t!.unsetHardwareBreakpoint(p.slot);
        } catch (_) {
            // gone
        }
    }
}

/**
 * Continuing past a hit without touching debug registers from the faulting thread (Frida's
 * thread-modification helper hangs when a thread modifies itself from its exception handler:
 * measured): execute a relocated copy of the instruction, then jump back after it. The
 * relocator rewrites rip-relative operands; the copy never uses the stack.
 */
const displaced = new Map<string, NativePointer>();

function displacedCopy(addr: NativePointer): NativePointer {
    const key = addr.toString();
    const known = displaced.get(key);
    if (known !== undefined) return known;
    const code = Memory.alloc(Process.pageSize);
    Memory.patchCode(code, 128, (w) => {
        const writer = new X86Writer(w, { pc: code });
        const relocator = new X86Relocator(addr, writer);
        if (relocator.readOne() === 0) throw new Error(`cannot decode the instruction at ${addr}`);
        const next = relocator.input!.next;
        relocator.writeOne();
        writer.putJmpAddress(next);
        writer.flush();
    });
    displaced.set(key, code);
    return code;
}

function onException(d: ExceptionDetails): boolean {
    if (d.type !== "breakpoint" && d.type !== "single-step") return false;
    const tid = Process.getCurrentThreadId();
    const hits = points.filter((p) => p.active && p.addr.equals(d.address) && (p.threadId === null || p.threadId === tid));
    if (hits.length === 0) return false;
    for (const p of hits) p.onHit(d.context);
    // A register write may have moved the PC: only step past when it is still here.
    if (d.context.pc.equals(d.address)) d.context.pc = displacedCopy(d.address);
    return true;
}
