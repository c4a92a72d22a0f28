// Typed hook records: arguments and return values read through DWARF recipes, plus
// watch values (globals, pointer chains, raw addresses, JS expressions) captured on
// function enter/exit. hooks.ts asks `typedHook(fnId, spec)` once per JS hook and
// records typed events whenever the hook has a recipe or a watch is in scope.
//
// Argument locations come from the daemon (System V x86-64 classification, done in Rust):
//   {r: i}        the value's bytes are argument slot i (args[i]: a register, or the stack)
//   {r2: [i, j]}  a 9-16 byte struct in two integer slots
//   {stack: off}  a struct passed in memory: at rsp + 8 + off on entry
//   {ind: i}      slot i holds the value's address (Rust passes big aggregates this way)
//   {x: i}        a float or double in xmm i (its saved copy, see xmm.ts)
//   {eb: [[k, i], ...]}  a struct of up to two eightbytes, each from integer slot i (k 0)
//                 or xmm i (k 1): System V's SSE and mixed classes
//   {none: why}   not recoverable here
// Return locations: {r: 0} rax, {r2: [0, 1]} rax:rdx, {x: 0} xmm0, {eb: ...} with integer
// slots 0/1 = rax/rdx, {ind: 0} rax holds the address (sret), {none: why}.

import { addTypes, currentDepth, readCString, readValue, typeDesc, TypeDesc, unreadable } from "./serialize.js";
import { xmmAddress, XMM_UNAVAILABLE } from "./xmm.js";

export interface Loc {
    r?: number;
    r2?: [number, number];
    /** Rust scalar pair: [slot, offset, size] twice; each slot's low bytes go at offset. */
    pair?: [number, number, number][];
    stack?: number;
    ind?: number;
    x?: number;
    eb?: [number, number][];
    none?: string;
}

export interface ArgRecipe {
    n: string;
    t: number;
    at: Loc;
}

export interface SerializeRecipe {
    args: ArgRecipe[];
    ret?: { t: number; at: Loc } | null;
    /** argumentsAtExit: pointer parameters' pointees are read again at exit. */
    exit?: boolean;
}

export interface WatchSpec {
    label: string;
    /** Static address (slid like function addresses) or, with noSlide, a runtime address. */
    addr?: string;
    noSlide?: boolean;
    /** Applied in order: ["d"] dereference, ["o", n] add n. */
    ops?: (string | number)[][];
    type?: number;
    expr?: string;
    /** Function ids in scope; absent = every traced function. */
    fns?: number[] | null;
}

interface Watch {
    spec: WatchSpec;
    base: NativePointer | null;
    fn: (() => unknown) | null;
    scope: Set<number> | null;
}

export const MAX_WATCHES = 32;

let watches: Watch[] = [];
let slideFn: () => NativePointer = () => ptr(0);
// Register values are copied here to be read as typed memory (JS runs one callback at a time).
const scratch = Memory.alloc(16);
const pairTmp = Memory.alloc(8);

export function setSlideSource(f: () => NativePointer): void {
    slideFn = f;
}

/** Replace the watch list. Returns the labels and per-watch errors (bad expressions). */
export function setWatches(list: WatchSpec[], types?: Record<string, TypeDesc>): { activeCount: number; errors: { label: string; error: string }[] } {
    addTypes(types);
    const errors: { label: string; error: string }[] = [];
    const next: Watch[] = [];
    for (const spec of (list ?? []).slice(0, MAX_WATCHES)) {
        try {
            let fn: (() => unknown) | null = null;
            if (typeof spec.expr === "string") {
                // Compiled once; evaluated on each enter/exit in scope.
                fn = new Function(`return (${spec.expr});`) as () => unknown;
            }
            const base = spec.addr === undefined ? null : spec.noSlide ? ptr(spec.addr) : ptr(spec.addr).add(slideFn());
            next.push({ spec, base, fn, scope: spec.fns ? new Set(spec.fns) : null });
        } catch (e) {
            errors.push({ label: spec.label, error: e instanceof Error ? e.message : String(e) });
        }
    }
    watches = next;
    return { activeCount: watches.length, errors };
}

export function watchCount(): number {
    return watches.length;
}

function inScope(fnId: number): boolean {
    for (const w of watches) if (w.scope === null || w.scope.has(fnId)) return true;
    return false;
}

/** Follow a watch's pointer chain; throws on unreadable memory. */
export function locate(base: NativePointer, ops: (string | number)[][] | undefined): NativePointer {
    let p = base;
    for (const op of ops ?? []) {
        if (op[0] === "d") {
            p = p.readPointer();
            if (p.isNull()) throw new Error("null pointer in chain");
        } else {
            p = p.add(op[1] as number);
        }
    }
    return p;
}

function jsonable(v: unknown): unknown {
    if (v instanceof NativePointer) return v.toString();
    if (v instanceof Int64 || v instanceof UInt64) return v.toString();
    if (typeof v === "bigint") return v.toString();
    if (typeof v === "number" && !isFinite(v)) return String(v);
    return v === undefined ? null : v;
}

function watchValue(w: Watch): unknown {
    if (w.fn !== null) {
        try {
            return jsonable(w.fn());
        } catch (e) {
            return `<error: ${e instanceof Error ? e.message : String(e)}>`;
        }
    }
    if (w.base === null || w.spec.type === undefined) return null;
    let at: NativePointer;
    try {
        at = locate(w.base, w.spec.ops);
    } catch (_) {
        return unreadable(w.base);
    }
    return readValue(at, w.spec.type, currentDepth());
}

