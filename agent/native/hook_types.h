/* The fast path's structures, shared by the hook image compiled ahead of time (fast_hook.c,
 * capture_walk.c) and the CModule TinyCC compiles in the target (build.rs hands this text,
 * after capture_types.h, to agent/src/fastpath_c.ts): one definition for both compilers,
 * each checking below the sizes and offsets the JS side (fastpath.ts, capture.ts) uses. */
#ifndef STROBE_HOOK_TYPES_H
#define STROBE_HOOK_TYPES_H

#include "capture_types.h"

#define HOOK_MAX_ARGS 6
#define HOOK_MAX_DEPTH 256

/* A ring slot (88 bytes; the wire format and the kinds: fastpath_c.ts). */
typedef struct {
  u32 seq; u8 kind; u8 flags; u8 nargs; u8 pad;
  u32 fn; u32 tid;
  u64 call; u64 parent; u64 ts;
  u64 v[HOOK_MAX_ARGS];
} Rec;

/* Per hooked function, allocated by JS (fastpath.ts FN_* offsets); its capture plan pointer
   follows it (capture_c.ts FN_PLAN). */
typedef struct {
  u32 id;
  u32 nargs;
  volatile u32 sampling;          /* 1 while 1-in-sample_every calls are recorded */
  u32 sample_every;
  volatile u32 auto_sampling;     /* 0 once the user turned sampling off for it */
  u32 slow_windows;               /* consecutive rate windows below the off threshold */
  volatile u64 calls;             /* every call seen (racy increments: an estimate) */
  volatile u64 window_start;      /* ns at the start of the current rate window */
  /* Hook install/revert (wrappers.ts): 1 while the trace is removed but the hook kept. */
  volatile u32 off;
  /* 1: the function's callers may keep values in vector registers across its calls (GCC's
     IPA-RA), so its hook runs no VEX code (capture_read.h cap_diff_list): vzeroupper would
     zero their upper halves, which no stub or Frida trampoline saves. */
  u32 sse_only;
  /* Time spent in this window copying typed values (hook_now's clock: ticks when
     Shared.use_tsc, else ns): what cost sampling weighs. */
  volatile u64 hook_ns;
} Fn;

/* The ring and what every hook shares, allocated by JS (fastpath.ts SH_* offsets). */
typedef struct {
  u32 tls_key;
  u32 mask;                       /* capacity - 1, capacity a power of two */
  volatile u32 head;
  volatile u32 tail;
  volatile u32 thread_serial;
  u32 window_calls;               /* rate window in calls, a power of two */
  u64 hot_window_ns;              /* window_calls at the hot threshold; 0: no auto sampling */
  volatile u64 lost;
  volatile u64 sampled_out;
  Rec * ring;
  u8 * new_tids;                  /* fastpath_c.ts NEW_TIDS slots of NEW_TID_SLOT bytes */
  u64 cost_share;                 /* tracing.costShare x 1024; 0: no cost sampling */
  /* Hook records' times (ts, an exit's duration) are time stamp counter ticks when use_tsc
     (fastpath.ts sets it where the kernel's clocksource is the TSC): the drain turns them
     into CLOCK_MONOTONIC ns as tsc_anchor's ns_anchor plus the ticks since times tsc_mult
     (ns per tick x 2^32); fastpath.ts recalibrates before every drain. */
  u64 tsc_anchor;
  u64 ns_anchor;
  u64 tsc_mult;
  u32 use_tsc;
  u32 pad;
} Shared;

/* A thread's call stack (fast_hook.c strobe_call_push), made on its first hooked call. */
typedef struct {
  u32 tid;
  u32 depth;
  u64 serial;
  u64 seq;
  u64 stack[HOOK_MAX_DEPTH];
  /* Each call's stack pointer at entry (about: a wrapper's is a little above it; 0: not
     known), so that frames a longjmp or an exception left without their exit can be told
     from the live callers (fast_hook.c strobe_call_push). */
  u64 sp[HOOK_MAX_DEPTH];
  /* Each call's function id (bit 31: recorded while sampled) and enter time (hook_now's
     clock; 0: not known), for the exit record of a call left without returning
     (fast_hook.c hook_unwound). */
  u32 fn[HOOK_MAX_DEPTH];
  u64 ts[HOOK_MAX_DEPTH];
  /* Attach frames whose return address Frida's leave trampoline replaces, innermost last:
     where that return address lives, what it was, and the trampoline an unwinding C++
     exception took out of the way (fastpath_c.ts on_unwind, on_catch). */
  u32 traps;
  u32 unwinding;
  u64 trap_slot[HOOK_MAX_DEPTH];
  u64 trap_ra[HOOK_MAX_DEPTH];
  u64 trap_tramp[HOOK_MAX_DEPTH];
} Thread;

