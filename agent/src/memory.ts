// debug_memory in the target: one-shot reads, writes (with the previous value), and
// polling that records variable_snapshot samples. The daemon resolves names to recipes
// (static address + pointer-chain ops + DWARF type); nothing here trusts an address:
// every read and write is guarded and reported per target.

import { currentSlide, setImageBase } from "./hooks.js";
import { nowNs } from "./clock.js";
import { addTypes, readValue, setDepth, currentDepth, TypeDesc, typeDesc } from "./serialize.js";
import { locate, setSlideSource, setWatches, WatchSpec } from "./watches.js";

export interface MemRecipe {
    label: string;
    addr: string;
    noSlide?: boolean;
    ops?: (string | number)[][];
    type: number;
    /** Write only: the new value. */
    value?: unknown;
}

export interface ReadRequest {
    recipes: MemRecipe[];
    types?: Record<string, TypeDesc>;
    depth?: number;
    poll?: { intervalMs: number; durationMs: number };
}

function where(r: MemRecipe): NativePointer {
    const base = r.noSlide ? ptr(r.addr) : ptr(r.addr).add(currentSlide() ?? setImageBase(null));
    return locate(base, r.ops);
}

function readOne(r: MemRecipe, depth: number): { label: string; address?: string; value?: unknown; error?: string } {
    let at: NativePointer;
    try {
        at = where(r);
    } catch (e) {
        return { label: r.label, error: `pointer chain not readable: ${e instanceof Error ? e.message : String(e)}` };
    }
    const value = readValue(at, r.type, depth);
    if (typeof value === "string" && value.startsWith("<unreadable ")) return { label: r.label, address: at.toString(), error: `memory at ${at} is not readable` };
    return { label: r.label, address: at.toString(), value };
}

let polls = 0;

export function readMemory(req: ReadRequest): object {
    addTypes(req.types);
    const depth = typeof req.depth === "number" ? Math.max(1, Math.min(10, req.depth)) : 1;
    const recipes = req.recipes ?? [];
    if (req.poll) {
        const interval = Math.max(50, Math.min(5000, req.poll.intervalMs));
        const until = Date.now() + Math.max(100, Math.min(30000, req.poll.durationMs));
        let samples = 0;
        const pollId = ++polls;
        const tick = (): void => {
            const values: Record<string, unknown> = {};
            for (const r of recipes) {
                const one = readOne(r, depth);
                values[r.label] = one.error !== undefined ? `<${one.error}>` : one.value;
            }
            samples++;
            send({ type: "variable_snapshot", pollId, ts: nowNs(), values });
            if (Date.now() + interval <= until) {
                setTimeout(tick, interval);
            } else {
                send({ type: "poll_complete", pollId, sampleCount: samples });
            }
        };
        setTimeout(tick, 0);
        return { polling: true, pollId };
    }
    return { results: recipes.map((r) => readOne(r, depth)) };
}

function toInt64(v: unknown): Int64 {
    if (typeof v === "boolean") return int64(v ? 1 : 0);
    if (typeof v === "number") {
        if (!Number.isInteger(v)) throw new Error(`${v} is not an integer`);
        return int64(v);
    }
    if (typeof v === "string" && /^-?(0x[0-9a-fA-F]+|\d+)$/.test(v.trim())) return int64(v.trim());
    throw new Error(`${JSON.stringify(v)} is not an integer`);
}

function writeValue(at: NativePointer, id: number, value: unknown): void {
    const t = typeDesc(id);
    if (t === undefined) throw new Error(`unknown type ${id}`);
    const size = t.s ?? 0;
    switch (t.k) {
        case "enum":
        case "int":
        case "char": {
            let v: unknown = value;
            if (t.k === "enum" && typeof value === "string" && t.e) {
                const hit = Object.keys(t.e).find((k) => t.e?.[k] === value);
                if (hit !== undefined) v = Number(hit);
            }
            if (t.k === "char" && typeof value === "string" && value.length === 1) v = value.codePointAt(0);
            const n = toInt64(v);
            if (size === 1) at.writeU8(n.toNumber() & 0xff);
            else if (size === 2) at.writeU16(n.toNumber() & 0xffff);
            else if (size === 4) at.writeU32(n.toNumber() >>> 0);
            else if (size === 8) at.writeS64(n);
            else throw new Error(`cannot write a ${size}-byte integer`);
            return;
        }
        case "float": {
            if (typeof value !== "number") throw new Error(`${JSON.stringify(value)} is not a number`);
            if (size === 4) at.writeFloat(value);
            else at.writeDouble(value);
            return;
        }
        case "bool":
            if (typeof value !== "boolean" && value !== 0 && value !== 1) throw new Error(`${JSON.stringify(value)} is not a boolean`);
            at.writeU8(value === true || value === 1 ? 1 : 0);
            return;
        case "ptr":
            if (value === null) at.writePointer(ptr(0));
            else at.writePointer(ptr(String(value)));
            return;
        default:
            throw new Error(`cannot write a value of type ${t.n ?? t.k}: write one of its scalar fields instead (e.g. "var.field")`);
    }
}

export function writeMemory(req: { recipes: MemRecipe[]; types?: Record<string, TypeDesc> }): object {
    addTypes(req.types);
    const results = (req.recipes ?? []).map((r) => {
        let at: NativePointer;
        try {
            at = where(r);
        } catch (e) {
            return { label: r.label, error: `pointer chain not readable: ${e instanceof Error ? e.message : String(e)}` };
        }
        const previousValue = readValue(at, r.type, 1);
        try {
            writeValue(at, r.type, r.value);
        } catch (e) {
            return { label: r.label, address: at.toString(), previousValue, error: e instanceof Error ? e.message : String(e) };
        }
        return { label: r.label, address: at.toString(), previousValue, newValue: readValue(at, r.type, 1) };
    });
    return { results };
}

/** serializationDepth of debug_trace: used by typed hook records and watches. */
export function configureSerialization(opts: { depth?: number }): object {
    return { depth: opts.depth !== undefined ? setDepth(opts.depth) : currentDepth() };
}

/** RPC exports of this file and watches.ts, spread into rpc.exports by index.ts. */
export const memoryExports = {
    readMemory(req: ReadRequest): object {
        return readMemory(req ?? { recipes: [] });
    },
    writeMemory(req: { recipes: MemRecipe[]; types?: Record<string, TypeDesc> }): object {
        return writeMemory(req ?? { recipes: [] });
    },
    watches(req: { watches: WatchSpec[]; types?: Record<string, TypeDesc> }): object {
        setSlideSource(() => currentSlide() ?? setImageBase(null));
        return setWatches(req?.watches ?? [], req?.types);
    },
    serialization(opts: { depth?: number; types?: Record<string, TypeDesc> }): object {
        addTypes(opts?.types);
        return configureSerialization(opts ?? {});
    },
};
