// Typed reads of target memory, driven by the daemon's DWARF type table (built by
// src/symbols/types.rs::agent_table). Every read is guarded: bad memory yields
// "<unreadable 0x…>", never a fault in the target.
//
// Rules (spec "Serialization"): pointers → hex or null; C strings and Rust strings are
// truncated at 1024 chars; arrays / Vec / slices show their first 100 elements; objects at
// most 100 keys; a struct deeper than the depth budget prints as "<TypeName>"; a struct
// already being printed higher up the same path prints as "<circular ref to TypeName>".
// Pointers to structs (and Rust containers) are followed without spending depth.

export interface TypeDesc {
    k: string;
    n?: string;
    s?: number;
    sg?: boolean;
    to?: number | null;
    f?: (string | number)[][];
    u?: boolean;
    of?: number;
    c?: number | null;
    e?: Record<string, string>;
    p?: number;
    l?: number;
    /** std::vector (rvec): offset of the past-the-end pointer, in place of `l`. */
    fe?: number;
    /** std::unique_ptr / std::shared_ptr (ptr): a pointer to one is followed, as to a struct. */
    sp?: boolean;
    utf8?: boolean;
    /** std::optional: offset of the engaged flag. */
    g?: number;
    d?: [number, number] | null;
    /** Rust enum variants: [discriminant value as decimal text | null, name, type, offset]. */
    v?: [string | number | null, string, number, number][];
    /** Node containers (nodes, src/symbols/cxx_std.rs nodes_desc): the walk (w: "tree",
     *  "list", "hash", "btree"), whether entries are key/value pairs (m), the element count's
     *  offset (nc), and where an element holds its key and value, with their types
     *  (kf/kt, vf/vt). */
    w?: string;
    m?: boolean;
    nc?: number;
    kf?: number;
    kt?: number;
    vf?: number;
    vt?: number;
    /** std::map / set (w "tree") and std::unordered_* (w "list"): the first node pointer's
     *  offset, a node's bytes before its element, a tree node's parent / left / right links,
     *  a list node's next (cxx_tree_desc, cxx_hash_desc). */
    nf?: number;
    nb?: number;
    np?: number;
    nl?: number;
    nr?: number;
    nx?: number;
    /** Rust HashMap / HashSet (w "hash"): offsets of the bucket mask and of the control
     *  bytes pointer, and an element's size (rust_hash_desc). */
    hm?: number;
    hc?: number;
    es?: number;
    /** Rust BTreeMap / BTreeSet (w "btree"): the root's height and node pointer offsets; a
     *  leaf's len (u16), keys and vals arrays, their slots' sizes; an internal node's child
     *  pointers (rust_btree_desc). */
    bh?: number;
    bp?: number;
    bl?: number;
    bk?: number;
    ks?: number;
    bv?: number;
    vs?: number;
    be?: number;
}

export const MAX_STRING = 1024;
export const MAX_ELEMENTS = 100;
export const MAX_KEYS = 100;
export const DEFAULT_DEPTH = 3;
export const MAX_DEPTH = 10;

const types = new Map<number, TypeDesc>();
let depthSetting = DEFAULT_DEPTH;

/** Merge a type table `{ "<id>": desc }` sent by the daemon. */
export function addTypes(table: Record<string, TypeDesc> | undefined | null): void {
    if (!table) return;
    for (const id of Object.keys(table)) types.set(Number(id), table[id]);
}

export function setDepth(depth: number): number {
    if (typeof depth === "number" && isFinite(depth)) depthSetting = Math.max(1, Math.min(MAX_DEPTH, Math.floor(depth)));
    return depthSetting;
}

export function currentDepth(): number {
    return depthSetting;
}

export function typeName(id: number): string {
    return types.get(id)?.n ?? "?";
}

export function typeSize(id: number): number {
    const t = types.get(id);
    if (t === undefined) return 0;
    if (t.k === "ptr") return Process.pointerSize;
    return t.s ?? 0;
}

export function unreadable(addr: NativePointer): string {
    return `<unreadable ${addr}>`;
}

/** Read the value of type `id` stored at `addr`. */
export function readValue(addr: NativePointer, id: number, depth: number = depthSetting): unknown {
    return read(addr, id, depth, []);
}

