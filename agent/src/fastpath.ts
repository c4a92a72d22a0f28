// The tracing fast path: hooks whose events need no JS run as CModule callbacks (see
// fastpath_c.ts) writing binary records into a shared ring; this file owns the ring, attaches
// the native callbacks, and drains the ring every few ms into
//   send({ type: "events_bin", format: "rec-v2", seq, count, lost, sampledOut }, records)
// where the daemon mapped the outbox (outbox.ts) the records go there and the message names
// their place in it (`outbox: [start, length]`) instead of carrying them.
// `lost` (records dropped because the ring was full) and `sampledOut` (calls skipped by hot
// function sampling) are running totals since the agent loaded.
//
// Flow control: the daemon answers with { type: "events-ack", seq } once batches up to `seq`
// are stored. At most MAX_IN_FLIGHT_RECORDS unacknowledged records leave the target; beyond that the
// ring fills and new records are dropped and counted, instead of queueing without bound in
// the target's memory (a hot loop produces events faster than SQLite stores them).
// At exit everything left is sent regardless (drainFast(true)).
//
// Which hooks take the fast path: needsJs() below is the one place that decides; a hook that
// needs JS (watches, typed serialization, conditions ...) keeps the Interceptor JS path.
//
// Both paths share one per-thread call stack in C (sharedEnter/sharedLeave), so parent links
// cross paths. The daemon links parents through the order it reads events in, so the two
// streams keep per-thread call order: a drain sends buffered JS events before the ring's
// records, and a JS hook sends the ring's committed records (drainBeforeJsEvent) before its
// own event. Such forced drains ignore flow control.
//
// Thread names: before sending records the drain announces (threads.ts) every thread the C
// side noted as new, so fast-path events carry names in-stream like JS-path events.

import { flush } from "./events.js";
import { FASTPATH_C, MAX_FAST_ARGS, NEW_TID_SLOT, NEW_TIDS, RECORD_SIZE } from "./fastpath_c.js";
import { announceThread } from "./threads.js";
import { xmmSavedCell } from "./xmm.js";
import { forkGateStats, isForkedCopy, onPiggybackedAck, requestReceipt, sendBatch, sendThroughGate } from "./forksafe.js";
import { fastHookPatches, installFastHook, reserveWrappers, wrapperStats } from "./wrappers.js";
import { setUnwindCallbacks, unwindingHooked } from "./unwinding.js";
import { setTrapLookup } from "./hook_frames.js";
import { costOptions, setCostOptions } from "./cost_sampling.js";
import { CAPTURE_MAX_SLOTS, FN_PLAN_OFFSET } from "./capture_c.js";
import { openOutbox, outboxRoom, outboxStats, outboxWritten } from "./outbox.js";
import { captureStats, captureSymbols, CaptureSpec, nativeCaptureEnabled, setCheckedReads, setNativeCapture, setTypedValues, usableCapture, wordsOnly } from "./capture.js";

/** Tuning knobs, settable by the daemon before (or between) hook changes. */
export interface TracingOptions {
    /** Ring capacity in records (rounded up to a power of two); only before the first fast hook. */
    ringRecords?: number;
    /** How often the ring is drained. */
    drainIntervalMs?: number;
    /** Calls per second above which a function is sampled; 0 turns auto sampling off. */
    hotCallsPerSec?: number;
    /** While sampling, record 1 call in this many (default 100: 1%). */
    sampleEvery?: number;
    /** replaceFast wrappers (wrappers.ts) for eligible hooks added from now on (default true). */
    wrappers?: boolean;
    /** Most records per binary batch; only before the first fast hook. */
    drainBatch?: number;
    /** Batches through the outbox the daemon maps (outbox.ts; default true); only before the first fast hook. */
    outbox?: boolean;
    /** JS-path hooks taking more than this share of their threads' time are sampled; 0: never (cost_sampling.ts). */
    costShare?: number;
}

/** Options kept outside this file's settings: typed values captured in native code where the
 * daemon sent a plan (capture.ts; default true). */
