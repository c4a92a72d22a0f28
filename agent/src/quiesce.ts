// Code patches with the program's running threads parked at a safe place.
//
// Why. On Linux x86-64 Frida writes a hook's jump over the function's first instructions with
// plain stores on RWX pages while the other threads run (gum_memory_patch_code_pages: the
// thread-suspending path is only taken where RWX is not allowed). A thread that is, at that
// moment, a few bytes into the prologue resumes in the middle of the new jump (SIGILL,
// SIGSEGV), and one that enters while the bytes are half written runs a torn instruction.
// replaceFast always writes the 16-byte absolute jump (its wrapper is far away), so it
// covers 3-5 instructions of a small function where attach's 5-byte near jump covers 1-3:
// the fault probe crashed 7 of 40 wrapper installs and 0 of 20 attaches. A reverted
// replaceFast also frees its trampoline at once (no usage counter), which a thread inside a
// wrapper may be about to call (tests/hook_install_stress.rs: 40 of 200 adds/removes on four
// busy threads crashed the target before this file).
//
// How. patchParked() stops each running thread of the program in a signal handler (one
// real-time signal, a futex wait), reads where each one stands, and makes the Interceptor
// changes (and writes them: Interceptor.flush) only when none stands inside a danger range (a
// patched prologue, a wrapper about to call its original); otherwise it lets them run a
// little and tries again. The changes are made, not only flushed, while the threads are
// parked: Frida writes queued changes at every NativeFunction call (measured), the park's
// own included. Threads blocked in a system call are
// not signalled (no EINTR for the program); their user PC comes from
// /proc/self/task/TID/syscall. Such a thread may wake while the patch is written: the ones
// the gate holds (js_gate.ts, the common case on a hot probe) stay held while the others are
// parked (`gate_hold`); the program's own sleepers are not covered. Frida's own (cloaked)
// threads and this one are left alone.
// A parked thread waits a second, then for as long as the patcher runs (up to 30 s): one
// parked while holding a lock the patch needs (malloc's) leaves once the patcher is seen
// asleep, which delays the patch instead of deadlocking it, and one on a loaded machine does
// not leave while the patcher merely waits for a core.
//
// Frida only writes queued changes when its interceptor's transaction level (one counter for
// the whole process) falls to 0, and every thread entering JavaScript (a JS listener, a
// NativeCallback) raises it before it even waits for the JS lock. A change queued while a
// program thread is in (or waiting for) a JS callback is written later by that thread, with
// every thread running (tests/probe_install_stress.rs: a logpoint's prologue found without
// its jump). The level is private, so it is tested: while the threads are parked, a canary
// hook on a function of our own goes in first, and the real changes follow only if its
// jump was written at once. JS listeners on program code sit behind a native gate
// (js_gate.ts) that holds new callers out of JavaScript while a patch waits, so those
// already inside drain.

import { attachNativeProbe, gateHoldWord, gateStats, moveGate } from "./js_gate.js";

/** [start, end) byte ranges no thread may stand in (PC) while the patch is written. */
export type DangerRange = [NativePointer, NativePointer];

const MAX_PARKED = 1024;
const PROLOGUE_SPAN = 32; // the longest relocated prologue: a 16-byte jump + one 15-byte instruction
/** Frida's longest redirect on x86-64 (replaceFast always; attach when no trampoline fits
 *  within a near jump's reach): a new hook overwrites the instructions that hold these bytes. */
const FULL_REDIRECT = 16;

