/* Typed capture's walk (issue 18 item 1), compiled ahead of time by build.rs with the
 * system C compiler at -O2 into position-independent machine code that the agent copies
 * into the target (capture.ts): TinyCC, which compiles the rest of the fast path in the
 * target, spills every value to the stack, and the walk is where a typed call spends its
 * time (the SQLite bench: about 2x faster this way, docs/performance.md).
 *
 * Freestanding: no libc, no globals, no relocations (build.rs checks): the system calls
 * are inline, the fault-safe copy is assembly below, and everything mutable lives in the
 * caller's per-thread scratch or in the shared counters it passes.
 *
 * Plan layout and payload format: capture_c.ts (the TinyCC side) documents both; this file
 * is the walk it calls, cap_run there before.
 */

typedef unsigned char u8;
typedef unsigned int u32;
typedef unsigned long u64;

typedef struct { u32 n_enter; u32 n_exit; u32 n_progs; u32 n_edges; } CapPlan;
typedef struct { u32 reg; u32 kind; u32 prog; u32 pad; } CapRoot;
typedef struct { u32 key; u32 depth; u32 size; u32 first; u32 n; u32 pad; } CapProg;
typedef struct { u32 off; u32 count; u32 stride; u32 kind; u32 child; u32 pad; } CapEdge;
/* capture_c.ts CaptureShared (the counters are racy increments: estimates). */
typedef struct { u32 tls_key; u32 vm_readv; u64 records; u64 bytes; u64 checked; u64 visits; u64 pushes; u64 scratch_size; } CaptureShared;

#define CAP_BUDGET (200 * 1024)
#define CAP_STRING 1024
#define CAP_TABLE 2048            /* (address, type) slots, a power of two */
#define CAP_SMALL 256             /* the table a walk starts with: stays in L1 */
#define CAP_VISITS 1536           /* distinct pointees per call: keeps the table sparse */
#define CAP_STACK 2048
#define CAP_KEY_CSTRING 0xffffffffu
#define CAP_SETS_BITS 8           /* pages known readable: 256 sets of 4, by hashed page number */
#define CAP_WAYS 4
#define CAP_PAGES ((1 << CAP_SETS_BITS) * CAP_WAYS)
#define CAP_BAD_BITS 8
#define CAP_BAD_PAGES (1 << CAP_BAD_BITS) /* pages found unreadable, and when */
#define CAP_BAD_TICKS (1UL << 25) /* time stamp counter ticks: ~10 ms at 3.3 GHz */
#define CAP_IOV 24                /* pages one checked read spans at most (64 KiB structs: 17) */
#define SYS_PROCESS_VM_READV 310
#define SYS_GETPID 39
#define META_CSTRING (1u << 30)
#define META_TERMINATED (1u << 31)

/* The visit tables: address and type first, 16 bytes, so probing touches one line in four;
   what a hit needs is in CapSeenData at the same index. A walk starts with the small table
   (most visit a few dozen pointees) and moves to the big one at half its size. */
typedef struct { u64 addr; u32 key; u32 gen; } CapSeen;
typedef struct { u8 * data; u32 depth; u32 want; u32 len; u32 pad; } CapSeenData;
typedef struct { u64 p; u32 kind; u32 prog; } CapTodo;

/* Per thread (allocated zeroed by the TinyCC side, scratch_size bytes). The payload buffer
   comes first: the caller finds it at the scratch's address (u32 length, then the walk's
   bytes). */
typedef struct {
  u8 buf[4 + CAP_BUDGET + CAP_STRING + 64];
  u32 gen;
  u32 visits;
  u32 big;                        /* this walk uses the big table */
  u32 pad;
  /* Page number + 1 of pages read without a fault, 4 ways a set: with one slot per hash, two
     hot pages sharing it evicted each other and every read of either became a system call
     (17,000 per SQLite bench run in some address layouts, none in others). */
  u64 pages[CAP_PAGES];
  u8 next_way[1 << CAP_SETS_BITS]; /* round-robin replacement */
  u64 bad[CAP_BAD_PAGES];         /* page number + 1 of a page process_vm_readv refused */
  u64 bad_at[CAP_BAD_PAGES];      /* time stamp counter when refused */
  CapSeen small[CAP_SMALL];
  CapSeenData small_data[CAP_SMALL];
  CapSeen seen[CAP_TABLE];
  CapSeenData seen_data[CAP_TABLE];
  CapTodo todo[CAP_STACK];
} CapScratch;

const u64 strobe_cap_scratch_size = sizeof (CapScratch);