export interface CaptureOptions {
    nativeCapture?: boolean;
    /** false: raw argument words even where typed values are due (a benchmark baseline). */
    typedValues?: boolean;
    /** false: native capture never checks a page with process_vm_readv; every read takes the
     * fault-safe copy (what a target whose seccomp filter refuses the call gets). */
    checkedReads?: boolean;
}

/** What a hook spec can carry that the fast path cannot honour. Extend here. */
export interface HookNeeds {
    /** Force the JS path for this function. */
    mode?: string;
    watches?: unknown;
    serialize?: unknown;
    argTypes?: unknown;
    condition?: unknown;
    /** A native capture plan (capture.ts): typed values without JS when usable. */
    capture?: CaptureSpec;
}

/** The one decision point: does this hook need JS callbacks? */
export function needsJs(spec: HookNeeds, argCount: number): boolean {
    if (spec.mode === "js") return true;
    if (argCount > MAX_FAST_ARGS) return true;
    if (spec.watches !== undefined || spec.argTypes !== undefined) return true;
    if (spec.serialize !== undefined && !wordsOnly() && !usableCapture(spec.capture)) return true;
    if (spec.condition !== undefined) return true;
    return false;
}

// Shared struct offsets (see `Shared` in fastpath_c.ts).
const SH_TLS_KEY = 0, SH_MASK = 4, SH_TAIL = 12, SH_WINDOW_CALLS = 20, SH_HOT_WINDOW_NS = 24;
const SH_LOST = 32, SH_SAMPLED_OUT = 40, SH_RING = 48, SH_NEW_TIDS = 56, SH_COST_SHARE = 64;
const SH_TSC_ANCHOR = 72, SH_NS_ANCHOR = 80, SH_TSC_MULT = 88, SH_USE_TSC = 96, SHARED_SIZE = 104;
// 32-bit word indexes into the same struct, for the typed-array view.
const W_HEAD = 2, W_TAIL = 3, W_THREAD_SERIAL = 4;
// Fn struct offsets (see `Fn`; Fn.off at 40 is wrappers.ts's).
const FN_ID = 0, FN_NARGS = 4, FN_SAMPLING = 8, FN_SAMPLE_EVERY = 12, FN_AUTO = 16, FN_SSE_ONLY = 44, FN_SIZE = 56;

const WINDOW_CALLS = 1024;
/** Records the daemon may have unacknowledged (flow control), whatever the batch size. */
const MAX_IN_FLIGHT_RECORDS = 131072;

const options: Required<Omit<TracingOptions, "costShare">> = {
    ringRecords: 1 << 17,
    drainIntervalMs: 5,
    hotCallsPerSec: 100_000,
    sampleEvery: 100,
    wrappers: true,
    drainBatch: 16384,
    outbox: true,
};

interface Native {
    cm: CModule;
    shared: NativePointer;
    ring: NativePointer;
    out: NativePointer;
    drain: NativeFunction<number, [NativePointerValue, number, NativePointerValue]>;
    /** strobe_drain's byte count (u32). */
    drainBytes: NativePointer;
    callbacks: { onEnter: NativePointer; onLeave: NativePointer };
    /** strobe_wrapped_call, the common code of the replaceFast wrappers (wrappers.ts). */
    wrappedCall: NativePointer;
    /** strobe_js_enter, compiled right after it: the end of its code. */
    wrappedCallEnd: NativePointer;
    /** The shared struct as 32-bit words: head/tail/serial reads without NativePointer calls. */
    words: Uint32Array;
    newTids: NativePointer;
    newTidWords: Uint32Array;
    jsEnter: NativeFunction<void, [NativePointerValue]>;
    jsLeave: NativeFunction<void, [UInt64 | number]>;
    /** strobe_js_enter's output: call, parent, tid (u64 each, read as u32 pairs). */
    idsOut: Uint32Array;
    idsOutPtr: NativePointer;
    /** A JS-path attach frame's return address slot and value, and its leaving (unwinding.ts). */
    trapEnter: NativeFunction<void, [NativePointerValue, NativePointerValue]>;
    trapLeave: NativeFunction<void, [NativePointerValue]>;
}

