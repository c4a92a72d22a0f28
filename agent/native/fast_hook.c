/* Both halves of every fast-path hook (fastpath_c.ts on_enter/on_leave and the replaceFast
 * wrappers' strobe_wrapped_call hand each call over whole): rate sampling's call count, the
 * thread's call stack, the ring's reservation and the record, plain (the six argument
 * registers, the return value) or typed (with the capture walk's payload, capture_walk.c).
 * Compiled ahead of time with the walk (build.rs): as TinyCC code, which spills every value
 * to the stack and never inlines, this glue took a sixth of a typed call's time on the
 * SQLite bench.
 *
 * Same freestanding rules as capture_walk.c: no libc but the calls HookCtx passes, no
 * globals. Record layout and ring protocol: fastpath_c.ts; typed payloads: capture_c.ts. */

#include "hook_types.h"

u32 strobe_cap_walk (const CapPlan * plan, int at_exit, const u64 * regs, const u8 * xmm, const u8 * stack, CapScratch * s, CaptureShared * cs);
void strobe_cap_forget (CapScratch * s);

#define KIND_ENTER 0
#define KIND_EXIT 1
#define KIND_SAMPLING 2
#define KIND_TYPED_ENTER 3
#define KIND_TYPED_EXIT 4
#define KIND_TYPED_EXIT_BARE 5
#define KIND_UNWOUND 6            /* a call left without returning (hook_unwound) */
#define CAP_MAX_SLOTS 2400        /* capture_c.ts CAPTURE_MAX_SLOTS */
#define CAP_COST_EVERY 16         /* capture_c.ts: 1 call in 16 is timed for cost sampling */
#define CAP_MEASURED(call) ((((call) * 0x9e3779b97f4a7c15UL) >> 60) == 0)

struct hook_timespec { long sec; long nsec; };

static inline u64 hook_ns_now (const HookCtx * x) {
  struct hook_timespec t;
  x->clock_gettime (1, &t);
  return (u64) t.sec * 1000000000UL + (u64) t.nsec;
}

/* A record's time: the time stamp counter where the kernel keeps time with it (~17 ns a
   read on the bench machine against ~40 for clock_gettime, two reads a call; the drain
   converts, fastpath_c.ts ticks_ns), else CLOCK_MONOTONIC ns. */
static inline u64 hook_now (const HookCtx * x) {
  if (x->shared->use_tsc) {
    u32 lo, hi;
    __asm__ volatile ("rdtsc" : "=a" (lo), "=d" (hi));
    return ((u64) hi << 32) | lo;
  }
  return hook_ns_now (x);
}

static inline void hook_add64 (volatile u64 * p, u64 v) {
  __asm__ volatile ("lock; addq %1, %0" : "+m" (*p) : "r" (v) : "memory");
}

static inline int hook_cas32 (volatile u32 * p, u32 old, u32 nw) {
  return __sync_bool_compare_and_swap (p, old, nw);
}

/* No memcpy in a freestanding image: rep movsb (fast strings on every CPU the fast path
   runs on). */
static inline void hook_copy (void * dst, const void * src, u64 n) {
  __asm__ volatile ("rep movsb" : "+D" (dst), "+S" (src), "+c" (n) : : "memory");
}

/* k consecutive slots with one CAS, or NULL (counted as lost) when they do not fit. */
static Rec * hook_reserve (Shared * sh, u32 k, u32 * pos) {
  for (;;) {
    u32 h = sh->head;
    u32 tl = sh->tail;
    if (k > CAP_MAX_SLOTS || h - tl + k > sh->mask + 1) {
      hook_add64 (&sh->lost, 1);
      return 0;
    }
    if (hook_cas32 (&sh->head, h, h + k)) {
      *pos = h;
      return &sh->ring[h & sh->mask];
    }
  }
}

static inline void hook_commit (Rec * r, u32 pos) {
  __asm__ volatile ("" : : : "memory");
  *(volatile u32 *) &r->seq = pos + 1;
}

/* The payload (length prefix included) into the slots after the header slot at pos; two
   copies where the ring wraps. */
static void hook_put (Shared * sh, u32 pos, const u8 * src, u32 len) {
  u32 first = (pos + 1) & sh->mask;
  u32 c = ring_before_wrap (sh, first, len);
  hook_copy (&sh->ring[first], src, c);
  if (c < len)
    hook_copy (&sh->ring[0], src + c, len - c);
}

