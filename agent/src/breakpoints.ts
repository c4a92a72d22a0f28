// Breakpoints and logpoints: separate from trace hooks (their own Interceptor listeners, so
// both coexist on one address). Always the probe (function) form of Interceptor.attach: the
// object form treats [rsp] as a return address, which corrupts the frame mid-function.
//
// Conditions and logpoint {expressions} are JavaScript over `args` (the function's
// parameters, decoded with their DWARF types) and the frame's variables by name.

import { nowNs } from "./clock.js";
import { currentSlide } from "./hooks.js";
import { pause } from "./pause.js";
import { attachProbe, Probe, ScanRange } from "./probes.js";
import { Frame, Value, VarRecipe, varsObject } from "./values.js";

export interface PointSpec {
    id: string;
    /** Static addresses (hex); the first is the primary one. */
    addresses: string[];
    condition?: string;
    hitCount?: number;
    message?: string;
    /** The enclosing function (static) of each address, to check line addresses; null at a function entry. */
    scans?: (ScanRange | null)[];
    params?: VarRecipe[];
    vars?: VarRecipe[];
}

type Evaluator = (args: Value[], vars: Record<string, Value>) => unknown;

interface Point {
    spec: PointSpec;
    logpoint: boolean;
    hits: number;
    condition: Evaluator | null;
    template: (string | Evaluator)[];
    probes: Probe[];
    conditionErrors: number;
    active: boolean;
}

const MAX_CONDITION_ERRORS = 20;
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

function onHit(p: Point, cpu: CpuContext): void {
    if (!p.active) return;
    const threadId = Process.getCurrentThreadId();
    const frame: Frame = { cpu, pending: new Map() };
    const recipes = p.spec.vars ?? [];
    const vars = varsObject(frame, recipes);
    let args: Value[] | null = null;
    const argsFor = (): Value[] => {
        if (args === null) {
            args = (p.spec.params ?? []).map((r) => vars[r.name]);
        }
        return args;
    };
    if (p.condition !== null) {
        let ok: unknown;
        try {
            ok = p.condition(argsFor(), vars);
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
        const text = p.template.map((part) => {
            if (typeof part === "string") return part;
            try {
                return show(part(argsFor(), vars));
            } catch (e) {
                return `<error: ${errorText(e)}>`;
            }
        });
        send({ type: "logpoint", logpointId: p.spec.id, message: text.join(""), threadId, address: p.spec.addresses[0], ts: nowNs() });
        return;
    }
    const n = p.spec.hitCount ?? 0;
    if (n > 0 && p.hits !== n) return;
    pause(cpu, { breakpointId: p.spec.id, hits: p.hits, recipes, params: p.spec.params });
}

/** Install a breakpoint or logpoint on all its addresses (all or nothing). */
export function setPoint(spec: PointSpec, logpoint: boolean): { id: string; installed: string[]; runtimeAddresses: string[]; probes: { kind: string; why: string | null }[] } {
    if (points.has(spec.id)) removePoint(spec.id);
    const p: Point = {
        spec,
        logpoint,
        hits: 0,
        condition: spec.condition ? compile(spec.condition, "condition") : null,
        template: logpoint ? compileTemplate(spec.message ?? "") : [],
        probes: [],
        conditionErrors: 0,
        active: true,
    };
    const slide = currentSlide() ?? ptr(0);
    const runtime: string[] = [];
    try {
        for (const [i, a] of spec.addresses.entries()) {
            const addr = ptr(a).add(slide);
            const range = Process.findRangeByAddress(addr);
            if (range === null || range.protection.indexOf("x") < 0) throw new Error(`address ${a} is not executable code in this process`);
            p.probes.push(attachProbe(addr, spec.scans?.[i] ?? null, null, (cpu) => onHit(p, cpu)));
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
    return [...points.values()].map((p) => ({ id: p.spec.id, hits: p.hits }));
}