const PARK_C = `
#include <glib.h>
#include <gum/guminterceptor.h>

extern long syscall (long n, ...);
extern int sigaction (int sig, const void * act, void * old);
extern int getpid (void);
extern int * __errno_location (void);
extern int sched_yield (void);
extern int open (const char * path, int flags, ...);
extern long read (int fd, void * buf, unsigned long n);
extern int close (int fd);
extern void * opendir (const char * path);
extern void * readdir (void * dir);
extern int closedir (void * dir);
extern int clock_gettime (int clk, void * ts);

#define MAX_PARKED ${MAX_PARKED}
#define SYS_GETTID 186
#define SYS_TGKILL 234
#define SYS_FUTEX 202
#define FUTEX_WAIT_PRIVATE 128
#define FUTEX_WAKE_PRIVATE 129
#define SA_SIGINFO 4
#define SA_RESTART 0x10000000
#define UC_RIP 168

typedef struct {
  volatile guint32 gen;       /* bumped to release parked threads */
  volatile guint32 open;      /* 1 while threads may park */
  volatile guint32 claimed;
  volatile guint32 arrived;
  guint32 sig;
  guint32 n_pcs;
  guint64 pc[MAX_PARKED];     /* the parked threads (strobe_park's result, n_pcs of them) */
  guint32 tid[MAX_PARKED];
  /* Slots the signal handler claims, and the window (gen) each one's thread parked in: a
     slot counts only in its own window. */
  guint64 slot_pc[MAX_PARKED];
  guint32 slot_tid[MAX_PARKED];
  volatile guint32 stamp[MAX_PARKED];
  volatile guint32 patcher; /* the thread that parks the others */
} Park;

extern Park park;
extern volatile guint32 park_timeouts[5];
extern volatile guint32 gate_hold; /* js_gate.ts: its waiters stay while this is 1 */

struct ts_ { long sec; long nsec; };

static inline guint32 xadd32 (volatile guint32 * p, guint32 v) {
  asm volatile ("lock; xaddl %0, %1" : "+r" (v), "+m" (*p) : : "memory");
  return v;
}

static guint64 now_ns (void) {
  struct ts_ t;
  clock_gettime (1, &t);
  return (guint64) t.sec * 1000000000ULL + (guint64) t.nsec;
}

/* /proc/self/task/TID/path as a C string in out. */
static void task_path (char * out, guint32 tid, const char * path) {
  const char * pre = "/proc/self/task/";
  char digits[12];
  int n = 0, nd = 0, i;
  for (i = 0; pre[i]; i++) out[n++] = pre[i];
  do { digits[nd++] = '0' + tid % 10; tid /= 10; } while (tid);
  while (nd) out[n++] = digits[--nd];
  for (i = 0; path[i]; i++) out[n++] = path[i];
  out[n] = 0;
}

/* Thread tid's state letter from /proc (R running, S asleep, D uninterruptible, t stopped at
   a spawn's first instruction ...); 0 when it cannot be read (the thread is gone). */
static char task_state (guint32 tid) {
  char path[48], buf[512];
  int i;
  task_path (path, tid, "/stat");
  int fd = open (path, 0);
  if (fd < 0)
    return 0;
  long len = read (fd, buf, sizeof (buf) - 1);
  close (fd);
  /* "pid (comm) S ...": the state follows the last ')' (comm may hold one). */
  long at = -1;
  for (i = 0; i < len; i++)
    if (buf[i] == ')') at = i;
  return at >= 0 && at + 2 < len ? buf[at + 2] : 0;
}

static void on_park (int sig, void * info, void * uc) {
  int saved = *__errno_location ();
  /* The window first, then whether one is open: a signal of an earlier window that arrives
     late stamps its slot with that window (not counted), leaves at once, and parks on the
     current window's own signal, which is still pending. Read the other way round, it was
     counted in the new window and left: the patcher took it for parked and wrote with one
     thread fewer parked than it counted (a SIGILL in a fresh prologue, 1 of 200 under load). */
  guint32 g = park.gen;
  asm volatile ("" : : : "memory");
  if (park.open) {
    guint32 i = xadd32 (&park.claimed, 1);
    if (i < MAX_PARKED) {
      park.slot_pc[i] = *(guint64 *) ((guint8 *) uc + UC_RIP);
      park.slot_tid[i] = (guint32) syscall (SYS_GETTID);
      asm volatile ("" : : : "memory");
      park.stamp[i] = g;
    }
    asm volatile ("" : : : "memory");
    xadd32 (&park.arrived, 1);
    /* A second at first; after it, only while the patcher runs (a loaded machine may not
       schedule it for a while, and a thread leaving then would run into the patch). It is
       let go once the patcher has been seen asleep ten times in a row (it may wait on a lock
       this thread holds) or after 30 s. */
    struct ts_ slice = { 0, 50000000 };
    int k, asleep = 0;
    for (k = 0; park.gen == g; k++) {
      syscall (SYS_FUTEX, &park.gen, FUTEX_WAIT_PRIVATE, g, &slice, 0, 0);
      if (k < 20 || park.gen != g)
        continue;
      asleep = task_state (park.patcher) != 'R' ? asleep + 1 : 0;
      if (asleep >= 10 || k >= 600)
        break;
    }
    if (park.gen == g) { /* left before the patcher let it go */
      xadd32 (&park_timeouts[0], 1);
      park_timeouts[1] = (guint32) syscall (SYS_GETTID);
      park_timeouts[2] = (guint32) (*(guint64 *) ((guint8 *) uc + UC_RIP));
      park_timeouts[3] = (guint32) (*(guint64 *) ((guint8 *) uc + UC_RIP) >> 32);
    }
    /* Serialize: this thread runs the new bytes, not what it prefetched. */
    guint32 a = 0, b, c = 0, d;
    asm volatile ("cpuid" : "+a" (a), "=b" (b), "+c" (c), "=d" (d) : : "memory");
  }
  *__errno_location () = saved;
}

/* Install the handler on the highest real-time signal nobody handles; 0 on success. */
int strobe_park_init (void) {
  guint8 act[152], old[152];
  int sig, i;
  for (sig = 62; sig >= 40; sig--) {
    for (i = 0; i < 152; i++) old[i] = 0;
    if (sigaction (sig, NULL, old) != 0)
      continue;
    if (*(void **) old != NULL)
      continue; /* the program (or a library) uses it */
    for (i = 0; i < 152; i++) act[i] = 0;
    *(void **) act = (void *) on_park;
    *(int *) (act + 136) = SA_SIGINFO | SA_RESTART;
    if (sigaction (sig, act, NULL) != 0)
      return -1;
    park.sig = sig;
    return 0;
  }
  return -1;
}

/* The last hexadecimal field of /proc/self/task/TID/syscall (a blocked thread's user PC);
   0 when the thread is running (or gone), or waits uninterruptibly outside a system call:
   in a page fault (mmap_lock, a locked or migrating page), "-1 sp pc" and state D. Such a
   thread is signalled, which interrupts nothing (it parks on its way back to user code);
   noted as blocked, it would resume from the fault while the patch is written (a CI run
   under load: a thread called a trampoline the patch had just freed). */
static guint64 blocked_pc (guint32 tid) {
  char path[48], buf[256];
  int fd, i;
  task_path (path, tid, "/syscall");
  fd = open (path, 0);
  if (fd < 0)
    return 0;
  long len = read (fd, buf, sizeof (buf) - 1);
  close (fd);
  if (len <= 0 || buf[0] == 'r')
    return 0;
  if (buf[0] == '-' && task_state (tid) == 'D') {
    xadd32 (&park_timeouts[4], 1);
    return 0;
  }
  while (len > 0 && (buf[len - 1] == '\\n' || buf[len - 1] == ' ')) len--;
  long s = len;
  while (s > 0 && buf[s - 1] != ' ') s--;
  guint64 pc = 0;
  for (i = s; i < len; i++) {
    char ch = buf[i];
    if (ch == 'x' || ch == 'X') { pc = 0; continue; }
    int dgt = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
    if (dgt < 0) return 0;
    pc = pc * 16 + dgt;
  }
  return pc;
}

/* The program's thread ids (all but this one) into out; returns how many. */
guint32 strobe_list_threads (guint32 * out, guint32 max) {
  guint32 self = (guint32) syscall (SYS_GETTID), n = 0;
  void * dir = opendir ("/proc/self/task");
  if (dir == NULL)
    return 0;
  void * e;
  while ((e = readdir (dir)) != NULL && n < max) {
    const char * name = (const char *) e + 19;
    guint32 tid = 0;
    int i;
    for (i = 0; name[i] >= '0' && name[i] <= '9'; i++) tid = tid * 10 + (name[i] - '0');
    if (i == 0 || name[i] != 0 || tid == self)
      continue;
    out[n++] = tid;
  }
  closedir (dir);
  return n;
}

/* How many threads of stids[0..n) hold no slot stamped with window g. */
static guint32 missing (const guint32 * stids, guint32 n, guint32 g) {
  guint32 got = park.claimed < MAX_PARKED ? park.claimed : MAX_PARKED, i, j, out = 0;
  for (i = 0; i < n; i++) {
    for (j = 0; j < got; j++)
      if (park.stamp[j] == g && park.slot_tid[j] == stids[i]) break;
    if (j == got) out++;
  }
  return out;
}

/* Park the running ones of tids[0..n): blocked threads' PCs are noted from /proc, running
   ones are signalled and note their own. Returns how many signalled threads did not arrive
   within timeout_ns (their PC is unknown). Call strobe_unpark after, whatever it returns. */
guint32 strobe_park (const guint32 * tids, guint32 n, guint64 timeout_ns) {
  guint32 pid = (guint32) getpid (), signalled = 0, i;
  guint32 g = park.gen;
  park.patcher = (guint32) syscall (SYS_GETTID);
  /* First: a gate waiter that reads 0 here is running when its state is read below, so it
     is signalled; one that reads 1 stays blocked until strobe_unpark. */
  gate_hold = 1;
  asm volatile ("mfence" : : : "memory");
  park.claimed = 0;
  park.arrived = 0;
  asm volatile ("" : : : "memory");
  park.open = 1;
  guint32 blocked = 0;
  guint64 bpc[MAX_PARKED];
  guint32 stids[MAX_PARKED];
  for (i = 0; i < n; i++) {
    guint64 pc = blocked_pc (tids[i]);
    if (pc != 0) {
      if (blocked < MAX_PARKED) bpc[blocked++] = pc;
      continue;
    }
    if (syscall (SYS_TGKILL, pid, tids[i], park.sig) == 0)
      stids[signalled++] = tids[i];
  }
  guint64 deadline = now_ns () + timeout_ns;
  guint32 unknown = signalled;
  while ((park.arrived < signalled || (unknown = missing (stids, signalled, g)) > 0) && now_ns () < deadline)
    sched_yield ();
  if (unknown > 0)
    unknown = missing (stids, signalled, g);
  /* Only this window's slots (a thread that parked after the count above is listed, which is
     safe), then the blocked threads. */
  guint32 claimed = park.claimed < MAX_PARKED ? park.claimed : MAX_PARKED, got = 0;
  for (i = 0; i < claimed; i++) {
    if (park.stamp[i] != g) continue;
    park.pc[got] = park.slot_pc[i];
    park.tid[got] = park.slot_tid[i];
    got++;
  }
  for (i = 0; i < blocked && got < MAX_PARKED; i++) {
    park.pc[got] = bpc[i];
    park.tid[got] = 0;
    got++;
  }
  park.n_pcs = got;
  return unknown;
}

/* An address in Frida's own code (the agent this module links against). */
gpointer strobe_frida_code (void) {
  return (gpointer) gum_invocation_context_get_nth_argument;
}

/* The canary: never called, hooked and unhooked to see whether Frida writes at once. */
int strobe_canary (int x) {
  int y = x * 7 + 3;
  return y ^ (x >> 2);
}

void strobe_canary_hit (GumInvocationContext * ic) {
}

void strobe_unpark (void) {
  park.open = 0;
  asm volatile ("" : : : "memory");
  xadd32 (&park.gen, 1);
  syscall (SYS_FUTEX, &park.gen, FUTEX_WAKE_PRIVATE, 0x7fffffff, 0, 0, 0);
  gate_hold = 0;
}
`;

