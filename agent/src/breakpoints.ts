// Breakpoints and logpoints: separate from trace hooks (their own Interceptor listeners, so
// both coexist on one address). Always the probe (function) form of Interceptor.attach: the
// object form treats [rsp] as a return address, which corrupts the frame mid-function.
//
// Conditions and logpoint {expressions} are JavaScript over `args` (the function's
// parameters, decoded with their DWARF types), the frame's variables by name, `threadId` and
// `hit` (this hit's number, 1-based). Variables are read only when the expression uses them:
// one that cannot be read (a double in an xmm register) fails only the expressions naming it.
//
// A line may compile to several blocks (a `while` header: the first jump and the test). One
// execution of the line can pass through more than one of them; it counts, logs and stops
// once: a hit at address j is the same execution as the thread's previous hit at address i
// of the same point in the same frame when i's code, stopping at nothing but calls and
// unconditional jumps within the line, leads to j (`continuations`).

import { nowNs } from "./clock.js";
import { currentSlide } from "./hooks.js";
import { pause } from "./pause.js";
import { compileFast, CompiledSpec, setHitCpu } from "./compiled.js";
import { LOGPOINT_BUDGET, logBudgetTake } from "./js_gate.js";
import { queueLogpointMessage } from "./logpoint_messages.js";
import { attachProbe, Probe, ScanRange, slid } from "./probes.js";
import { cancelStepHooks } from "./stepping.js";
import { Frame, Value, VarRecipe, varsObject } from "./values.js";

export interface PointSpec {
    id: string;
    /** The condition and template compiled by the daemon (debug_eval's language). */
    compiled?: CompiledSpec;
    /** Static addresses (hex); the first is the primary one. */
    addresses: string[];
    condition?: string;
    hitCount?: number;
    message?: string;
    /** The enclosing function (static) of each address, to check line addresses; null at a function entry. */
    scans?: (ScanRange | null)[];
    params?: VarRecipe[];
    vars?: VarRecipe[];
    /** Static [start, end) ranges of the line's code, to tell one execution from the next. */
    lineRanges?: [string, string][];
}

type Evaluator = (args: Value[], vars: Record<string, unknown>) => unknown;

interface Point {
    spec: PointSpec;
    logpoint: boolean;
    hits: number;
    condition: Evaluator | null;
    /** The compiled condition (debug_eval's language), run before anything else per hit. */
    fast: (() => unknown) | null;
    template: (string | Evaluator)[];
    probes: Probe[];
    conditionErrors: number;
    active: boolean;
    /** Per address index: the indexes one execution of the line can reach next without a stop. */
    continuations: Set<number>[];
    /** "tid/sp" → the address index of the thread's last hit in that frame. */
    lastHit: Map<string, number>;
    /** Logpoint hits not logged since its last message (over LOGPOINT_BUDGET), on the JS path. */
    unlogged: number;
    /** A logpoint with nothing to decide per hit: its probes check the budget natively, and
     *  only hits that may be logged reach onHit. */
    budgeted: boolean;
    /** Of the probes' natively counted hits, how many the messages have reported. */
    nativeReported: number;
    /** A JavaScript condition or template part reads `args` and the variables by name. */
    usesVars: boolean;
}

const MAX_WALK = 200;

/** Which addresses of the point an execution starting at each one reaches within the line. */
function continuations(spec: PointSpec): Set<number>[] {
    const ranges = (spec.lineRanges ?? []).map(([lo, hi]) => [slid(lo), slid(hi)]);
    const inLine = (p: NativePointer): boolean => ranges.some(([lo, hi]) => p.compare(lo) >= 0 && p.compare(hi) < 0);
    const index = new Map(spec.addresses.map((a, i) => [slid(a).toString(), i]));
    return spec.addresses.map((a, i) => {
        const out = new Set<number>();
        if (ranges.length === 0) return out;
        let p = slid(a);
        try {
            for (let n = 0; n < MAX_WALK && inLine(p); n++) {
                const j = index.get(p.toString());
                if (j !== undefined && j !== i) out.add(j);
                const ins = Instruction.parse(p) as X86Instruction;
                const m = ins.mnemonic;
                if (m === "jmp") {
                    const op = ins.operands[0];
                    if (op === undefined || op.type !== "imm") break;
                    p = ptr(op.value.toString());
                    continue;
                }
                if (m.startsWith("j") || m.startsWith("loop") || m.startsWith("ret") || m === "ud2" || m === "hlt") break;
                p = ins.next;
            }
        } catch (_) {
            // undecodable: no continuation
        }
        return out;
    });
}

const MAX_CONDITION_ERRORS = 20;
// Logpoint messages are budgeted (js_gate.ts LOGPOINT_BUDGET a second, all logpoints
// together). A logpoint on a function busy threads call millions of times a second otherwise
// queues messages faster than the host reads them, and every later request waits behind them
// (measured: 151,000 messages from a 300 ms logpoint on four busy threads; its removal
// answered after 22 s, longer ones timed out). Hits over the budget still count; the point's
// next message says how many were not logged.

