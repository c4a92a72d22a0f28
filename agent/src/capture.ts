// Typed capture in native code (issue 18 item 1), the JavaScript side: the walk's machine
// code (agent/native/capture_walk.c, compiled by build.rs) put into the target, the
// exception hook of its fault-safe copy, and the capture plan a hook spec carries
// (`capture`, compiled by the daemon: src/engine/capture_plan.rs) turned into the native
// block capture_c.ts runs. JavaScript stays for what needs it: a hook with watches or
// a condition, or when the agent's depth is not the plan's, serializes in JS as before.

import { addExceptionHook } from "./crash.js";
import { noteHookFrames } from "./hook_frames.js";
import { currentDepth } from "./serialize.js";
import { CAPTURE_WALK_CODE, CAPTURE_WALK_SYMBOLS } from "./capture_walk.js";

export interface CaptureSpec {
    /** Per (struct type, depth left): [typeKey, depth, size, [edge, …], base?] (base: a B-tree
     *  slot program's array offset, CapProg.base), an edge as CapEdge's
     *  fifteen u32s: off, count, stride, kind, child, len_off, elem, max, guard off, guard
     *  size | inside << 8, guard lo low, high, mask low, high, aux (capture_plan.rs
     *  Edge::to_agent). */
    progs: [number, number, number, number[][], number?][];
    /** [reg, kind, prog, size?] per walk start: the enter roots, then the exit roots (size:
     *  a stack root's bytes). */
    roots: [number, number, number, number?][];
    /** How many of `roots` start at enter. */
    enter: number;
    /** serializationDepth the plan was compiled for. */
    depth: number;
}

/** capture_c.ts: CapPlan header, CapRoot, CapProg and CapEdge sizes. */
const PLAN_HEADER = 16, ROOT_SIZE = 16, PROG_SIZE = 24, EDGE_SIZE = 60;

/** The walk's machine code in the target (build.rs compiles agent/native/capture_walk.c). */
let walk: NativePointer | null = null;
let faults = 0;
/** capture_c.ts CaptureShared: tls_key, vm_readv, records, bytes, checked, visits, pushes, scratch_size, replayed, recorded, stale, unchanged, deltas, avx2. */
const CAPTURE_SHARED_SIZE = 104, CS_UNCHANGED = 80, CS_DELTAS = 88, CS_AVX2 = 96, CS_VM_READV = 4, CS_RECORDS = 8, CS_BYTES = 16, CS_CHECKED = 24, CS_VISITS = 32, CS_PUSHES = 40, CS_SCRATCH_SIZE = 48, CS_REPLAYED = 56, CS_RECORDED = 64, CS_STALE = 72;
let captureShared: NativePointer | null = null;
let enabled = true;
let typedValues = true;
/** process_vm_readv works here (probed once), and tracing option `checkedReads`. */
let vmReadv = false;
let checkedReads = true;
/** Plans by their spec text: hooks of the same function share one block. Never freed. */
const plans = new Map<string, NativePointer>();

/**
 * The walk copied into executable memory of its own (read-only once written), and the
 * exception hook (run from crash.ts) that turns a fault in its safe copy into a return of
 * the bytes not copied instead of killing the target (capture_walk.c says where each
 * fault point resumes).
 */