/* Room in the ring for a record as long as this thread's last one (its u32 length is at the
   scratch's start)? If not, the record is lost without walking. */
static inline int hook_room (const Shared * sh, const u8 * s) {
  return sh->head - sh->tail + rec_slots_for (*(const u32 *) s) <= sh->mask + 1;
}

/* A thread's first hooked call allocates its state with libc, whose calloc clears memory with
   glibc's AVX2 memset, ending in vzeroupper: the upper halves of ymm0-15 go to zero. Neither
   the register-saving stub nor Frida's trampoline keeps more than the xmm halves, and a
   caller GCC let keep ymm values across the call (IPA-RA, Fn.sse_only) would compute with
   zeros. So those libc calls run between an XSAVE and an XRSTOR of the vector state (SSE,
   AVX, AVX-512's opmasks and zmm halves: XCR0's bits 1, 2, 5, 6, 7). */
#define VEC_KEEP_AREA 2688 /* XSAVE's standard layout up to the end of Hi16_ZMM */
#define VEC_KEEP_PARTS 0xe6u

typedef struct {
  u8 area[VEC_KEEP_AREA] __attribute__ ((aligned (64)));
  u32 parts; /* 0: no XSAVE enabled, so no register wider than xmm */
} VecKeep;

static void vec_keep (VecKeep * k) {
  u32 a, b, c, d;
  __asm__ volatile ("cpuid" : "=a" (a), "=b" (b), "=c" (c), "=d" (d) : "a" (1), "c" (0));
  k->parts = 0;
  if (!(c & (1u << 27))) /* OSXSAVE */
    return;
  __asm__ volatile ("xgetbv" : "=a" (a), "=d" (d) : "c" (0));
  k->parts = a & VEC_KEEP_PARTS;
  /* The header: XSAVE sets only the bits it saves, XRSTOR faults on stale ones. */
  for (u32 i = 512; i < 576; i += 8)
    *(volatile u64 *) &k->area[i] = 0;
  __asm__ volatile ("xsave %0" : "+m" (*k) : "a" (k->parts), "d" (0) : "memory");
}

static void vec_restore (const VecKeep * k) {
  if (k->parts != 0)
    __asm__ volatile ("xrstor %0" : : "m" (*k), "a" (k->parts), "d" (0) : "memory");
}

/* This thread's scratch (its payload buffer first), made on its first typed call. */
static __attribute__ ((noinline)) u8 * hook_scratch_new (const HookCtx * x) {
  VecKeep k;
  vec_keep (&k);
  u8 * s = x->calloc (1, x->capture->scratch_size);
  if (s != 0)
    x->setspecific (x->capture->tls_key, s);
  vec_restore (&k);
  return s;
}

static inline u8 * hook_scratch (const HookCtx * x) {
  u8 * s = x->getspecific (x->capture->tls_key);
  return s != 0 ? s : hook_scratch_new (x);
}

static __attribute__ ((noinline)) Thread * hook_thread_new (const HookCtx * x) {
  VecKeep k;
  vec_keep (&k);
  Thread * t = x->thread_state ();
  vec_restore (&k);
  return t;
}

static inline Thread * hook_thread (const HookCtx * x) {
  Thread * t = x->getspecific (x->shared->tls_key);
  return t != 0 ? t : hook_thread_new (x);
}

/* The same for the CModule's own callers (fastpath_c.ts trap_push): vector registers kept. */
Thread * strobe_thread (const HookCtx * x) {
  return hook_thread (x);
}

/* Records of calls left without returning — unwound by an exception or skipped by a
   longjmp — are exits of their own kind: no return value, the time from their enter to when
   the hooks saw them gone (the next traced call or return below them, or the catch). */
#define CALL_SAMPLED 0x80000000u

/* Exits for the calls at depths [to, from) of t's stack, innermost first; t->depth is the
   caller's to set. */