/* u64 strobe_safe_copy (dst, src, n) (System V: rdi, rsi, rdx): returns the bytes NOT
   copied. 32 bytes a step (two unaligned SSE loads, then the stores), then 8, then 1: a
   short `rep movsb` costs tens of ns to start, and a call copies ~25 small pointees. The
   registers are exact at every load (loads precede the stores and the pointer updates), so
   the agent's exception hook (capture.ts) resumes a fault: one in the wide steps at
   strobe_sc_slow (a `rep movsb` of what is left, byte-exact up to the unreadable page),
   one there at strobe_sc_rest (returns rcx), one in the byte step at strobe_sc_left
   (returns rdx). The fault points are strobe_sc_fault_*. */
__asm__ (
  ".text\n"
  ".globl strobe_safe_copy, strobe_sc_fault_w0, strobe_sc_fault_w1, strobe_sc_fault_q, strobe_sc_fault_b, strobe_sc_fault_rep, strobe_sc_slow, strobe_sc_rest, strobe_sc_left\n"
  "strobe_safe_copy:\n"
  "  cmp $32, %rdx\n"
  "  jb 2f\n"
  "1:\n"
  "strobe_sc_fault_w0:\n"
  "  movdqu (%rsi), %xmm0\n"
  "strobe_sc_fault_w1:\n"
  "  movdqu 16(%rsi), %xmm1\n"
  "  movdqu %xmm0, (%rdi)\n"
  "  movdqu %xmm1, 16(%rdi)\n"
  "  add $32, %rsi\n"
  "  add $32, %rdi\n"
  "  sub $32, %rdx\n"
  "  cmp $32, %rdx\n"
  "  jae 1b\n"
  "2:\n"
  "  cmp $8, %rdx\n"
  "  jb 3f\n"
  "strobe_sc_fault_q:\n"
  "  mov (%rsi), %rax\n"
  "  mov %rax, (%rdi)\n"
  "  add $8, %rsi\n"
  "  add $8, %rdi\n"
  "  sub $8, %rdx\n"
  "  jmp 2b\n"
  "3:\n"
  "  test %rdx, %rdx\n"
  "  jz 4f\n"
  "strobe_sc_fault_b:\n"
  "  movb (%rsi), %al\n"
  "  movb %al, (%rdi)\n"
  "  inc %rsi\n"
  "  inc %rdi\n"
  "  dec %rdx\n"
  "  jmp 3b\n"
  "4:\n"
  "  xor %eax, %eax\n"
  "  ret\n"
  "strobe_sc_left:\n"
  "  mov %rdx, %rax\n"
  "  ret\n"
  "strobe_sc_slow:\n"
  "  mov %rdx, %rcx\n"
  "strobe_sc_fault_rep:\n"
  "  rep movsb\n"
  "  xor %eax, %eax\n"
  "  ret\n"
  "strobe_sc_rest:\n"
  "  mov %rcx, %rax\n"
  "  ret\n");

extern u64 strobe_safe_copy (void * dst, const void * src, u64 n);

static inline long sys6 (long n, long a, long b, long c, long d, long e, long f) {
  long ret;
  register long r10 __asm__ ("r10") = d;
  register long r8 __asm__ ("r8") = e;
  register long r9 __asm__ ("r9") = f;
  __asm__ volatile ("syscall" : "=a" (ret) : "a" (n), "D" (a), "S" (b), "d" (c), "r" (r10), "r" (r8), "r" (r9) : "rcx", "r11", "memory");
  return ret;
}

static inline u64 cap_ticks (void) {
  u32 lo, hi;
  __asm__ volatile ("rdtsc" : "=a" (lo), "=d" (hi));
  return ((u64) hi << 32) | lo;
}

static inline int cap_plausible (u64 p) {
  return p >= 0x10000 && p < 0x800000000000UL;
}

/* A page's slot in a table of 2^bits: hashed, as garbage pointers differ in high bits. */
static inline u32 cap_page_slot (u64 page, u32 bits) {
  return (u32) ((page * 0x9e3779b97f4a7c15UL) >> (64 - bits));
}

static inline int cap_page_known (CapScratch * s, u64 page) {
  const u64 * set = &s->pages[cap_page_slot (page, CAP_SETS_BITS) * CAP_WAYS];
  return set[0] == page + 1 || set[1] == page + 1 || set[2] == page + 1 || set[3] == page + 1;
}

static void cap_page_remember (CapScratch * s, u64 page) {
  if (cap_page_known (s, page))
    return;
  u32 at = cap_page_slot (page, CAP_SETS_BITS);
  s->pages[at * CAP_WAYS + (s->next_way[at]++ & (CAP_WAYS - 1))] = page + 1;
}

typedef struct { void * base; u64 len; } CapIov;

