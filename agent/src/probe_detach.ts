// Detaching an inline probe (Interceptor.attach) from running code without freeing code or
// data a thread is about to use.
//
// Why. Frida's detach restores the prologue and frees the hook's trampoline slice (the jump
// target, the relocated prologue and the jump back), its function context and the listener,
// at the first flush where the context's usage counter is 0. That counter only covers a
// thread from the start of _gum_function_context_begin_invocation to the end of the
// listeners. A thread on the trampoline, in the shared enter thunk, or past the listeners on
// its way through the relocated prologue is not counted; and when the counter is not 0 (a
// thread waiting for the JS lock to run the probe's callback, or paused on a breakpoint) the
// free is merely deferred to a later flush, which comes at any NativeFunction call, with the
// program's threads running (tests/probe_install_stress.rs crashed this way).
//
// How. Two steps.
// 1. With the threads parked (quiesce.ts), pin (add 1 to the usage counter), detach, flush:
//    the original bytes are back, no thread can enter any more, and Frida defers the free.
// 2. Off the request's path (a timer), park again until no thread stands in the trampoline
//    slice, the enter thunk or begin_invocation, and the counter is 1 (ours: nobody is
//    inside the listeners); then unpin and flush, which frees it all with every thread
//    elsewhere. A busy hook may take a few tries; nothing waits for them.
//
// The counter is found through Frida's private layout (GumFunctionContext, Frida 17): the
// slice starts with the context's address. The layout is checked against what it must hold
// (the function's address, the trampoline the prologue jumps to) before anything is written;
// if it does not match, the detach is only parked (step 1 without the pin) and counted.

import { DangerRange, moreStats, patchParked, prologue, tryParked } from "./quiesce.js";

/** GumFunctionContext fields (Frida 17.26, x86-64: read from a live context; the header of older
 *  versions differs). */
const FC_FUNCTION = 0, FC_SLICE = 32, FC_USAGE = 48, FC_ON_ENTER = 56, FC_PROLOGUE_LEN = 72, FC_ON_INVOKE = 88;
/** GUM_INTERCEPTOR_CODE_SLICE_SIZE: the trampoline slice and the enter thunk's. */
const SLICE = 256;
/** How far into _gum_function_context_begin_invocation a thread may stand (generous). */
const BEGIN_INVOCATION_SPAN = 2048;

interface PinnedHook {
    address: NativePointer;
    usage: NativePointer;
    /** How many bytes of the function the hook's jump (and padding) overwrote. */
    overwritten: number;
    /** Where no thread may stand when the hook is freed. */
    danger: DangerRange[];
    tries: number;
}

const pending: PinnedHook[] = [];
let timer: ReturnType<typeof setTimeout> | null = null;
const stats = { pinned: 0, freed: 0, unpinned: 0, reclaimTries: 0 };
/** Why the layout check failed the last time (null: it never did). */
let layoutMismatch: string | null = null;

/** Where a jmp at `at` goes (rel32/rel8, or `jmp [rip+d]`); null if it is no jump. */
function jumpTarget(at: NativePointer): NativePointer | null {
    const ins = Instruction.parse(at) as X86Instruction;
    if (ins.mnemonic !== "jmp") return null;
    const op = ins.operands[0];
    if (op === undefined) return null;
    if (op.type === "imm") return ptr(op.value.toString());
    if (op.type === "mem" && op.value.base === "rip") return ins.next.add(op.value.disp).readPointer();
    return null;
}

/** The function the enter thunk calls first: _gum_function_context_begin_invocation. */
function firstCall(thunk: NativePointer): NativePointer | null {
    const imm = new Map<string, NativePointer>();
    let p = thunk;
    for (let n = 0; n < 100; n++) {
        const ins = Instruction.parse(p) as X86Instruction;
        const ops = ins.operands;
        if ((ins.mnemonic === "mov" || ins.mnemonic === "movabs") && ops.length === 2 && ops[0].type === "reg" && ops[1].type === "imm") {
            imm.set(String(ops[0].value), ptr(ops[1].value.toString()));
        }
        if (ins.mnemonic === "call") {
            if (ops[0]?.type === "imm") return ptr(ops[0].value.toString());
            if (ops[0]?.type === "reg") return imm.get(String(ops[0].value)) ?? null;
            return null;
        }
        if (ins.mnemonic.startsWith("ret")) return null;
        p = ins.next;
    }
    return null;
}

