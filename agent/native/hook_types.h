/* The fast path's shared structures as the TinyCC side (agent/src/fastpath_c.ts) lays them
 * out, for the hook compiled ahead of time (fast_hook.c). Both sides check the sizes
 * and the offsets they rely on at compile time, against the same numbers. */
#ifndef STROBE_HOOK_TYPES_H
#define STROBE_HOOK_TYPES_H

#include "capture_types.h"

#define HOOK_MAX_ARGS 6
#define HOOK_MAX_DEPTH 256

typedef struct {
  u32 seq; u8 kind; u8 flags; u8 nargs; u8 pad;
  u32 fn; u32 tid;
  u64 call; u64 parent; u64 ts;
  u64 v[HOOK_MAX_ARGS];
} Rec;

typedef struct {
  u32 id;
  u32 nargs;
  volatile u32 sampling;
  u32 sample_every;
  volatile u32 auto_sampling;
  u32 slow_windows;
  volatile u64 calls;
  volatile u64 window_start;
  volatile u32 off;
  volatile u64 hook_ns;
} Fn;

typedef struct {
  u32 tls_key;
  u32 mask;
  volatile u32 head;
  volatile u32 tail;
  volatile u32 thread_serial;
  u32 window_calls;
  u64 hot_window_ns;
  volatile u64 lost;
  volatile u64 sampled_out;
  Rec * ring;
  u8 * new_tids;
  u64 cost_share;
  u64 tsc_anchor;                 /* fastpath_c.ts: ticks to ns, for the drain */
  u64 ns_anchor;
  u64 tsc_mult;
  u32 use_tsc;                    /* 1: records' times are time stamp counter ticks */
  u32 pad;
} Shared;

typedef struct {
  u32 tid;
  u32 depth;
  u64 serial;
  u64 seq;
  u64 stack[HOOK_MAX_DEPTH];
} Thread;

typedef struct { u64 call; u64 parent; u64 ts; u32 flags; u32 measure; Thread * thread; } Invocation;

/* What the typed hook needs from the TinyCC side and libc (fastpath_c.ts hook_ctx). */
typedef struct {
  Shared * shared;
  CaptureShared * capture;
  Thread * (* thread_state) (void);        /* this thread's state, made on first use */
  void (* check_rate) (Fn * f, u64 n);     /* a rate window's end (sampling decisions) */
  void * (* getspecific) (u32 key);
  int (* setspecific) (u32 key, const void * value);
  void * (* calloc) (unsigned long n, unsigned long size);
  int (* clock_gettime) (int clk, void * ts);
} HookCtx;

#define HOOK_CHECK(name, cond) typedef char name[(cond) ? 1 : -1]
HOOK_CHECK (rec_is_88_bytes, sizeof (Rec) == 88);
HOOK_CHECK (fn_is_56_bytes, sizeof (Fn) == 56);
HOOK_CHECK (fn_off_at_40, __builtin_offsetof (Fn, off) == 40);
HOOK_CHECK (fn_hook_ns_at_48, __builtin_offsetof (Fn, hook_ns) == 48);
HOOK_CHECK (shared_is_104_bytes, sizeof (Shared) == 104);
HOOK_CHECK (shared_use_tsc_at_96, __builtin_offsetof (Shared, use_tsc) == 96);
HOOK_CHECK (shared_ring_at_48, __builtin_offsetof (Shared, ring) == 48);
HOOK_CHECK (thread_stack_at_24, __builtin_offsetof (Thread, stack) == 24);
HOOK_CHECK (invocation_is_40_bytes, sizeof (Invocation) == 40);
HOOK_CHECK (ctx_is_64_bytes, sizeof (HookCtx) == 64);
HOOK_CHECK (capture_shared_is_104_bytes, sizeof (CaptureShared) == 104); /* capture.ts CAPTURE_SHARED_SIZE */

#endif