// Park offsets (see `Park` above).
const PK_N_PCS = 20, PK_PC = 24, PK_TID = 24 + MAX_PARKED * 8, PARK_SIZE = PK_TID + MAX_PARKED * 4 + MAX_PARKED * 16 + 4;
// park_timeouts: the threads that left the park on their own (count, last tid, pc low, pc
// high), then how many were found blocked outside a system call (signalled, blocked_pc).
const PARK_TIMEOUTS_SIZE = 20;

interface Parker {
    cm: CModule;
    park: NativePointer;
    tids: NativePointer;
    list: NativeFunction<number, [NativePointerValue, number]>;
    parkRunning: NativeFunction<number, [NativePointerValue, number, number]>;
    unpark: NativeFunction<void, []>;
    /** park_timeouts and the gate's hold word, referenced here so they live as long as the
     *  module. */
    timeouts: NativePointer;
    hold: NativePointer;
    /** Where a thread parked may hold a lock the patch needs (the interceptor's, Frida's
     *  heap), which the patch would then wait a second on: Frida's code (its executable
     *  mapping) and libc's mutex lock and unlock. */
    locking: DangerRange[];
    /** The canary function, its first byte unhooked, and the native probe hooked on it. */
    canary: NativePointer;
    canaryByte: number;
    canaryHit: NativePointer;
}

