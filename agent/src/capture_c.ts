// C source of typed capture (issue 18 item 1), compiled into the fast path's CModule
// (spliced into FASTPATH_C, fastpath_c.ts): a hook whose function has a capture plan
// (src/engine/capture_plan.rs; its Fn block carries the plan right after the Fn struct)
// copies the pointees the JavaScript serializer would read into its record, natively.
//
// Plan: u32 n_enter, u32 n_exit, then ops {i32 src, u32 off, u32 size, u32 kind}: src < 0
// is register -src-1 (arguments; at exit rax), else the pointer is the 8 bytes at `off` of
// the block op `src` copied; kind 0 copies `size` bytes, kind 1 a C string (up to 1,025
// bytes, stopping at NUL). An op whose pointer is null, implausible (below 64 KiB or not a
// user-space address) or whose source block is missing is skipped: the daemon prints what
// the serializer would for it (null, or <unreadable …>). Each copy goes into the payload as
// u64 address | u32 meta | bytes (meta: struct: bytes copied; C string: length scanned,
// bit 30 set, bit 31 when a NUL ended it; min(length, 1024) bytes follow).
//
// Reads never fault the target: strobe_safe_copy (capture.ts) is a `rep movsb` whose fault
// the agent's exception hook turns into a return of the bytes not copied.
//
// Ring: a typed record takes k consecutive slots with one reservation: the header slot
// (kind 3 enter / 4 exit, laid out like the others) then u32 payload length and the payload
// across the next slots. strobe_drain sends header, words, u32 length, payload ("rec-v2").

/** Where a hook's Fn block (fastpath.ts) holds its plan pointer: after the Fn struct. */
export const FN_PLAN_OFFSET = 48;

/** Most ring slots one typed record may take (the drain's buffer keeps this much spare). */
export const CAPTURE_MAX_SLOTS = 2400;