/* Copy n (> 0) bytes from src to dst without faulting; returns the bytes copied (a read
   stops at the first page that cannot be read). A page not known readable is read with
   process_vm_readv on this process (EFAULT instead of a signal and Frida's exception
   dispatch) and remembered; one it refused is remembered for CAP_BAD_TICKS (read from the
   time stamp counter only then: a clock read costs more than the rest of a small walk). */
static u32 cap_copy (CapScratch * s, CaptureShared * cs, u8 * dst, u64 src, u32 n) {
  u64 first = src >> 12, last = (src + n - 1) >> 12, pg;
  int known = 1;
  for (pg = first; pg <= last && known; pg++)
    known = cap_page_known (s, pg);
  if (known || !cs->vm_readv)
    return n - (u32) strobe_safe_copy (dst, (const void *) src, n);
  u32 b = cap_page_slot (first, CAP_BAD_BITS);
  u64 now = cap_ticks ();
  if (s->bad[b] == first + 1 && now - s->bad_at[b] < CAP_BAD_TICKS)
    return 0;
  cs->checked++;
  /* One remote element per page: a partial read stops at an element boundary (man
     process_vm_readv), so what precedes an unreadable page is still copied. */
  CapIov local, remote[CAP_IOV];
  long nr = 0;
  u64 at = src, end = src + n;
  while (at < end && nr < CAP_IOV) {
    u64 stop = ((at >> 12) + 1) << 12;
    if (stop > end)
      stop = end;
    remote[nr].base = (void *) at;
    remote[nr].len = stop - at;
    nr++;
    at = stop;
  }
  local.base = dst;
  local.len = at - src;
  long pid = sys6 (SYS_GETPID, 0, 0, 0, 0, 0, 0);
  long got = sys6 (SYS_PROCESS_VM_READV, pid, (long) &local, 1, (long) remote, nr, 0);
  if (got <= 0) {
    s->bad[b] = first + 1;
    s->bad_at[b] = now;
    return 0;
  }
  if ((u64) got > n)
    got = n;
  /* Every page a byte was read from is readable (protection is per page). */
  for (pg = first; pg <= ((src + (u64) got - 1) >> 12); pg++)
    cap_page_remember (s, pg);
  return (u32) got;
}

static inline u32 cap_hash (u64 p, u32 key) {
  return (u32) (((p >> 3) ^ (p >> 17) ^ ((u64) key * 0x9e3779b9u)) * 0x9e3779b1u);
}

/* The small table's entries of this walk into the big one, which the walk uses from now on. */
static void cap_grow (CapScratch * s) {
  for (u32 i = 0; i < CAP_SMALL; i++) {
    if (s->small[i].gen != s->gen)
      continue;
    u32 h = cap_hash (s->small[i].addr, s->small[i].key) & (CAP_TABLE - 1);
    while (s->seen[h].gen == s->gen)
      h = (h + 1) & (CAP_TABLE - 1);
    s->seen[h] = s->small[i];
    s->seen_data[h] = s->small_data[i];
  }
  s->big = 1;
}

/* The entry of (p, key) this walk; *fresh when it was not there. NULL: no room. */
static CapSeenData * cap_seen (CapScratch * s, u64 p, u32 key, int * fresh) {
  if (!s->big && s->visits >= CAP_SMALL / 2)
    cap_grow (s);
  CapSeen * table = s->big ? s->seen : s->small;
  CapSeenData * data = s->big ? s->seen_data : s->small_data;
  u32 mask = s->big ? CAP_TABLE - 1 : CAP_SMALL - 1;
  u32 h = cap_hash (p, key) & mask;
  for (;;) {
    CapSeen * e = &table[h];
    if (e->gen != s->gen) {
      if (s->visits >= CAP_VISITS)
        return 0;
      s->visits++;
      e->gen = s->gen;
      e->addr = p;
      e->key = key;
      CapSeenData * d = &data[h];
      d->depth = 0; d->want = 0; d->len = 0; d->data = 0;
      *fresh = 1;
      return d;
    }
    if (e->addr == p && e->key == key) {
      *fresh = 0;
      return &data[h];
    }
    h = (h + 1) & mask;
  }
}

/* The first NUL in p[0..n), or NULL: eight bytes a step (a byte is zero where its
   (v - 0x01..) has the top bit set and v's does not). */
static u8 * cap_nul (u8 * p, u32 n) {
  u32 i = 0;
  for (; i + 8 <= n; i += 8) {
    u64 v;
    __builtin_memcpy (&v, p + i, 8);
    if ((v - 0x0101010101010101UL) & ~v & 0x8080808080808080UL)
      break;
  }
  for (; i < n; i++)
    if (p[i] == 0)
      return p + i;
  return 0;
}

/* A C string at p into h (header included); returns the bytes used (0: none). Copied in
   growing chunks (64 bytes first: most strings are short), none crossing a page (readable
   as a whole or not at all), until a NUL or CAP_STRING + 1 bytes. */