let parker: Parker | null = null;
let unavailable: string | null = null;
/** How often the patch waited for a thread to leave a danger range (or for Frida to write at
 *  once), gave up waiting, and the longest one patch took (ms). */
const stats = { flushes: 0, retries: 0, forced: 0, lastForced: null as string | null, unknownThreads: 0, otherTransactions: 0, canaryUnavailable: null as string | null, longestMs: 0, inLocking: 0 };
/** Attempts for which a running thread parked in Frida's or libc's locking code is waited out
 *  (it may hold a lock the patch needs; after them it is trusted to the park's time
 *  limit). */
const FRIDA_ATTEMPTS = 50;
/** After this long (ms) a patch is made at the next park whatever it finds (counted in
 *  `forced`, the reason in `lastForced`). Everything else is waited out until then: a patch
 *  forced at 2 s with a thread one byte into busy_int crashed the twelve-thread logpoint test
 *  about 1 run in 20 (it ran the new jump's second byte, 0xf1: SIGTRAP). The request waiting
 *  on it times out at 60 s. */
const PATCH_DEADLINE_MS = 20_000;
/** Bytes of libc's pthread_mutex_lock and _unlock taken as their code (both are shorter), and
 *  how far apart they may be for the code between them to count as their helpers. */
const LOCK_CODE_SPAN = 0x400;
const LOCK_HELPERS_SPAN = 0x10000;