/** The hook Frida made at `address`, found and checked before it is detached; null if unsure. */
function findHook(address: NativePointer): PinnedHook | null {
    try {
        const onEnter = jumpTarget(address);
        if (onEnter === null) throw new Error("the prologue holds no jump");
        const slice = onEnter.sub(Process.pointerSize);
        const ctx = slice.readPointer();
        const onInvoke = ctx.add(FC_ON_INVOKE).readPointer();
        const sliceEnd = slice.add(SLICE);
        const checks: [boolean, string][] = [
            [ctx.add(FC_FUNCTION).readPointer().equals(address), "function address"],
            [ctx.add(FC_ON_ENTER).readPointer().equals(onEnter), "on_enter trampoline"],
            [onInvoke.compare(onEnter) > 0 && onInvoke.compare(sliceEnd) < 0, "on_invoke trampoline"],
            [ctx.add(FC_SLICE).readPointer().add(Process.pointerSize).readPointer().equals(slice), "trampoline slice"],
            [ctx.add(FC_PROLOGUE_LEN).readU32() >= 5 && ctx.add(FC_PROLOGUE_LEN).readU32() <= 32, "prologue length"],
        ];
        const bad = checks.find(([ok]) => !ok);
        if (bad !== undefined) {
            const words: string[] = [];
            for (let i = 0; i < 160; i += 8) words.push(`${i}:${ctx.add(i).readPointer()}`);
            throw new Error(`unexpected ${bad[1]} (onEnter ${onEnter} slice ${slice} ctx ${words.join(" ")})`);
        }
        // on_enter: push [rip+ctx]; jmp enter_thunk.
        const thunk = jumpTarget(Instruction.parse(onEnter).next);
        if (thunk === null) throw new Error("no jump to the enter thunk");
        const danger: DangerRange[] = [[slice, sliceEnd], [thunk, thunk.add(SLICE)]];
        const begin = firstCall(thunk);
        if (begin === null) throw new Error("no call in the enter thunk");
        danger.push([begin, begin.add(BEGIN_INVOCATION_SPAN)]);
        return { address, usage: ctx.add(FC_USAGE), overwritten: ctx.add(FC_PROLOGUE_LEN).readU32(), danger, tries: 0 };
    } catch (e) {
        layoutMismatch = `${address}: ${e instanceof Error ? e.message : e}`;
        return null;
    }
}

/**
 * Detach `listeners` (a probe's, at `address`; others may stay) with the program's threads
 * parked, and free Frida's trampoline later, once no thread can be on it.
 */
export function detachParked(address: NativePointer, listeners: InvocationListener[]): void {
    const hook = findHook(address);
    patchParked([prologue(address, hook?.overwritten)], () => {
        if (hook !== null) hook.usage.writeS32(hook.usage.readS32() + 1);
        for (const l of listeners) l.detach();
    });
    if (hook === null) {
        stats.unpinned++;
        return;
    }
    stats.pinned++;
    pending.push(hook);
    reclaimSoon(1);
}

function reclaimSoon(ms: number): void {
    if (timer === null) timer = setTimeout(reclaim, ms);
}

function reclaim(): void {
    timer = null;
    let wait = 0;
    for (let i = 0; i < pending.length; ) {
        const h = pending[i];
        stats.reclaimTries++;
        h.tries++;
        if (tryParked(h.danger, () => h.usage.readS32() === 1, () => h.usage.writeS32(0))) {
            stats.freed++;
            pending.splice(i, 1);
            continue;
        }
        wait = Math.max(wait, Math.min(100, 1 << Math.min(h.tries, 7)));
        i++;
    }
    if (pending.length > 0) reclaimSoon(wait);
}

/** Unpin everything (the agent is unloading: Frida would wait for the pins forever). */
export function releasePins(): void {
    for (const h of pending.splice(0)) h.usage.writeS32(h.usage.readS32() - 1);
}

moreStats.probeDetach = () => ({ ...stats, pending: pending.length, layoutMismatch });