let native: Native | null = null;
let unavailable: string | null = null;
const fnStates = new Map<number, NativePointer>();
let timer: ReturnType<typeof setTimeout> | null = null;
let batches = 0;
let reportedLost = -1;
let reportedSampledOut = -1;
/** Index of the first new-thread slot not yet announced. */
let tidsAnnounced = 0;
/** Data batches sent / acknowledged by the daemon (see "Flow control" above). */
let sentSeq = 0;
let ackedSeq = 0;

function onAck(message: { seq?: number }): void {
    if (typeof message.seq === "number") acked(message.seq);
    recv("events-ack", onAck);
}
recv("events-ack", onAck);
// With a fork gate the host sends acks only on receipts (forksafe.ts, "Receipts").
onPiggybackedAck(acked);

function acked(seq: number): void {
    if (seq > ackedSeq) ackedSeq = seq;
}

export function configure(opts: TracingOptions & CaptureOptions): object {
    if (opts.ringRecords !== undefined) {
        if (native !== null) throw new Error("ringRecords can only be set before the first fast-path hook");
        options.ringRecords = Math.max(16, Math.min(1 << 24, Math.floor(opts.ringRecords)));
    }
    if (opts.drainBatch !== undefined) {
        if (native !== null) throw new Error("drainBatch can only be set before the first fast-path hook");
        options.drainBatch = Math.max(64, Math.min(1 << 16, Math.floor(opts.drainBatch)));
    }
    if (opts.outbox !== undefined) {
        if (native !== null) throw new Error("outbox can only be set before the first fast-path hook");
        options.outbox = opts.outbox === true;
    }
    if (opts.drainIntervalMs !== undefined) options.drainIntervalMs = Math.max(1, Math.min(1000, Math.floor(opts.drainIntervalMs)));
    if (opts.sampleEvery !== undefined) options.sampleEvery = Math.max(1, Math.floor(opts.sampleEvery));
    if (opts.hotCallsPerSec !== undefined) options.hotCallsPerSec = Math.max(0, opts.hotCallsPerSec);
    if (opts.wrappers !== undefined) options.wrappers = opts.wrappers === true;
    if (opts.costShare !== undefined && !(typeof opts.costShare === "number" && opts.costShare >= 0 && opts.costShare <= 1)) {
        throw new Error(`costShare must be a number from 0 to 1 (0: no cost sampling), got ${JSON.stringify(opts.costShare)}`);
    }
    setCostOptions({ costShare: opts.costShare, sampleEvery: options.sampleEvery });
    if (opts.nativeCapture !== undefined) setNativeCapture(opts.nativeCapture === true);
    if (opts.typedValues !== undefined) setTypedValues(opts.typedValues === true);
    if (opts.checkedReads !== undefined) setCheckedReads(opts.checkedReads === true);
    if (native !== null) writeSamplingThresholds(native.shared);
    return { ...options, ...costOptions(), nativeCapture: nativeCaptureEnabled(), available: unavailable === null, unavailable, clock: hookClock(), hookPaths: { ...wrapperStats(), unwinding: unwindingHooked() }, forkGate: forkGateStats(), capture: captureStats(), outbox: outboxStats() };
}

/** The cost share changed (hooks.ts sends tracing.costShare with every add): the native hooks weigh by it too. */
export function syncCostShare(): void {
    if (native !== null) writeSamplingThresholds(native.shared);
}

function writeSamplingThresholds(shared: NativePointer): void {
    const windowNs = options.hotCallsPerSec > 0 ? Math.floor((WINDOW_CALLS * 1e9) / options.hotCallsPerSec) : 0;
    shared.add(SH_HOT_WINDOW_NS).writeU64(windowNs);
    // Cost sampling of typed-capture hooks (fast_hook.c hook_check_rate), like the JS path's.
    shared.add(SH_COST_SHARE).writeU64(Math.round(costOptions().costShare * 1024));
}

let memset: NativeFunction<NativePointer, [NativePointerValue, number, number]> | null = null;