function setUp(): Parker | null {
    if (parker !== null || unavailable !== null) return parker;
    try {
        if (Process.platform !== "linux" || Process.arch !== "x64") throw new Error(`parking threads needs linux x64 (this is ${Process.platform} ${Process.arch})`);
        const libc = (name: string) => Module.getGlobalExportByName(name);
        const park = Memory.alloc(PARK_SIZE);
        const timeouts = Memory.alloc(PARK_TIMEOUTS_SIZE);
        const hold = gateHoldWord() ?? Memory.alloc(4); // (no gate: a word nobody reads)
        const symbols: Record<string, NativePointer> = { park, park_timeouts: timeouts, gate_hold: hold };
        for (const name of ["syscall", "sigaction", "getpid", "__errno_location", "sched_yield", "open", "read", "close", "opendir", "readdir", "closedir", "clock_gettime"]) {
            symbols[name] = libc(name);
        }
        const cm = new CModule(PARK_C, symbols);
        const opts = { scheduling: "exclusive", exceptions: "propagate" } as const;
        const init = new NativeFunction(cm.strobe_park_init, "int", [], opts);
        if (init() !== 0) throw new Error("no free real-time signal to park threads with");
        parker = {
            cm, park, tids: Memory.alloc(MAX_PARKED * 4),
            list: new NativeFunction(cm.strobe_list_threads, "uint32", ["pointer", "uint32"], opts),
            parkRunning: new NativeFunction(cm.strobe_park, "uint32", ["pointer", "uint32", "uint64"], opts),
            unpark: new NativeFunction(cm.strobe_unpark, "void", [], opts),
            timeouts, hold,
            locking: lockingCode(new NativeFunction(cm.strobe_frida_code, "pointer", [], opts)()),
            canary: cm.strobe_canary,
            canaryByte: cm.strobe_canary.readU8(),
            canaryHit: cm.strobe_canary_hit,
        };
        return parker;
    } catch (e) {
        unavailable = e instanceof Error ? e.message : String(e);
        send({ type: "log", level: "warning", message: `hooks are patched without parking threads: ${unavailable}` });
        return null;
    }
}

