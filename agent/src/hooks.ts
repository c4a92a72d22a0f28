// Function hooks: Interceptor.attach on (static address + slide), per-thread call stacks,
// enter/exit events. JS-path calls live on the fast path's per-thread stack in C (fastpath.ts
// sharedEnter) so parent links cross paths; the JS stacks below are the fallback where there
// is no CModule.

import { nowNs } from "./clock.js";
import { costMeter, CostMeter, setCostOptions } from "./cost_sampling.js";
import { AgentEvent, ENTER, EXIT, push } from "./events.js";
import { announceThread } from "./threads.js";
import { idleWrapperDanger, releaseIdleWrapper } from "./wrappers.js";
import { hookUnwinding, unwindHookSites } from "./unwinding.js";
import { attachFast, attachFastPatches, drainBeforeJsEvent, HookNeeds, prepareFastHooks, prepareSharedStack, sharedEnter, sharedLeave, syncCostShare, trapEnter, trapLeave, useFastPath } from "./fastpath.js";
import { attachGate } from "./js_gate.js";
import { DangerRange, patchParked, prologue } from "./quiesce.js";
import { ENTER_TYPED, EXIT_TYPED, SerializeRecipe, TypedHook, typedHook } from "./watches.js";
import { capturePlan, usableCapture } from "./capture.js";

export const DEFAULT_ARG_COUNT = 6;
export const MAX_ARG_COUNT = 10;

export interface FunctionSpec extends HookNeeds {
    id: number;
    /** Static (pre-ASLR) address, hex string "0x…". */
    address: string;
    name: string;
    /** How many arguments to record (default 6, at most 10). */
    argCount?: number;
    /** The address is already a runtime address: do not add the slide. */
    noSlide?: boolean;
    /** DWARF read recipes for arguments and return value (watches.ts); forces the JS path. */
    serialize?: SerializeRecipe;
    /** "sysv-int": a replaceFast wrapper may stand in for the function (wrappers.ts). */
    abi?: string;
    /** GCC's IPA-RA unit: callers may keep values in any register the function leaves alone,
     *  vector registers' upper halves included, so its native hook runs no AVX code. */
    ipaRa?: boolean;
}

export interface HooksRequest {
    action: "add" | "remove";
    functions?: FunctionSpec[];
    /** Static image base of the main module, if init did not give one. */
    imageBase?: string;
    /** "js" forces the JS path for this request; default: fastpath.ts decides per hook. */
    mode?: string;
    /** The `tracing.costShare` setting (cost_sampling.ts), sent with every add. */
    costShare?: number;
}

export interface HooksResult {
    activeCount: number;
    installed: number[];
    /** Of `installed`, the hooks on the JS path (Interceptor.attach with JS callbacks). */
    jsPath: number[];
    removed: number[];
    failed: { id: number; name: string; error: string }[];
}

interface Hook {
    id: number;
    name: string;
    address: NativePointer;
    listener: InvocationListener;
    /** A JS-path hook's gate (js_gate.ts), attached right before it. */
    gate: InvocationListener | null;
    /** On the fast path: its removal switches it off and writes no code. */
    fast: boolean;
    /** Cleared on removal, so a call that raced the removal records nothing. */
    state: { active: boolean };
}

const hooks = new Map<number, Hook>();
const stacks = new Map<number, number[]>();
let nextCall = 1;
let slide: NativePointer | null = null;

/** slide = runtime base of the main module - its static image base. Computed once. */
export function setImageBase(imageBase: string | undefined | null): NativePointer {
    if (slide !== null) return slide;
    const staticBase = imageBase ? ptr(imageBase) : ptr(0);
    slide = Process.mainModule.base.sub(staticBase);
    return slide;
}

export function currentSlide(): NativePointer | null {
    return slide;
}

export function activeCount(): number {
    return hooks.size;
}