function read(addr: NativePointer, id: number, depth: number, path: string[]): unknown {
    const t = types.get(id);
    if (t === undefined) return `<unknown type ${id}>`;
    try {
        switch (t.k) {
            case "int":
                return readInt(addr, t.s ?? 4, t.sg ?? true);
            case "float":
                return readFloat(addr, t.s ?? 8);
            case "bool":
                return addr.readU8() !== 0;
            case "char":
                return readChar(addr, t);
            case "enum": {
                const v = readInt(addr, t.s ?? 4, t.sg ?? true);
                const name = t.e?.[String(v)];
                return name !== undefined ? name : v;
            }
            case "ptr":
                return readPointer(addr.readPointer(), t, depth, path);
            case "struct":
                return readStruct(addr, t, depth, path, id);
            case "array":
                return readArray(addr, t.of ?? -1, t.c ?? 0, depth, path);
            case "rstr":
                return readUtf8(addr.add(t.p ?? 0).readPointer(), lengthAt(addr.add(t.l ?? 8)));
            case "rslice":
                return readArray(addr.add(t.p ?? 0).readPointer(), t.of ?? -1, lengthAt(addr.add(t.l ?? 8)), depth, path);
            case "rvec": {
                const data = addr.add(t.p ?? 0).readPointer();
                // C++'s std::vector keeps a past-the-end pointer (e) instead of a length.
                const len = t.fe !== undefined ? vectorLength(data, addr.add(t.fe).readPointer(), typeSize(t.of ?? -1)) : lengthAt(addr.add(t.l ?? 16));
                if (t.utf8) return readUtf8(data, len);
                return readArray(data, t.of ?? -1, len, depth, path);
            }
            case "renum":
                return readRustEnum(addr, t, depth, path);
            case "nodes": // std::map, std::set, std::unordered_*: their entries
                return readNodes(addr, t, depth, path);
            case "opt": // std::optional<T>: the value, or null when disengaged
                return addr.add(t.g ?? 0).readU8() === 0 ? null : read(addr.add(t.p ?? 0), t.of ?? -1, depth, path);
            case "void":
                return null;
            case "fn":
                return addr.toString();
            default:
                return `<${t.n ?? "?"} @${addr}>`;
        }
    } catch (_) {
        return unreadable(addr);
    }
}

function readInt(addr: NativePointer, size: number, signed: boolean): number | string {
    switch (size) {
        case 1:
            return signed ? addr.readS8() : addr.readU8();
        case 2:
            return signed ? addr.readS16() : addr.readU16();
        case 4:
            return signed ? addr.readS32() : addr.readU32();
        case 8: {
            const v = signed ? addr.readS64() : addr.readU64();
            const n = v.toNumber();
            // Beyond 2^53 a JSON number would silently change the value.
            return Number.isSafeInteger(n) ? n : v.toString();
        }
        case 16: {
            // __int128, u128: low then high eightbyte; the daemon's decoder prints the same.
            let v = (BigInt(addr.add(8).readU64().toString()) << 64n) | BigInt(addr.readU64().toString());
            if (signed && v >= 1n << 127n) v -= 1n << 128n;
            const limit = BigInt(Number.MAX_SAFE_INTEGER);
            return v <= limit && v >= -limit ? Number(v) : v.toString();
        }
        default:
            return `<int${size * 8} @${addr}>`;
    }
}

function readFloat(addr: NativePointer, size: number): number | string {
    // x86's long double: 80-bit extended precision in a 16-byte slot (shown as the nearest double).
    const v = size === 4 ? addr.readFloat() : size === 8 ? addr.readDouble() : size === 16 && Process.arch === "x64" ? readExtended(addr) : NaN;
    if (size !== 4 && size !== 8 && !(size === 16 && Process.arch === "x64")) return `<float${size * 8}>`;
    return isFinite(v) ? v : String(v);
}

/** An x87 80-bit value: 64-bit significand with an explicit integer bit, 15-bit exponent, sign. */
function readExtended(addr: NativePointer): number {
    const lo = addr.readU32();
    const hi = addr.add(4).readU32();
    const se = addr.add(8).readU16();
    const sign = se & 0x8000 ? -1 : 1;
    const exp = se & 0x7fff;
    const significand = hi * 4294967296 + lo;
    if (exp === 0x7fff) return (hi & 0x7fffffff) === 0 && lo === 0 ? sign * Infinity : NaN;
    if (exp === 0 && significand === 0) return sign * 0;
    // Denormals have an effective exponent of 1 - 16383.
    return sign * significand * Math.pow(2, (exp === 0 ? 1 : exp) - 16383 - 63);
}