/** p[0..size) set to 0 (and its pages touched). */
function fillZero(p: NativePointer, size: number): NativePointer {
    if (memset === null) memset = new NativeFunction(Module.getGlobalExportByName("memset"), "pointer", ["pointer", "int", "size_t"]);
    memset(p, 0, size);
    return p;
}

/** Memory.alloc does not promise zeroed memory; the ring's commit markers must start at 0. */
function zeroed(size: number): NativePointer {
    return fillZero(Memory.alloc(size), size);
}

/**
 * The ring's memory: a private anonymous mapping in transparent huge pages where the system
 * allows them (MADV_HUGEPAGE; a ring is megabytes, written at a new 4 KiB page every ~46
 * slots), populated up front. Memory from Memory.alloc took write faults in the hooks
 * (do_wp_page: ~8% of a typed call's time on the SQLite bench) even after a memset.
 */
function ringMemory(size: number): NativePointer {
    const libc = (name: string) => Module.getGlobalExportByName(name);
    const mmap = new NativeFunction(libc("mmap"), "pointer", ["pointer", "size_t", "int", "int", "int", "int64"]);
    const madvise = new NativeFunction(libc("madvise"), "int", ["pointer", "size_t", "int"]);
    const PROT_RW = 3, MAP_PRIVATE_ANON = 0x02 | 0x20, MADV_HUGEPAGE = 14, HUGE = 2 << 20;
    // Room to align the start to a huge page; the slack before and after stays mapped, unused.
    const p = mmap(NULL, size + HUGE, PROT_RW, MAP_PRIVATE_ANON, -1, 0);
    if (p.equals(ptr(-1))) return zeroed(size);
    const start = p.add(HUGE - 1).and(ptr(HUGE - 1).not());
    madvise(start, size, MADV_HUGEPAGE);
    return fillZero(start, size);
}

/**
 * The hooks' clock (fast_hook.c hook_now): the time stamp counter where the kernel keeps time
 * with it (its clocksource is "tsc": constant, synchronized across CPUs) and it runs above
 * 1 GHz, read in ~17 ns where clock_gettime takes ~40 (two reads a traced call). The drain
 * (fastpath_c.ts ticks_ns) converts to CLOCK_MONOTONIC ns from the latest (ticks, ns) pair
 * with the rate measured since the first: records a drain sends are a few ms old, so the
 * rate's error is far below a nanosecond on them.
 */
interface TscCalibration {
    pair: NativePointer;
    read: NativeFunction<void, [NativePointerValue]>;
    /** The first pair: rates are measured from it. */
    base: [UInt64, UInt64];
}
let tsc: TscCalibration | null = null;

function tscClocksource(): boolean {
    try {
        return File.readAllText("/sys/devices/system/clocksource/clocksource0/current_clocksource").trim() === "tsc";
    } catch (_) {
        return false;
    }
}

/** The native hooks' clock: "tsc", "clock_gettime", or null before the first native hook. */
function hookClock(): string | null {
    return native === null ? null : tsc !== null ? "tsc" : "clock_gettime";
}

/** (ticks, ns) now, read back to back (fastpath_c.ts strobe_clock_pair). */
function clockPair(c: TscCalibration): [UInt64, UInt64] {
    c.read(c.pair);
    return [c.pair.readU64(), c.pair.add(8).readU64()];
}

/** ns per tick from the first pair to `now` (0 when no time passed). */
function rateSince(c: TscCalibration, now: [UInt64, UInt64]): number {
    const ticks = now[0].sub(c.base[0]).toNumber();
    return ticks > 0 ? now[1].sub(c.base[1]).toNumber() / ticks : 0;
}

/** Where the TSC is the kernel's clock: a first rate over ~2 ms, written before any hook. */
function setUpTsc(cm: CModule, shared: NativePointer): void {
    if (!tscClocksource()) return;
    const c: TscCalibration = { pair: zeroed(16), read: new NativeFunction(cm.strobe_clock_pair, "void", ["pointer"]), base: [uint64(0), uint64(0)] };
    c.base = clockPair(c);
    let now = c.base;
    while (now[1].sub(c.base[1]).toNumber() < 2e6) now = clockPair(c);
    const perTick = rateSince(c, now);
    if (!(perTick > 0 && perTick < 1)) return; // below 1 GHz (or no sense): clock_gettime
    tsc = c;
    writeTsc(shared, now, perTick);
    shared.add(SH_USE_TSC).writeU32(1);
}