function makeCallbacks(fnId: number, argCount: number, state: { active: boolean }, typed: TypedHook, meter: CostMeter): InvocationListenerCallbacks {
    return {
        onEnter(args) {
            // Noted whatever happens next: Frida replaces the return address of every call
            // (unwinding.ts).
            if (trapEnter(this.context.sp, this.returnAddress)) this.trapSlot = this.context.sp;
            if (!state.active) return;
            const tid = this.threadId;
            const admit = meter.admit(tid);
            if (admit < 0) return; // sampled out by cost: no event, not on the call stack
            const t0 = admit > 0 ? nowNs() : 0;
            announceThread(tid); // first event of this thread: its name goes first
            let call: number;
            let parent: number | null;
            const ids = sharedEnter(this.context.sp, fnId);
            // The ring's records first: those before this call, and the exits of calls the
            // push found unwound.
            drainBeforeJsEvent();
            if (ids !== null) {
                call = ids[0];
                parent = ids[1] === 0 ? null : ids[1];
            } else {
                let stack = stacks.get(tid);
                if (stack === undefined) {
                    stack = [];
                    stacks.set(tid, stack);
                }
                call = nextCall++;
                parent = stack.length > 0 ? stack[stack.length - 1] : null;
                stack.push(call);
            }
            // Typed record (recipe or watches in scope): [10, fn, call, parent, tid, ts, args, watches].
            const ev: (number | string | null)[] = typed.active()
                ? ([ENTER_TYPED, fnId, call, parent, tid, 0, typed.args(this.context, args), typed.watches()] as unknown as AgentEvent)
                : [ENTER, fnId, call, parent, tid, 0];
            if (ev[0] === ENTER) for (let i = 0; i < argCount; i++) ev.push(args[i].toString());
            const ts = nowNs();
            ev[5] = ts;
            // One property on the invocation context: they are not free.
            this.strobe = { call, parent, ts, ptrs: typed.pointers(args), measured: admit > 0 };
            push(ev);
            if (admit > 0) meter.charge(ts - t0);
        },
        onLeave(retval) {
            if (this.trapSlot !== undefined) trapLeave(this.trapSlot);
            const entry: { call: number; parent: number | null; ts: number; ptrs: NativePointer[] | null; measured: boolean } | undefined = this.strobe;
            if (entry === undefined) return;
            const ts = nowNs();
            const tid = this.threadId;
            sharedLeave(entry.call);
            drainBeforeJsEvent(); // with the exits of calls unwound above this one
            const stack = stacks.get(tid);
            if (stack !== undefined) {
                // Pop down to (and including) this call: frames left by a longjmp or by an
                // exception unwinding through hooked functions never see their onLeave.
                const i = stack.lastIndexOf(entry.call);
                if (i >= 0) stack.length = i;
            }
            if (typed.active()) {
                const rec: unknown[] = [EXIT_TYPED, fnId, entry.call, entry.parent, tid, ts, typed.ret(this.context, retval), ts - entry.ts, typed.watches()];
                if (entry.ptrs !== null) rec.push(typed.pointees(entry.ptrs));
                push(rec as unknown as AgentEvent);
            } else {
                push([EXIT, fnId, entry.call, entry.parent, tid, ts, retval.toString(), ts - entry.ts]);
            }
            if (entry.measured) meter.charge(nowNs() - ts);
        },
    };
}

function resolve(spec: FunctionSpec): NativePointer {
    if (typeof spec.address !== "string" || !/^0x[0-9a-fA-F]+$/.test(spec.address)) {
        throw new Error(`bad address ${JSON.stringify(spec.address)} (expected a hex string "0x…")`);
    }
    const staticAddr = ptr(spec.address);
    const addr = spec.noSlide ? staticAddr : staticAddr.add(slide ?? setImageBase(null));
    const range = Process.findRangeByAddress(addr);
    if (range === null) throw new Error(`address ${addr} (static ${spec.address}) is not mapped`);
    if (range.protection.indexOf("x") < 0) {
        throw new Error(`address ${addr} (static ${spec.address}) is not executable (${range.protection})`);
    }
    return addr;
}