function readChar(addr: NativePointer, t: TypeDesc): string | number {
    const size = t.s ?? 1;
    const code = size === 4 ? addr.readU32() : size === 2 ? addr.readU16() : t.sg ? addr.readS8() : addr.readU8();
    // One-byte characters beyond ASCII are bytes of some encoding: shown as numbers (as gdb does);
    // so is every unsigned char: C's byte (uint8_t, flags, states), whose number is what matters.
    const printable = size === 1 ? t.sg === true && code >= 32 && code < 127 : code >= 32 && code < 0x110000 && code !== 127 && !(code >= 0xd800 && code < 0xe000);
    if (printable) return String.fromCodePoint(code);
    return code;
}

function lengthAt(addr: NativePointer): number {
    const v = addr.readU64();
    // A garbage length must not make us read gigabytes: the caller caps it anyway.
    return v.compare(uint64(0x7fffffff)) > 0 ? 0x7fffffff : v.toNumber();
}

/**
 * A node container's entries in iteration order, as debug_eval prints them
 * (src/eval/pretty/entries.rs): a map is an object keyed by each key's text when every key is
 * a string, number or bool and none repeats, else `[[key, value], …]`; a set is an array;
 * past MAX_ELEMENTS, `"<N more>"`. Containers spend no depth, as arrays do.
 */
function readNodes(addr: NativePointer, t: TypeDesc, depth: number, path: string[]): unknown {
    const count = addr.add(t.nc ?? 0).readU64();
    const total = count.compare(uint64(0x7fffffff)) > 0 ? 0x7fffffff : count.toNumber();
    const shown = Math.min(total, MAX_ELEMENTS);
    const keys: unknown[] = [], values: unknown[] = [];
    // An entry: its key and value, or a set's element (at keyAt).
    const take = (keyAt: NativePointer, valueAt: NativePointer): void => {
        if (t.m) {
            keys.push(read(keyAt, t.kt ?? -1, depth, path));
            values.push(read(valueAt, t.vt ?? -1, depth, path));
        } else {
            values.push(read(keyAt, t.kt ?? t.of ?? -1, depth, path));
        }
    };
    // A node's element (a C++ pair or value, a Rust tuple) holds both.
    const takeElement = (at: NativePointer): void => take(at.add(t.kf ?? 0), at.add(t.vf ?? 0));
    if (t.w === "hash") {
        rustTable(addr, t, total, shown, takeElement);
    } else if (t.w === "btree") {
        const height = addr.add(t.bh ?? 0).readU64();
        const root = addr.add(t.bp ?? 0).readPointer();
        if (height.compare(uint64(32)) > 0) throw new Error("tree too tall");
        if (!root.isNull() && shown > 0) btreeWalk(root, height.toNumber(), t, () => values.length < shown, take);
    } else {
        let node = addr.add(t.nf ?? 0).readPointer();
        for (let i = 0; i < shown && !node.isNull(); i++) {
            takeElement(node.add(t.nb ?? 0));
            if (i + 1 < shown) node = t.w === "tree" ? treeSuccessor(node, t) : node.add(t.nx ?? 0).readPointer();
        }
    }
    const more = total > values.length ? total - values.length : 0;
    if (!t.m) {
        if (more > 0) values.push(`<${more} more>`);
        return values;
    }
    const texts = keys.map((k) => (typeof k === "string" ? k : typeof k === "number" || typeof k === "boolean" ? String(k) : null));
    if (texts.every((k) => k !== null) && new Set(texts).size === texts.length) {
        const out: Record<string, unknown> = {};
        texts.forEach((k, i) => (out[k as string] = values[i]));
        if (more > 0) out[`<${more} more>`] = "…";
        return out;
    }
    const pairs: unknown[] = keys.map((k, i) => [k, values[i]]);
    if (more > 0) pairs.push(`<${more} more>`);
    return pairs;
}

/** In key order: edge 0, entry 0, edge 1, … entry len-1, edge len (edges above height 0),
 *  while `room()`. */
