// Code probes that never corrupt the target. An inline hook (Interceptor.attach, always in
// the probe/function form: the object form treats [rsp] as a return address) overwrites >= 5
// bytes (whole instructions). At a function entry that is safe. In the middle of a function:
//  - a direct branch whose target lies inside the overwritten window would land in the middle
//    of the jump: we decode the function (Instruction.parse) and look for such targets, and
//    never hook inside another of our patches (indirect jumps, e.g. switch tables, are not
//    visible this way);
//  - Frida's trampoline pushes the CPU context onto the stack, clobbering the 128-byte red
//    zone below rsp that leaf functions (no call, no `sub rsp`) keep their locals in.
// Either case gets a hardware breakpoint instead (hwbreak.ts).
//
// Probes go in and out of running code: a breakpoint on a function busy threads run. The
// patch is written with the program's threads parked outside the bytes it overwrites
// (quiesce.ts), and a removed probe's trampoline is freed only once no thread can be on it
// (probe_detach.ts); tests/probe_install_stress.rs crashed the target 8 times in 200 adds and
// removes before.

import { currentSlide } from "./hooks.js";
import { hwAttach, hwDetach } from "./hwbreak.js";
import { detachParked } from "./probe_detach.js";
import { attachGate, attachLogListener } from "./js_gate.js";
import { patchParked, prologue } from "./quiesce.js";
import { demoteWrappers } from "./wrappers.js";

export interface ScanRange {
    /** Static start/end of the function that holds the address. */
    start: string;
    end: string;
}

export function slid(staticAddr: string, noSlide?: boolean): NativePointer {
    const p = ptr(staticAddr);
    return noSlide ? p : p.add(currentSlide() ?? ptr(0));
}

const MIN_PATCH = 5;

interface FunctionScan {
    targets: Set<string>;
    /** No call and no `sub rsp`: a leaf that may keep locals in the red zone. */
    leaf: boolean;
}

const scans = new Map<string, FunctionScan>();

/** Direct branch and call targets inside [start, end) (runtime addresses), and leafness. */
function scanFunction(start: NativePointer, end: NativePointer): FunctionScan {
    const key = start.toString();
    const cached = scans.get(key);
    if (cached !== undefined) return cached;
    const out = new Set<string>();
    let leaf = true;
    let p = start;
    for (let n = 0; p.compare(end) < 0 && n < 100000; n++) {
        let ins: Instruction;
        try {
            ins = Instruction.parse(p);
        } catch (_) {
            break;
        }
        const m = ins.mnemonic;
        if (m === "call" || (m === "sub" && ins.opStr.startsWith("rsp"))) leaf = false;
        if (m.startsWith("j") || m.startsWith("loop") || m === "call" || m === "jrcxz") {
            const ops = (ins as X86Instruction).operands;
            if (ops.length > 0 && ops[0].type === "imm") out.add(ptr(ops[0].value.toString()).toString());
        }
        p = ins.next;
    }
    const scan = { targets: out, leaf };
    scans.set(key, scan);
    return scan;
}

/** Bytes Interceptor will overwrite at `addr`: whole instructions covering MIN_PATCH bytes. */
function patchSize(addr: NativePointer): number {
    let size = 0;
    let p = addr;
    while (size < MIN_PATCH) {
        const ins = Instruction.parse(p);
        size += ins.size;
        p = ins.next;
    }
    return size;
}

/** Our own patched windows (runtime start → size), to never hook inside another patch. */
const patches = new Map<string, { start: NativePointer; size: number; users: number }>();

/** Why hooking `addr` (runtime) is unsafe, or null when it is safe. */
export function unsafeReason(addr: NativePointer, scan?: ScanRange | null): string | null {
    let size: number;
    try {
        size = patchSize(addr);
    } catch (e) {
        return `cannot decode the instructions at ${addr}`;
    }
    const end = addr.add(size);
    for (const p of patches.values()) {
        if (p.start.equals(addr)) continue; // same address: Frida stacks listeners
        const pEnd = p.start.add(p.size);
        if (addr.compare(pEnd) < 0 && p.start.compare(end) < 0) {
            return `it overlaps another hook's patch at ${p.start}`;
        }
    }
    if (!scan) return null;
    const fnStart = slid(scan.start);
    if (fnStart.equals(addr)) return null; // a function entry is never a branch target inside
    // A trace hook may patch the function's entry: stay out of that window too.
    if (addr.compare(fnStart.add(patchSize(fnStart))) < 0) {
        return "it lies inside the function's first instructions (where entry hooks patch)";
    }
    const fn = scanFunction(fnStart, slid(scan.end));
    if (fn.leaf) return "the function is a leaf that may keep locals in the stack's red zone, which an inline hook would overwrite";
    for (const t of fn.targets) {
        const tp = ptr(t);
        if (tp.compare(addr) > 0 && tp.compare(end) < 0) {
            return `a branch targets ${tp}, inside the ${size} bytes a hook at ${addr} would overwrite`;
        }
    }
    return null;
}

