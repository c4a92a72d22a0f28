// The native gate in front of every JS listener on program code (probes, JS-path traces).
//
// A native probe listener attached right before the JS one (Frida calls a function's
// listeners in the order they were attached), so a caller passes it before it raises Frida's
// interceptor transaction or waits for the JS lock. While a patch waits (quiesce.ts) it is
// closed: Frida writes queued Interceptor changes only when no thread is in, or waiting for,
// JavaScript, so new callers are held here while the ones inside drain. A closed gate holds a
// caller at most a second, natively and outside any transaction.
//
// A logpoint with nothing to decide per hit (no condition, one address) is instead one native
// listener that also checks the logpoint budget (all logpoints together: LOGPOINT_BUDGET
// messages a second) and calls into JavaScript only for a hit it may log; the others are
// counted here. A hot logpoint then enters JavaScript at most a few thousand times a second
// instead of on every hit: twelve threads queued on the JS lock had kept the agent's requests
// unanswered for a minute (docs/performance.md, "Parked is not enough"), and a hit not logged
// costs ≈ 0.5 µs (Frida's listener call) instead of ≈ 25 µs (benches/breakpoints.rs).

const GATE_C = `
#include <glib.h>
#include <gum/guminterceptor.h>

extern long syscall (long n, ...);
extern int getpid (void);
extern int * __errno_location (void);
struct ts_ { long sec; long nsec; };
extern int clock_gettime (int clock, struct ts_ * ts);

#define SYS_FUTEX 202
#define FUTEX_WAIT_PRIVATE 128
#define FUTEX_WAKE_PRIVATE 129

typedef struct {
  volatile guint32 gate;         /* closers: patches waiting */
  volatile guint32 gate_pid;     /* the process that closed it last */
  volatile guint32 waits;        /* callers it held */
  volatile guint32 hold;         /* 1 while the program's threads are parked (quiesce.ts) */
  volatile guint32 held_longer;  /* callers held past GATE_SLICES because of it */
} Gate;

extern Gate strobe_gate_block;
#define g strobe_gate_block

/* Logpoint messages sent in the current one-second window, all logpoints together. */
typedef struct {
  volatile guint64 window_start; /* CLOCK_MONOTONIC ns */
  volatile guint32 sent;
  guint32 limit;
} Budget;

extern Budget strobe_log_budget_block;
#define budget strobe_log_budget_block

/* One logpoint address on the native path (its listener's data). */
typedef struct {
  void (* on_hit) (GumCpuContext * cpu); /* a NativeCallback into the agent's JavaScript */
  volatile guint64 unlogged;             /* hits over the budget, never seen by JavaScript */
} LogProbe;

static inline guint32 xadd32 (volatile guint32 * p, guint32 v) {
  asm volatile ("lock; xaddl %0, %1" : "+r" (v), "+m" (*p) : : "memory");
  return v;
}

static inline void inc64 (volatile guint64 * p) {
  asm volatile ("lock; incq %0" : "+m" (*p) : : "memory");
}

static inline int cas64 (volatile guint64 * p, guint64 old, guint64 new_) {
  guint8 ok;
  asm volatile ("lock; cmpxchgq %3, %1; sete %0" : "=q" (ok), "+m" (*p), "+a" (old) : "r" (new_) : "memory");
  return ok;
}

/* Close (by 1) or open (by -1) the gate. Closers may overlap (a timer's patch while a program
   thread's sleeps between tries), so it stays closed until every closer opened it. */
void strobe_gate_move (gint32 by) {
  if (by > 0)
    g.gate_pid = (guint32) getpid ();
  if (xadd32 (&g.gate, (guint32) by) + (guint32) by == 0)
    syscall (SYS_FUTEX, &g.gate, FUTEX_WAKE_PRIVATE, 0x7fffffff, 0, 0, 0);
}

/* A closed gate holds a caller a second at most, but never while the other threads are
   parked: a waiter is a blocked thread, which the park does not stop, and one let go then
   would run into the prologue while its bytes are written (a SIGTRAP or SIGSEGV a few bytes
   into it, about 1 run in 20 of the twelve-thread logpoint test). A park lasts a fraction of
   a second; ten seconds bound the hold in case the patcher never clears it. */
#define GATE_SLICES 20
#define HOLD_SLICES 200

static void gate_wait (void) {
  int k;
  guint32 v;
  if (g.gate != 0 && (guint32) getpid () == g.gate_pid) {
    /* (A child forked while the gate was closed passes: nobody there will open it.) */
    xadd32 (&g.waits, 1);
    for (k = 0; (k < GATE_SLICES || (g.hold && k < HOLD_SLICES)) && (v = g.gate) != 0; k++) {
      struct ts_ slice = { 0, 50000000 };
      syscall (SYS_FUTEX, &g.gate, FUTEX_WAIT_PRIVATE, v, &slice, 0, 0);
    }
    if (k > GATE_SLICES)
      xadd32 (&g.held_longer, 1);
    /* Serialize: run the bytes a patch just wrote, not what was fetched before it. */
    guint32 a = 0, b, c = 0, d;
    asm volatile ("cpuid" : "+a" (a), "=b" (b), "+c" (c), "=d" (d) : : "memory");
  }
}

void strobe_gate (GumInvocationContext * ic) {
  int saved = *__errno_location ();
  gate_wait ();
  *__errno_location () = saved;
}

/* May one more logpoint message go out now? (Approximate at a window's edge: a hit racing
   the reset may count in either window.) */
guint32 strobe_log_budget_take (void) {
  struct ts_ t;
  guint64 now, start = budget.window_start;
  clock_gettime (1, &t);
  now = (guint64) t.sec * 1000000000ull + (guint64) t.nsec;
  if (now - start >= 1000000000ull && cas64 (&budget.window_start, start, now))
    budget.sent = 0;
  return xadd32 (&budget.sent, 1) < budget.limit;
}

void strobe_log_probe (GumInvocationContext * ic) {
  LogProbe * lp = GUM_IC_GET_FUNC_DATA (ic, LogProbe *);
  int saved = *__errno_location ();
  gate_wait ();
  if (strobe_log_budget_take ())
    lp->on_hit (ic->cpu_context);
  else
    inc64 (&lp->unlogged);
  *__errno_location () = saved;
}

/* Where GumCpuContext keeps each register (the JavaScript side reads a hit's registers there). */
void strobe_cpu_offsets (guint32 * out) {
  out[0] = offsetof (GumCpuContext, rip); out[1] = offsetof (GumCpuContext, r15);
  out[2] = offsetof (GumCpuContext, r14); out[3] = offsetof (GumCpuContext, r13);
  out[4] = offsetof (GumCpuContext, r12); out[5] = offsetof (GumCpuContext, r11);
  out[6] = offsetof (GumCpuContext, r10); out[7] = offsetof (GumCpuContext, r9);
  out[8] = offsetof (GumCpuContext, r8); out[9] = offsetof (GumCpuContext, rdi);
  out[10] = offsetof (GumCpuContext, rsi); out[11] = offsetof (GumCpuContext, rbp);
  out[12] = offsetof (GumCpuContext, rsp); out[13] = offsetof (GumCpuContext, rbx);
  out[14] = offsetof (GumCpuContext, rdx); out[15] = offsetof (GumCpuContext, rcx);
  out[16] = offsetof (GumCpuContext, rax);
}
`;