function writeTsc(shared: NativePointer, anchor: [UInt64, UInt64], perTick: number): void {
    shared.add(SH_TSC_ANCHOR).writeU64(anchor[0]);
    shared.add(SH_NS_ANCHOR).writeU64(anchor[1]);
    shared.add(SH_TSC_MULT).writeU64(Math.round(perTick * 2 ** 32));
}

/** Before a drain: the anchor moved to now, the rate over everything since the first pair. */
function recalibrate(n: Native): void {
    if (tsc === null) return;
    const now = clockPair(tsc);
    const perTick = rateSince(tsc, now);
    if (perTick > 0 && perTick < 1) writeTsc(n.shared, now, perTick);
}

/** The most bytes one drain writes: a batch and one typed record beyond it (capture_c.ts). */
function outBytes(): number {
    return (options.drainBatch + CAPTURE_MAX_SLOTS) * RECORD_SIZE;
}

/** The CModule, compiled on first need; null when this platform cannot have it. */
function setUp(): Native | null {
    if (native !== null || unavailable !== null) return native;
    try {
        if (Process.arch !== "x64") throw new Error(`the fast path needs x64 (this process is ${Process.arch})`);
        const libc = (name: string) => Module.getGlobalExportByName(name);
        let capacity = 16;
        while (capacity < options.ringRecords) capacity *= 2;
        const shared = zeroed(SHARED_SIZE);
        const ring = ringMemory(capacity * RECORD_SIZE);
        // Room for one typed record beyond the batch (capture_c.ts).
        const out = Memory.alloc(outBytes());
        const newTids = zeroed(NEW_TIDS * NEW_TID_SLOT);
        const idsOutPtr = zeroed(24);
        const keyCreate = new NativeFunction(libc("pthread_key_create"), "int", ["pointer", "pointer"]);
        // The per-thread call stack is freed by libc when its thread exits.
        if (keyCreate(shared.add(SH_TLS_KEY), libc("free")) !== 0) throw new Error("pthread_key_create failed");
        shared.add(SH_MASK).writeU32(capacity - 1);
        shared.add(SH_WINDOW_CALLS).writeU32(WINDOW_CALLS);
        shared.add(SH_RING).writePointer(ring);
        shared.add(SH_NEW_TIDS).writePointer(newTids);
        writeSamplingThresholds(shared);
        const cm = new CModule(FASTPATH_C, {
            shared,
            pthread_getspecific: libc("pthread_getspecific"),
            pthread_setspecific: libc("pthread_setspecific"),
            clock_gettime: libc("clock_gettime"),
            syscall: libc("syscall"),
            calloc: libc("calloc"),
            memcpy: libc("memcpy"),
            prctl: libc("prctl"),
            ...captureSymbols(libc),
            xmm_saved: xmmSavedCell(),
        });
        setUpTsc(cm, shared);
        if (options.outbox) openOutbox(outBytes());
        const drain = new NativeFunction(cm.strobe_drain, "uint32", ["pointer", "uint32", "pointer"], {
            scheduling: "exclusive",
            exceptions: "propagate",
            traps: "none",
        });
        // Exclusive scheduling: the JS lock stays held, so the one output buffer cannot race.
        const fast = { scheduling: "exclusive", exceptions: "propagate", traps: "none" } as const;
        native = {
            cm, shared, ring, out, drain, drainBytes: zeroed(4), callbacks: { onEnter: cm.on_enter, onLeave: cm.on_leave },
            wrappedCall: cm.strobe_wrapped_call,
            wrappedCallEnd: cm.strobe_js_enter,
            words: new Uint32Array(ArrayBuffer.wrap(shared, SHARED_SIZE)),
            newTids,
            newTidWords: new Uint32Array(ArrayBuffer.wrap(newTids, NEW_TIDS * NEW_TID_SLOT)),
            jsEnter: new NativeFunction(cm.strobe_js_enter, "void", ["pointer"], fast),
            jsLeave: new NativeFunction(cm.strobe_js_leave, "void", ["uint64"], fast),
            idsOut: new Uint32Array(ArrayBuffer.wrap(idsOutPtr, 24)),
            idsOutPtr,
            trapEnter: new NativeFunction(cm.strobe_trap_enter, "void", ["pointer", "pointer"], fast),
            trapLeave: new NativeFunction(cm.strobe_trap_leave, "void", ["pointer"], fast),
        };
        setUnwindCallbacks(cm.strobe_on_unwind, cm.on_catch, cm.strobe_on_panic);
        const trapRa = new NativeFunction(cm.strobe_trap_ra, "uint64", ["pointer"], fast);
        setTrapLookup((slot) => {
            const ra = trapRa(slot);
            return ra.equals(0) ? null : ptr(ra.toString());
        });
        return native;
    } catch (e) {
        unavailable = e instanceof Error ? e.message : String(e);
        send({ type: "log", level: "warning", message: `tracing fast path unavailable, using JS hooks: ${unavailable}` });
        return null;
    }
}

