// Conditions and logpoint {expressions} compiled by the daemon (src/eval/compile.rs) from the
// debug_eval language into straight-line JavaScript over the hit's CPU context `c` and this
// runtime `R`: register reads, guarded memory reads (a bad address throws, which the caller
// reports as a condition error), and C arithmetic. Numbers are JS numbers; pointers are
// NativePointers.

import { currentSlide } from "./hooks.js";
import { addTypes, readCString, readValue, TypeDesc, typeDesc } from "./serialize.js";

export interface CompiledSpec {
    condition?: string;
    /** The condition as the user wrote it (for condition_error events). */
    source?: string;
    template?: (string | { js: string } | { legacy: string })[];
    types?: Record<string, TypeDesc>;
}

type Fast = (c: CpuContext, r: typeof R) => unknown;

let hitCpu: CpuContext | null = null;

/** The CPU context of the hit being evaluated (set before conditions and templates run). */
export function setHitCpu(cpu: CpuContext): void {
    hitCpu = cpu;
}

/** A compiled expression as the breakpoint code's evaluator shape (it ignores args/vars). */
export function compileFast(js: string, types?: Record<string, TypeDesc>): () => unknown {
    addTypes(types);
    const f = new Function("c", "R", `return (${js});`) as Fast;
    return () => {
        if (hitCpu === null) throw new Error("no CPU context for this hit");
        return f(hitCpu, R);
    };
}

function signExtend(v: number, bits: number): number {
    return v >= 2 ** (bits - 1) ? v - 2 ** bits : v;
}

function big(n: number): bigint {
    return BigInt(Math.trunc(n));
}

export const R = {
    s(p: NativePointer, size: number): number {
        switch (size) {
            case 1:
                return p.readS8();
            case 2:
                return p.readS16();
            case 4:
                return p.readS32();
            default:
                return p.readS64().toNumber();
        }
    },
    u(p: NativePointer, size: number): number {
        switch (size) {
            case 1:
                return p.readU8();
            case 2:
                return p.readU16();
            case 4:
                return p.readU32();
            default:
                return p.readU64().toNumber();
        }
    },
    f(p: NativePointer, size: number): number {
        return size === 4 ? p.readFloat() : p.readDouble();
    },
    /** A register holding an integer of `size` bytes. */
    reg(v: NativePointer, size: number, signed: boolean): number {
        if (size >= 8) return signed ? int64(v.toString()).toNumber() : uint64(v.toString()).toNumber();
        const low = size === 4 ? v.toUInt32() : v.toUInt32() & (2 ** (size * 8) - 1);
        return signed ? signExtend(low, size * 8) : low;
    },
    /** A pointer as a number (addresses fit in 53 bits). */
    pn(p: NativePointer): number {
        return Number(p.toString());
    },
    /** A static address of the main binary, slid to where it is loaded. */
    g(staticAddr: string): NativePointer {
        return ptr(staticAddr).add(currentSlide() ?? ptr(0));
    },
    bits(p: NativePointer, bitOff: number, bits: number, signed: boolean): number {
        const bytes = Math.max(1, Math.min(8, Math.ceil((bitOff + bits) / 8)));
        let raw = 0n;
        for (let i = bytes - 1; i >= 0; i--) raw = (raw << 8n) | BigInt(p.add(i).readU8());
        let v = (raw >> BigInt(bitOff)) & ((1n << BigInt(bits)) - 1n);
        if (signed && bits > 0 && (v >> BigInt(bits - 1)) === 1n) v -= 1n << BigInt(bits);
        return Number(v);
    },
    div(a: number, b: number): number {
        if (b === 0) throw new Error("division by zero");
        return Math.trunc(a / b);
    },
    rem(a: number, b: number): number {
        if (b === 0) throw new Error("division by zero");
        return a % b;
    },
    shl: (a: number, b: number): number => Number(BigInt.asIntN(64, big(a) << big(b))),
    shr: (a: number, b: number): number => Number(big(a) >> big(b)),
    band: (a: number, b: number): number => Number(big(a) & big(b)),
    bor: (a: number, b: number): number => Number(big(a) | big(b)),
    bxor: (a: number, b: number): number => Number(big(a) ^ big(b)),
    bnot: (a: number): number => Number(~big(a)),
    cast(n: number, size: number, signed: boolean): number {
        const v = big(n);
        return Number(signed ? BigInt.asIntN(size * 8, v) : BigInt.asUintN(size * 8, v));
    },
    /** A variable the daemon found unreadable at this line: every use fails with why. */
    fail(why: string): never {
        throw new Error(why);
    },
    cstr(p: NativePointer): string {
        return readCString(p);
    },
    /** A value in memory, rendered like traced arguments. */
    val(p: NativePointer, type: number): unknown {
        return readValue(p, type);
    },
    /** A number shown by its type: enumerator names, characters, booleans. */
    shown(n: number, type: number): unknown {
        const t = typeDesc(type);
        if (t?.k === "enum") return t.e?.[String(n)] ?? n;
        if (t?.k === "bool") return n !== 0;
        if (t?.k === "char" && n >= 32 && n < 0x110000) return String.fromCodePoint(n);
        return n;
    },
    shownPtr(p: NativePointer, type: number): unknown {
        const t = typeDesc(type);
        const target = t?.to !== undefined && t.to !== null ? typeDesc(t.to) : undefined;
        if (target?.k === "char" && (target.s ?? 1) === 1) return p.isNull() ? null : readCString(p);
        return p.toString();
    },
};
