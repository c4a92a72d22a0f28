// The native gate in front of every JS listener on program code (probes, JS-path traces).
//
// A native probe listener attached right before the JS one (Frida calls a function's
// listeners in the order they were attached), so a caller passes it before it raises Frida's
// interceptor transaction or waits for the JS lock. While a patch waits (quiesce.ts) it is
// closed: Frida writes queued Interceptor changes only when no thread is in, or waiting for,
// JavaScript, so new callers are held here while the ones inside drain. A closed gate holds a
// caller at most a second, natively and outside any transaction.

const GATE_C = `
#include <glib.h>
#include <gum/guminterceptor.h>

extern long syscall (long n, ...);
extern int getpid (void);
extern int * __errno_location (void);

#define SYS_FUTEX 202
#define FUTEX_WAIT_PRIVATE 128
#define FUTEX_WAKE_PRIVATE 129

typedef struct {
  volatile guint32 gate;         /* closers: patches waiting */
  volatile guint32 gate_pid;     /* the process that closed it last */
  volatile guint32 waits;        /* callers it held */
} Gate;

extern Gate strobe_gate_block;
#define g strobe_gate_block

struct ts_ { long sec; long nsec; };

static inline guint32 xadd32 (volatile guint32 * p, guint32 v) {
  asm volatile ("lock; xaddl %0, %1" : "+r" (v), "+m" (*p) : : "memory");
  return v;
}

/* Close (by 1) or open (by -1) the gate. Closers may overlap (a timer's patch while a program
   thread's sleeps between tries), so it stays closed until every closer opened it. */
void strobe_gate_move (gint32 by) {
  if (by > 0)
    g.gate_pid = (guint32) getpid ();
  if (xadd32 (&g.gate, (guint32) by) + (guint32) by == 0)
    syscall (SYS_FUTEX, &g.gate, FUTEX_WAKE_PRIVATE, 0x7fffffff, 0, 0, 0);
}

void strobe_gate (GumInvocationContext * ic) {
  int saved = *__errno_location (), k;
  guint32 v;
  if (g.gate != 0 && (guint32) getpid () == g.gate_pid) {
    /* (A child forked while the gate was closed passes: nobody there will open it.) */
    xadd32 (&g.waits, 1);
    for (k = 0; k < 20 && (v = g.gate) != 0; k++) {
      struct ts_ slice = { 0, 50000000 };
      syscall (SYS_FUTEX, &g.gate, FUTEX_WAIT_PRIVATE, v, &slice, 0, 0);
    }
  }
  *__errno_location () = saved;
}
`;

// Offsets in `Gate` above.
const G_WAITS = 8, GATE_SIZE = 12;

interface GateModule {
    cm: CModule;
    /** The `Gate` block, referenced here so it lives as long as the module. */
    block: NativePointer;
    move: NativeFunction<void, [number]>;
}

let gate: GateModule | null = null;
let unavailable: string | null = null;

function setUp(): GateModule | null {
    if (gate !== null || unavailable !== null) return gate;
    try {
        if (Process.platform !== "linux" || Process.arch !== "x64") throw new Error(`the gate needs linux x64 (this is ${Process.platform} ${Process.arch})`);
        const block = Memory.alloc(GATE_SIZE);
        const symbols: Record<string, NativePointer> = { strobe_gate_block: block };
        for (const name of ["syscall", "getpid", "__errno_location"]) symbols[name] = Module.getGlobalExportByName(name);
        const cm = new CModule(GATE_C, symbols);
        const move = new NativeFunction(cm.strobe_gate_move, "void", ["int32"], { scheduling: "exclusive", exceptions: "propagate" });
        gate = { cm, block, move };
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

/** Close (1) or open (-1) the gate for a patch (quiesce.ts). */
export function moveGate(by: 1 | -1): void {
    setUp()?.move(by);
}

/** A native function given to Interceptor.attach is a probe, `void (GumInvocationContext *)`
 *  (the typings only list the JS forms). */
export function attachNativeProbe(at: NativePointer, fn: NativePointer): InvocationListener {
    return Interceptor.attach(at, fn as unknown as InstructionProbeCallback);
}

/** Callers the gate held. */
export function gateStats(): { gateWaits: number } {
    return { gateWaits: gate?.block.add(G_WAITS).readU32() ?? 0 };
}