static void hook_unwound (const HookCtx * x, Thread * t, u32 from, u32 to) {
  if (from > HOOK_MAX_DEPTH)
    from = HOOK_MAX_DEPTH;
  if (to >= from)
    return;
  Shared * sh = x->shared;
  u64 now = hook_now (x);
  for (u32 d = from; d-- > to;) {
    u32 pos;
    Rec * r = hook_reserve (sh, 1, &pos);
    if (r == 0)
      continue;
    r->kind = KIND_UNWOUND; r->flags = (t->fn[d] & CALL_SAMPLED) ? 1 : 0; r->nargs = 0; r->pad = 0;
    r->fn = t->fn[d] & ~CALL_SAMPLED; r->tid = t->tid;
    r->call = t->stack[d]; r->parent = d > 0 ? t->stack[d - 1] : 0; r->ts = now;
    r->v[0] = 0;
    r->v[1] = t->ts[d] != 0 && now > t->ts[d] ? now - t->ts[d] : 0;
    hook_commit (r, pos);
  }
}

/* A new call on this thread's stack; its parent is the innermost open call (0: none). Also
   the JS path's (fastpath_c.ts strobe_js_enter): one stack per thread for both. Call ids
   are (thread serial << 32) | per-thread counter: unique without an atomic.
   sp: the new call's stack pointer at entry (0: not known). Frames whose own lies at or below
   it are gone — a longjmp or an exception (a C++ throw through wrapped functions) left them
   without their exit, where a live caller's lies above — and are dropped first (with their
   unwound exits), so the call gets its real caller as parent, not the frame that threw.
   fn: the function's id, bit 31 set while sampled; ts: the enter's time (0: set later,
   hook_note_ts); sibling: the call was entered through a sibling call (call_is_sibling), so
   the open call with its very stack pointer is its caller, which returns later through its
   leave trampoline: kept. */
u64 strobe_call_push (const HookCtx * x, Thread * t, u64 * parent, u64 sp, u32 fn, u64 ts, int sibling) {
  u64 call = t->serial | ++t->seq;
  u32 d = t->depth;
  if (sp != 0)
    while (d > 0 && d <= HOOK_MAX_DEPTH && t->sp[d - 1] != 0 && t->sp[d - 1] <= sp
           && !(sibling && t->sp[d - 1] == sp))
      d--;
  if (d < t->depth)
    hook_unwound (x, t, t->depth, d);
  *parent = d == 0 ? 0 : t->stack[(d <= HOOK_MAX_DEPTH ? d : HOOK_MAX_DEPTH) - 1];
  if (d < HOOK_MAX_DEPTH) {
    t->stack[d] = call;
    t->sp[d] = sp;
    t->fn[d] = fn;
    t->ts[d] = ts;
  }
  t->depth = d + 1;
  return call;
}

/* The enter time of the call just pushed. */
static inline void hook_note_ts (Thread * t, u64 ts) {
  if (t->depth - 1 < HOOK_MAX_DEPTH)
    t->ts[t->depth - 1] = ts;
}

/* Pop down to this call: frames left by a longjmp or an unwinding exception never leave,
   and get their unwound exits here. */
void strobe_call_pop (const HookCtx * x, Thread * t, u64 call) {
  u32 d = t->depth;
  if (d > HOOK_MAX_DEPTH) {
    t->depth = d - 1;
  } else {
    while (d > 0 && t->stack[d - 1] != call)
      d--;
    if (d > 0) {
      hook_unwound (x, t, t->depth, d);
      t->depth = d - 1;
    }
  }
}

/* Where an exception or panic is caught (fastpath_c.ts on_catch): the calls whose entry
   stack pointer lies below live_from were unwound. */
void strobe_calls_unwound_below (const HookCtx * x, Thread * t, u64 live_from) {
  u32 d = t->depth;
  if (d > HOOK_MAX_DEPTH)
    return;
  while (d > 0 && t->sp[d - 1] != 0 && t->sp[d - 1] < live_from)
    d--;
  if (d < t->depth) {
    hook_unwound (x, t, t->depth, d);
    t->depth = d;
  }
}

static inline void hook_header (Rec * r, u8 kind, const Invocation * inv, u32 nargs, u32 fn, u32 tid, u64 ts) {
  r->kind = kind; r->flags = (u8) inv->flags; r->nargs = (u8) nargs; r->pad = 0;
  r->fn = fn; r->tid = tid; r->call = inv->call; r->parent = inv->parent; r->ts = ts;
}

#define SAMPLING_BY_RATE 0
#define SAMPLING_BY_COST 1