function btreeWalk(node: NativePointer, height: number, t: TypeDesc, room: () => boolean, take: (keyAt: NativePointer, valueAt: NativePointer) => void): void {
    const len = node.add(t.bl ?? 0).readU16();
    for (let i = 0; i <= len && room(); i++) {
        if (height > 0) btreeWalk(node.add((t.be ?? 0) + i * 8).readPointer(), height - 1, t, room, take);
        if (i < len && room()) take(node.add((t.bk ?? 0) + i * (t.ks ?? 0)), node.add((t.bv ?? 0) + i * (t.vs ?? 0)));
    }
}

/** hashbrown's table: `shown` of the full slots (control byte's top bit clear), slot i's
 *  element at `ctrl - (i + 1) * es`, control bytes read 256 at a time. */
function rustTable(addr: NativePointer, t: TypeDesc, total: number, shown: number, take: (at: NativePointer) => void): void {
    const mask = addr.add(t.hm ?? 0).readU64();
    const ctrl = addr.add(t.hc ?? 0).readPointer();
    const es = t.es ?? 0;
    if (mask.compare(uint64(0xffffffff)) > 0 || total > mask.toNumber() + 1 || es === 0) throw new Error("not a table");
    const buckets = mask.toNumber() + 1;
    let found = 0;
    for (let i = 0; i < buckets && found < shown; i += 256) {
        const n = Math.min(256, buckets - i);
        const control = new Uint8Array(ctrl.add(i).readByteArray(n) as ArrayBuffer);
        for (let j = 0; j < n && found < shown; j++) {
            if ((control[j] & 0x80) !== 0) continue;
            take(ctrl.sub((i + j + 1) * es));
            found++;
        }
    }
}

/** The in-order successor of a red-black tree node (libstdc++'s _Rb_tree_increment). */
function treeSuccessor(node: NativePointer, t: TypeDesc): NativePointer {
    const link = (n: NativePointer, off: number | undefined): NativePointer => n.add(off ?? 0).readPointer();
    const right = link(node, t.nr);
    if (!right.isNull()) {
        node = right;
        for (let i = 0; i < 128; i++) {
            const left = link(node, t.nl);
            if (left.isNull()) return node;
            node = left;
        }
        throw new Error("tree too tall");
    }
    let parent = link(node, t.np);
    for (let i = 0; i < 128; i++) {
        if (!node.equals(link(parent, t.nr))) return parent;
        node = parent;
        parent = link(node, t.np);
    }
    throw new Error("tree too tall");
}

/** Struct-like pointees are followed (depth is spent by the struct itself). */
function followable(t: TypeDesc | undefined): boolean {
    return t !== undefined && (t.k === "struct" || t.k === "rvec" || t.k === "rstr" || t.k === "rslice" || t.k === "renum" || t.k === "opt" || t.k === "nodes" || t.sp === true);
}

function readPointer(p: NativePointer, t: TypeDesc, depth: number, path: string[]): unknown {
    if (p.isNull()) return null;
    const to = t.to ?? null;
    const target = to === null ? undefined : types.get(to);
    if (target !== undefined && target.k === "char" && (target.s ?? 1) === 1) return readCString(p);
    if (to !== null && followable(target)) return read(p, to, depth, path);
    if (target !== undefined && target.k === "fn") return codeName(p);
    return p.toString();
}

/** A code address as gdb prints a function pointer: "0x… <compare_ints>", "<name+4>" inside
 *  a function, the bare address where no function symbol's extent holds it. The same rule as
 *  the daemon's decoder of native captures (src/engine/code_names.rs, symbols/elf_symbols.rs):
 *  the module's function symbols with their sizes, at one address the longest extent, then
 *  the public alias; C++ names without their parameters. */
function codeName(p: NativePointer): string {
    try {
        const m = Process.findModuleByAddress(p);
        const f = m === null ? null : containing(codeTable(m), p);
        if (f === null) return p.toString();
        const off = p.sub(f.start).toUInt32();
        return off === 0 ? `${p} <${f.name}>` : `${p} <${f.name}+${off}>`;
    } catch (_) {
        return p.toString();
    }
}

interface CodeSymbol {
    start: NativePointer;
    end: NativePointer;
    name: string;
}

const codeTables = new Map<string, CodeSymbol[]>();

