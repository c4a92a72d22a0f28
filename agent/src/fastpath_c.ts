// C source of the tracing fast path, compiled in the target by Frida's CModule (TinyCC).
//
// A fast hook is Interceptor.attach(address, {onEnter, onLeave}, fnState) with the native
// callbacks below, or (wrappers.ts) Interceptor.replaceFast with a per-hook wrapper that calls
// strobe_wrapped_call; both hand the call to strobe_hook_enter/strobe_hook_exit
// (agent/native/fast_hook.c, compiled ahead of time: TinyCC's code was a sixth of a typed
// call's time), which write fixed-size records into one shared ring (multi-producer: a CAS
// on `head` reserves a slot, `seq` commits it). JS drains it with strobe_drain() every few
// ms. A full ring never blocks: the record is dropped and counted in `lost`.
//
// TinyCC has no __atomic/__sync builtins: this side's atomic operations are inline x86-64
// asm (the fast path is only offered on x64; elsewhere every hook takes the JS path).
// Mutable state lives in memory allocated by JS and passed in as the `shared` symbol: a
// CModule's own globals are not writable from JS.
//
// Record (88 bytes in the ring, little-endian). On the wire (format "rec-v2", decoded by
// src/engine/decode.rs) each record is cut after the words it uses: the 40-byte header plus
// 8 bytes per argument of an enter, 16 for the others (a 2-argument call: 112 bytes, not 176):
//   u32 seq | u8 kind | u8 flags | u8 nargs | u8 0 | u32 fn | u32 tid | u64 call | u64 parent
//   | u64 ts | u64 v[6]
//   kind 0 enter:    v[0..nargs] = raw argument registers (all six are written; the
//                    decoder uses the first nargs)
//   kind 1 exit:     v[0] = return value, v[1] = duration in ns (exit ts - enter ts)
//   kind 2 sampling: v[0] = 1 sampling switched on / 0 off, v[1] = 1-in-N rate; flags 0
//                    for the call rate, 1 for the hooks' cost (fast_hook.c hook_check_rate)
//   kind 3, 4:       typed enter and exit, followed by their captures (capture_c.ts)
//   kind 5:          typed exit with nothing captured, laid out as kind 1
//   kind 6 unwound:  a call left without returning (an exception or a longjmp), seen at the
//                    next traced call or return below it, or at the catch: v[0] = 0, v[1] =
//                    ns since its enter (fast_hook.c hook_unwound)
//   flags bit 0 (enter, exit): the call was recorded while its function was being sampled.
// Call ids are (thread serial << 32) | per-thread counter: unique without an atomic.
//
// One call stack per thread for both hook paths: JS-path hooks (hooks.ts) push and pop on the
// same per-thread stack through strobe_js_enter/strobe_js_leave, so a JS-hooked caller is the
// parent of a fast-path callee and the reverse, with call ids from one space.
//
// Thread names: every Thread created notes its tid and kernel name (prctl PR_GET_NAME, taken
// at its first hooked call) in shared.new_tids before its first record: slot = serial index,
// 24 bytes { u32 index + 1 (written last: a reader tells a written slot from a stale one),
// u32 tid, char name[16] }. The drain (fastpath.ts) announces them in-stream before sending
// the records; reading the name here, not at drain time, keeps it right for a thread that
// renamed itself or exited in between.

import { CAPTURE_C } from "./capture_c.js";
import { HOOK_TYPES_H } from "./capture_walk.js";

export const RECORD_SIZE = 88;
export const MAX_FAST_ARGS = 6;
/** Slots of the new-thread list (a power of two). */
export const NEW_TIDS = 256;
export const NEW_TID_SLOT = 24;