function notePatch(addr: NativePointer): void {
    const key = addr.toString();
    const p = patches.get(key);
    if (p !== undefined) p.users++;
    else patches.set(key, { start: addr, size: patchSize(addr), users: 1 });
}

function releasePatch(addr: NativePointer): void {
    const key = addr.toString();
    const p = patches.get(key);
    if (p === undefined) return;
    if (--p.users <= 0) patches.delete(key);
}


export interface Probe {
    /** "inline" (Interceptor) or "hardware" (debug register). */
    kind: string;
    /** Why an inline hook was not used, for hardware probes. */
    why: string | null;
    /** Hits the probe counted without calling `onHit` (a budgeted logpoint over its budget). */
    unlogged(): number;
    detach(): void;
}

/**
 * Run `onHit(cpu, threadId)` when execution reaches `addr` (runtime). `scan` is the enclosing
 * function for a mid-function address (absent at a function entry). With `threadId`, only
 * that thread triggers it (step hooks). `budgeted`: a logpoint with nothing to decide per hit;
 * an inline probe then checks the logpoint budget natively and calls `onHit` only for a hit it
 * may log (js_gate.ts), the others counted in `unlogged()`.
 */
export function attachProbe(addr: NativePointer, scan: ScanRange | null | undefined, threadId: number | null, onHit: (cpu: CpuContext, budgetTaken: boolean) => void, budgeted = false): Probe {
    // Probes need real frames and cannot share a function entry with replaceFast (wrappers.ts).
    demoteWrappers(threadId === null ? "a breakpoint or logpoint was set" : "a step was requested");
    let why = unsafeReason(addr, scan);
    if (why === null) {
        try {
            return inlineProbe(addr, threadId, onHit, budgeted);
        } catch (e) {
            // Frida cannot relocate the code there (a function shorter than its patch, say).
            why = `Frida cannot hook it inline (${e instanceof Error ? e.message : e})`;
        }
    }
    let hw;
    try {
        hw = hwAttach(addr, (cpu) => onHit(cpu, false), threadId);
    } catch (e) {
        throw new Error(`${why}, and no hardware breakpoint is available (${e instanceof Error ? e.message : e})`);
    }
    return { kind: "hardware", why, unlogged: () => 0, detach: () => hwDetach(hw) };
}

function inlineProbe(addr: NativePointer, threadId: number | null, onHit: (cpu: CpuContext, budgetTaken: boolean) => void, budgeted: boolean): Probe {
    // Never detach while a thread is inside the callback: Frida's detach spins until every
    // thread has left the trampoline, and a paused thread only leaves after a message the
    // JS thread (the one spinning) would deliver: a deadlock (measured). Such a detach is
    // deferred to when the last thread has left.
    let inside = 0;
    let wanted = false;
    let done = false;
    const finish = (): void => {
        if (done || inside > 0) return;
        done = true;
        detachParked(addr, attached);
        releasePatch(addr);
    };
    const enter = (cpu: CpuContext, thread: number | null, budgetTaken: boolean): void => {
        if (wanted || (threadId !== null && thread !== threadId)) return;
        inside++;
        try {
            onHit(cpu, budgetTaken);
        } finally {
            inside--;
            if (wanted && inside === 0) setTimeout(finish, 0);
        }
    };
    const onEnter = function (this: InvocationContext): void {
        enter(this.context, this.threadId, false);
    };
    const attached: InvocationListener[] = [];
    let unlogged = (): number => 0;
    patchParked([prologue(addr)], () => {
        const native = budgeted && threadId === null ? attachLogListener(addr, (cpu) => enter(cpu, null, true)) : null;
        if (native !== null) {
            attached.push(native.listener);
            unlogged = native.unlogged;
            return;
        }
        const gate = attachGate(addr); // first: it must run before the JS listener
        if (gate !== null) attached.push(gate);
        attached.push(Interceptor.attach(addr, onEnter));
    });
    notePatch(addr);
    return {
        kind: "inline",
        why: null,
        unlogged: () => unlogged(),
        detach() {
            wanted = true;
            finish();
        },
    };
}