static u32 cap_string (CapScratch * s, CaptureShared * cs, u8 * h, u64 p) {
  u8 * d = h + 12;
  u32 got = 0, term = 0, step = 64;
  while (got <= CAP_STRING) {
    u64 at = p + got;
    u32 chunk = 4096 - (u32) (at & 4095);
    if (chunk > step)
      chunk = step;
    if (chunk > CAP_STRING + 1 - got)
      chunk = CAP_STRING + 1 - got;
    u32 c = cap_copy (s, cs, d + got, at, chunk);
    u8 * z = c > 0 ? cap_nul (d + got, c) : 0;
    if (z != 0) {
      got = (u32) (z - d);
      term = 1;
      break;
    }
    got += c;
    if (c < chunk)
      break;
    step *= 2;
  }
  if (got == 0 && !term)
    return 0;
  u32 meta = got | META_CSTRING | (term ? META_TERMINATED : 0);
  __builtin_memcpy (h, &p, 8);
  __builtin_memcpy (h + 8, &meta, 4);
  return 12 + (got > CAP_STRING ? CAP_STRING : got);
}

/* Walk the plan's enter (or exit) roots; the payload goes to s->buf + 4.
   Returns its length. */
u32 strobe_cap_walk (const CapPlan * plan, int at_exit, const u64 * regs, CapScratch * s, CaptureShared * cs) {
  const CapRoot * roots = (const CapRoot *) (plan + 1);
  const CapProg * progs = (const CapProg *) (roots + plan->n_enter + plan->n_exit);
  const CapEdge * edges = (const CapEdge *) (progs + plan->n_progs);
  const CapRoot * r = at_exit ? roots + plan->n_enter : roots;
  u32 nr = at_exit ? plan->n_exit : plan->n_enter;
  if (nr == 0)
    return 0;
  u8 * out = s->buf + 4;
  u32 pos = 0, sp = 0, i;
  u64 pushes = 0;
  if (++s->gen == 0) { /* wrapped: forget every slot once */
    for (i = 0; i < CAP_TABLE; i++)
      s->seen[i].gen = 0;
    for (i = 0; i < CAP_SMALL; i++)
      s->small[i].gen = 0;
    s->gen = 1;
  }
  s->visits = 0;
  s->big = 0;
  for (i = nr; i-- > 0;) {
    s->todo[sp].p = regs[r[i].reg];
    s->todo[sp].kind = r[i].kind;
    s->todo[sp].prog = r[i].prog;
    sp++;
  }
  while (sp > 0) {
    --sp;
    u64 tp = s->todo[sp].p;
    u32 tkind = s->todo[sp].kind, tprog = s->todo[sp].prog;
    int fresh;
    if (!cap_plausible (tp))
      continue;
    u8 * h = out + pos;
    if (tkind != 0) {
      CapSeenData * at = cap_seen (s, tp, CAP_KEY_CSTRING, &fresh);
      if (at == 0 || !fresh || pos + 12 + CAP_STRING > CAP_BUDGET)
        continue;
      pos += cap_string (s, cs, h, tp);
      continue;
    }
    if (tprog >= plan->n_progs)
      continue;
    const CapProg * g = &progs[tprog];
    CapSeenData * e = cap_seen (s, tp, g->key, &fresh);
    if (e == 0)
      continue;
    if (!fresh && e->depth >= g->depth)
      continue;
    if (e->want < g->size) {
      if (pos + 12 + g->size > CAP_BUDGET)
        continue; /* over the budget: left out (a later, smaller need may still fit) */
      u32 got = g->size > 0 ? cap_copy (s, cs, h + 12, tp, g->size) : 0;
      e->want = g->size;
      if (got > 0) {
        __builtin_memcpy (h, &tp, 8);
        __builtin_memcpy (h + 8, &got, 4);
        e->data = h + 12;
        e->len = got;
        pos += 12 + got;
      }
    }
    e->depth = g->depth;
    /* Children pushed last-edge first: popped in field order. */
    u32 k = g->n;
    while (k-- > 0) {
      const CapEdge * ed = &edges[g->first + k];
      u32 c = ed->count;
      while (c-- > 0) {
        u32 off = ed->off + c * ed->stride;
        u64 p;
        if (off + 8 > e->len || sp >= CAP_STACK)
          continue;
        __builtin_memcpy (&p, e->data + off, 8);
        if (p == 0)
          continue;
        s->todo[sp].p = p;
        s->todo[sp].kind = ed->kind;
        s->todo[sp].prog = ed->child;
        sp++;
        pushes++;
      }
    }
  }
  cs->visits += s->visits;
  cs->pushes += pushes;
  return pos;
}