function loadWalk(): NativePointer {
    const bytes = CAPTURE_WALK_CODE.match(/../g)!.map((h) => parseInt(h, 16));
    const size = Math.ceil(bytes.length / Process.pageSize) * Process.pageSize;
    const code = Memory.alloc(size);
    code.writeByteArray(bytes);
    Memory.protect(code, size, "r-x");
    noteHookFrames(code, code.add(size));
    const at = (name: string): number => {
        const off = CAPTURE_WALK_SYMBOLS[name];
        if (off === undefined) throw new Error(`capture walk: no symbol ${name}`);
        return off;
    };
    const slow = at("strobe_sc_slow");
    // Where a fault at an instruction of the safe copy resumes, by offset in the code.
    const resume = new Map<number, number>([
        [at("strobe_sc_fault_w0"), slow],
        [at("strobe_sc_fault_w1"), slow],
        [at("strobe_sc_fault_q"), slow],
        [at("strobe_sc_fault_b"), at("strobe_sc_left")],
        [at("strobe_sc_fault_rep"), at("strobe_sc_rest")],
        // The comparison with a kept span: a fault sends the call to a replay or the walk.
        [at("strobe_sd_fault_w0"), at("strobe_sd_fault")],
        [at("strobe_sd_fault_w1"), at("strobe_sd_fault")],
        [at("strobe_sd_fault_q"), at("strobe_sd_fault")],
        [at("strobe_sd_fault_t"), at("strobe_sd_fault")],
        [at("strobe_sd_fault_b"), at("strobe_sd_fault")],
        ...["w0", "w1", "x", "y", "q", "r", "b", "c", "d", "e", "f", "n"].map((l): [number, number] => [at(`strobe_sl_fault_${l}`), at("strobe_sd_fault")]),
        ...["w0", "w1", "x", "y", "o", "p", "q", "r", "b", "c", "d", "e", "f", "n"].map((l): [number, number] => [at(`strobe_sa_fault_${l}`), at("strobe_sd_fault")]),
    ]);
    addExceptionHook((details) => {
        const off = details.context.pc.sub(code);
        if (off.compare(ptr(bytes.length)) >= 0) return false; // below code too: unsigned
        const to = resume.get(off.toInt32());
        if (to === undefined) return false;
        faults++;
        (details.context as X64CpuContext).rip = code.add(to);
        return true;
    });
    return code;
}

/** Symbols the fast path's CModule needs for typed capture (fastpath.ts setUp). */
export function captureSymbols(libc: (name: string) => NativePointer): Record<string, NativePointer> {
    const shared = Memory.alloc(CAPTURE_SHARED_SIZE);
    for (let i = 0; i < CAPTURE_SHARED_SIZE; i += 8) shared.add(i).writeU64(0);
    captureShared = shared;
    const keyCreate = new NativeFunction(libc("pthread_key_create"), "int", ["pointer", "pointer"]);
    // Each thread's scratch is freed by libc when the thread exits.
    if (keyCreate(shared, libc("free")) !== 0) throw new Error("pthread_key_create failed (capture scratch)");
    vmReadv = vmReadvWorks(libc);
    setCheckedReads(checkedReads);
    // No walk built for this architecture (build.rs): usableCapture() keeps typed hooks in JS.
    if (CAPTURE_WALK_CODE.length === 0) throw new Error("no native hook code was built for this architecture");
    if (walk === null) walk = loadWalk();
    shared.add(CS_SCRATCH_SIZE).writeU64(walk.add(CAPTURE_WALK_SYMBOLS.strobe_cap_scratch_size).readU64());
    // Span comparisons with 32-byte loads where the CPU and the kernel allow them.
    const avx2 = new NativeFunction(walk.add(CAPTURE_WALK_SYMBOLS.strobe_cpu_avx2), "uint32", []);
    shared.add(CS_AVX2).writeU32(avx2() as number);
    // The hook's two halves and the shared call stack (agent/native/fast_hook.c), for the CModule.
    const sym = (name: string) => walk!.add(CAPTURE_WALK_SYMBOLS[name]);
    return { capture: shared, ...Object.fromEntries(["strobe_hook_enter", "strobe_hook_exit", "strobe_call_push", "strobe_call_pop", "strobe_calls_unwound_below", "strobe_thread"].map((n) => [n, sym(n)])) };
}

/**
 * Does process_vm_readv on this process work here (a seccomp filter may refuse it)? The
 * native capture checks pages not known readable with it instead of faulting (capture_c.ts).
 */
function vmReadvWorks(libc: (name: string) => NativePointer): boolean {
    try {
        const syscall = new NativeFunction(libc("syscall"), "long", ["long", "long", "pointer", "long", "pointer", "long", "long"]);
        const getpid = new NativeFunction(libc("getpid"), "int", []);
        const src = Memory.alloc(16);
        src.writeU64(0x1234_5678);
        const dst = Memory.alloc(16);
        const iov = Memory.alloc(32);
        iov.writePointer(dst);
        iov.add(8).writeU64(8);
        iov.add(16).writePointer(src);
        iov.add(24).writeU64(8);
        const got = syscall(310, getpid(), iov, 1, iov.add(16), 1, 0) as unknown as Int64 | number;
        return Number(got) === 8 && dst.readU64().toNumber() === 0x1234_5678;
    } catch (_) {
        return false;
    }
}