function codeTable(m: Module): CodeSymbol[] {
    const known = codeTables.get(m.path);
    if (known !== undefined) return known;
    const rank = (n: string): [number, number, string] => [n.length - n.replace(/^_+/, "").length, n.length, n];
    const before = (a: [number, number, string], b: [number, number, string]): number => a[0] - b[0] || a[1] - b[1] || (a[2] < b[2] ? -1 : a[2] > b[2] ? 1 : 0);
    const all = m.enumerateSymbols().filter((s) => s.type === "function" && (s.size ?? 0) > 0 && !s.address.isNull());
    all.sort((a, b) => a.address.compare(b.address) || (b.size ?? 0) - (a.size ?? 0) || before(rank(a.name), rank(b.name)));
    const table: CodeSymbol[] = [];
    for (const s of all) {
        if (table.length > 0 && table[table.length - 1].start.equals(s.address)) continue;
        table.push({ start: s.address, end: s.address.add(s.size ?? 0), name: s.name });
    }
    codeTables.set(m.path, table);
    return table;
}

function containing(table: CodeSymbol[], p: NativePointer): CodeSymbol | null {
    let lo = 0, hi = table.length; // first start above p
    while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (table[mid].start.compare(p) <= 0) lo = mid + 1;
        else hi = mid;
    }
    for (let i = lo - 1; i >= 0 && i >= lo - 16; i--) {
        const f = table[i];
        if (p.compare(f.end) < 0) return { ...f, name: shownName(f) };
    }
    return null;
}

/** A mangled name as the daemon shows it: demangled, without parameters. */
function shownName(f: CodeSymbol): string {
    if (!f.name.startsWith("_Z") && !f.name.startsWith("_R")) return f.name;
    const demangled = DebugSymbol.fromAddress(f.start).name ?? f.name;
    const paren = demangled.indexOf("(");
    return paren > 0 ? demangled.slice(0, paren) : demangled;
}

export function readCString(p: NativePointer): string {
    if (p.isNull()) return "<null>";
    let len = 0;
    let cur = p;
    try {
        // Scan page by page: a string ending just before an unmapped page is still readable.
        while (len <= MAX_STRING) {
            const pageLeft = 4096 - (cur.toUInt32() & 0xfff);
            const n = Math.min(pageLeft, MAX_STRING + 1 - len);
            const bytes = new Uint8Array(cur.readByteArray(n) as ArrayBuffer);
            const nul = bytes.indexOf(0);
            if (nul >= 0) {
                len += nul;
                break;
            }
            len += n;
            cur = cur.add(n);
        }
    } catch (_) {
        if (len === 0) return unreadable(p);
    }
    const truncated = len > MAX_STRING;
    return readUtf8(p, Math.min(len, MAX_STRING)) + (truncated ? "…" : "");
}

function readUtf8(p: NativePointer, len: number): string {
    if (len === 0) return "";
    if (p.isNull()) return unreadable(p);
    const n = Math.min(len, MAX_STRING);
    let s: string;
    try {
        s = p.readUtf8String(n) ?? "";
    } catch (_) {
        // Cut inside a multi-byte sequence, or not UTF-8: fall back to bytes as Latin-1.
        try {
            const bytes = new Uint8Array(p.readByteArray(n) as ArrayBuffer);
            s = "";
            for (let i = 0; i < bytes.length; i++) s += String.fromCharCode(bytes[i]);
        } catch (_e) {
            return unreadable(p);
        }
    }
    return len > MAX_STRING ? s + "…" : s;
}

const CELLS = ["Cell<", "UnsafeCell<", "SyncUnsafeCell<", "ManuallyDrop<"];

function isTransparentWrapper(name: string, member: string): boolean {
    if (member === "__0") return true;
    if (member === "value") return CELLS.some((p) => name.startsWith(p));
    return member === "v" && name.startsWith("Atomic");
}