/** Hits counted natively (over the budget) by the point's probes (0 but on a budgeted point). */
function nativeUnlogged(p: Point): number {
    return p.probes.reduce((n, probe) => n + probe.unlogged(), 0);
}

/** Every hit of the point, including those its probes counted without JavaScript. */
function allHits(p: Point): number {
    return p.hits + nativeUnlogged(p);
}
const points = new Map<string, Point>();

function compile(expr: string, what: string): Evaluator {
    try {
        // Sloppy-mode Function so that `with` can expose the variables by name.
        return new Function("args", "vars", `with (vars) { return (${expr}); }`) as Evaluator;
    } catch (e) {
        throw new Error(`${what} ${JSON.stringify(expr)} is not a valid JavaScript expression: ${errorText(e)}`);
    }
}

function compileTemplate(message: string): (string | Evaluator)[] {
    const parts: (string | Evaluator)[] = [];
    let last = 0;
    for (const m of message.matchAll(/\{([^}]+)\}/g)) {
        parts.push(message.slice(last, m.index));
        parts.push(compile(m[1], "logpoint expression"));
        last = m.index! + m[0].length;
    }
    parts.push(message.slice(last));
    return parts;
}

function compiledTemplate(c: CompiledSpec): (string | Evaluator)[] {
    return (c.template ?? []).map((part: string | { js: string } | { legacy: string }) => {
        if (typeof part === "string") return part;
        if ("js" in part) return compileFast(part.js, c.types);
        return compile(part.legacy, "logpoint expression");
    });
}

function errorText(e: unknown): string {
    return e instanceof Error ? e.message : String(e);
}

function show(v: unknown): string {
    if (typeof v === "string") return v;
    if (v instanceof NativePointer) return v.toString();
    try {
        return typeof v === "object" ? JSON.stringify(v) : String(v);
    } catch (_) {
        return String(v);
    }
}

/** Is this hit (address index `i`) part of the execution the thread's last hit started? */
function sameExecution(p: Point, threadId: number, cpu: CpuContext, i: number): boolean {
    if (p.spec.addresses.length < 2) return false;
    const key = `${threadId}/${cpu.sp}`;
    const last = p.lastHit.get(key);
    if (p.lastHit.size > 10000) p.lastHit.clear(); // frames long gone
    p.lastHit.set(key, i);
    return last !== undefined && p.continuations[last]?.has(i) === true;
}

/** `args`, read element by element only when an expression uses one. */
function lazyArgs(vars: Record<string, unknown>, params: VarRecipe[]): Value[] {
    const args: Value[] = [];
    params.forEach((r, i) => Object.defineProperty(args, i, { enumerable: true, get: () => vars[r.name] }));
    return args;
}

/** Run a point's compiled condition; a failure is reported (up to 20 times) and is false. */
function fastHolds(p: Point): boolean {
    try {
        p.hits++; // `hit` would be this number
        try {
            return Boolean(p.fast!());
        } finally {
            p.hits--;
        }
    } catch (e) {
        if (p.conditionErrors++ < MAX_CONDITION_ERRORS) {
            const threadId = Process.getCurrentThreadId();
            send({ type: "conditionError", breakpointId: p.spec.id, condition: p.spec.compiled?.source ?? null, error: errorText(e), threadId, ts: nowNs() });
        }
        return false;
    }
}