/** Tracing option `checkedReads` (default true; fastpath.ts CaptureOptions). */
export function setCheckedReads(on: boolean): void {
    checkedReads = on;
    if (captureShared !== null) captureShared.add(CS_VM_READV).writeU32(on && vmReadv ? 1 : 0);
}

/** Tracing option `nativeCapture` (default true): false keeps typed hooks in JavaScript. */
export function setNativeCapture(on: boolean): void {
    enabled = on;
}

export function nativeCaptureEnabled(): boolean {
    return enabled;
}

/** Tracing option `typedValues` (default true): false records typed functions' raw argument
 * words on the fast path instead (the integer-only baseline of benches/sqlite_real.rs). */
export function setTypedValues(on: boolean): void {
    typedValues = on;
}

export function wordsOnly(): boolean {
    return !typedValues;
}

/** Can this spec's typed values be captured natively now? */
export function usableCapture(capture: CaptureSpec | undefined): boolean {
    return CAPTURE_WALK_CODE.length > 0 && enabled && typedValues && capture !== undefined && Array.isArray(capture.progs) && Array.isArray(capture.roots) && capture.depth === currentDepth();
}

/** The native plan block of a spec (capture_c.ts CapPlan), built once per distinct plan. */
export function capturePlan(capture: CaptureSpec): NativePointer {
    const key = JSON.stringify(capture);
    const known = plans.get(key);
    if (known !== undefined) return known;
    const { progs, roots } = capture;
    const nEdges = progs.reduce((n, p) => n + p[3].length, 0);
    const block = Memory.alloc(PLAN_HEADER + ROOT_SIZE * roots.length + PROG_SIZE * progs.length + EDGE_SIZE * Math.max(1, nEdges));
    const u32s = (at: NativePointer, values: number[]) => values.forEach((v, i) => at.add(4 * i).writeU32(v));
    u32s(block, [capture.enter, roots.length - capture.enter, progs.length, nEdges]);
    roots.forEach(([reg, kind, prog, size], i) => u32s(block.add(PLAN_HEADER + ROOT_SIZE * i), [reg, kind, prog, size ?? 0]));
    const progsAt = block.add(PLAN_HEADER + ROOT_SIZE * roots.length);
    const edgesAt = progsAt.add(PROG_SIZE * progs.length);
    let first = 0;
    progs.forEach(([typeKey, depth, size, edges, base], i) => {
        u32s(progsAt.add(PROG_SIZE * i), [typeKey, depth, size, first, edges.length, base ?? 0]);
        edges.forEach((edge, j) => u32s(edgesAt.add(EDGE_SIZE * (first + j)), edge.slice(0, EDGE_SIZE / 4)));
        first += edges.length;
    });
    plans.set(key, block);
    return block;
}

export function captureStats(): object {
    const u64 = (at: number): number => (captureShared === null ? 0 : captureShared.add(at).readU64().toNumber());
    const vmReadv = captureShared !== null && captureShared.add(CS_VM_READV).readU32() === 1;
    const avx2 = captureShared !== null && captureShared.add(CS_AVX2).readU32() === 1;
    return {
        enabled, typedValues, plans: plans.size, faultsRecovered: faults, records: u64(CS_RECORDS), payloadBytes: u64(CS_BYTES),
        checkedReads: u64(CS_CHECKED), vmReadv, avx2, visits: u64(CS_VISITS), pushes: u64(CS_PUSHES), walksReplayed: u64(CS_REPLAYED), walksRecorded: u64(CS_RECORDED), walksStale: u64(CS_STALE), walksUnchanged: u64(CS_UNCHANGED), walksDelta: u64(CS_DELTAS),
    };
}