/* One call between its enter and exit. measure: its typed capture is timed for cost
   sampling; thread: the caller's thread state, looked up once at enter for the exit too;
   xmm: where the interceptor saved xmm0-7 for the half being recorded (set by on_enter and
   on_leave before they record; NULL under a wrapper or where Frida's layout is unknown);
   stack: the first stack argument at enter (rsp + 8; NULL under a wrapper, whose functions
   take none: abi.rs). */
typedef struct { u64 call; u64 parent; u64 ts; u32 flags; u32 measure; Thread * thread; const u8 * xmm; const u8 * stack; } Invocation;

/* What the hook image needs from the CModule and libc (fastpath_c.ts hook_ctx). */
typedef struct {
  Shared * shared;
  CaptureShared * capture;
  Thread * (* thread_state) (void);        /* this thread's state, made on first use */
  void * (* getspecific) (u32 key);
  int (* setspecific) (u32 key, const void * value);
  void * (* calloc) (unsigned long n, unsigned long size);
  int (* clock_gettime) (int clk, void * ts);
} HookCtx;

/* Whether the attach call whose return address lives at slot was entered through a sibling
   call: its traced caller ended in a jump to it, so the innermost noted frame has this slot
   but the slot holds that caller's leave trampoline, not the real return address noted
   (fastpath_c.ts trap_push asks before noting the call, which then takes its caller's real
   return address; the call stack after). Read before Frida writes this call's own
   trampoline there (after the enter callbacks). */
static inline int call_is_sibling (const Thread * t, u64 slot) {
  u32 n = t->traps;
  return n > 0 && n <= HOOK_MAX_DEPTH && t->trap_slot[n - 1] == slot && t->trap_ra[n - 1] != *(const u64 *) slot;
}

#define HOOK_CHECK(name, cond) typedef char name[(cond) ? 1 : -1]
HOOK_CHECK (rec_is_88_bytes, sizeof (Rec) == 88);
HOOK_CHECK (fn_is_56_bytes, sizeof (Fn) == 56);
HOOK_CHECK (fn_off_at_40, __builtin_offsetof (Fn, off) == 40);
HOOK_CHECK (fn_sse_only_at_44, __builtin_offsetof (Fn, sse_only) == 44);
HOOK_CHECK (fn_hook_ns_at_48, __builtin_offsetof (Fn, hook_ns) == 48);
HOOK_CHECK (shared_is_104_bytes, sizeof (Shared) == 104);
HOOK_CHECK (shared_use_tsc_at_96, __builtin_offsetof (Shared, use_tsc) == 96);
HOOK_CHECK (shared_ring_at_48, __builtin_offsetof (Shared, ring) == 48);
HOOK_CHECK (thread_stack_at_24, __builtin_offsetof (Thread, stack) == 24);
HOOK_CHECK (invocation_is_56_bytes, sizeof (Invocation) == 56);
HOOK_CHECK (ctx_is_56_bytes, sizeof (HookCtx) == 56);
HOOK_CHECK (capture_shared_is_104_bytes, sizeof (CaptureShared) == 104); /* capture.ts CAPTURE_SHARED_SIZE */

/* Ring arithmetic both sides use: the hooks (fast_hook.c) writing records, the drain
   (fastpath_c.ts, capture_c.ts) reading them. */

/* Slots of a typed record whose payload is len bytes: 1 + ceil((4 + len) / 88), the division
   as a multiplication by 2^38 / 88 rounded up (exact for any 32-bit len; TinyCC would emit a
   64-bit div). */
static inline u32 rec_slots_for (u32 len) {
  return 1 + (u32) (((4 + (u64) len + 87) * 0xBA2E8BA3UL) >> 38);
}

/* Of len payload bytes from ring slot first on, how many fit before the ring wraps: the
   slots are contiguous bytes, so a payload is one copy, or two where the ring wraps. */
static inline u32 ring_before_wrap (const Shared * sh, u32 first, u32 len) {
  u32 room = (sh->mask + 1 - first) * (u32) sizeof (Rec);
  return len < room ? len : room;
}

/* A span of time stamp counter ticks in ns (tsc_mult < 2^32: fastpath.ts uses the TSC only
   above 1 GHz). */
static inline u64 ticks_span (const Shared * sh, u64 d) {
  u64 m = sh->tsc_mult;
  return (d >> 32) * m + (((d & 0xffffffffUL) * m) >> 32);
}

#endif