/** `{label: value}` of the watches in scope for `fnId`, or null if none is. */
export function watchValues(fnId: number | null): Record<string, unknown> | null {
    if (watches.length === 0) return null;
    let out: Record<string, unknown> | null = null;
    for (const w of watches) {
        if (fnId !== null && w.scope !== null && !w.scope.has(fnId)) continue;
        if (out === null) out = {};
        out[w.spec.label] = watchValue(w);
    }
    return out;
}

function valueAt(ctx: CpuContext, args: InvocationArguments | null, ret: InvocationReturnValue | null, at: Loc, t: number): unknown {
    const slot = (i: number): NativePointer => {
        if (ret !== null) return i === 0 ? ret : ((ctx as X64CpuContext).rdx ?? ptr(0));
        return (args as InvocationArguments)[i];
    };
    if (at.none !== undefined) return `<${at.none}>`;
    if (at.r !== undefined) {
        scratch.writePointer(slot(at.r));
        return readValue(scratch, t);
    }
    if (at.r2 !== undefined) {
        scratch.writePointer(slot(at.r2[0]));
        scratch.add(8).writePointer(slot(at.r2[1]));
        return readValue(scratch, t);
    }
    if (at.pair !== undefined) {
        scratch.writeU64(0);
        scratch.add(8).writeU64(0);
        for (const [s, off, size] of at.pair) {
            pairTmp.writePointer(slot(s));
            Memory.copy(scratch.add(off), pairTmp, Math.min(size, 8));
        }
        return readValue(scratch, t);
    }
    if (at.ind !== undefined) return readValue(slot(at.ind), t);
    if (at.stack !== undefined) return readValue(ctx.sp.add(8 + at.stack), t);
    if (at.x !== undefined) {
        const p = xmmAddress(ctx, at.x, ret !== null);
        return p === null ? `<${XMM_UNAVAILABLE}>` : readValue(p, t);
    }
    if (at.eb !== undefined) {
        for (let i = 0; i < at.eb.length && i < 2; i++) {
            const [kind, index] = at.eb[i];
            if (kind === 0) {
                scratch.add(8 * i).writePointer(slot(index));
            } else {
                const p = xmmAddress(ctx, index, ret !== null);
                if (p === null) return `<${XMM_UNAVAILABLE}>`;
                Memory.copy(scratch.add(8 * i), p, 8);
            }
        }
        return readValue(scratch, t);
    }
    return null;
}

export interface TypedHook {
    /** Typed records are due: a recipe exists, or a watch is in scope. */
    active(): boolean;
    /** Named typed values, or (no recipe) the raw argument slots as hex. */
    args(ctx: CpuContext, args: InvocationArguments): Record<string, unknown> | string[];
    ret(ctx: CpuContext, retval: InvocationReturnValue): unknown;
    watches(): Record<string, unknown> | null;
    /** argumentsAtExit: the pointer parameters' values at entry (null: not asked for). */
    pointers(args: InvocationArguments): NativePointer[] | null;
    /** `{name: pointee now}` of those parameters, at exit. */
    pointees(saved: NativePointer[]): Record<string, unknown>;
}

/** The value `p` points to now, read as pointer type `t` describes its target. */
function pointee(p: NativePointer, t: number): unknown {
    if (p.isNull()) return null;
    const to = typeDesc(t)?.to;
    if (to === undefined || to === null) return p.toString();
    const target = typeDesc(to);
    if (target === undefined || target.k === "void" || target.k === "fn") return p.toString();
    if (target.k === "char" && (target.s ?? 1) === 1) return readCString(p);
    return readValue(p, to);
}

export function typedHook(fnId: number, recipe: SerializeRecipe | undefined, argCount: number): TypedHook {
    // Pointer parameters in integer registers, found once the type table is loaded.
    let pointerArgs: ArgRecipe[] | null = null;
    const ptrArgs = (): ArgRecipe[] => {
        if (pointerArgs === null) pointerArgs = (recipe?.args ?? []).filter((a) => a.at.r !== undefined && typeDesc(a.t)?.k === "ptr");
        return pointerArgs;
    };
    return {
        pointers(args) {
            if (recipe?.exit !== true) return null;
            return ptrArgs().map((a) => args[a.at.r as number]);
        },
        pointees(saved) {
            const out: Record<string, unknown> = {};
            ptrArgs().forEach((a, i) => {
                try {
                    out[a.n || `arg${i}`] = pointee(saved[i], a.t);
                } catch (_) {
                    out[a.n || `arg${i}`] = unreadable(saved[i]);
                }
            });
            return out;
        },
        active: () => recipe !== undefined || (watches.length > 0 && inScope(fnId)),
        args(ctx, args) {
            if (recipe === undefined) {
                const hex: string[] = [];
                for (let i = 0; i < argCount; i++) hex.push(args[i].toString());
                return hex;
            }
            const out: Record<string, unknown> = {};
            recipe.args.forEach((a, i) => {
                out[a.n || `arg${i}`] = valueAt(ctx, args, null, a.at, a.t);
            });
            return out;
        },
        ret(ctx, retval) {
            if (recipe === undefined) return retval.toString();
            if (!recipe.ret) return null;
            return valueAt(ctx, null, retval, recipe.ret.at, recipe.ret.t);
        },
        watches: () => watchValues(fnId),
    };
}

/** Record kinds of typed events (see events.ts for the others; src/frida/host.rs expands them):
 *   [10, fn, call, parent, tid, ts, args, watchValues]
 *   [11, fn, call, parent, tid, ts, ret, dur, watchValues] */
export const ENTER_TYPED = 10;
export const EXIT_TYPED = 11;