/**
 * Set the native side up before JS-path hooks go in (hooks.ts), on the agent's thread: never
 * lazily from inside a hook callback, where compiling the CModule lets another thread's
 * callback start a second set-up, with its own thread serials (colliding call ids and wrong
 * parents across threads: tests/frida_host.rs::per_thread_call_stacks_give_parents).
 */
export function prepareSharedStack(): void {
    setUp();
}

/**
 * For a JS-path call of function `fnId` entered with stack pointer `sp` (its frame noted
 * first: trapEnter): push it on the thread's shared stack (frames a longjmp or an exception
 * left below it are dropped, their unwound exits go to the ring). Returns [call, parent
 * (0: none), tid], or null when there is no shared stack (no CModule on this platform): the JS path then
 * keeps its own stacks.
 */
export function sharedEnter(sp: NativePointer, fnId: number): [number, number, number] | null {
    const n = native;
    if (n === null) return null;
    n.idsOutPtr.writePointer(sp); // the call's stack pointer at entry (strobe_js_enter)
    n.idsOut[2] = fnId; // its function, for an unwound exit (fast_hook.c hook_unwound)
    n.idsOut[3] = 0;
    n.jsEnter(n.idsOutPtr);
    const w = n.idsOut;
    const call = w[0] + w[1] * 4294967296;
    if (call === 0) return null;
    return [call, w[2] + w[3] * 4294967296, w[4]];
}

/**
 * A JS-path attach frame: its return address lives at `slot` (the context's sp at enter)
 * and is `ra`; Frida replaces it with its leave trampoline (unwinding.ts). False: not noted
 * (no native side), so no trapLeave either.
 */
export function trapEnter(slot: NativePointer, ra: NativePointer): boolean {
    if (native === null) return false;
    native.trapEnter(slot, ra);
    return true;
}

/** The frame trapEnter noted at `slot` returned. */
export function trapLeave(slot: NativePointer): void {
    if (native !== null) native.trapLeave(slot);
}

/** Pop a call pushed by sharedEnter (and any frames above it left by longjmp/unwinding). */
export function sharedLeave(call: number): void {
    if (native !== null) native.jsLeave(call);
}

/** Before a JS-path event: send the ring's committed records, which happened before it. */
export function drainBeforeJsEvent(): void {
    const n = native;
    if (n !== null && n.words[W_HEAD] !== n.words[W_TAIL]) drainFast(true);
}