export const CAPTURE_C = `
typedef struct { gint32 src; guint32 off; guint32 size; guint32 kind; } CapOp;
typedef struct { guint32 n_enter; guint32 n_exit; CapOp ops[1]; } CapPlan;
typedef struct { guint32 tls_key; guint32 pad; volatile guint64 faults; } CaptureShared;

extern CaptureShared capture;
extern guint64 strobe_safe_copy (void * dst, const void * src, guint64 n);

#define CAP_SCRATCH (200 * 1024)
#define CAP_MAX_OPS 1024
#define CAP_STRING 1024
#define CAP_MAX_SLOTS ${CAPTURE_MAX_SLOTS}
#define META_CSTRING (1u << 30)
#define META_TERMINATED (1u << 31)
#define KIND_TYPED_ENTER 3
#define KIND_TYPED_EXIT 4
#define FN_PLAN(f) (*(CapPlan * volatile *) ((guint8 *) (f) + ${FN_PLAN_OFFSET}))
typedef char fn_struct_ends_before_the_plan[sizeof (Fn) <= ${FN_PLAN_OFFSET} ? 1 : -1];

/* Per thread: where each op's block went, and the payload being built (u32 length first). */
typedef struct {
  guint64 addr[CAP_MAX_OPS];
  guint8 * data[CAP_MAX_OPS];
  guint32 len[CAP_MAX_OPS];
  guint8 buf[4 + CAP_SCRATCH + 2048];
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

/* Run n ops; the payload goes to s->buf + 4. Returns its length. */
static guint32 cap_run (const CapOp * ops, guint32 n, const guint64 * regs, CapScratch * s) {
  guint8 * out = s->buf + 4;
  guint32 pos = 0;
  guint32 i;
  if (n > CAP_MAX_OPS)
    n = CAP_MAX_OPS;
  for (i = 0; i < n; i++) {
    const CapOp * op = &ops[i];
    guint64 p;
    s->data[i] = NULL;
    s->len[i] = 0;
    if (op->src < 0) {
      p = regs[-op->src - 1];
    } else {
      guint32 b = (guint32) op->src;
      if (b >= i || s->data[b] == NULL || s->len[b] < op->off + 8)
        continue;
      memcpy (&p, s->data[b] + op->off, 8);
    }
    if (!cap_plausible (p))
      continue;
    s->addr[i] = p;
    guint8 * h = out + pos;
    if (op->kind == 0) {
      guint32 j;
      for (j = 0; j < i; j++)
        if (s->data[j] != NULL && s->addr[j] == p && ops[j].kind == 0 && s->len[j] >= op->size)
          break;
      if (j < i) {
        s->data[i] = s->data[j];
        s->len[i] = s->len[j];
        continue;
      }
      if (pos + 12 + op->size > CAP_SCRATCH)
        continue;
      guint32 got = op->size - (guint32) strobe_safe_copy (h + 12, (const void *) p, op->size);
      if (got == 0)
        continue;
      memcpy (h, &p, 8);
      memcpy (h + 8, &got, 4);
      s->data[i] = h + 12;
      s->len[i] = got;
      pos += 12 + got;
    } else {
      if (pos + 12 + CAP_STRING + 64 > CAP_SCRATCH + 2048)
        continue;
      guint8 * d = h + 12;
      guint32 got = 0, term = 0;
      while (got <= CAP_STRING) {
        guint64 at = p + got;
        guint32 chunk = 64 - (guint32) (at & 63); /* aligned chunks never cross a page */
        if (chunk > CAP_STRING + 1 - got)
          chunk = CAP_STRING + 1 - got;
        guint32 c = chunk - (guint32) strobe_safe_copy (d + got, (const void *) at, chunk);
        guint32 k;
        for (k = 0; k < c; k++)
          if (d[got + k] == 0)
            break;
        if (k < c) {
          got += k;
          term = 1;
          break;
        }
        got += c;
        if (c < chunk)
          break;
      }
      if (got == 0 && !term)
        continue;
      guint32 meta = got | META_CSTRING | (term ? META_TERMINATED : 0);
      memcpy (h, &p, 8);
      memcpy (h + 8, &meta, 4);
      pos += 12 + (got > CAP_STRING ? CAP_STRING : got);
    }
  }
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
  CapPlan * plan = FN_PLAN (f);
  CapScratch * s = cap_scratch ();
  guint32 len = s != NULL ? cap_run (plan->ops, plan->n_enter, a, s) : 0;
  guint32 pos;
  Rec * r = s != NULL ? reserve_n (cap_slots_for (len), &pos) : NULL;
  guint64 ts = now_ns ();
  inv->ts = ts;
  if (r == NULL) {
    if (s == NULL)
      xadd64 (&shared.lost, 1);
    return;
  }
  memcpy (s->buf, &len, 4);
  cap_put (pos, s->buf, 4 + len);
  r->kind = KIND_TYPED_ENTER; r->flags = inv->flags; r->nargs = f->nargs; r->pad = 0;
  r->fn = f->id; r->tid = t->tid; r->call = inv->call; r->parent = inv->parent; r->ts = ts;
  r->v[0] = a[0]; r->v[1] = a[1]; r->v[2] = a[2];
  r->v[3] = a[3]; r->v[4] = a[4]; r->v[5] = a[5];
  commit (r, pos);
}

/* Typed exit: the return value read with the plan's exit ops (pointees of rax). */
static void capture_exit (Fn * f, Thread * t, Invocation * inv, guint64 ret, guint64 ts) {
  CapPlan * plan = FN_PLAN (f);
  CapScratch * s = cap_scratch ();
  if (s == NULL) {
    xadd64 (&shared.lost, 1);
    return;
  }
  guint32 len = cap_run (plan->ops + plan->n_enter, plan->n_exit, &ret, s);
  guint32 pos;
  Rec * r = reserve_n (cap_slots_for (len), &pos);
  if (r == NULL)
    return;
  memcpy (s->buf, &len, 4);
  cap_put (pos, s->buf, 4 + len);
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