export const FASTPATH_C = `
#include <gum/guminterceptor.h>
#include <glib.h>

extern void * pthread_getspecific (unsigned int key);
extern int pthread_setspecific (unsigned int key, const void * value);
extern int clock_gettime (int clk, void * ts);
extern long syscall (long n, ...);
extern void * calloc (unsigned long n, unsigned long size);
extern void * memcpy (void * dst, const void * src, unsigned long n);
extern int prctl (int option, ...);

#define MAX_ARGS 6
#define WIRE_HEADER 40
#define SYS_GETTID 186
#define NEW_TIDS ${NEW_TIDS}
#define NEW_TID_SLOT 24
#define PR_GET_NAME 16
#define KIND_UNWOUND 6

/* Rec, Fn, Shared, Thread, Invocation, HookCtx, CaptureShared and the capture plan's types:
   agent/native/hook_types.h and capture_types.h, one definition for this CModule and the
   hook image (build.rs). */
${HOOK_TYPES_H}

typedef guint64 (* Orig) (guint64, guint64, guint64, guint64, guint64, guint64);

/* One wrapper's slot (wrappers.ts WRAP_SLOT): its function's state, the original's entry,
   and "off" (1: the trace was removed, the wrapper only calls the original; wrappers.ts). */
typedef struct { Fn * volatile fn; volatile Orig orig; volatile guint64 off; } WrapSlot;

extern Shared shared;

struct timespec_ { long sec; long nsec; };

static inline guint32 xadd32 (volatile guint32 * p, guint32 v) {
  asm volatile ("lock; xaddl %0, %1" : "+r" (v), "+m" (*p) : : "memory");
  return v;
}

static inline guint64 now_ns (void) {
  struct timespec_ t;
  clock_gettime (1, &t);
  return (guint64) t.sec * 1000000000ULL + (guint64) t.nsec;
}

static inline guint64 rdtsc_ (void) {
  guint32 lo, hi;
  asm volatile ("rdtsc" : "=a" (lo), "=d" (hi));
  return ((guint64) hi << 32) | lo;
}

/* A hook record's time in CLOCK_MONOTONIC ns. */
static guint64 ticks_ns (guint64 ticks) {
  if (!shared.use_tsc)
    return ticks;
  return ticks >= shared.tsc_anchor ? shared.ns_anchor + ticks_span (&shared, ticks - shared.tsc_anchor)
                                    : shared.ns_anchor - ticks_span (&shared, shared.tsc_anchor - ticks);
}

/* For fastpath.ts's calibration: out[0] ticks, out[1] ns, read back to back (the ticks
   halfway between two reads around the clock's). */
void strobe_clock_pair (guint64 * out) {
  guint64 a = rdtsc_ ();
  guint64 ns = now_ns ();
  guint64 b = rdtsc_ ();
  out[0] = a + (b - a) / 2;
  out[1] = ns;
}

static Thread * thread_state (void) {
  Thread * t = pthread_getspecific (shared.tls_key);
  if (t == NULL) {
    t = calloc (1, sizeof (Thread));
    if (t == NULL)
      return NULL;
    t->tid = (guint32) syscall (SYS_GETTID);
    guint32 index = xadd32 (&shared.thread_serial, 1);
    t->serial = ((guint64) index + 1) << 32;
    volatile guint32 * slot = (volatile guint32 *) (shared.new_tids + (index & (NEW_TIDS - 1)) * NEW_TID_SLOT);
    slot[0] = 0;
    slot[1] = t->tid;
    prctl (PR_GET_NAME, (char *) (slot + 2));
    asm volatile ("" : : : "memory");
    slot[0] = index + 1;
    pthread_setspecific (shared.tls_key, t);
  }
  return t;
}

/* ---- typed capture (capture_c.ts) ---- */
${CAPTURE_C}
/* ---- end of typed capture ---- */

/* Both halves of a traced call, for both native hook paths (on_enter/on_leave and
   strobe_wrapped_call), are strobe_hook_enter and strobe_hook_exit (agent/native/
   fast_hook.c, compiled ahead of time with the typed capture's walk): sampling (its rate
   check and records too), the thread's call stack, the record. What they need from this side and from libc (HookCtx): */
static const HookCtx hook_ctx = { &shared, &capture, thread_state, pthread_getspecific, pthread_setspecific, calloc, clock_gettime };

/* a: the six argument registers; plan: the function's capture plan, read once (NULL: a
   plain record). inv->call stays 0 when nothing is to be recorded at exit. */
extern void strobe_hook_enter (const HookCtx * x, Fn * f, const CapPlan * plan, Invocation * inv, const guint64 * a);
extern void strobe_hook_exit (const HookCtx * x, Fn * f, const CapPlan * plan, Invocation * inv, const guint64 * ret);
extern guint64 strobe_call_push (const HookCtx * x, Thread * t, guint64 * parent, guint64 sp, guint32 fn, guint64 ts, int sibling);
extern Thread * strobe_thread (const HookCtx * x);
extern void strobe_call_pop (const HookCtx * x, Thread * t, guint64 call);
extern void strobe_calls_unwound_below (const HookCtx * x, Thread * t, guint64 live_from);

#define record_enter(f, inv, a) strobe_hook_enter (&hook_ctx, (f), FN_PLAN (f), (inv), (a))
#define record_exit(f, inv, ret) do { if ((inv)->call != 0) strobe_hook_exit (&hook_ctx, (f), FN_PLAN (f), (inv), (ret)); } while (0)

/* Where the interceptor saved xmm0-7, from the context's rsp: {known, at enter, at leave}
   (xmm.ts measures it once; Frida's CpuContext has no xmm fields). */
extern const gint32 xmm_saved[3];
#define XMM_SAVED(c, half) (xmm_saved[0] ? (const guint8 *) (c)->rsp + xmm_saved[half] : NULL)

/* ---- C++ exceptions and Rust panics through attach frames ----
   Frida's attach replaces a hooked call's return address with its leave trampoline, for
   which the program's unwinder finds no unwind info: an exception or panic thrown through
   the call would end in an abort. So every attach frame is noted (trap_push: where its
   return address lives and what it was); when one starts or resumes unwinding on this
   thread (strobe_on_unwind, _Unwind_RaiseException / _Unwind_Resume), the real return
   addresses go back in place; where it is caught (on_catch: __cxa_begin_catch, Rust's
   __rust_panic_cleanup), the frames it unwound are dropped and the trampolines of the
   others put back, so those still return through their exit hooks (Frida itself drops the
   unwound frames' invocations at its next hooked call on the thread: the catcher's).
   unwinding.ts installs the hooks. */

/* Drop the noted frames whose return address lies below live_from: gone (the innermost
   last, so they are the top of the list). Only with t->traps within HOOK_MAX_DEPTH. */
static void traps_drop_below (Thread * t, guint64 live_from) {
  guint32 n = t->traps;
  while (n > 0 && t->trap_slot[n - 1] < live_from)
    n--;
  t->traps = n;
}

static void trap_push (guint64 slot, guint64 ra) {
  /* Not thread_state (): a new thread's calloc zeroes the upper halves of ymm registers an
     optimized caller may keep across the call (fast_hook.c hook_thread_new). */
  Thread * t = strobe_thread (&hook_ctx);
  if (t == NULL)
    return;
  /* Entered with the return-address slot of the innermost noted frame, but another return
     address there: a sibling call (that traced caller ended in a jump here), and what this
     call takes for its return address is the caller's leave trampoline. Both frames return
     through the caller's real one, which an unwinding exception must find. (A frame a
     longjmp left, whose slot a call from elsewhere reuses, would read the same: that needs
     a longjmp and an exception through the same traced frames; Frida offers no way to tell
     a leave trampoline from code.) */
  if (call_is_sibling (t, slot))
    ra = t->trap_ra[t->traps - 1];
  /* Frames at or below this one are gone (a longjmp left them). */
  if (t->traps <= HOOK_MAX_DEPTH)
    traps_drop_below (t, slot + 1);
  guint32 n = t->traps;
  if (n < HOOK_MAX_DEPTH) {
    t->trap_slot[n] = slot;
    t->trap_ra[n] = ra;
    t->trap_tramp[n] = 0;
  }
  t->traps = n + 1;
}

/* The frame whose return address lived at slot returned: it and any left above it go. */
static void trap_pop (guint64 slot) {
  Thread * t = pthread_getspecific (shared.tls_key);
  if (t == NULL)
    return;
  if (t->traps > HOOK_MAX_DEPTH)
    t->traps--;
  else
    traps_drop_below (t, slot + 1);
}

/* The real return address of this thread's noted attach frame whose return address lives at
   slot, 0 if none is noted there (frames.ts: a backtrace past a traced caller). */
guint64 strobe_trap_ra (guint64 slot) {
  Thread * t = pthread_getspecific (shared.tls_key);
  if (t == NULL)
    return 0;
  guint32 n = t->traps < HOOK_MAX_DEPTH ? t->traps : HOOK_MAX_DEPTH;
  for (guint32 i = n; i-- > 0;)
    if (t->trap_slot[i] == slot)
      return t->trap_ra[i];
  return 0;
}

/* The JS path's attach frames (hooks.ts). */
void strobe_trap_enter (guint64 slot, guint64 ra) { trap_push (slot, ra); }
void strobe_trap_leave (guint64 slot) { trap_pop (slot); }

/* libstdc++'s and libc++abi's exception classes ("GNUCC++" / "CLNGC++" read as a big-endian
   number, last byte a variant), and Rust panics' (the bytes "MOZ", 0, "RUST" in memory). */
#define GNU_CXX_CLASS 0x474e5543432b2b00ULL
#define CLANG_CXX_CLASS 0x434c4e47432b2b00ULL
#define RUST_CLASS 0x54535552005a4f4dULL

/* This thread's noted frames get their real return addresses back (the trampolines kept for
   on_catch), those at or below entry_sp dropped: the unwound callee of the frame that calls
   now was called from the same stack pointer, so its return address lay where this call's
   does. */
static void traps_restore (guint64 entry_sp) {
  Thread * t = pthread_getspecific (shared.tls_key);
  if (t == NULL || t->traps > HOOK_MAX_DEPTH)
    return;
  traps_drop_below (t, entry_sp + 1);
  for (guint32 i = 0; i < t->traps; i++) {
    guint64 * slot = (guint64 *) t->trap_slot[i];
    if (*slot != t->trap_ra[i]) {
      t->trap_tramp[i] = *slot;
      *slot = t->trap_ra[i];
    }
  }
  t->unwinding = 1;
}

/* Entered from a stub in front of _Unwind_RaiseException and _Unwind_Resume (unwinding.ts)
   with their argument and where their return address lies, before they walk a frame: for
   a C++ exception or a Rust panic. Noted
   frames below that are gone (a cleanup in the caller's frame resumes the unwinding: the
   frames below it were unwound, and these very calls now use their stack), the others
   get their real return addresses back. */
void strobe_on_unwind (const guint64 * exception, guint64 entry_sp) {
  if (exception == NULL)
    return;
  guint64 cls = exception[0] & ~0xffULL;
  if (cls != GNU_CXX_CLASS && cls != CLANG_CXX_CLASS && exception[0] != RUST_CLASS)
    return; /* another language's, or a forced unwind (pthread_cancel): left as it was */
  traps_restore (entry_sp);
}

/* Rust's panic machinery is entered (std's panic_with_hook, probed: unwinding.ts) and its hook
   may print a backtrace (RUST_BACKTRACE), which stops at the first return address Frida's
   attach replaced: the real ones go back now, as for the unwinding that follows; where the
   panic is caught, on_catch puts the live frames' trampolines back. */
void strobe_on_panic (guint64 entry_sp) {
  traps_restore (entry_sp);
}

void on_catch (GumInvocationContext * ic) {
  Thread * t = pthread_getspecific (shared.tls_key);
  if (t == NULL || !t->unwinding || t->traps > HOOK_MAX_DEPTH)
    return;
  t->unwinding = 0;
  /* Live: the handler's frame and its callers, whose return addresses lie at or above the
     handler's stack pointer at the call the exception came out of — which the unwinder's
     search left in the exception (private_2); the unwound frames' lie below it. Rust's
     cleanup is called from below frames the panic unwound, whose stack it reuses, so this
     call's own stack pointer cannot tell them apart. Without it: the frames at or below
     this call's return address are the unwound ones (see strobe_on_unwind). */
  const guint64 * exception = (const guint64 *) ic->cpu_context->rdi;
  guint64 sp = ic->cpu_context->rsp;
  guint64 live_from = sp + 1;
  if (exception != NULL && exception[3] > sp)
    live_from = exception[3];
  traps_drop_below (t, live_from);
  strobe_calls_unwound_below (&hook_ctx, t, live_from);
  for (guint32 i = 0; i < t->traps; i++) {
    if (t->trap_tramp[i] != 0) {
      *(guint64 *) t->trap_slot[i] = t->trap_tramp[i];
      t->trap_tramp[i] = 0;
    }
  }
}
/* ---- end of C++ exceptions and Rust panics ---- */

void on_enter (GumInvocationContext * ic) {
  /* The System V argument registers, read straight from the saved context: calling
     gum_invocation_context_get_nth_argument() six times costs more than the rest. */
  GumCpuContext * c = ic->cpu_context;
  trap_push (c->rsp, (guint64) gum_invocation_context_get_return_address (ic));
  guint64 a[MAX_ARGS];
  a[0] = c->rdi; a[1] = c->rsi; a[2] = c->rdx; a[3] = c->rcx; a[4] = c->r8; a[5] = c->r9;
  Fn * f = GUM_IC_GET_FUNC_DATA (ic, Fn *);
  Invocation * inv = GUM_IC_GET_INVOCATION_DATA (ic, Invocation);
  inv->xmm = XMM_SAVED (c, 1);
  inv->stack = (const guint8 *) c->rsp + 8; /* past the return address */
  record_enter (f, inv, a);
}

void on_leave (GumInvocationContext * ic) {
  Fn * f = GUM_IC_GET_FUNC_DATA (ic, Fn *);
  Invocation * inv = GUM_IC_GET_INVOCATION_DATA (ic, Invocation);
  trap_pop ((guint64) inv->stack - 8);
  inv->xmm = XMM_SAVED (ic->cpu_context, 2);
  guint64 ret[2];
  ret[0] = ic->cpu_context->rax;
  ret[1] = ic->cpu_context->rdx; /* a result's second eightbyte */
  record_exit (f, inv, ret);
}

/* The replaceFast path (wrappers.ts): a per-hook wrapper passes its slot and the six integer
   argument registers; this records enter, calls the original through the trampoline
   replaceFast returned, records exit and returns the original's rax. Only for functions
   whose arguments and result all travel in integer registers (src/symbols/abi.rs). */
guint64 strobe_wrapped_call (WrapSlot * s, const guint64 * a) {
  /* Realign: GCC drops the 16-byte alignment at calls into functions of the same unit that
     do not need it (-fipa-stack-alignment), so a wrapper may be entered with rsp off by 8,
     and libc (calloc making a thread's arena: movaps) faults on that. TinyCC addresses
     locals from rbp and returns through "leave", so lowering rsp here is safe. */
  asm volatile ("andq $-16, %%rsp" : : : "memory");
  Fn * f = s->fn;
  Invocation inv;
  inv.call = 0;
  inv.xmm = NULL; /* only functions of integer registers are wrapped (abi.rs) */
  inv.stack = NULL;
  if (!s->off)
    record_enter (f, &inv, a);
  /* Read right before the call: a demotion (wrappers.ts) repoints it while every thread is
     parked outside this function, and the old trampoline is freed after. */
  Orig orig = s->orig;
  while (orig == NULL) {
    /* Not yet published: JS writes it right after replaceFast, before the patch is
       flushed, so this never spins in practice. */
    asm volatile ("pause" : : : "memory");
    orig = s->orig;
  }
  /* Nothing between the read of orig and the call: TinyCC would zero an initialized array
     with a call to memset, outside this function's code, where a parked thread holding an
     old trampoline does not count as inside it (wrappers.ts wrapperCode). */
  guint64 ret[2];
  ret[0] = orig (a[0], a[1], a[2], a[3], a[4], a[5]);
  ret[1] = 0; /* results in rax alone (abi.rs) */
  record_exit (f, &inv, ret);
  return ret[0];
}

/* The JS path's side of the shared stack: out[0] = call id (0: no thread state), out[1] =
   parent call id (0: none), out[2] = tid. In: out[0] = the call's stack pointer at entry
   (0: not known), out[1] = the function's id. */
void strobe_js_enter (guint64 * out) {
  guint64 sp = out[0];
  guint32 fn = (guint32) out[1];
  Thread * t = thread_state ();
  if (t == NULL) {
    out[0] = 0; out[1] = 0; out[2] = 0;
    return;
  }
  /* The JS hook noted its frame first (hooks.ts trapEnter), as on_enter does. */
  int sibling = sp != 0 && call_is_sibling (t, sp);
  out[0] = strobe_call_push (&hook_ctx, t, &out[1], sp, fn, shared.use_tsc ? rdtsc_ () : now_ns (), sibling);
  out[2] = t->tid;
}

void strobe_js_leave (guint64 call) {
  Thread * t = thread_state ();
  if (t != NULL && call != 0)
    strobe_call_pop (&hook_ctx, t, call);
}

/* Words a record uses: an enter's arguments, two for the others. */
static guint32 words_of (const Rec * r) {
  guint32 n = (r->kind == 0 || r->kind == KIND_TYPED_ENTER) ? r->nargs : r->kind == KIND_TYPED_EXIT ? 3 : 2;
  return n > MAX_ARGS ? MAX_ARGS : n;
}

/* Copy up to max committed records into out, oldest first, each cut after the words it
   uses (WIRE_HEADER bytes + 8 per word: the rec-v2 wire format); frees their slots.
   *bytes receives the length written. A typed record (capture_c.ts) takes several slots
   and carries its payload; max counts slots (out has room for CAP_MAX_SLOTS more). */
guint32 strobe_drain (guint8 * out, guint32 max, guint32 * bytes) {
  guint32 tl = shared.tail;
  guint32 n = 0;
  guint32 used = 0;
  guint32 pos = 0;
  while (used < max) {
    Rec * r = &shared.ring[tl & shared.mask];
    if (r->seq != tl + 1)
      break;
    guint32 typed = r->kind == KIND_TYPED_ENTER || r->kind == KIND_TYPED_EXIT;
    guint32 k = typed ? cap_slots_at (tl) : 1;
    if (typed && used + k > max && n > 0)
      break;
    guint32 len = WIRE_HEADER + 8 * words_of (r);
    memcpy (out + pos, r, len);
    if (shared.use_tsc) { /* the hooks' times are ticks (fast_hook.c hook_now) */
      guint64 ts = ticks_ns (r->ts);
      memcpy (out + pos + 32, &ts, 8);
      if (r->kind == 1 || r->kind == KIND_TYPED_EXIT || r->kind == KIND_TYPED_EXIT_BARE || r->kind == KIND_UNWOUND) { /* an exit: v[1] is its duration */
        guint64 d = ts - ticks_ns (r->ts - r->v[1]);
        memcpy (out + pos + 48, &d, 8);
      }
    }
    pos += len;
    if (typed)
      pos += cap_take (out + pos, tl, k);
    n++;
    used += k;
    tl += k;
  }
  asm volatile ("" : : : "memory");
  shared.tail = tl;
  *bytes = pos;
  return n;
}
`;