/** Announce, in-stream, the threads the C side created since the last call. */
function announceNewThreads(n: Native): void {
    const serial = n.words[W_THREAD_SERIAL];
    let firstPending = -1;
    for (let i = Math.max(tidsAnnounced, serial - NEW_TIDS); i < serial; i++) {
        const slot = i & (NEW_TIDS - 1);
        const w = (slot * NEW_TID_SLOT) / 4;
        if (n.newTidWords[w] === i + 1) {
            let name: string | null = null;
            try {
                name = n.newTids.add(slot * NEW_TID_SLOT + 8).readCString() || null; // NUL-terminated by prctl
            } catch (_) {
                // unreadable name: announced without one
            }
            announceThread(n.newTidWords[w + 1], name);
        } else if (firstPending < 0) {
            firstPending = i; // created, tid not yet written: look again next time
        }
    }
    // More new threads than slots between two drains: the overwritten ones are not announced
    // here; the daemon names their events from /proc instead.
    tidsAnnounced = firstPending >= 0 ? firstPending : serial;
}

/** Before hooks are added with the threads parked (quiesce.ts): compile what they need. */
export function prepareFastHooks(count: number): void {
    const n = setUp();
    if (n !== null && options.wrappers) reserveWrappers(n, count);
}

/**
 * Should this hook take the fast path? Only when the hooks request asks for it (mode "auto",
 * as the daemon does): a client of the raw agent protocol keeps getting JSON events.
 */
export function useFastPath(spec: HookNeeds, argCount: number, requestMode?: string): boolean {
    if (requestMode !== "auto" || needsJs(spec, argCount)) return false;
    return setUp() !== null;
}

/** The abi installFastHook gets: none (so no wrapper) when the `wrappers` option is off. */
function wrapperAbi(abi: string | undefined): string | undefined {
    return options.wrappers ? abi : undefined;
}

/** Whether attachFast of `fnId` at `address` would write code (wrappers.ts fastHookPatches);
 *  its removal never does: the hook is switched off and kept. */
export function attachFastPatches(fnId: number, address: NativePointer, abi?: string): boolean {
    return fastHookPatches(address, fnStates.get(fnId), wrapperAbi(abi));
}

/**
 * Hook on the fast path: a replaceFast wrapper when the daemon marked the function's `abi` as
 * eligible (wrappers.ts), else native attach callbacks. The function's state block is kept
 * (and reused) for its id. sseOnly: its callers may keep vector registers' upper halves
 * across the call (hooks.ts FunctionSpec.ipaRa), so the hook runs no AVX code (Fn.sse_only).
 */
export function attachFast(fnId: number, address: NativePointer, argCount: number, abi?: string, name = `#${fnId}`, capture: NativePointer = NULL, sseOnly = false): InvocationListener {
    const n = setUp();
    if (n === null) throw new Error(`fast path unavailable: ${unavailable}`);
    let fn = fnStates.get(fnId);
    if (fn === undefined) {
        // Never freed: a callback may still be running on another thread after detach.
        // The capture plan pointer (capture_c.ts FN_PLAN) follows the Fn struct.
        fn = zeroed(Math.max(FN_SIZE, FN_PLAN_OFFSET + 8));
        fn.add(FN_ID).writeU32(fnId);
        fn.add(FN_AUTO).writeU32(1);
        fnStates.set(fnId, fn);
    }
    fn.add(FN_NARGS).writeU32(Math.min(argCount, MAX_FAST_ARGS));
    fn.add(FN_SAMPLE_EVERY).writeU32(options.sampleEvery);
    fn.add(FN_PLAN_OFFSET).writePointer(capture);
    fn.add(FN_SSE_ONLY).writeU32(sseOnly ? 1 : 0);
    const listener = installFastHook({ fnId, name, address, fn }, n, wrapperAbi(abi));
    scheduleDrain();
    return listener;
}

export interface SamplingRequest {
    /** Function ids whose sampling is switched off (and never switched on automatically again). */
    disable?: number[];
    /** Function ids for which automatic sampling is allowed again. */
    enable?: number[];
}