function readStruct(addr: NativePointer, t: TypeDesc, depth: number, path: string[], id: number): unknown {
    const name = t.n ?? "?";
    // By type, not name: Rust's HashMap wraps another struct named HashMap at its address.
    const key = `${addr}:${id}`;
    if (path.indexOf(key) >= 0) return `<circular ref to ${name}>`;
    if (depth <= 0) return `<${name}>`;
    // Probe the first byte: an unreadable struct is one value, not N unreadable fields.
    if ((t.s ?? 0) > 0) addr.readU8();
    const fields = t.f ?? [];
    // A Rust newtype (`NonZero<u32>(NonZeroU32Inner(5))`), cell or atomic: its one field's
    // value (the daemon's types.rs `is_transparent_wrapper` decides the same).
    if (fields.length === 1 && isTransparentWrapper(name, String(fields[0][0])) && fields[0][4] === undefined) {
        return read(addr.add(fields[0][1] as number), fields[0][2] as number, depth, path);
    }
    // A Rust tuple, `(i32, &str)`: its fields as an array, as the daemon's eval prints it.
    if (name.startsWith("(") && fields.length > 0 && fields.every((f) => /^__\d+$/.test(String(f[0])) && f[4] === undefined)) {
        path.push(key);
        const items = fields.slice(0, MAX_KEYS).map((f) => read(addr.add(f[1] as number), f[2] as number, depth - 1, path));
        path.pop();
        return items;
    }
    const shared = sharedBlock(name, fields);
    if (shared !== null) {
        // An Rc's shared block, as debug_eval prints the Rc: the strong count, then the value.
        path.push(key);
        const strong = read(addr.add(shared[0][1] as number), shared[0][2] as number, depth - 1, path);
        const value = read(addr.add(shared[1][1] as number), shared[1][2] as number, depth - 1, path);
        path.pop();
        const isObject = value !== null && typeof value === "object" && !Array.isArray(value);
        return isObject ? { "@strong": strong, ...(value as object) } : { "@strong": strong, "*": value };
    }
    const out: Record<string, unknown> = {};
    path.push(key);
    for (let i = 0; i < fields.length && i < MAX_KEYS; i++) {
        const [fname, off, fid, bitOff, bitSize] = fields[i] as [string, number, number, number?, number?];
        const faddr = addr.add(off);
        const value = bitSize !== undefined ? readBits(faddr, fid, bitOff ?? 0, bitSize) : read(faddr, fid, depth - 1, path);
        // An anonymous struct or union's members are this struct's (C: `a.x`); two of them
        // under one key would hide the first. The daemon's decoder does the same.
        if (fname === "<anonymous>" && value !== null && typeof value === "object" && !Array.isArray(value)) Object.assign(out, value);
        else out[fname] = value;
    }
    path.pop();
    return out;
}

/** Rust's `RcInner` / `ArcInner` (`RcBox` before 1.84), what an `Rc` / `Arc` points to: its
 *  `strong` and `value` (`data`) fields (the daemon's cxx_std.rs `rust_shared_block_fields`). */
function sharedBlock(name: string, fields: (string | number)[][]): [(string | number)[], (string | number)[]] | null {
    const bare = name.replace(/^alloc::(rc|sync)::/, "");
    if (!/^(RcInner|RcBox|ArcInner)</.test(bare)) return null;
    const field = (n: string) => fields.find((f) => f[0] === n && f[4] === undefined);
    const strong = field("strong");
    const value = field("value") ?? field("data");
    return strong !== undefined && value !== undefined ? [strong, value] : null;
}

function readBits(addr: NativePointer, id: number, bitOff: number, bitSize: number): unknown {
    const size = Math.max(1, Math.min(8, Math.ceil((bitOff + bitSize) / 8)));
    let raw = 0n;
    for (let i = size - 1; i >= 0; i--) raw = (raw << 8n) | BigInt(addr.add(i).readU8());
    const v = (raw >> BigInt(bitOff)) & ((1n << BigInt(bitSize)) - 1n);
    const t = types.get(id);
    if (t?.sg && bitSize > 0 && (v >> BigInt(bitSize - 1)) === 1n) return Number(v - (1n << BigInt(bitSize)));
    if (t?.k === "bool") return v !== 0n;
    const name = t?.e?.[v.toString()];
    return name !== undefined ? name : Number(v);
}

function readArray(addr: NativePointer, of: number, count: number, depth: number, path: string[]): unknown {
    if (addr.isNull()) return count === 0 ? [] : null;
    const et = types.get(of);
    if (et !== undefined && et.k === "char" && (et.s ?? 1) === 1) {
        const text = charArrayText(addr, count);
        if (text !== null) return text;
    }
    const size = typeSize(of);
    const n = Math.min(count, MAX_ELEMENTS);
    const out: unknown[] = [];
    for (let i = 0; i < n; i++) out.push(read(addr.add(i * size), of, depth, path));
    if (count > MAX_ELEMENTS) out.push(`<${count - MAX_ELEMENTS} more>`);
    return out;
}