export function updateHooks(req: HooksRequest): HooksResult {
    const result: HooksResult = { activeCount: 0, installed: [], jsPath: [], removed: [], failed: [] };
    if (req.imageBase !== undefined) setImageBase(req.imageBase);
    const functions = req.functions ?? [];
    if (req.costShare !== undefined) {
        setCostOptions({ costShare: req.costShare });
        syncCostShare();
    }
    // The hooks go in and out with the program's threads parked outside the patched
    // prologues (quiesce.ts): what can be prepared is prepared first. A fast-path hook
    // switched off or back on writes no code, so parks nothing: a trace removed and added
    // again on a busy program returns at once (a park took up to a second).
    const patched: DangerRange[] = [];
    if (req.action === "add") {
        if (functions.length > 0) prepareSharedStack();
        if (req.mode === "auto") prepareFastHooks(functions.length);
        const seen = new Set<string>();
        for (const f of functions) {
            if (hooks.has(f.id)) continue;
            try {
                const address = resolve(f);
                const fast = useFastPath(f, argCountOf(f), req.mode);
                // (Two functions at one address: the second finds the idle hook taken.)
                const again = seen.has(address.toString());
                seen.add(address.toString());
                if (!fast || again || attachFastPatches(f.id, address, f.abi)) patched.push(prologue(address));
                // A JS-path hook releases an idle wrapper there (wrappers.ts): park threads
                // outside it too.
                if (!fast) patched.push(...idleWrapperDanger(address));
            } catch (_) {
                // reported below
            }
        }
        // The C++ runtime's unwinding, hooked once, with these patches (unwinding.ts).
        const unwind = functions.length > 0 ? unwindHookSites() : [];
        for (const site of unwind) patched.push(prologue(site.address));
        patchParked(patched, () => {
            hookUnwinding(unwind);
            addHooks(req, functions, result);
        });
    } else if (req.action === "remove") {
        for (const f of functions) {
            const h = hooks.get(f.id);
            if (h !== undefined && !h.fast) patched.push(prologue(h.address));
        }
        patchParked(patched, () => removeHooks(functions, result));
    } else {
        throw new Error(`unknown hooks action ${JSON.stringify(req.action)} (expected "add" or "remove")`);
    }
    result.activeCount = hooks.size;
    return result;
}

function argCountOf(f: FunctionSpec): number {
    return Math.max(0, Math.min(MAX_ARG_COUNT, f.argCount ?? DEFAULT_ARG_COUNT));
}

function addHooks(req: HooksRequest, functions: FunctionSpec[], result: HooksResult): void {
    for (const f of functions) {
        const existing = hooks.get(f.id);
        if (existing !== undefined) {
            result.installed.push(f.id); // already hooked: no-op
            if (!existing.fast) result.jsPath.push(f.id);
            continue;
        }
        try {
            const address = resolve(f);
            const argCount = argCountOf(f);
            const state = { active: true };
            let listener: InvocationListener;
            let gate: InvocationListener | null = null;
            const fast = useFastPath(f, argCount, req.mode);
            if (fast) {
                listener = attachFast(f.id, address, argCount, f.abi, f.name, usableCapture(f.capture) ? capturePlan(f.capture!) : NULL, f.ipaRa === true);
            } else {
                releaseIdleWrapper(address);
                gate = attachGate(address);
                listener = Interceptor.attach(address, makeCallbacks(f.id, argCount, state, typedHook(f.id, f.serialize, argCount), costMeter(f.id)));
            }
            hooks.set(f.id, { id: f.id, name: f.name, address, listener, gate, state, fast });
            result.installed.push(f.id);
            if (!fast) result.jsPath.push(f.id);
        } catch (e) {
            result.failed.push({ id: f.id, name: f.name, error: errorText(e) });
        }
    }
}

function removeHooks(functions: FunctionSpec[], result: HooksResult): void {
    for (const f of functions) {
        const h = hooks.get(f.id);
        if (h === undefined) continue; // not hooked: no-op
        try {
            h.state.active = false;
            h.listener.detach();
            h.gate?.detach();
            hooks.delete(f.id);
            result.removed.push(f.id);
        } catch (e) {
            result.failed.push({ id: f.id, name: f.name, error: errorText(e) });
        }
    }
}

export function removeAll(): void {
    for (const h of hooks.values()) {
        h.state.active = false;
        try {
            h.listener.detach();
            h.gate?.detach();
        } catch (_) {
            // already gone
        }
    }
    hooks.clear();
}

export function errorText(e: unknown): string {
    if (e instanceof Error) return e.message;
    return String(e);
}
