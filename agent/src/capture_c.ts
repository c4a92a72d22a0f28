// C source of typed capture (issue 18 item 1), compiled into the fast path's CModule
// (spliced into FASTPATH_C, fastpath_c.ts): a hook whose function has a capture plan
// (src/engine/capture_plan.rs; its Fn block carries the plan right after the Fn struct)
// copies the pointees the JavaScript serializer would read into its record, natively.
//
// Plan (built by capture.ts): a header {u32 n_enter, n_exit, n_progs, n_edges}, then the
// roots {u32 reg, kind, prog, pad} (enter roots, then exit roots: reg 0 is rax), the
// programs {u32 key, depth, size, first edge, n edges, pad} and the edges {u32 off, count,
// stride, kind, child, pad}. A program says what to do with a struct of one type (key)
// reached with `depth` left: copy `size` bytes and follow its pointer edges (`count`
// pointers `stride` apart from `off`; kind 0: a struct, run program `child`; kind 1: a C
// string, up to 1,025 bytes, stopping at NUL).
//
// The walk (cap_run) is depth-first with an explicit stack; a hash table keyed by (address,
// type) skips a pointee already visited with as much depth left (cycles and shared
// pointees cost one copy), and a revisit with more depth reuses the bytes when they reach
// far enough. A pointer that is null or implausible (below 64 KiB or not a user-space
// address) is skipped: the daemon prints what the serializer would for it (null, or
// <unreadable …>). The bytes one call copies are bounded (CAP_BUDGET), as are the
// pointees it visits (CAP_VISITS) and the stack (CAP_STACK): what does not fit is left
// out, and the daemon prints <unreadable …> for it — never a wrong value. Each copy goes
// into the payload as u64 address | u32 meta | bytes (meta: struct: bytes copied; C
// string: length scanned, bit 30 set, bit 31 when a NUL ended it; min(length, 1024)
// bytes follow).
//
// Reads never fault the target: strobe_safe_copy (capture.ts) is a `rep movsb` whose fault
// the agent's exception hook turns into a return of the bytes not copied. A fault is costly
// (a signal and Frida's JavaScript exception dispatch, ~100 µs), and SQLite's unions alone
// make a few per call (an integer member read as a pointer), so a read touching a page not
// known readable goes through process_vm_readv on the process itself instead (~1 µs, EFAULT
// instead of a signal); the pages it read are remembered per thread (CAP_PAGES), and reads
// within them take the `rep movsb`. A remembered page unmapped since still only faults. A
// page process_vm_readv could not read is remembered as unreadable for CAP_BAD_NS (10 ms):
// the same garbage pointer in the next calls costs nothing, and memory mapped at that
// address within those 10 ms reads as <unreadable …> until then (never as a wrong value).
//
// Ring: a typed record takes k consecutive slots with one reservation: the header slot
// (kind 3 enter / 4 exit, laid out like the others) then u32 payload length and the payload
// across the next slots. strobe_drain sends header, words, u32 length, payload ("rec-v2").

/** Where a hook's Fn block (fastpath.ts) holds its plan pointer: after the Fn struct. */
export const FN_PLAN_OFFSET = 56;

/** Most ring slots one typed record may take (the drain's buffer keeps this much spare). */
export const CAPTURE_MAX_SLOTS = 2400;