/**
 * A `char` array holding text, as gdb prints `char name[16]`: the bytes before the first NUL
 * (of the first MAX_STRING, "…" when all of those are text and the array goes on), when they
 * are UTF-8 without control characters (tab, newline, carriage return aside); null for
 * binary data, or nothing before a NUL that non-zero bytes follow. The daemon's decoder
 * decides the same way (src/symbols/types.rs char_array_text_len).
 */
function charArrayText(addr: NativePointer, count: number): string | null {
    const scan = Math.min(count, MAX_STRING);
    let bytes: Uint8Array;
    try {
        bytes = new Uint8Array(addr.readByteArray(scan) as ArrayBuffer);
    } catch (_) {
        return null;
    }
    let end = bytes.indexOf(0);
    if (end < 0) end = bytes.length;
    if (end === 0 && bytes.some((b) => b !== 0)) return null;
    const points = utf8CodePoints(bytes, end);
    if (points === null) return null;
    let text = "";
    for (const c of points) {
        if ((c < 0x20 && c !== 9 && c !== 10 && c !== 13) || (c >= 0x7f && c <= 0x9f)) return null;
        text += String.fromCodePoint(c);
    }
    return text + (end === scan && count > scan ? "…" : "");
}

/** The code points of bytes[0..end) when they are valid UTF-8 (as Rust's from_utf8 decides), else null. */
function utf8CodePoints(bytes: Uint8Array, end: number): number[] | null {
    const out: number[] = [];
    let i = 0;
    while (i < end) {
        const b = bytes[i];
        const n = b < 0x80 ? 0 : b >= 0xc2 && b <= 0xdf ? 1 : b >= 0xe0 && b <= 0xef ? 2 : b >= 0xf0 && b <= 0xf4 ? 3 : -1;
        if (n < 0 || i + n >= end) return null; // not a lead byte, or cut by the end
        let c = n === 0 ? b : b & (0x3f >> n);
        for (let k = 1; k <= n; k++) {
            const x = bytes[i + k];
            if ((x & 0xc0) !== 0x80) return null;
            c = (c << 6) | (x & 0x3f);
        }
        // Overlong forms, surrogates and past U+10FFFF are not UTF-8.
        if ((n === 2 && c < 0x800) || (n === 3 && (c < 0x10000 || c > 0x10ffff)) || (c >= 0xd800 && c <= 0xdfff)) return null;
        out.push(c);
        i += n + 1;
    }
    return out;
}

/** Elements from data to end (a std::vector's past-the-end pointer), as the decoder counts them. */
function vectorLength(data: NativePointer, end: NativePointer, size: number): number {
    if (size <= 0 || end.compare(data) <= 0) return 0;
    const bytes = Number(uint64(end.toString()).sub(uint64(data.toString())).toString());
    return Math.min(Math.floor(bytes / size), 0x7fffffff);
}

function readRustEnum(addr: NativePointer, t: TypeDesc, depth: number, path: string[]): unknown {
    const variants = t.v ?? [];
    let chosen = variants.find((v) => v[0] === null);
    if (t.d) {
        const [off, size] = t.d;
        const raw = readInt(addr.add(off), size, false);
        const hit = variants.find((v) => v[0] !== null && String(v[0]) === String(raw));
        if (hit !== undefined) chosen = hit;
    } else if (variants.length > 0) {
        chosen = variants[0];
    }
    if (chosen === undefined) return `<${t.n ?? "?"}: unknown variant>`;
    const [, vname, vtype, voff] = chosen;
    const vt = types.get(vtype);
    const fields = vt?.f ?? [];
    const isOption = (t.n ?? "").startsWith("Option<");
    if (fields.length === 0) return isOption && vname === "None" ? null : vname;
    const base = addr.add(voff);
    const tuple = fields.every((f) => /^__\d+$/.test(String(f[0])));
    if (tuple && fields.length === 1) {
        const value = read(base.add(fields[0][1] as number), fields[0][2] as number, depth, path);
        return isOption ? value : { [vname]: value };
    }
    const inner = read(base, vtype, depth, path);
    return { [vname]: inner };
}

export function typeDesc(id: number): TypeDesc | undefined {
    return types.get(id);
}