/** `budgetTaken`: the probe checked the logpoint budget natively (a budgeted point's inline probe). */
function onHit(p: Point, cpu: CpuContext, index: number, budgetTaken: boolean): void {
    if (!p.active) return;
    setHitCpu(cpu);
    // A compiled condition (the daemon's, from DWARF) reads only what it names: run it before
    // building anything else, so a false one costs little more than the hook itself. (A
    // line of several addresses first tells a new execution from the rest of one.)
    const multi = p.spec.addresses.length >= 2;
    if (p.fast !== null && !multi && !fastHolds(p)) return;
    const threadId = Process.getCurrentThreadId();
    if (sameExecution(p, threadId, cpu, index)) return;
    if (p.fast !== null && multi && !fastHolds(p)) return;
    // A logpoint whose condition is settled by now (none, or compiled) takes its budget before
    // the frame's variables are built: over the budget, a hit then costs the condition alone
    // (building them cost ≈ 13 µs a hit on SQLite's sqlite3BtreeNext, benches/logpoint_real.rs).
    let ts = 0;
    if (p.logpoint && p.condition === null) {
        ts = nowNs();
        if (!budgetTaken && !logBudgetTake(ts)) {
            p.hits++;
            p.unlogged++;
            return;
        }
        budgetTaken = true;
    }
    const recipes = p.spec.vars ?? [];
    // Only a JavaScript condition or template reads `args` and the variables by name; the
    // compiled ones read the registers and memory themselves.
    let vars: Record<string, unknown> = {};
    let args: Value[] = [];
    if (p.usesVars) {
        const frame: Frame = { cpu, pending: new Map() };
        vars = varsObject(frame, recipes);
        // threadId and the hit's number, unless the frame has variables of those names.
        if (!("threadId" in vars)) vars.threadId = threadId;
        if (!("hit" in vars)) Object.defineProperty(vars, "hit", { enumerable: true, get: () => allHits(p) });
        args = lazyArgs(vars, p.spec.params ?? []);
    }
    if (p.condition !== null) {
        let ok: unknown;
        try {
            p.hits++; // `hit` in a condition is the number this hit would have
            try {
                ok = p.condition(args, vars);
            } finally {
                p.hits--;
            }
        } catch (e) {
            if (p.conditionErrors++ < MAX_CONDITION_ERRORS) {
                send({ type: "conditionError", breakpointId: p.spec.id, condition: p.spec.condition, error: errorText(e), threadId, ts: nowNs() });
            }
            return;
        }
        if (!ok) return;
    }
    p.hits++;
    if (p.logpoint) {
        if (ts === 0) ts = nowNs();
        if (!budgetTaken && !logBudgetTake(ts)) {
            p.unlogged++;
            return;
        }
        const text = p.template.map((part) => {
            if (typeof part === "string") return part;
            try {
                return show(part(args, vars));
            } catch (e) {
                return `<error: ${errorText(e)}>`;
            }
        });
        const native = nativeUnlogged(p);
        const unlogged = p.unlogged + native - p.nativeReported;
        if (unlogged > 0) {
            text.push(` (${unlogged} earlier hits not logged: over ${LOGPOINT_BUDGET} logpoint messages a second; add a condition)`);
            p.unlogged = 0;
            p.nativeReported = native;
        }
        queueLogpointMessage(p.spec.id, text.join(""), threadId, ts);
        return;
    }
    const n = p.spec.hitCount ?? 0;
    if (n > 0 && p.hits !== n) return;
    // A breakpoint reached during a step ends the step (as in gdb): its hooks go.
    cancelStepHooks(threadId);
    pause(cpu, { breakpointId: p.spec.id, hits: p.hits, recipes, params: p.spec.params });
}

/** Install a breakpoint or logpoint on all its addresses (all or nothing). */
export function setPoint(spec: PointSpec, logpoint: boolean): { id: string; installed: string[]; runtimeAddresses: string[]; probes: { kind: string; why: string | null }[] } {
    if (points.has(spec.id)) removePoint(spec.id);
    const p: Point = {
        spec,
        logpoint,
        hits: 0,
        condition: spec.compiled?.condition === undefined && spec.condition ? compile(spec.condition, "condition") : null,
        fast: spec.compiled?.condition !== undefined ? compileFast(spec.compiled.condition, spec.compiled.types) : null,
        template: !logpoint ? [] : spec.compiled?.template !== undefined ? compiledTemplate(spec.compiled) : compileTemplate(spec.message ?? ""),
        probes: [],
        conditionErrors: 0,
        active: true,
        continuations: [],
        lastHit: new Map(),
        unlogged: 0,
        budgeted: false,
        nativeReported: 0,
        usesVars: true,
    };
    const compiledParts = spec.compiled?.template;
    p.usesVars = p.condition !== null || (logpoint && (compiledParts === undefined || compiledParts.some((part) => typeof part !== "string" && !("js" in part))));
    p.budgeted = logpoint && p.condition === null && p.fast === null && spec.addresses.length < 2;
    p.continuations = continuations(spec);
    const slide = currentSlide() ?? ptr(0);
    const runtime: string[] = [];
    try {
        for (const [i, a] of spec.addresses.entries()) {
            const addr = ptr(a).add(slide);
            const range = Process.findRangeByAddress(addr);
            if (range === null || range.protection.indexOf("x") < 0) throw new Error(`address ${a} is not executable code in this process`);
            p.probes.push(attachProbe(addr, spec.scans?.[i] ?? null, null, (cpu, taken) => onHit(p, cpu, i, taken), p.budgeted));
            runtime.push(addr.toString());
        }
    } catch (e) {
        detachAll(p);
        throw e;
    }
    points.set(spec.id, p);
    return { id: spec.id, installed: spec.addresses, runtimeAddresses: runtime, probes: p.probes.map((x) => ({ kind: x.kind, why: x.why })) };
}

function detachAll(p: Point): void {
    p.active = false;
    for (const probe of p.probes) {
        try {
            probe.detach();
        } catch (_) {
            // already gone
        }
    }
    p.probes = [];
}

export function removePoint(id: string): boolean {
    const p = points.get(id);
    if (p === undefined) return false;
    detachAll(p);
    points.delete(id);
    return true;
}

export function pointStats(): { id: string; hits: number }[] {
    return [...points.values()].map((p) => ({ id: p.spec.id, hits: allHits(p) }));
}
