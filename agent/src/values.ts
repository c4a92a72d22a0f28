// Variables of a paused or hooked frame: the daemon resolves DWARF into a symbolic location
// ("in rdi", "at rbp-20", "static 0x4010"); here it becomes a value with the thread's
// registers (this.context). Register writes to a paused thread are queued and applied by the
// thread itself when it resumes, so the CPU context is only touched from its own thread.

import { currentSlide } from "./hooks.js";

export interface VarRecipe {
    name: string;
    kind: "register" | "memory" | "static" | "value" | "optimizedOut" | "unsupported";
    reg?: string;
    base?: string;
    offset?: number;
    address?: number | string;
    value?: number;
    why?: string;
    size: number;
    encoding: string;
    typeName?: string;
}

export type Value = number | string | boolean | null;

/** Registers of the current architecture that are reported with a pause. */
export const REGISTERS = ["rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "rip"];

/** A register source: the live context plus writes waiting for the thread to resume. */
export interface Frame {
    cpu: CpuContext;
    pending: Map<string, NativePointer>;
}

export function register(frame: Frame, name: string): NativePointer {
    const p = frame.pending.get(name);
    if (p !== undefined) return p;
    const v = (frame.cpu as unknown as Record<string, NativePointer | undefined>)[name];
    if (v === undefined) throw new Error(`no register ${name} on ${Process.arch}`);
    return v;
}

function slide(): NativePointer {
    return currentSlide() ?? ptr(0);
}

export function address(frame: Frame, r: VarRecipe): NativePointer {
    if (r.kind === "memory") return register(frame, r.base!).add(r.offset ?? 0);
    if (r.kind === "static") return ptr(String(r.address)).add(slide());
    throw new Error(`${r.name} is not in memory`);
}

function fromRegister(p: NativePointer, r: VarRecipe): Value {
    const size = r.size || 8;
    switch (r.encoding) {
        case "pointer":
            return p.toString();
        case "bool":
            return (p.toUInt32() & 0xff) !== 0;
        case "float":
            throw new Error("floating-point values live in SSE registers, which Frida does not expose");
        case "signed":
        case "char":
            if (size === 1) return (p.toInt32() << 24) >> 24;
            if (size === 2) return (p.toInt32() << 16) >> 16;
            if (size === 4) return p.toInt32();
            return int64(p.toString()).toNumber();
        default:
            if (size === 1) return p.toUInt32() & 0xff;
            if (size === 2) return p.toUInt32() & 0xffff;
            if (size === 4) return p.toUInt32();
            return u64Value(uint64(p.toString()));
    }
}

function u64Value(v: UInt64): number | string {
    return v.compare(uint64("9007199254740991")) <= 0 ? v.toNumber() : v.toString();
}

function fromMemory(a: NativePointer, r: VarRecipe): Value {
    const size = r.size;
    switch (r.encoding) {
        case "pointer":
            return a.readPointer().toString();
        case "bool":
            return a.readU8() !== 0;
        case "float":
            return size === 4 ? a.readFloat() : a.readDouble();
        case "signed":
        case "char":
            if (size === 1) return a.readS8();
            if (size === 2) return a.readS16();
            if (size === 4) return a.readS32();
            return a.readS64().toNumber();
        case "unsigned":
            if (size === 1) return a.readU8();
            if (size === 2) return a.readU16();
            if (size === 4) return a.readU32();
            return u64Value(a.readU64());
        default: {
            const bytes = new Uint8Array(a.readByteArray(Math.min(Math.max(size, 1), 64))!);
            return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
        }
    }
}

export function readVar(frame: Frame, r: VarRecipe): Value {
    switch (r.kind) {
        case "register":
            return fromRegister(register(frame, r.reg!), r);
        case "memory":
        case "static":
            return fromMemory(address(frame, r), r);
        case "value":
            return r.value ?? null;
        case "optimizedOut":
            throw new Error(`${r.name} is optimized out at this point`);
        default:
            throw new Error(`${r.name} cannot be read here: ${r.why ?? "unsupported location"}`);
    }
}

function toPointer(v: number | string | boolean): NativePointer {
    if (typeof v === "boolean") return ptr(v ? 1 : 0);
    if (typeof v === "string") return ptr(v);
    if (!Number.isInteger(v)) throw new Error(`${v} is not an integer`);
    return v < 0 ? ptr(0).sub(ptr(-v)) : ptr(v);
}

/** Write `value`; returns the value read back (for registers: the queued value). */
export function writeVar(frame: Frame, r: VarRecipe, value: number | string | boolean): Value {
    if (r.kind === "register") {
        if (r.encoding === "float") throw new Error("cannot write a floating-point register value");
        frame.pending.set(r.reg!, toPointer(value));
        return readVar(frame, r);
    }
    if (r.kind !== "memory" && r.kind !== "static") return readVar(frame, r); // throws the reason
    const a = address(frame, r);
    const n = typeof value === "boolean" ? (value ? 1 : 0) : value;
    switch (r.encoding) {
        case "float":
            if (r.size === 4) a.writeFloat(Number(n));
            else a.writeDouble(Number(n));
            break;
        case "pointer":
            a.writePointer(toPointer(n));
            break;
        case "bytes":
            throw new Error(`${r.name} is a ${r.typeName ?? "compound value"}; write its fields by address instead`);
        default: {
            const size = r.size;
            if (typeof n === "string") a.writeU64(uint64(n));
            else if (size === 1) a.writeS8(n);
            else if (size === 2) a.writeS16(n);
            else if (size === 4) a.writeS32(n);
            else a.writeS64(int64(n));
        }
    }
    return readVar(frame, r);
}

/** An object whose properties read the variables lazily (for conditions and templates). */
export function varsObject(frame: Frame, recipes: VarRecipe[]): Record<string, Value> {
    const o: Record<string, Value> = {};
    for (const r of recipes) {
        Object.defineProperty(o, r.name, { enumerable: true, get: () => readVar(frame, r) });
    }
    return o;
}

/** Every readable variable, with an `error` text for those that cannot be read. */
export function readAll(frame: Frame, recipes: VarRecipe[]): { name: string; value?: Value; error?: string }[] {
    return recipes.map((r) => {
        try {
            return { name: r.name, value: readVar(frame, r) };
        } catch (e) {
            return { name: r.name, error: e instanceof Error ? e.message : String(e) };
        }
    });
}