/** Turn sampling off (or allow it again) for fast-path functions; returns the ids changed. */
export function setSampling(req: SamplingRequest): { disabled: number[]; enabled: number[] } {
    const result = { disabled: [] as number[], enabled: [] as number[] };
    for (const id of req.disable ?? []) {
        const fn = fnStates.get(id);
        if (fn === undefined) continue;
        fn.add(FN_AUTO).writeU32(0);
        fn.add(FN_SAMPLING).writeU32(0);
        result.disabled.push(id);
    }
    for (const id of req.enable ?? []) {
        const fn = fnStates.get(id);
        if (fn === undefined) continue;
        fn.add(FN_AUTO).writeU32(1);
        result.enabled.push(id);
    }
    return result;
}

function scheduleDrain(): void {
    if (timer === null && native !== null) timer = setTimeout(onTimer, options.drainIntervalMs);
}

function onTimer(): void {
    timer = null;
    if (isForkedCopy()) return; // a fork's stale copy: no more timers (forksafe.ts)
    drainFast();
    scheduleDrain();
}

/**
 * Send what is committed in the ring (as far as flow control allows; everything with
 * `force`), and any change in the loss counters.
 */
export function drainFast(force = false): void {
    const n = native;
    if (n === null || isForkedCopy()) return; // a fork's stale copy must not drain (forksafe.ts)
    // While a fork is in progress the records stay in the ring for the next round.
    sendThroughGate(() => drainRing(n, force));
}

function drainRing(n: Native, force: boolean): void {
    recalibrate(n);
    for (;;) {
        const batch = options.drainBatch;
        const credit = force || (sentSeq - ackedSeq) * batch < MAX_IN_FLIGHT_RECORDS;
        const tail = n.words[W_TAIL];
        // Out of credit with a fork gate: acks come only with receipts, so ask for one.
        if (!credit) requestReceipt();
        // Into the outbox the daemon maps (outbox.ts) where it has room, else into `out`.
        const room = credit ? outboxRoom(outBytes()) : null;
        const count = credit ? n.drain(room?.at ?? n.out, batch, n.drainBytes) : 0;
        // Ring slots this drain freed: a typed record takes several (capture_c.ts), so a full
        // batch holds fewer records than `batch`; more may wait only if the slots ran out.
        const slots = (n.words[W_TAIL] - tail) >>> 0;
        if (count > 0) announceNewThreads(n);
        flush(); // JS events (and thread names) buffered so far go before these records
        const lost = n.shared.add(SH_LOST).readU64().toNumber();
        const sampledOut = n.shared.add(SH_SAMPLED_OUT).readU64().toNumber();
        if (count === 0 && lost === reportedLost && sampledOut === reportedSampledOut) return;
        reportedLost = lost;
        reportedSampledOut = sampledOut;
        batches++;
        if (count > 0) sentSeq++;
        const header = { type: "events_bin", format: "rec-v2", seq: sentSeq, count, lost, sampledOut };
        if (count === 0) {
            sendBatch(header);
            return;
        }
        const bytes = n.drainBytes.readU32();
        if (room !== null) {
            outboxWritten(room.start, bytes);
            sendBatch({ ...header, outbox: [room.start, bytes] });
        } else {
            // A view of the drain buffer, not a copy: send() copies the bytes into the message
            // before it returns (Frida's "B" argument), and the buffer is refilled only after.
            sendBatch(header, ArrayBuffer.wrap(n.out, bytes));
        }
        if (slots + CAPTURE_MAX_SLOTS <= batch) return;
    }
}

/** Batches sent by the fast path (the exit path waits until they are out). */
export function fastBatchesSent(): number {
    return batches;
}

export function fastStats(): object {
    const n = native;
    if (n === null) return { available: unavailable === null, unavailable, hooks: 0 };
    return {
        available: true,
        fnStates: fnStates.size,
        ringRecords: n.shared.add(SH_MASK).readU32() + 1,
        clock: hookClock(),
        lost: n.shared.add(SH_LOST).readU64().toNumber(),
        sampledOut: n.shared.add(SH_SAMPLED_OUT).readU64().toNumber(),
        tail: n.shared.add(SH_TAIL).readU32(),
        batches,
        inFlight: sentSeq - ackedSeq,
        hookPaths: { ...wrapperStats(), unwinding: unwindingHooked() },
        capture: captureStats(),
        outbox: outboxStats(),
    };
}