export const CAPTURE_C = `
typedef struct { guint32 n_enter; guint32 n_exit; guint32 n_progs; guint32 n_edges; } CapPlan;
typedef struct { guint32 reg; guint32 kind; guint32 prog; guint32 pad; } CapRoot;
typedef struct { guint32 key; guint32 depth; guint32 size; guint32 first; guint32 n; guint32 pad; } CapProg;
typedef struct { guint32 off; guint32 count; guint32 stride; guint32 kind; guint32 child; guint32 pad; } CapEdge;
/* records / bytes: typed records written and their payload bytes; checked: reads that went
   through process_vm_readv (racy increments: estimates). vm_readv: 1 when process_vm_readv
   works here (capture.ts probes it; else every read takes the rep movsb). */
typedef struct { guint32 tls_key; guint32 vm_readv; guint64 records; guint64 bytes; guint64 checked; guint64 visits; guint64 pushes; } CaptureShared;
typedef struct { void * base; guint64 len; } CapIov;

extern CaptureShared capture;
extern guint64 strobe_safe_copy (void * dst, const void * src, guint64 n);
extern void * memchr (const void * p, int c, unsigned long n);

/* Bytes of blocks one call may copy (capture_plan.rs documents it: beyond, <unreadable>). */
#define CAP_BUDGET (200 * 1024)
#define CAP_STRING 1024
#define CAP_TABLE 2048            /* (address, type) slots, a power of two */
#define CAP_VISITS 1536           /* distinct pointees per call: keeps the table sparse */
#define CAP_STACK 2048
#define CAP_KEY_CSTRING 0xffffffffu
#define CAP_PAGES_BITS 10
#define CAP_PAGES (1 << CAP_PAGES_BITS) /* pages known readable, by hashed page number */
#define CAP_BAD_BITS 8
#define CAP_BAD_PAGES (1 << CAP_BAD_BITS) /* pages found unreadable, and when */
#define CAP_BAD_NS 10000000ULL
#define SYS_PROCESS_VM_READV 310
#define CAP_IOV 24                /* pages one checked read spans at most (64 KiB structs: 17) */
#define SYS_GETPID_ 39
#define CAP_MAX_SLOTS ${CAPTURE_MAX_SLOTS}
#define META_CSTRING (1u << 30)
#define META_TERMINATED (1u << 31)
#define KIND_TYPED_ENTER 3
#define KIND_TYPED_EXIT 4
#define FN_PLAN(f) (*(CapPlan * volatile *) ((guint8 *) (f) + ${FN_PLAN_OFFSET}))
typedef char fn_struct_ends_before_the_plan[sizeof (Fn) <= ${FN_PLAN_OFFSET} ? 1 : -1];

/* A pointee visited this call (gen == the call's generation): the depth it was walked
   with, the size asked for, and where its copy went (len 0: nothing could be read). */
typedef struct { guint64 addr; guint8 * data; guint32 key; guint32 gen; guint32 depth; guint32 want; guint32 len; guint32 pad; } CapSeen;
typedef struct { guint64 p; guint32 kind; guint32 prog; } CapTodo;

/* Per thread: the visit table, the walk's stack and the payload being built (u32 length first). */
typedef struct {
  guint32 gen;
  guint32 visits;
  guint64 now;                    /* ns at the start of this walk */
  guint64 pages[CAP_PAGES];       /* page number + 1 of a page read without a fault */
  guint64 bad[CAP_BAD_PAGES];     /* page number + 1 of a page process_vm_readv refused */
  guint64 bad_at[CAP_BAD_PAGES];
  CapSeen seen[CAP_TABLE];
  CapTodo todo[CAP_STACK];
  guint8 buf[4 + CAP_BUDGET + CAP_STRING + 64];
} CapScratch;

static CapScratch * cap_scratch (void) {
  CapScratch * s = pthread_getspecific (capture.tls_key);
  if (s == NULL) {
    s = calloc (1, sizeof (CapScratch));
    if (s == NULL)
      return NULL;
    pthread_setspecific (capture.tls_key, s);
  }
  return s;
}

static inline int cap_plausible (guint64 p) {
  return p >= 0x10000 && p < 0x800000000000ULL;
}

/* A page's slot in a table of 2^bits: hashed, as garbage pointers differ in high bits. */
static inline guint32 cap_page_slot (guint64 page, guint32 bits) {
  return (guint32) ((page * 0x9e3779b97f4a7c15ULL) >> (64 - bits));
}

static inline int cap_page_known (CapScratch * s, guint64 page) {
  return s->pages[cap_page_slot (page, CAP_PAGES_BITS)] == page + 1;
}

/* Copy n (> 0) bytes from src to dst without faulting; returns the bytes copied (a read
   stops at the first page that cannot be read). */
static guint32 cap_copy (CapScratch * s, guint8 * dst, guint64 src, guint32 n) {
  guint64 first = src >> 12, last = (src + n - 1) >> 12, pg;
  int known = 1;
  for (pg = first; pg <= last && known; pg++)
    known = cap_page_known (s, pg);
  if (known || !capture.vm_readv)
    return n - (guint32) strobe_safe_copy (dst, (const void *) src, n);
  guint32 b = cap_page_slot (first, CAP_BAD_BITS);
  if (s->bad[b] == first + 1 && s->now - s->bad_at[b] < CAP_BAD_NS)
    return 0;
  capture.checked++;
  /* One remote element per page: a partial read stops at an element boundary (man
     process_vm_readv), so what precedes an unreadable page is still copied. */
  CapIov local, remote[CAP_IOV];
  long nr = 0;
  guint64 at = src, end = src + n;
  while (at < end && nr < CAP_IOV) {
    guint64 stop = ((at >> 12) + 1) << 12;
    if (stop > end)
      stop = end;
    remote[nr].base = (void *) at;
    remote[nr].len = stop - at;
    nr++;
    at = stop;
  }
  local.base = dst; local.len = at - src;
  long got = syscall (SYS_PROCESS_VM_READV, syscall (SYS_GETPID_), &local, 1L, remote, nr, 0L);
  if (got <= 0) {
    s->bad[b] = first + 1;
    s->bad_at[b] = s->now;
    return 0;
  }
  if (got > n)
    got = n;
  /* Every page a byte was read from is readable (protection is per page). */
  for (pg = first; pg <= ((src + (guint64) got - 1) >> 12); pg++)
    s->pages[cap_page_slot (pg, CAP_PAGES_BITS)] = pg + 1;
  return (guint32) got;
}

/* The table slot of (p, key) this call; *fresh when it was not there. NULL: table full. */
static CapSeen * cap_seen (CapScratch * s, guint64 p, guint32 key, int * fresh) {
  guint32 h = (guint32) (((p >> 3) ^ (p >> 17) ^ ((guint64) key * 0x9e3779b9u)) * 0x9e3779b1u) & (CAP_TABLE - 1);
  for (;;) {
    CapSeen * e = &s->seen[h];
    if (e->gen != s->gen) {
      if (s->visits >= CAP_VISITS)
        return NULL;
      s->visits++;
      e->gen = s->gen; e->addr = p; e->key = key;
      e->depth = 0; e->want = 0; e->len = 0; e->data = NULL;
      *fresh = 1;
      return e;
    }
    if (e->addr == p && e->key == key) {
      *fresh = 0;
      return e;
    }
    h = (h + 1) & (CAP_TABLE - 1);
  }
}

/* A C string at p into out + pos (header included); returns the bytes used (0: none). */
static guint32 cap_string (CapScratch * s, guint8 * h, guint64 p) {
  guint8 * d = h + 12;
  guint32 got = 0, term = 0;
  while (got <= CAP_STRING) {
    guint64 at = p + got;
    /* Up to the end of the page (readable as a whole, or not at all), then memchr: one
       copy for most strings instead of a byte loop per 64 bytes. */
    guint32 chunk = 4096 - (guint32) (at & 4095);
    if (chunk > CAP_STRING + 1 - got)
      chunk = CAP_STRING + 1 - got;
    guint32 c = cap_copy (s, d + got, at, chunk);
    guint8 * z = c > 0 ? memchr (d + got, 0, c) : NULL;
    if (z != NULL) {
      got = (guint32) (z - d);
      term = 1;
      break;
    }
    got += c;
    if (c < chunk)
      break;
  }
  if (got == 0 && !term)
    return 0;
  guint32 meta = got | META_CSTRING | (term ? META_TERMINATED : 0);
  *(guint64 *) h = p;
  *(guint32 *) (h + 8) = meta;
  return 12 + (got > CAP_STRING ? CAP_STRING : got);
}

/* Walk the plan's enter (or exit) roots at time now (ns, read by the caller anyway); the
   payload goes to s->buf + 4. Returns its length. */
static guint32 cap_run (const CapPlan * plan, int at_exit, const guint64 * regs, CapScratch * s, guint64 now) {
  const CapRoot * roots = (const CapRoot *) (plan + 1);
  const CapProg * progs = (const CapProg *) (roots + plan->n_enter + plan->n_exit);
  const CapEdge * edges = (const CapEdge *) (progs + plan->n_progs);
  const CapRoot * r = at_exit ? roots + plan->n_enter : roots;
  guint32 nr = at_exit ? plan->n_exit : plan->n_enter;
  if (nr == 0)
    return 0;
  s->now = now;
  guint8 * out = s->buf + 4;
  guint32 pos = 0, sp = 0, i;
  if (++s->gen == 0) { /* wrapped: forget every slot once */
    for (i = 0; i < CAP_TABLE; i++)
      s->seen[i].gen = 0;
    s->gen = 1;
  }
  s->visits = 0;
  for (i = nr; i-- > 0;) {
    s->todo[sp].p = regs[r[i].reg]; s->todo[sp].kind = r[i].kind; s->todo[sp].prog = r[i].prog;
    sp++;
  }
  while (sp > 0) {
    --sp;
    guint64 tp = s->todo[sp].p;
    guint32 tkind = s->todo[sp].kind, tprog = s->todo[sp].prog;
    int fresh;
    if (!cap_plausible (tp))
      continue;
    guint8 * h = out + pos;
    if (tkind != 0) {
      CapSeen * e = cap_seen (s, tp, CAP_KEY_CSTRING, &fresh);
      if (e == NULL || !fresh || pos + 12 + CAP_STRING > CAP_BUDGET)
        continue;
      pos += cap_string (s, h, tp);
      continue;
    }
    if (tprog >= plan->n_progs)
      continue;
    const CapProg * g = &progs[tprog];
    CapSeen * e = cap_seen (s, tp, g->key, &fresh);
    if (e == NULL || (!fresh && e->depth >= g->depth))
      continue;
    if (e->want < g->size) {
      if (pos + 12 + g->size > CAP_BUDGET)
        continue; /* over the budget: left out (a later, smaller need may still fit) */
      guint32 got = g->size > 0 ? cap_copy (s, h + 12, tp, g->size) : 0;
      e->want = g->size;
      if (got > 0) {
        *(guint64 *) h = tp; /* x86-64: unaligned stores are fine (TinyCC calls memcpy) */
        *(guint32 *) (h + 8) = got;
        e->data = h + 12;
        e->len = got;
        pos += 12 + got;
      }
    }
    e->depth = g->depth;
    /* Children pushed last-edge first: popped in field order. */
    guint32 k = g->n;
    while (k-- > 0) {
      const CapEdge * ed = &edges[g->first + k];
      guint32 c = ed->count;
      while (c-- > 0) {
        guint32 off = ed->off + c * ed->stride;
        guint64 p;
        if (off + 8 > e->len || sp >= CAP_STACK)
          continue;
        p = *(const guint64 *) (e->data + off);
        if (p == 0)
          continue;
        s->todo[sp].p = p; s->todo[sp].kind = ed->kind; s->todo[sp].prog = ed->child;
        sp++;
        capture.pushes++;
      }
    }
  }
  capture.visits += s->visits;
  return pos;
}

/* k consecutive slots with one CAS, or NULL (counted as lost) when they do not fit. */
static Rec * reserve_n (guint32 k, guint32 * pos) {
  for (;;) {
    guint32 h = shared.head;
    guint32 tl = shared.tail;
    if (k > CAP_MAX_SLOTS || h - tl + k > shared.mask + 1) {
      xadd64 (&shared.lost, 1);
      return NULL;
    }
    if (cas32 (&shared.head, h, h + k)) {
      *pos = h;
      return &shared.ring[h & shared.mask];
    }
  }
}

/* The payload (length prefix included) into the slots after the header slot at pos. */
static void cap_put (guint32 pos, const guint8 * src, guint32 len) {
  guint32 slot = pos + 1;
  while (len > 0) {
    guint32 c = len < sizeof (Rec) ? len : sizeof (Rec);
    memcpy (&shared.ring[slot & shared.mask], src, c);
    src += c;
    len -= c;
    slot++;
  }
}

static inline guint32 cap_slots_for (guint32 len) {
  return 1 + (4 + len + sizeof (Rec) - 1) / sizeof (Rec);
}

/* Typed enter: record_enter's record, with the plan's copies. */
static void capture_enter (Fn * f, Thread * t, Invocation * inv, const guint64 * a) {
  guint64 t0 = now_ns ();
  CapPlan * plan = FN_PLAN (f);
  CapScratch * s = cap_scratch ();
  guint32 len = s != NULL ? cap_run (plan, 0, a, s, t0) : 0;
  guint32 pos;
  Rec * r = s != NULL ? reserve_n (cap_slots_for (len), &pos) : NULL;
  guint64 ts = now_ns ();
  inv->ts = ts;
  f->hook_ns += ts - t0; /* cost sampling (fastpath_c.ts check_rate); racy: an estimate */
  if (r == NULL) {
    if (s == NULL)
      xadd64 (&shared.lost, 1);
    return;
  }
  memcpy (s->buf, &len, 4);
  cap_put (pos, s->buf, 4 + len);
  capture.records++;
  capture.bytes += len;
  r->kind = KIND_TYPED_ENTER; r->flags = inv->flags; r->nargs = f->nargs; r->pad = 0;
  r->fn = f->id; r->tid = t->tid; r->call = inv->call; r->parent = inv->parent; r->ts = ts;
  r->v[0] = a[0]; r->v[1] = a[1]; r->v[2] = a[2];
  r->v[3] = a[3]; r->v[4] = a[4]; r->v[5] = a[5];
  commit (r, pos);
}

/* Typed exit: the return value read with the plan's exit ops (pointees of rax). */
static void capture_exit_record (Fn * f, Thread * t, Invocation * inv, guint64 ret, guint64 ts);

static void capture_exit (Fn * f, Thread * t, Invocation * inv, guint64 ret, guint64 ts) {
  capture_exit_record (f, t, inv, ret, ts);
  f->hook_ns += now_ns () - ts; /* cost sampling, as at enter */
}

static void capture_exit_record (Fn * f, Thread * t, Invocation * inv, guint64 ret, guint64 ts) {
  CapPlan * plan = FN_PLAN (f);
  CapScratch * s = cap_scratch ();
  if (s == NULL) {
    xadd64 (&shared.lost, 1);
    return;
  }
  guint32 len = cap_run (plan, 1, &ret, s, ts);
  guint32 pos;
  Rec * r = reserve_n (cap_slots_for (len), &pos);
  if (r == NULL)
    return;
  memcpy (s->buf, &len, 4);
  cap_put (pos, s->buf, 4 + len);
  capture.records++;
  capture.bytes += len;
  r->kind = KIND_TYPED_EXIT; r->flags = inv->flags; r->nargs = 0; r->pad = 0;
  r->fn = f->id; r->tid = t->tid; r->call = inv->call; r->parent = inv->parent; r->ts = ts;
  r->v[0] = ret;
  r->v[1] = ts - inv->ts;
  commit (r, pos);
}

/* Drain side: slots of the typed record at tail position tl. */
static guint32 cap_slots_at (guint32 tl) {
  guint32 len;
  memcpy (&len, &shared.ring[(tl + 1) & shared.mask], 4);
  return cap_slots_for (len);
}

/* Copy the length and payload of the typed record at tl (k slots) to dst; clear the commit
   words its payload overwrote, so a stale byte pattern never passes for a committed record.
   Returns the bytes written. */
static guint32 cap_take (guint8 * dst, guint32 tl, guint32 k) {
  guint32 len;
  memcpy (&len, &shared.ring[(tl + 1) & shared.mask], 4);
  guint32 total = 4 + len, done = 0, slot = tl + 1;
  while (done < total) {
    guint32 c = total - done < sizeof (Rec) ? total - done : sizeof (Rec);
    memcpy (dst + done, &shared.ring[slot & shared.mask], c);
    done += c;
    slot++;
  }
  for (slot = tl + 1; slot < tl + k; slot++)
    shared.ring[slot & shared.mask].seq = 0;
  return total;
}
`;