/* A sampling record: sampling of f switched on or off, and why (its flags). */
static void hook_emit_sampling (const HookCtx * x, Fn * f, u32 on, u32 reason) {
  u32 pos;
  Rec * r = hook_reserve (x->shared, 1, &pos);
  if (r == 0)
    return;
  r->kind = KIND_SAMPLING; r->flags = (u8) reason; r->nargs = 0; r->pad = 0;
  r->fn = f->id; r->tid = 0; r->call = 0; r->parent = 0; r->ts = hook_now (x);
  r->v[0] = on; r->v[1] = f->sample_every;
  hook_commit (r, pos);
}

/* Every window_calls calls of a function: was that window shorter than the hot threshold
   (rate), or did its typed-capture hooks take more than cost_share of it (cost; while
   sampling, the recorded calls' hook time is scaled up to every call)? With several
   threads calling, their hook time adds up against one wall-clock window: cost sampling
   comes sooner, never later. The window is in ns; hook_ns in hook_now's clock. */
static void hook_check_rate (const HookCtx * x, Fn * f, u64 n) {
  Shared * sh = x->shared;
  u64 t = hook_ns_now (x);
  u64 start = f->window_start;
  u64 hook = sh->use_tsc ? ticks_span (sh, f->hook_ns) : f->hook_ns;
  f->window_start = t;
  f->hook_ns = 0;
  if (n == 0)
    return;
  u64 elapsed = t - start;
  u64 full = f->sampling ? hook * f->sample_every : hook;
  int rate_hot = sh->hot_window_ns != 0 && elapsed < sh->hot_window_ns;
  int rate_slow = sh->hot_window_ns == 0 || elapsed > 2 * sh->hot_window_ns;
  int cost_high = sh->cost_share != 0 && full * 1024 > elapsed * sh->cost_share;
  int cost_low = sh->cost_share == 0 || full * 2048 < elapsed * sh->cost_share;
  if (rate_slow && cost_low) {
    /* Two slow windows in a row: one alone is usually the thread being descheduled on a
       busy machine, and switching off for it made sampling flap. */
    if (++f->slow_windows >= 2 && hook_cas32 (&f->sampling, 1, 0))
      hook_emit_sampling (x, f, 0, SAMPLING_BY_RATE);
    return;
  }
  f->slow_windows = 0;
  if ((rate_hot || cost_high) && f->auto_sampling && hook_cas32 (&f->sampling, 0, 1))
    hook_emit_sampling (x, f, 1, rate_hot ? SAMPLING_BY_RATE : SAMPLING_BY_COST);
}

/* The plan's walk (of its enter roots, or at_exit of the return value's) into a typed
   record reserved for it, its payload written after the header slot: the header is the
   caller's to write and commit. NULL when the record is lost (counted; a lost walk's spans
   are forgotten, so nothing refers to them). */
static Rec * hook_walk_record (const HookCtx * x, const Fn * f, const CapPlan * plan, int at_exit, const u64 * regs, const Invocation * inv, u32 * pos) {
  Shared * sh = x->shared;
  u8 * s = hook_scratch (x);
  if (s == 0 || !hook_room (sh, s)) {
    hook_add64 (&sh->lost, 1);
    return 0;
  }
  ((CapScratch *) s)->sse_only = f->sse_only;
  u32 len = strobe_cap_walk (plan, at_exit, regs, inv->xmm, at_exit ? 0 : inv->stack, (CapScratch *) s, x->capture);
  Rec * r = hook_reserve (sh, rec_slots_for (len), pos);
  if (r == 0) { /* hook_reserve counted it */
    strobe_cap_forget ((CapScratch *) s);
    return 0;
  }
  *(u32 *) s = len;
  hook_put (sh, *pos, s, 4 + len);
  x->capture->records++;
  x->capture->bytes += len;
  return r;
}

/* The enter half of a call of f: inv->call stays 0 when nothing is to be recorded at exit.
   plan: f's capture plan as the caller read it once (FN_PLAN), NULL for a plain record. */