// Offsets in `Gate` and `Budget` above.
const G_WAITS = 8, G_HOLD = 12, G_HELD_LONGER = 16, GATE_SIZE = 20, BUDGET_LIMIT = 12, BUDGET_SIZE = 16;
/** `LogProbe`: the callback, then the hits not logged. */
const LP_UNLOGGED = 8, LOG_PROBE_SIZE = 16;
/** GumCpuContext's x86-64 registers, in the order strobe_cpu_offsets reports them. */
const REGISTER_ORDER = ["rip", "r15", "r14", "r13", "r12", "r11", "r10", "r9", "r8", "rdi", "rsi", "rbp", "rsp", "rbx", "rdx", "rcx", "rax"];

/** Logpoint messages sent per second, all logpoints together (both paths share the count). */
export const LOGPOINT_BUDGET = 2000;

interface GateModule {
    cm: CModule;
    /** The `Gate` and `Budget` blocks, referenced here so they live as long as the module. */
    block: NativePointer;
    budget: NativePointer;
    move: NativeFunction<void, [number]>;
    take: NativeFunction<number, []>;
    /** Getters of a hit's registers (and pc, sp) over `this.at`, its saved GumCpuContext. */
    savedRegisters: object;
}

let gate: GateModule | null = null;
let unavailable: string | null = null;

function setUp(): GateModule | null {
    if (gate !== null || unavailable !== null) return gate;
    try {
        if (Process.platform !== "linux" || Process.arch !== "x64") throw new Error(`the gate needs linux x64 (this is ${Process.platform} ${Process.arch})`);
        const block = Memory.alloc(GATE_SIZE);
        const budget = Memory.alloc(BUDGET_SIZE);
        budget.add(BUDGET_LIMIT).writeU32(LOGPOINT_BUDGET);
        const symbols: Record<string, NativePointer> = { strobe_gate_block: block, strobe_log_budget_block: budget };
        for (const name of ["syscall", "getpid", "__errno_location", "clock_gettime"]) symbols[name] = Module.getGlobalExportByName(name);
        const cm = new CModule(GATE_C, symbols);
        const move = new NativeFunction(cm.strobe_gate_move, "void", ["int32"], { scheduling: "exclusive", exceptions: "propagate" });
        const take = new NativeFunction(cm.strobe_log_budget_take, "uint32", [], { scheduling: "exclusive", exceptions: "propagate" });
        const offsets = Memory.alloc(4 * REGISTER_ORDER.length);
        new NativeFunction(cm.strobe_cpu_offsets, "void", ["pointer"])(offsets);
        const savedRegisters = {};
        const getter = (off: number) => ({ get(this: { at: NativePointer }) { return this.at.add(off).readPointer(); } });
        REGISTER_ORDER.forEach((name, i) => {
            const off = offsets.add(4 * i).readU32();
            Object.defineProperty(savedRegisters, name, getter(off));
            if (name === "rip") Object.defineProperty(savedRegisters, "pc", getter(off));
            if (name === "rsp") Object.defineProperty(savedRegisters, "sp", getter(off));
        });
        gate = { cm, block, budget, move, take, savedRegisters };
    } catch (e) {
        unavailable = e instanceof Error ? e.message : String(e);
        send({ type: "log", level: "warning", message: `JS listeners run without a gate: ${unavailable}` });
    }
    return gate;
}

