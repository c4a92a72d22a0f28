// Pausing one thread: report the pause, then block that thread in recv('resume-<tid>').wait().
// wait() releases the JS lock, so other threads keep running (and hitting hooks) and RPC is
// still served. script.unload() releases every waiter without a message: the thread then
// simply returns into the target.

import { nowNs } from "./clock.js";
import { flush } from "./events.js";
import { stackFrames } from "./frames.js";
import { currentSlide } from "./hooks.js";
import { Frame, readAll, readVar, REGISTERS, VarRecipe, writeVar, Value } from "./values.js";

export interface PauseReason {
    breakpointId?: string;
    step?: boolean;
    hits?: number;
    recipes?: VarRecipe[];
    params?: VarRecipe[];
}

const paused = new Map<number, Frame>();
const pausedOnPoint = new Map<number, string | null>();

/** The daemon's address space for every module: runtime - the main module's slide
 *  (src/engine/modules.rs). */
function toStatic(p: NativePointer): string {
    return p.sub(currentSlide() ?? ptr(0)).toString();
}

/** Called from a hook callback on the thread that hit it. Returns when resumed. */
export function pause(cpu: CpuContext, reason: PauseReason): void {
    const tid = Process.getCurrentThreadId();
    const frame: Frame = { cpu, pending: new Map() };
    const registers: Record<string, string> = {};
    for (const r of REGISTERS) {
        const v = (cpu as unknown as Record<string, NativePointer | undefined>)[r];
        if (v !== undefined) registers[r] = v.toString();
    }
    const args = (reason.params ?? []).map((r): Value => {
        try {
            return readVar(frame, r);
        } catch (_) {
            return null;
        }
    });
    paused.set(tid, frame);
    pausedOnPoint.set(tid, reason.breakpointId ?? null);
    flush(); // trace events before the pause go first
    send({
        type: "paused",
        threadId: tid,
        breakpointId: reason.breakpointId ?? null,
        step: reason.step === true,
        hits: reason.hits ?? null,
        address: toStatic(cpu.pc),
        slide: (currentSlide() ?? ptr(0)).toString(),
        registers,
        frames: stackFrames(cpu, 32),
        arguments: args,
        locals: reason.recipes ? readAll(frame, reason.recipes) : null,
        ts: nowNs(),
    });
    let resumed = false;
    recv("resume-" + tid, () => {
        resumed = true;
    }).wait();
    paused.delete(tid);
    pausedOnPoint.delete(tid);
    if (!resumed) return; // the script is unloading: let the thread go untouched
    for (const [reg, value] of frame.pending) {
        (cpu as unknown as Record<string, NativePointer>)[reg] = value;
    }
}

function frameOf(threadId: number): Frame {
    const f = paused.get(threadId);
    if (f === undefined) throw new Error(`thread ${threadId} is not paused`);
    return f;
}

export function readLocals(threadId: number, recipes: VarRecipe[]): { name: string; value?: Value; error?: string }[] {
    return readAll(frameOf(threadId), recipes);
}

export function writeLocal(threadId: number, recipe: VarRecipe, value: number | string | boolean): { previous: Value; value: Value } {
    const frame = frameOf(threadId);
    const previous = readVar(frame, recipe);
    return { previous, value: writeVar(frame, recipe, value) };
}

export function pausedThreadIds(): number[] {
    return [...paused.keys()];
}

/** Threads paused at breakpoint `id` (to be resumed when it is removed). */
export function threadsPausedOn(id: string): number[] {
    return [...pausedOnPoint].filter(([, bp]) => bp === id).map(([tid]) => tid);
}