__attribute__ ((force_align_arg_pointer))
void strobe_hook_enter (const HookCtx * x, Fn * f, const CapPlan * plan, Invocation * inv, const u64 * a) {
  Shared * sh = x->shared;
  inv->call = 0;
  if (f->off)
    return; /* trace removed, hook kept (wrappers.ts) */
  u64 n = f->calls++;
  if ((n & (sh->window_calls - 1)) == 0)
    hook_check_rate (x, f, n);
  u32 sampled = f->sampling;
  if (sampled && (n % f->sample_every) != 0) {
    hook_add64 (&sh->sampled_out, 1);
    return;
  }
  Thread * t = hook_thread (x);
  if (t == 0) {
    hook_add64 (&sh->lost, 2);
    return;
  }
  u64 parent;
  /* Attach: the saved stack pointer points at the return address; a wrapper (no stack
     pointer saved) passes the address of its argument copy, in its frame just above. */
  u64 sp = inv->stack != 0 ? (u64) inv->stack - 8 : (u64) a;
  int sibling = inv->stack != 0 && call_is_sibling (t, sp);
  u64 call = strobe_call_push (x, t, &parent, sp, f->id | (sampled ? CALL_SAMPLED : 0), 0, sibling);
  inv->thread = t;
  inv->call = call;
  inv->parent = parent;
  inv->flags = sampled ? 1 : 0;
  inv->measure = plan != 0 && CAP_MEASURED (call);
  u32 pos;
  Rec * r;
  u64 ts;
  if (plan == 0) {
    r = hook_reserve (sh, 1, &pos);
    ts = hook_now (x);
    inv->ts = ts;
    hook_note_ts (t, ts);
    if (r == 0)
      return;
    hook_header (r, KIND_ENTER, inv, f->nargs, f->id, t->tid, ts);
  } else {
    u64 t0 = inv->measure ? hook_now (x) : 0;
    r = hook_walk_record (x, f, plan, 0, a, inv, &pos);
    ts = hook_now (x);
    inv->ts = ts;
    hook_note_ts (t, ts);
    if (inv->measure) /* cost sampling (hook_check_rate); racy: an estimate */
      f->hook_ns += (ts - t0) * CAP_COST_EVERY;
    if (r == 0)
      return;
    hook_header (r, KIND_TYPED_ENTER, inv, f->nargs, f->id, t->tid, ts);
  }
  for (int i = 0; i < HOOK_MAX_ARGS; i++)
    r->v[i] = a[i];
  hook_commit (r, pos);
}

/* A plain exit record, or a bare typed one (kind): the return value and the duration. 0
   when the ring was full (counted as lost). */
static int hook_exit_plain (Shared * sh, Fn * f, Thread * t, Invocation * inv, u64 ret, u64 ts, u8 kind) {
  u32 pos;
  Rec * r = hook_reserve (sh, 1, &pos);
  if (r == 0)
    return 0;
  hook_header (r, kind, inv, 0, f->id, t->tid, ts);
  r->v[0] = ret;
  r->v[1] = ts - inv->ts;
  hook_commit (r, pos);
  return 1;
}

/* A typed exit's record: bare (the plan reads nothing at exit) or with the return value's
   pointees. ret: rax and rdx (a result of two eightbytes); the latter travels as a third word
   (nargs 3) of a typed exit. */
static void hook_exit_typed (const HookCtx * x, Fn * f, const CapPlan * plan, Thread * t, Invocation * inv, const u64 * ret, u64 ts) {
  if (plan->n_exit == 0) {
    if (hook_exit_plain (x->shared, f, t, inv, ret[0], ts, KIND_TYPED_EXIT_BARE))
      x->capture->records++;
    return;
  }
  u32 pos;
  Rec * r = hook_walk_record (x, f, plan, 1, ret, inv, &pos);
  if (r == 0)
    return;
  hook_header (r, KIND_TYPED_EXIT, inv, 3, f->id, t->tid, ts);
  r->v[0] = ret[0];
  r->v[1] = ts - inv->ts;
  r->v[2] = ret[1];
  hook_commit (r, pos);
}

/* The exit half: pop the call, record the return value (ret[0]: rax; ret[1]: rdx, read by
   typed exits only) and the duration. */
__attribute__ ((force_align_arg_pointer))
void strobe_hook_exit (const HookCtx * x, Fn * f, const CapPlan * plan, Invocation * inv, const u64 * ret) {
  u64 call = inv->call;
  if (call == 0)
    return;
  u64 ts = hook_now (x);
  Thread * t = inv->thread;
  strobe_call_pop (x, t, call);
  if (plan == 0) {
    hook_exit_plain (x->shared, f, t, inv, ret[0], ts, KIND_EXIT);
    return;
  }
  hook_exit_typed (x, f, plan, t, inv, ret, ts);
  if (inv->measure) /* cost sampling, as at enter */
    f->hook_ns += (hook_now (x) - ts) * CAP_COST_EVERY;
}