/**
 * The danger range of a function whose first bytes a hook's jump overwrites or restores
 * (entry itself is safe): the first `overwritten` bytes when the hook says how many (Frida's
 * function context), else up to the end of the instruction holding byte FULL_REDIRECT, or
 * PROLOGUE_SPAN where the entry already holds a jump (a hook whose padding cannot be decoded)
 * or cannot be decoded. A tight range matters: with twelve threads in a 25-byte function, a
 * 32-byte one found a thread inside at 42 parks in a row.
 */
export function prologue(address: NativePointer, overwritten?: number): DangerRange {
    return [address.add(1), address.add(overwritten ?? overwrittenAtMost(address))];
}

function overwrittenAtMost(address: NativePointer): number {
    try {
        let at = address;
        let n = 0;
        while (n < FULL_REDIRECT) {
            const ins = Instruction.parse(at);
            if (n === 0 && ins.mnemonic === "jmp") return PROLOGUE_SPAN;
            at = ins.next;
            n = at.sub(address).toInt32();
        }
        return Math.min(n, PROLOGUE_SPAN);
    } catch (_) {
        return PROLOGUE_SPAN;
    }
}

function programThreads(p: Parker): number {
    const n = p.list(p.tids, MAX_PARKED);
    const cloak = (globalThis as { Cloak?: { hasThread(id: number): boolean } }).Cloak;
    let kept = 0;
    for (let i = 0; i < n; i++) {
        const tid = p.tids.add(i * 4).readU32();
        if (cloak !== undefined && cloak.hasThread(tid)) continue; // Frida's own threads
        p.tids.add(kept++ * 4).writeU32(tid);
    }
    return kept;
}

/** Whether a parked thread stands in `ranges`; with `runningOnly`, only the threads that were
 *  running (not those found blocked in a system call, which hold no lock being taken). */
function inDanger(p: Parker, ranges: DangerRange[], runningOnly = false): boolean {
    const n = p.park.add(PK_N_PCS).readU32();
    for (let i = 0; i < n; i++) {
        if (runningOnly && p.park.add(PK_TID + i * 4).readU32() === 0) continue;
        const pc = p.park.add(PK_PC + i * 8).readPointer();
        for (const [start, end] of ranges) {
            if (pc.compare(start) >= 0 && pc.compare(end) < 0) return true;
        }
    }
    return false;
}

/**
 * Run `apply` (Interceptor changes) and write its patches (Interceptor.flush) while no
 * program thread runs or stands in `ranges`. Anything slow or allocating belongs before it.
 * Parking never makes it fail: without it (another platform, no free signal) or after
 * PATCH_DEADLINE_MS it patches anyway and counts it.
 */
export function patchParked(ranges: DangerRange[], apply: () => void): void {
    const p = ranges.length > 0 ? setUp() : null;
    if (p === null) {
        apply();
        Interceptor.flush();
        return;
    }
    stats.flushes++;
    const started = Date.now();
    moveGate(1);
    try {
        for (let attempt = 0; ; attempt++) {
            const unknown = p.parkRunning(p.tids, programThreads(p), 200_000_000);
            try {
                if (unknown > 0) stats.unknownThreads += unknown;
                const why = unsafe(p, ranges, unknown > 0, attempt < FRIDA_ATTEMPTS);
                if (why === null || Date.now() - started > PATCH_DEADLINE_MS) {
                    if (why !== null) {
                        stats.forced++;
                        stats.lastForced = `${why} (after ${attempt + 1} tries)`;
                    }
                    remember(p, ranges, attempt + 1, why);
                    apply();
                    Interceptor.flush();
                    return;
                }
            } finally {
                p.unpark();
            }
            stats.retries++;
            Thread.sleep(0.0002 * (1 + (attempt % 10))); // let them move on (and out of JS)
        }
    } finally {
        moveGate(-1);
        stats.longestMs = Math.max(stats.longestMs, Date.now() - started);
    }
}

/** The last patches written: when, over which ranges, and where every parked thread stood
 *  then, so that a crash in patched bytes can say how that patch went (patchNear). */
interface PatchRecord {
    at: number;
    ranges: DangerRange[];
    tries: number;
    forced: string | null;
    /** Where each parked thread stood, and whether it was in a system call (not signalled). */
    parked: { pc: string; inSyscall: boolean }[];
}
const recentPatches: PatchRecord[] = [];
const RECENT_PATCHES = 16;