/** Attach the gate at `address`, right before a JS listener on program code. Null where it
 *  cannot be built (another platform). */
export function attachGate(address: NativePointer): InvocationListener | null {
    const g = setUp();
    return g === null ? null : attachNativeProbe(address, g.cm.strobe_gate);
}

/** The gate's `hold` word: quiesce.ts's park sets it while the threads are parked. Null
 *  where the gate cannot be built. */
export function gateHoldWord(): NativePointer | null {
    return setUp()?.block.add(G_HOLD) ?? null;
}

/** Close (1) or open (-1) the gate for a patch (quiesce.ts). */
export function moveGate(by: 1 | -1): void {
    setUp()?.move(by);
}

/** May one more logpoint message go out now? The budget the native path checks too; without
 *  the module (another platform), a window kept here. */
const fallbackWindow = { start: 0, sent: 0 };
export function logBudgetTake(nowNs: number): boolean {
    const g = setUp();
    if (g !== null) return g.take() !== 0;
    if (nowNs - fallbackWindow.start >= 1e9) {
        fallbackWindow.start = nowNs;
        fallbackWindow.sent = 0;
    }
    return fallbackWindow.sent++ < LOGPOINT_BUDGET;
}

/** A logpoint address on the native path: the listener that checks gate and budget. */
export interface LogListener {
    listener: InvocationListener;
    /** Hits it did not pass to JavaScript (over the budget), since it was attached. */
    unlogged(): number;
}

/** The callbacks and data blocks of native logpoint listeners: never freed, since a thread may
 *  still be in the listener after it is detached (its trampoline is freed later,
 *  probe_detach.ts). A data block freed early was written by such a thread: the target crashed. */
const logListeners: { callback: NativeCallback<"void", ["pointer"]>; data: NativePointer }[] = [];

/**
 * Attach a native logpoint listener at `address`: gate, budget, then `onHit` with the hit's
 * registers (a CpuContext's register getters over the saved context, valid during the call).
 * Null where the module cannot be built: the caller attaches a JS listener instead.
 */
export function attachLogListener(address: NativePointer, onHit: (cpu: CpuContext) => void): LogListener | null {
    const g = setUp();
    if (g === null) return null;
    const callback = new NativeCallback((saved: NativePointer) => onHit(savedContext(g, saved)), "void", ["pointer"]);
    const data = Memory.alloc(LOG_PROBE_SIZE);
    logListeners.push({ callback, data });
    data.writePointer(callback);
    data.add(LP_UNLOGGED).writeU64(0);
    const listener = Interceptor.attach(address, g.cm.strobe_log_probe as unknown as InstructionProbeCallback, data);
    return { listener, unlogged: () => data.add(LP_UNLOGGED).readU64().toNumber() };
}

/** The registers of a hit saved by Frida at `at`, read like a CpuContext (reads only, each
 *  when asked: a template usually names one or two). */
function savedContext(g: GateModule, at: NativePointer): CpuContext {
    const ctx = Object.create(g.savedRegisters) as { at: NativePointer };
    ctx.at = at;
    return ctx as unknown as CpuContext;
}

/** A native function given to Interceptor.attach is a probe, `void (GumInvocationContext *)`
 *  (the typings only list the JS forms). */
export function attachNativeProbe(at: NativePointer, fn: NativePointer): InvocationListener {
    return Interceptor.attach(at, fn as unknown as InstructionProbeCallback);
}

/** Callers the gate held (and of those, how many past its second because the threads were
 *  parked); logpoint addresses that went native, and their hits not passed to JavaScript
 *  (over the budget). */
export function gateStats(): { gateWaits: number; gateHeldForPark: number; nativeLogpoints: number; logpointHitsNotLogged: number } {
    const notLogged = logListeners.reduce((n, l) => n + l.data.add(LP_UNLOGGED).readU64().toNumber(), 0);
    return {
        gateWaits: gate?.block.add(G_WAITS).readU32() ?? 0,
        gateHeldForPark: gate?.block.add(G_HELD_LONGER).readU32() ?? 0,
        nativeLogpoints: logListeners.length,
        logpointHitsNotLogged: notLogged,
    };
}