function remember(p: Parker, ranges: DangerRange[], tries: number, forced: string | null): void {
    const parked: PatchRecord["parked"] = [];
    const n = Math.min(p.park.add(PK_N_PCS).readU32(), MAX_PARKED);
    for (let i = 0; i < n; i++) {
        // A thread in a system call was not signalled: its slot has no tid.
        parked.push({ pc: p.park.add(PK_PC + i * 8).readPointer().toString(), inSyscall: p.park.add(PK_TID + i * 4).readU32() === 0 });
    }
    recentPatches.push({ at: Date.now(), ranges, tries, forced, parked });
    if (recentPatches.length > RECENT_PATCHES) recentPatches.shift();
}

/**
 * The latest patch whose bytes hold `pc` (a prologue's danger range, from the entry to its
 * end): a crash there is likely Strobe's, and what the park found then says how it happened.
 * Null when no recent patch is near.
 */
export function patchNear(pc: NativePointer): object | null {
    for (let i = recentPatches.length - 1; i >= 0; i--) {
        const r = recentPatches[i];
        const range = r.ranges.find(([start, end]) => pc.compare(start.sub(1)) >= 0 && pc.compare(end) < 0);
        if (range === undefined) continue;
        return {
            entry: range[0].sub(1).toString(),
            agoMs: Date.now() - r.at,
            tries: r.tries,
            forced: r.forced,
            parked: r.parked,
            patching: quiesceStats(),
        };
    }
    return null;
}

/** The thread that last left the park on its own (a patch waited a second on something it
 *  held): its id, name and where it stood. */
function lastParkTimeout(p: Parker): string | null {
    const t = p.timeouts;
    if (t.readU32() === 0) return null;
    const tid = t.add(4).readU32();
    const pc = ptr(t.add(12).readU32()).shl(32).or(t.add(8).readU32());
    let name = "?";
    try {
        name = File.readAllText(`/proc/self/task/${tid}/comm`).trim();
    } catch (_) {
        // the thread is gone
    }
    const m = mappingAt(pc);
    return `thread ${tid} (${name}) at ${DebugSymbol.fromAddress(pc)} in ${m === null ? "no mapping" : `${m.name} (${m.perms})`}`;
}

interface Mapping {
    range: DangerRange;
    perms: string;
    /** The mapped file, or "anonymous". */
    name: string;
}

/** The mapping that holds `address`, from /proc/self/maps (which lists Frida's own, unlike
 *  Process.findRangeByAddress); null if none does. */
function mappingAt(address: NativePointer): Mapping | null {
    for (const line of File.readAllText("/proc/self/maps").split("\n")) {
        const f = line.split(/\s+/);
        const m = /^([0-9a-f]+)-([0-9a-f]+)$/.exec(f[0] ?? "");
        if (m === null) continue;
        const start = ptr("0x" + m[1]), end = ptr("0x" + m[2]);
        if (address.compare(start) >= 0 && address.compare(end) < 0) return { range: [start, end], perms: f[1] ?? "", name: f.slice(5).join(" ") || "anonymous" };
    }
    return null;
}

/** Frida's executable mapping (the one holding `frida`, from /proc/self/maps) and libc's
 *  mutex code: from pthread_mutex_lock to past pthread_mutex_unlock (glibc keeps the helpers
 *  both call between them: a thread parked just after taking the lock stood at one). */
function lockingCode(frida: NativePointer): DangerRange[] {
    const out: DangerRange[] = [];
    const own = mappingAt(frida);
    if (own !== null && own.perms.startsWith("r-x")) out.push(own.range);
    const lock = Module.findGlobalExportByName("pthread_mutex_lock");
    const unlock = Module.findGlobalExportByName("pthread_mutex_unlock");
    for (const at of [lock, unlock]) if (at !== null) out.push([at, at.add(LOCK_CODE_SPAN)]);
    if (lock !== null && unlock !== null) {
        const [lo, hi] = lock.compare(unlock) < 0 ? [lock, unlock] : [unlock, lock];
        if (hi.sub(lo).compare(ptr(LOCK_HELPERS_SPAN)) < 0) out.push([lo, hi]);
    }
    return out;
}

/** Code freed or left behind by an earlier patch that a thread may still run (a reverted
 *  wrapper's trampoline, the wrapper code that may hold one it is about to call): kept out of
 *  later patches too for LASTING_MS, since Frida hands freed bytes to the next trampoline. A
 *  straggler leaves them within microseconds once it runs; the limit keeps a new hot
 *  trampoline in the same bytes from holding patches back for long. */
let lasting: { range: DangerRange; until: number }[] = [];
const LASTING_MS = 2000;
const MAX_LASTING = 4096;

/** Keep threads out of `ranges` during the patches of the next LASTING_MS (see `lasting`). */
export function keepOutAfterFree(ranges: DangerRange[]): void {
    const until = Date.now() + LASTING_MS;
    lastingRanges();
    for (const range of ranges) {
        if (lasting.length >= MAX_LASTING) return;
        lasting.push({ range, until });
    }
}

/** The ranges still kept out; the expired ones are dropped. */
function lastingRanges(): DangerRange[] {
    const now = Date.now();
    lasting = lasting.filter((l) => l.until > now);
    return lasting.map((l) => l.range);
}

/** Why the parked program may not be patched now (null: it may). `early`: a thread parked in
 *  Frida's code counts too (on a busy hook path it often is, so only for the first tries). */
function unsafe(p: Parker, ranges: DangerRange[], unknownThreads: boolean, early: boolean): string | null {
    if (unknownThreads) return "a thread did not park";
    if (inDanger(p, ranges)) return "a thread stands in a patched range";
    if (lasting.length > 0 && inDanger(p, lastingRanges())) return "a thread stands in code an earlier patch freed (or on its way to it)";
    if (early && inDanger(p, p.locking, true)) {
        stats.inLocking++;
        return "a thread stands in Frida's code or a mutex (it may hold a lock the patch needs)";
    }
    if (!writesAtOnce(p)) {
        stats.otherTransactions++;
        return "another thread is in (or waits for) JavaScript";
    }
    return null;
}

/** Whether Interceptor changes made now are written at once: the canary's hook goes in and
 *  its jump must be there after the flush. Its removal rides with the next flush. Where the
 *  canary cannot be hooked the test is skipped (said in `canaryUnavailable`), as before it. */
function writesAtOnce(p: Parker): boolean {
    if (stats.canaryUnavailable !== null) return true;
    let hook: InvocationListener;
    try {
        hook = attachNativeProbe(p.canary, p.canaryHit);
    } catch (e) {
        stats.canaryUnavailable = e instanceof Error ? e.message : String(e);
        return true;
    }
    Interceptor.flush();
    const written = p.canary.readU8() !== p.canaryByte;
    hook.detach();
    return written;
}

/**
 * One try of patchParked that may decline: park, and run `apply` (then flush) only when no
 * program thread stands in `ranges` and `ready()` (read while they are parked) holds.
 * Returns whether it ran. Without parking (another platform) it runs at once.
 */
export function tryParked(ranges: DangerRange[], ready: () => boolean, apply: () => void): boolean {
    const p = setUp();
    if (p === null) {
        apply();
        Interceptor.flush();
        return true;
    }
    moveGate(1);
    try {
        Thread.sleep(0.0002); // callbacks already in JavaScript finish
        const unknown = p.parkRunning(p.tids, programThreads(p), 200_000_000);
        try {
            if (unsafe(p, ranges, unknown > 0, true) !== null || !ready()) {
                stats.retries++;
                return false;
            }
            stats.flushes++;
            remember(p, ranges, 1, null);
            apply();
            Interceptor.flush();
            return true;
        } finally {
            p.unpark();
        }
    } finally {
        moveGate(-1);
    }
}

/** More counters for quiesceStats, by the modules that park (probe_detach.ts). */
export const moreStats: Record<string, () => object> = {};

export function quiesceStats(): object {
    const more: Record<string, object> = {};
    for (const [name, f] of Object.entries(moreStats)) more[name] = f();
    return {
        ...stats,
        ...gateStats(),
        parkTimeouts: parker?.timeouts.readU32() ?? 0,
        blockedInFaults: parker?.timeouts.add(16).readU32() ?? 0,
        lastParkTimeout: parker === null ? null : lastParkTimeout(parker),
        unavailable,
        ...more,
    };
}
