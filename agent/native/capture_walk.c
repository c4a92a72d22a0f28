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
 * Most of a typed call's pointees are the same from one call to the next (SQLite: a row's
 * Mem or a cursor changes, the connection, schema and pager it points to do not), so the
 * walk from each pointee of an argument is remembered per thread and replayed while every
 * pointer word it read is unchanged: the same blocks copied again, fresh, in the same
 * order, without the visit table, the stack or the edges (cap_subtree, cap_replay).
 *
 * Plan layout and payload format: capture_c.ts (the TinyCC side) documents both; this file
 * is the walk it calls, cap_run there before.
 */

#include "capture_types.h"
#include "capture_read.h"

const u64 strobe_cap_scratch_size = sizeof (CapScratch);

/* n bytes from src to dst in this image (no libc): rep movsb. */
static inline void cap_move (void * dst, const void * src, u64 n) {
  __asm__ volatile ("rep movsb" : "+D" (dst), "+S" (src), "+c" (n) : : "memory");
}

/* The plan's parts. */
typedef struct {
  const CapPlan * plan;
  const CapRoot * roots;
  const CapProg * progs;
  const CapEdge * edges;
} CapParts;

/* A copy of at least size bytes at addr made earlier in this walk (a big one), or NULL. */
static inline u8 * cap_big_find (CapScratch * s, u64 addr, u32 size) {
  for (u32 i = 0; i < s->n_big; i++)
    if (s->big_copies[i].addr == addr && s->big_copies[i].size >= size)
      return s->big_copies[i].data;
  return 0;
}

static inline void cap_big_note (CapScratch * s, u64 addr, u8 * data, u32 size) {
  if (size >= CAP_BIG && s->n_big < CAP_BIG_COPIES) {
    s->big_copies[s->n_big].addr = addr;
    s->big_copies[s->n_big].data = data;
    s->big_copies[s->n_big].size = size;
    s->n_big++;
  }
}

/* Recording a sub-walk for replay: each call notes what the walk just did; anything a replay
   could not reproduce (a limit reached, a partial copy, too many steps) spoils the trace. */
static inline void cap_rec_op (CapScratch * s, u64 addr, u32 size, u32 kind) {
  CapTrace * t = s->rec;
  if (t == 0)
    return;
  if (t->n_ops >= t->max_ops) {
    s->rec_ok = 0;
    return;
  }
  t->ops[t->n_ops].addr = addr;
  t->ops[t->n_ops].size = size;
  t->ops[t->n_ops].kind = kind;
  t->n_ops++;
}

static inline void cap_rec_check (CapScratch * s, u32 op, u32 off, u64 value) {
  CapTrace * t = s->rec;
  if (t == 0)
    return;
  if (t->n_checks >= t->max_checks) {
    s->rec_ok = 0;
    return;
  }
  t->checks[t->n_checks].value = value;
  t->checks[t->n_checks].op = op;
  t->checks[t->n_checks].off = off;
  t->n_checks++;
}

/* Whether edge ed, moved d bytes on, is followed from a block copy (data, len bytes): its
   guard, if any — a Rust enum's discriminant in the same block — selects its variant
   (serialize.ts readRustEnum). The discriminant's 8-byte window is a check of the sub-walk
   being recorded (op: the block's). */
__attribute__ ((always_inline)) static inline int cap_guard_ok (CapScratch * s, const CapEdge * ed, const u8 * data, u32 len, u32 d, u32 op) {
  u32 gsize = ed->gspec & 0xff;
  if (gsize == 0)
    return 1;
  u32 goff = ed->goff + d;
  if (gsize > 8 || goff + gsize > len)
    return 0; /* not copied: the decoder prints the enum unreadable */
  if (len >= 8) {
    u32 w = goff + 8 <= len ? goff : len - 8;
    u64 win;
    __builtin_memcpy (&win, data + w, 8);
    cap_rec_check (s, op, w, win);
  } else if (s->rec != 0) {
    s->rec_ok = 0;
  }
  u64 v = 0;
  for (u32 b = 0; b < gsize; b++)
    v |= (u64) data[goff + b] << (8 * b);
  u64 lo = ((u64) ed->glo_hi << 32) | ed->glo_lo, mask = ((u64) ed->gmask_hi << 32) | ed->gmask_lo;
  int in_set = v - lo < 64 && ((mask >> (v - lo)) & 1);
  return in_set == (int) ((ed->gspec >> 8) & 1);
}

/* The todo entry edge ed (moved d bytes on) makes of the pointer word q it read from a block
   copy (data, len bytes): a Rust buffer's element count comes from the same block (a
   check of the recording); 0 when there is nothing to visit (no elements, or no length). */
__attribute__ ((always_inline)) static inline int cap_todo_of (CapScratch * s, const CapEdge * ed, const u8 * data, u32 len, u32 d, u32 op, u64 q, CapTodo * t) {
  t->p = q;
  t->kind = ed->kind;
  t->prog = ed->child;
  t->n = 0;
  t->elem = 0;
  t->aux = 0;
  if (ed->kind < CAP_KIND_LIST && ed->kind != CAP_KIND_ARRAY)
    return 1;
  u32 loff = (ed->len_off & ~CAP_LEN_END) + d;
  u64 n;
  if (loff + 8 > len)
    return 0;
  __builtin_memcpy (&n, data + loff, 8);
  cap_rec_check (s, op, loff, n);
  if (ed->kind == CAP_KIND_HASH) { /* q: its control bytes; a mask the serializer refuses: not walked */
    u32 moff = ed->aux + d;
    u64 mask;
    if (moff + 8 > len)
      return 0;
    __builtin_memcpy (&mask, data + moff, 8);
    cap_rec_check (s, op, moff, mask);
    if (mask > CAP_TABLE_MASK || n > mask + 1)
      return 0;
    t->aux = (u32) mask;
  }
  if (ed->kind == CAP_KIND_BTREE) { /* q: its root node */
    u32 hoff = ed->aux + d;
    u64 height;
    if (hoff + 8 > len)
      return 0;
    __builtin_memcpy (&height, data + hoff, 8);
    if (height > CAP_BTREE_HEIGHT)
      return 0;
    t->aux = (u32) height;
  }
  if (ed->kind != CAP_KIND_ARRAY) { /* a node container: q is its first node, or a table's control bytes */
    t->n = n < ed->max ? (u32) n : ed->max;
    t->elem = ed->elem;
    return n > 0;
  }
  if (ed->len_off & CAP_LEN_END) /* a std::vector: the past-the-end pointer */
    n = n > q && ed->elem != 0 ? (n - q) / ed->elem : 0;
  if (n == 0 || ed->elem == 0)
    return 0; /* "" or []: nothing read */
  t->n = n < ed->max ? (u32) n : ed->max;
  t->elem = ed->elem;
  return 1;
}

/* Whether todo t is text that lies inside len bytes copied from addr (a std::string's short
   buffer, in the object itself): the decoder reads it from that copy, nothing to push. */
static inline int cap_text_inside (const CapTodo * t, u64 addr, u32 len) {
  return t->kind == CAP_KIND_ARRAY && t->prog == CAP_NO_CHILD && t->p >= addr && t->p - addr <= len && (u64) t->n * t->elem <= len - (t->p - addr);
}

/* Pushes the edges of program g for the block copy at data (len bytes, copied from addr),
   from byte base on (an element of a Rust buffer), last edge first: popped in field order.
   Text that lies inside that copy (a std::string's short buffer, in the object itself) is
   not pushed: the decoder reads it from the copy. */
__attribute__ ((always_inline)) static inline u32 cap_push (CapScratch * s, const CapParts * pl, const CapProg * g, u64 addr, const u8 * data, u32 len, u32 base, u32 op, u32 sp, u64 * pushes) {
  u32 k = g->n;
  while (k-- > 0) {
    const CapEdge * ed = &pl->edges[g->first + k];
    u32 c = ed->count;
    while (c-- > 0) {
      u32 d = base + c * ed->stride, off = ed->off + d;
      u64 q;
      if (off + 8 > len)
        continue;
      if (sp >= CAP_STACK) {
        s->rec_ok = 0;
        continue;
      }
      if (!cap_guard_ok (s, ed, data, len, d, op))
        continue;
      __builtin_memcpy (&q, data + off, 8);
      cap_rec_check (s, op, off, q);
      if (q == 0)
        continue;
      if (cap_todo_of (s, ed, data, len, d, op, q, &s->todo[sp])) {
        if (cap_text_inside (&s->todo[sp], addr, len))
          continue;
        sp++;
        (*pushes)++;
      }
    }
  }
  return sp;
}

/* The size bytes at tp, which seen entry e wants more of, copied into out at *pos (header,
   then bytes): e->data and e->len say where and how many (0: unreadable), and the recording
   notes the op. 0 when over the budget: nothing copied. */
__attribute__ ((always_inline)) static inline int cap_fill (CapScratch * s, CaptureShared * cs, CapSeenData * e, u8 * out, u32 * pos, u64 tp, u32 size) {
  u8 * h = out + *pos;
  if (*pos + 12 + size > CAP_BUDGET) {
    s->rec_ok = 0;
    return 0;
  }
  u32 got = size > 0 ? cap_copy (s, cs, h + 12, tp, size) : 0;
  e->want = size;
  if (got == size || got == 0)
    cap_rec_op (s, tp, size, got == 0 ? CAP_OP_UNREADABLE : CAP_OP_STRUCT);
  else
    s->rec_ok = 0;
  if (got > 0) {
    cap_header (h, tp, got);
    e->data = h + 12;
    e->len = got;
    e->op = s->rec != 0 ? s->rec->n_ops - 1 : 0;
    if (got == size)
      cap_big_note (s, tp, h + 12, got);
    *pos += 12 + got;
  }
  return 1;
}

/* n raw bytes at addr (a hash table's control bytes, a B-tree node's child pointers) copied
   into out at *pos unless this walk has them already: where they are (in out: they stay
   there), or NULL when they could not all be read. */
static const u8 * cap_bytes (CapScratch * s, CaptureShared * cs, u8 * out, u32 * pos, u64 addr, u32 n) {
  int fresh;
  CapSeenData * e = cap_seen (s, addr, CAP_KEY_BYTES, &fresh);
  if (e == 0 || (e->want < n && !cap_fill (s, cs, e, out, pos, addr, n)) || e->len < n)
    return 0;
  return e->data;
}

/* Node tp of a container (program g: its links, then its element): copied, and its
   element's pointees pushed, when new or reached with more depth, as a struct pointee is.
   Returns its seen entry (e->data, e->len: the copy, e->len 0 when unreadable; valid until
   the next cap_seen), or NULL when it could not be copied. */
static CapSeenData * cap_node_data (CapScratch * s, CaptureShared * cs, const CapParts * pl, const CapProg * g, u8 * out, u32 * pos, u64 tp, u32 * sp, u64 * pushes) {
  int fresh;
  if (!cap_plausible (tp))
    return 0;
  CapSeenData * e = cap_seen (s, tp, g->key, &fresh);
  if (e == 0) {
    s->rec_ok = 0;
    return 0;
  }
  if (fresh || e->depth < g->depth) {
    if (e->want < g->size && !cap_fill (s, cs, e, out, pos, tp, g->size))
      return 0;
    e->depth = g->depth;
    if (g->n > 0)
      *sp = cap_push (s, pl, g, tp, e->data, e->len, 0, e->op, *sp, pushes);
  }
  return e;
}

/* cap_node_data, then, unless off is CAP_NO_WORD, the link at off read from the node's copy
   into *w (a check of the recording). 0 when the node or that link could not be read. */
static int cap_node (CapScratch * s, CaptureShared * cs, const CapParts * pl, const CapProg * g, u8 * out, u32 * pos, u64 tp, u32 off, u64 * w, u32 * sp, u64 * pushes) {
  CapSeenData * e = cap_node_data (s, cs, pl, g, out, pos, tp, sp, pushes);
  if (e == 0)
    return 0;
  if (off == CAP_NO_WORD)
    return 1;
  if (off + 8 > e->len)
    return 0;
  __builtin_memcpy (w, e->data + off, 8);
  cap_rec_check (s, e->op, off, *w);
  return 1;
}

/* A node container's first td->n nodes from td->p in the serializer's order (serialize.ts
   readNodes): a list's next links, or a red-black tree's in-order successors
   (_Rb_tree_increment: the right subtree's leftmost node, else the first ancestor reached
   from a left child). Every node whose link is read is copied, so the decoder's walk over
   the copies takes the same steps; where a link cannot be read the walk stops (the decoder
   then prints the container unreadable, as the serializer does). Returns the new pos. */
static u32 cap_nodes (CapScratch * s, CaptureShared * cs, const CapParts * pl, u8 * out, u32 pos, const CapTodo * td, u32 * sp, u64 * pushes) {
  const CapProg * g = &pl->progs[td->prog];
  u32 up = td->elem & 0xff, left = (td->elem >> 8) & 0xff, right = (td->elem >> 16) & 0xff, k;
  u64 node = td->p, w, parent;
#define CAP_NODE(p, off, into) cap_node (s, cs, pl, g, out, &pos, (p), (off), (into), sp, pushes)
  for (u32 i = 0; i < td->n && node != 0; i++) {
    if (i + 1 == td->n) {
      CAP_NODE (node, CAP_NO_WORD, &w);
      break;
    }
    if (td->kind == CAP_KIND_LIST) {
      if (!CAP_NODE (node, up, &node))
        break;
      continue;
    }
    if (!CAP_NODE (node, right, &w))
      break;
    if (w != 0) {
      for (node = w, k = 0; k < CAP_TREE_HEIGHT; k++, node = w)
        if (!CAP_NODE (node, left, &w) || w == 0)
          break;
      if (k == CAP_TREE_HEIGHT || w != 0)
        break;
      continue;
    }
    if (!CAP_NODE (node, up, &parent))
      break;
    for (k = 0; k < CAP_TREE_HEIGHT; k++) {
      if (!CAP_NODE (parent, right, &w))
        return pos;
      if (node != w)
        break;
      node = parent;
      if (!CAP_NODE (node, up, &parent))
        return pos;
    }
    if (k == CAP_TREE_HEIGHT)
      break;
    node = parent;
  }
#undef CAP_NODE
  return pos;
}

/* A Rust hash table's first td->n full slots in slot order (serialize.ts rustTable): its
   control bytes (at td->p, td->aux + 1 of them; top bit clear: full) copied 256 at a time, as
   the serializer reads them, and each full slot's element (td->elem bytes, slot i at
   ctrl - (i + 1) * elem) visited with program td->prog. A replay would not notice a changed
   control byte: a walk that scans a table is not remembered. Returns the new pos. */
static u32 cap_table (CapScratch * s, CaptureShared * cs, const CapParts * pl, u8 * out, u32 pos, const CapTodo * td, u32 * sp, u64 * pushes) {
  const CapProg * g = &pl->progs[td->prog];
  u64 ctrl = td->p, buckets = (u64) td->aux + 1, i, w;
  u32 found = 0;
  s->rec_ok = 0;
  for (i = 0; i < buckets && found < td->n; i += 256) {
    u32 n = buckets - i < 256 ? (u32) (buckets - i) : 256, j;
    const u8 * control = cap_bytes (s, cs, out, &pos, ctrl + i, n);
    if (control == 0)
      break;
    for (j = 0; j < n && found < td->n; j++)
      if ((control[j] & 0x80) == 0) {
        cap_node (s, cs, pl, g, out, &pos, ctrl - (i + j + 1) * td->elem, CAP_NO_WORD, &w, sp, pushes);
        found++;
      }
  }
  return pos;
}

/* Rust B-tree node `node` at height h (serialize.ts btreeWalk): copied with program td->prog
   (the leaf) and the pointees of each filled slot pushed (programs td->prog + 1 and + 2: a
   key slot's and a value slot's, at base + i * size), then in key order its subtrees and
   entries while fewer than td->n entries are counted in *found; an internal node's len + 1
   child pointers are copied as bytes after it. 0 where a node or its children cannot be read
   (the decoder then prints the tree unreadable, as the serializer does). Not remembered for
   replay: a node's len is no pointer word a replay checks. */
static int cap_btree (CapScratch * s, CaptureShared * cs, const CapParts * pl, const CapTodo * td, u8 * out, u32 * pos, u64 node, u32 h, u32 * found, u32 * sp, u64 * pushes) {
  u32 loff = td->elem & 0xffff, eoff = td->elem >> 16, len, i, k;
  const u8 * kids = 0;
  s->rec_ok = 0;
  if (td->prog + 2 >= pl->plan->n_progs)
    return 0;
  CapSeenData * e = cap_node_data (s, cs, pl, &pl->progs[td->prog], out, pos, node, sp, pushes);
  if (e == 0 || loff + 2 > e->len)
    return 0;
  len = e->data[loff] | (u32) e->data[loff + 1] << 8;
  for (k = 1; k <= 2; k++) { /* last slot first: popped in order (keys before values: as good) */
    const CapProg * slot = &pl->progs[td->prog + k];
    for (i = len; slot->n > 0 && i-- > 0;)
      *sp = cap_push (s, pl, slot, node, e->data, e->len, slot->base + i * slot->size, e->op, *sp, pushes);
  }
  if (h > 0 && (kids = cap_bytes (s, cs, out, pos, node + eoff, (len + 1) * 8)) == 0)
    return 0;
  for (i = 0; i <= len && *found < td->n; i++) {
    if (h > 0) {
      u64 kid;
      __builtin_memcpy (&kid, kids + 8 * i, 8);
      if (!cap_btree (s, cs, pl, td, out, pos, kid, h - 1, found, sp, pushes))
        return 0;
    }
    if (i < len && *found < td->n)
      (*found)++;
  }
  return 1;
}

/* The walk from pointee start (a struct of program prog, a C string, or a Rust buffer) into
   out from pos on; returns the new pos. Depth-first with an explicit stack; the visit table
   skips a pointee already visited with as much depth left. Records into s->rec when set.
   Inlined at both callers: as a call per sub-walk it showed in the Lua bench. */
__attribute__ ((always_inline)) static inline u32 cap_walk (CapScratch * s, CaptureShared * cs, const CapParts * pl, u8 * out, u32 pos, const CapTodo * start) {
  u32 sp = 0, i;
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
  s->todo[0] = *start;
  sp = 1;
  while (sp > 0) {
    --sp;
    CapTodo td = s->todo[sp];
    u64 tp = td.p;
    int fresh;
    if (!cap_plausible (tp))
      continue;
    u8 * h = out + pos;
    if (td.kind >= CAP_KIND_LIST) { /* a container's nodes or elements */
      u32 found = 0;
      if (td.prog >= pl->plan->n_progs)
        continue;
      CapTrace * rec = s->rec;
      if ((td.kind == CAP_KIND_LIST || td.kind == CAP_KIND_TREE) && rec != 0 && rec->max_ops == CAP_TRACE_OPS && rec->n_deferred < CAP_DEFERRED) {
        rec->deferred[rec->n_deferred++] = td; /* too big for this sub-walk's room: its own walk, after it */
        continue;
      }
      if (td.kind == CAP_KIND_BTREE)
        cap_btree (s, cs, pl, &td, out, &pos, tp, td.aux, &found, &sp, &pushes);
      else if (td.kind == CAP_KIND_HASH)
        pos = cap_table (s, cs, pl, out, pos, &td, &sp, &pushes);
      else
        pos = cap_nodes (s, cs, pl, out, pos, &td, &sp, &pushes);
      continue;
    }
    if (td.kind == CAP_KIND_CSTRING) {
      CapSeenData * at = cap_seen (s, tp, CAP_KEY_CSTRING, &fresh);
      if (at == 0 || (fresh && pos + 12 + CAP_STRING > CAP_BUDGET)) {
        s->rec_ok = 0;
        continue;
      }
      if (!fresh)
        continue;
      u32 n = cap_string (s, cs, h, tp, 64);
      cap_rec_op (s, tp, n, CAP_OP_STRING); /* size: bytes written (0: unreadable) */
      pos += n;
      continue;
    }
    /* A struct (size bytes of program g), or a Rust buffer (n elements of program g, or
       text: no program). */
    const CapProg * g = 0;
    u32 key = CAP_KEY_BYTES, depth = 0, size;
    if (td.prog != CAP_NO_CHILD) {
      if (td.prog >= pl->plan->n_progs)
        continue;
      g = &pl->progs[td.prog];
      key = g->key;
      depth = g->depth;
    }
    if (td.kind == CAP_KIND_ARRAY)
      size = td.n * td.elem;
    else if (g != 0)
      size = g->size;
    else
      continue;
    CapSeenData * e = cap_seen (s, tp, key, &fresh);
    if (e == 0) {
      s->rec_ok = 0;
      continue;
    }
    if (!fresh && e->depth >= depth && (td.kind != CAP_KIND_ARRAY || e->want >= size))
      continue;
    if (e->want < size && !cap_fill (s, cs, e, out, &pos, tp, size))
      continue; /* over the budget: left out (a later, smaller need may still fit) */
    e->depth = depth;
    if (g == 0 || g->n == 0)
      continue;
    if (td.kind != CAP_KIND_ARRAY) {
      sp = cap_push (s, pl, g, tp, e->data, e->len, 0, e->op, sp, &pushes);
      continue;
    }
    for (i = td.n; i-- > 0;) /* last element first: popped in order */
      sp = cap_push (s, pl, g, tp, e->data, e->len, i * td.elem, e->op, sp, &pushes);
  }
  cs->visits += s->visits;
  cs->pushes += pushes;
  return pos;
}

/* The meta of the block whose header is at h, and the length it gives (of a C string: the
   length scanned; its bytes follow up to CAP_STRING). */
static inline u32 cap_meta (const u8 * h) {
  u32 meta;
  __builtin_memcpy (&meta, h + 8, 4);
  return meta;
}

static inline u32 cap_meta_len (u32 meta) {
  return meta & ~(META_CSTRING | META_TERMINATED);
}

/* Replay trace t into out: the bytes the walk would write, or 0 when something it depends on
   changed (a pointer word, a copy that no longer reads whole, an unreadable block that reads
   now) and the walk must run. whole: every block copied here, none shared with an earlier
   sub-walk of the call (a span the decoder keeps must hold all it needs); *keepable then
   says whether cap_delta could compare memory with it later (each string whole, ended by a
   NUL). */
static int cap_replay (CapScratch * s, CaptureShared * cs, const CapTrace * t, u8 * out, u32 * len, int whole, int * keepable) {
  u8 ** data = s->replay_data;
  u32 pos = 0, i;
  *keepable = whole;
  for (i = 0; i < t->n_ops; i++) {
    const CapOp * op = &t->ops[i];
    u8 * h = out + pos;
    data[i] = h + 12;
    if (op->kind == CAP_OP_STRING) {
      /* Its first page read last time: not checked again (any next page is). */
      s->trusted = op->size > 0 ? (op->addr >> 12) + 1 : 0;
      /* The first chunk as long as the string was, and its NUL (rounded to 16). */
      u32 n = cap_string (s, cs, h, op->addr, op->size >= 12 ? ((op->size - 12) | 15) + 1 : 64);
      s->trusted = 0;
      u32 meta = cap_meta (h);
      if (n == 0 || !(meta & META_TERMINATED) || cap_meta_len (meta) > CAP_STRING)
        *keepable = 0;
      pos += n;
      continue;
    }
    if (op->kind == CAP_OP_UNREADABLE) {
      if (cap_copy (s, cs, h + 12, op->addr, op->size) != 0)
        return 0;
      continue;
    }
    if (op->size >= CAP_BIG && !whole) {
      u8 * copy = cap_big_find (s, op->addr, op->size);
      if (copy != 0) {
        data[i] = copy; /* its pointer words are read from that copy */
        continue;
      }
    }
    /* Read whole last time: the safe copy without page checks (a page unmapped since
       faults once, is recovered, and the short copy sends this call to the walk). */
    if (strobe_safe_copy (h + 12, (const void *) op->addr, op->size) != 0)
      return 0;
    cap_header (h, op->addr, op->size);
    cap_big_note (s, op->addr, h + 12, op->size);
    pos += 12 + op->size;
  }
  for (i = 0; i < t->n_checks; i++) {
    const CapCheck * c = &t->checks[i];
    u64 v;
    __builtin_memcpy (&v, data[c->op] + c->off, 8);
    if (v != c->value)
      return 0;
  }
  *len = pos;
  return 1;
}

/* The changed bytes of one block, from memory at src of n bytes, into its copy in the
   kept span (at off of kept, kept_len bytes), each 8-byte window from the first changed byte
   (looked for from byte from on: strobe_safe_diff_list found the bytes before equal) as an
   entry (u32 offset in the span, u64 bytes of the updated span there) at ent + 12 * *n.
   0 once more than most entries, or when src faults. */
static int cap_delta_block (const u8 * src, u8 * kept, u32 kept_len, u32 off, u32 len, u32 from, u8 * ent, u32 * n, u32 most) {
  u32 i = from < len ? from : 0;
  while (i < len) {
    u64 r = strobe_safe_diff (src + i, kept + off + i, len - i);
    if (r == ~0UL)
      return 0;
    if (r == len - i)
      return 1;
    u32 d = i + (u32) r, k = len - d < 8 ? len - d : 8;
    if (*n == most || strobe_safe_copy (kept + off + d, src + d, k) != 0)
      return 0;
    u32 at = off + d;
    u64 w = 0;
    if (at + 8 <= kept_len)
      __builtin_memcpy (&w, kept + at, 8);
    else
      for (u32 b = 0; at + b < kept_len; b++)
        w |= (u64) kept[at + b] << (8 * b);
    __builtin_memcpy (ent + 12 * *n, &at, 4);
    __builtin_memcpy (ent + 12 * *n + 4, &w, 8);
    (*n)++;
    i = d + k;
  }
  return 1;
}

/* Trace t's kept span brought up to date with memory, comparing each block with its copy
   there (and a string's NUL where it was): returns how many changed-word entries it wrote at
   ent (0: unchanged, a reference will do), or ~0u when the span cannot stand for the walk any
   more — a string's length, an unreadable block that reads now, a changed pointer word (the
   walk would go elsewhere), more than most entries, a fault — and the kept span is then
   dropped. The comparisons run in one loop (strobe_safe_diff_list) up to the next block that
   differs; only that block's changed words are looked for (cap_delta_block). tmp: a byte of
   room to try an unreadable block. */
static u32 cap_delta (CapScratch * s, CaptureShared * cs, CapTrace * t, u8 * kept, u8 * ent, u32 most, u8 * tmp) {
  u32 n = 0, i;
  if (t->n_unreadable > 0)
    for (i = 0; i < t->n_ops; i++) {
      const CapOp * op = &t->ops[i];
      if (op->kind == CAP_OP_UNREADABLE && !cap_known_bad (s, op->addr) && cap_copy (s, cs, tmp, op->addr, 1) != 0)
        goto changed;
    }
  u32 n_changed = 0; /* the comparisons (one per op) that found a changed byte */
  u8 at_changed[CAP_BIG_OPS];
  for (i = 0; i < t->n_cmp; i++) {
    CapDiff r = cap_diff_list (cs, s->sse_only, t->cmp + i, t->n_cmp - i, kept);
    if (r.at == ~0UL)
      goto changed;
    i += (u32) r.at;
    if (i == t->n_cmp)
      break;
    const CapCmp * c = &t->cmp[i];
    u8 end;
    if (c->nul && (strobe_safe_copy (&end, (const void *) (c->src + c->len), 1) != 0 || end != 0))
      goto changed; /* a string that goes on further now: not a delta */
    if (!cap_delta_block ((const u8 *) c->src, kept, t->kept_len, c->koff, c->len, (u32) r.from, ent, &n, most))
      goto changed;
    if (c->nul && cap_nul (kept + c->koff, c->len) != 0)
      goto changed; /* one that ends sooner (a NUL written into it) */
    at_changed[n_changed++] = (u8) i;
  }
  /* A changed pointer word: the walk would go elsewhere. Only a changed op's are looked at. */
  for (i = 0; i < n_changed; i++) {
    const CapCmp * c = &t->cmp[at_changed[i]];
    for (u32 k = t->check_at[c->op]; k < t->check_at[c->op + 1]; k++) {
      u64 v;
      __builtin_memcpy (&v, kept + c->koff + t->checks[k].off, 8);
      if (v != t->checks[k].value)
        goto changed;
    }
  }
  return n;
changed:
  t->kept_len = 0;
  return ~0u;
}

/* The comparisons of trace t's span (len bytes at span, about to be kept) with memory, in
   t->cmp, one per block (a string's with its NUL); 0 when the span is not laid out as t's
   ops say (it is not kept then). */
static int cap_keep_cmp (CapTrace * t, const u8 * span, u32 len) {
  u32 at = 0, n = 0, bad = 0, i;
  for (i = 0; i < t->n_ops; i++) {
    const CapOp * op = &t->ops[i];
    if (op->kind == CAP_OP_UNREADABLE) {
      bad++;
      continue;
    }
    if (at + 12 > len)
      return 0;
    u32 blen = op->kind == CAP_OP_STRING ? cap_meta_len (cap_meta (span + at)) : op->size;
    if (at + 12 + blen > len || blen > 0xffff)
      return 0;
    t->cmp[n].src = op->addr;
    t->cmp[n].koff = at + 12;
    t->cmp[n].len = (u16) blen;
    t->cmp[n].nul = op->kind == CAP_OP_STRING; /* its NUL too, in the same step */
    t->cmp[n].op = (u8) i;
    n++;
    at += 12 + blen;
  }
  if (at != len)
    return 0;
  t->n_cmp = n;
  t->n_unreadable = bad;
  return 1;
}

static inline void cap_span_header (u8 * h, u64 key, u32 meta, u64 base) {
  cap_header (h, key, meta);
  __builtin_memcpy (h + 12, &base, 8);
}

/* A recorded trace's checks ordered by op (stable), with where each op's start (check_at):
   a delta verifies the pointer words of the ops that changed only. */
static void cap_checks_by_op (CapScratch * s, CapTrace * t) {
  CapCheck * sorted = s->sorted;
  u32 count[CAP_BIG_OPS + 1] = { 0 }, i;
  for (i = 0; i < t->n_checks; i++)
    count[t->checks[i].op + 1]++;
  for (i = 0; i < t->n_ops; i++)
    count[i + 1] += count[i];
  for (i = 0; i <= t->n_ops; i++)
    t->check_at[i] = (u16) count[i];
  for (i = 0; i < t->n_checks; i++)
    sorted[count[t->checks[i].op]++] = t->checks[i];
  for (i = 0; i < t->n_checks; i++)
    t->checks[i] = sorted[i];
}

/* A new key for what trace at sends to be kept: its slot above, a version unique per thread. */
static inline u64 cap_new_key (CapScratch * s, u32 at) {
  return ((u64) (at + 1) << 48) | (++s->next_key & 0xffffffffffffUL);
}

/* Trace at was replayed (bookkeeping shared by its reference, delta and span). */
static inline void cap_replayed (CapScratch * s, CaptureShared * cs, const CapTrace * t, u32 at) {
  s->trace_tags[at].used = s->clock;
  cs->visits += t->visits;
  cs->replayed++;
}

/* Trace at sent a span the decoder is to keep, or a delta of one. */
static inline void cap_sent (CapScratch * s, u32 at) {
  if (s->n_sent < CAP_SENT)
    s->sent[s->n_sent++] = (u16) at;
  else
    s->n_sent = ~0u;
}

/* What a kept span sends when memory still holds it (n 0: a reference to *key) or n of its
   8-byte windows changed (a delta on *key, whose entries are already at h + CAP_SPAN_HEADER;
   *key becomes the delta's, of slot): the header at h. Returns the bytes written. */
static u32 cap_send_kept (CapScratch * s, CaptureShared * cs, u8 * h, u64 * key, u32 slot, u32 n) {
  if (n == 0) {
    cs->unchanged++;
    cap_header (h, *key, META_REF);
    return 12;
  }
  u64 next = cap_new_key (s, slot);
  cap_span_header (h, next, META_DELTA | n, *key);
  *key = next;
  cs->deltas++;
  cap_sent (s, slot);
  return CAP_SPAN_HEADER + 12 * n;
}

/* Where the walk from p with program prog of plan is remembered: a hash whose top bits pick
   the set (cap_subtree's traces, cap_root's argument structs). */
static inline u64 cap_start_hash (const CapPlan * plan, u64 p, u32 prog) {
  return ((u64) plan ^ (p * 0x9e3779b97f4a7c15UL) ^ ((u64) prog << 48)) * 0x9e3779b97f4a7c15UL;
}

/* A replay of trace t (index at) at out + pos, in a span the decoder keeps when it may be
   compared later, or as the changed words of the span it kept (kept: t's kept span is
   valid); returns the new pos, or 0 when the walk must run. */
static u32 cap_replay_span (CapScratch * s, CaptureShared * cs, CapTrace * t, u32 at, u8 * out, u32 pos, int kept) {
  u32 len;
  int keepable;
  if (t->pause > 0) {
    t->pause--;
    return cap_replay (s, cs, t, out + pos, &len, 0, &keepable) ? pos + len : 0;
  }
  u8 * span = out + pos + CAP_SPAN_HEADER;
  if (pos + CAP_SPAN_HEADER + t->bound > CAP_BUDGET || !cap_replay (s, cs, t, span, &len, 1, &keepable))
    return 0;
  if (!keepable || len > t->max_kept || !cap_keep_cmp (t, span, len)) {
    t->kept_len = 0;
    cap_span_header (out + pos, 0, META_SPAN | len, 0);
    return pos + CAP_SPAN_HEADER + len;
  }
  u64 key = cap_new_key (s, at);
  if (kept && ++t->misses >= CAP_KEEP_MISSES) { /* changes much every call: plain replays */
    t->misses = 0;
    t->pause = CAP_KEEP_PAUSE;
  }
  cap_move (t->kept, span, len);
  t->kept_len = len;
  t->kept_epoch = s->epoch;
  t->key = key;
  cap_sent (s, at);
  cap_span_header (out + pos, key, META_SPAN | len, 0);
  return pos + CAP_SPAN_HEADER + len;
}

/* Each trace's room: its arrays, and how much they hold (set once a scratch). */
static void cap_rooms (CapScratch * s) {
  for (u32 i = 0; i < CAP_ALL_TRACES; i++) {
    CapTrace * t = &s->traces[i];
    if (i < CAP_TRACES) {
      CapTraceRoom * r = &s->rooms[i];
      t->cmp = r->cmp;
      t->ops = r->ops;
      t->check_at = r->check_at;
      t->checks = r->checks;
      t->kept = s->kept[i];
      t->max_ops = CAP_TRACE_OPS;
      t->max_checks = CAP_TRACE_CHECKS;
      t->max_kept = CAP_KEPT;
    } else {
      CapBigRoom * r = &s->big_rooms[i - CAP_TRACES];
      t->cmp = r->cmp;
      t->ops = r->ops;
      t->check_at = r->check_at;
      t->checks = r->checks;
      t->kept = r->kept;
      t->max_ops = CAP_BIG_OPS;
      t->max_checks = CAP_BIG_CHECKS;
      t->max_kept = CAP_BIG_KEPT;
    }
  }
  s->rooms_ready = 1;
}

/* What tells container walks from the same first node apart: how many nodes, which links,
   list or tree (a struct's sub-walk: 0). */
static inline u32 cap_container_tag (const CapTodo * start) {
  return start->kind == CAP_KIND_STRUCT ? 0 : start->elem ^ (start->kind << 24);
}

static u32 cap_subtree (CapScratch * s, CaptureShared * cs, const CapParts * pl, u8 * out, u32 pos, const CapTodo * start);

/* The containers sub-walk t left to their own walks, after it (at pos); returns the new pos. */
static u32 cap_deferred (CapScratch * s, CaptureShared * cs, const CapParts * pl, u8 * out, u32 pos, const CapTrace * t) {
  for (u32 i = 0; i < t->n_deferred; i++)
    pos = cap_subtree (s, cs, pl, out, pos, &t->deferred[i]);
  return pos;
}

/* The walk from start (a struct pointee, or a node container's first node) into out at pos:
   replayed when a remembered one starting there still holds — as a reference when memory
   still holds what its kept span does — else walked and remembered. Then the containers it
   left to their own walks (cap_deferred). Returns the new pos. */
static u32 cap_subtree (CapScratch * s, CaptureShared * cs, const CapParts * pl, u8 * out, u32 pos, const CapTodo * start) {
  u64 p = start->p;
  u32 prog = start->prog, n_nodes = start->kind == CAP_KIND_STRUCT ? 0 : start->n, tag = cap_container_tag (start);
  u32 set, ways, at, w, end;
  if (start->kind == CAP_KIND_STRUCT) {
    set = (u32) (cap_start_hash (pl->plan, p, prog) >> (64 - CAP_TRACE_BITS)) * CAP_TRACE_WAYS;
    ways = CAP_TRACE_WAYS;
  } else {
    set = CAP_TRACES;
    ways = CAP_BIG_TRACES;
  }
  CapTraceTag * tags = s->trace_tags;
  int found = 0;
  at = set;
  s->clock++;
  for (w = set; w < set + ways; w++)
    if (tags[w].addr == p && tags[w].prog == prog && tags[w].plan == pl->plan && tags[w].n == n_nodes && tags[w].elem == tag) {
      at = w;
      found = 1;
    }
  CapTrace * t = &s->traces[at];
  if (found) {
    int kept = t->pause == 0 && t->kept_len > 0 && t->kept_epoch == s->epoch;
    if (kept && pos + CAP_SPAN_HEADER + 12 <= CAP_BUDGET) {
      u32 most = t->kept_len / 24, n;
      if (most > (CAP_BUDGET - pos - CAP_SPAN_HEADER) / 12)
        most = (CAP_BUDGET - pos - CAP_SPAN_HEADER) / 12;
      n = cap_delta (s, cs, t, t->kept, out + pos + CAP_SPAN_HEADER, most, out + pos);
      if (n != ~0u) {
        cap_replayed (s, cs, t, at);
        t->misses = 0;
        /* Unchanged, or a few words changed (a counter, a cursor's position): those are sent. */
        return cap_deferred (s, cs, pl, out, pos + cap_send_kept (s, cs, out + pos, &t->key, at, n), t);
      }
    }
    end = cap_replay_span (s, cs, t, at, out, pos, kept);
    if (end != 0) {
      cap_replayed (s, cs, t, at);
      return cap_deferred (s, cs, pl, out, end, t);
    }
    cs->stale++;
  } else {
    for (w = set + 1; w < set + ways; w++) /* the way used least recently */
      if (tags[w].used < tags[at].used)
        at = w;
    t = &s->traces[at];
  }
  tags[at].plan = 0;
  tags[at].used = s->clock;
  t->n_ops = t->n_checks = t->n_deferred = 0;
  t->kept_len = t->misses = t->pause = 0;
  s->rec = t;
  s->rec_ok = 1;
  end = cap_walk (s, cs, pl, out, pos, start);
  s->rec = 0;
  /* A sub-walk that read no pointer word has nothing a replay would save. */
  if (s->rec_ok && t->n_checks > 0) {
    u64 bound = 0;
    for (w = 0; w < t->n_ops; w++)
      bound += 12 + (t->ops[w].kind == CAP_OP_STRING ? CAP_STRING : t->ops[w].size);
    if (bound <= CAP_BUDGET) {
      cap_checks_by_op (s, t);
      t->bound = (u32) bound;
      t->visits = s->visits;
      tags[at].plan = pl->plan;
      tags[at].addr = p;
      tags[at].prog = prog;
      tags[at].n = n_nodes;
      tags[at].elem = tag;
      cs->recorded++;
    }
  }
  return cap_deferred (s, cs, pl, out, end, t);
}

/* Seen (address, type) among what the roots led to directly, with at least depth left; else
   noted (up to CAP_ROOT_SEEN). A repeat is left out, as the whole walk's visit table would
   leave it out. */
static int cap_root_seen (CapScratch * s, u64 addr, u32 key, u32 depth) {
  u32 n = s->n_root_seen, i;
  for (i = 0; i < n; i++)
    if (s->root_seen_addr[i] == addr && s->root_seen_key[i] == key) {
      if (s->root_seen_depth[i] >= depth)
        return 1;
      s->root_seen_depth[i] = depth;
      return 0;
    }
  if (n < CAP_ROOT_SEEN) {
    s->root_seen_addr[n] = addr;
    s->root_seen_key[n] = key;
    s->root_seen_depth[n] = depth;
    s->n_root_seen = n + 1;
  }
  return 0;
}

/* The argument struct at p (program prog, size bytes) into out at *pos: as a span kept for
   next time (once seen before), or — when this thread sent the same one before and kept
   it — as a reference to that span, or the 8-byte windows changed since (a cursor or a row
   changes a few words a call). Returns its bytes as they are now (in out or in the kept span), *got how many; NULL
   when nothing could be copied. */
static const u8 * cap_root (CapScratch * s, CaptureShared * cs, const CapParts * pl, u8 * out, u32 * pos, u64 p, u32 prog, u32 size, u32 * got) {
  if (size == 0)
    return 0;
  u64 h = cap_start_hash (pl->plan, p, prog);
  u32 set = (u32) (h >> (64 - CAP_ROOT_BITS)) * CAP_ROOT_WAYS, at = set, w;
  int found = 0;
  s->clock++;
  cs->visits++;
  for (w = set; w < set + CAP_ROOT_WAYS; w++)
    if (s->roots[w].addr == p && s->roots[w].prog == prog && s->roots[w].plan == pl->plan) {
      at = w;
      found = 1;
    }
  CapRootSpan * r = &s->roots[at];
  u8 * kept = s->root_kept[at];
  u8 * hd = out + *pos;
  if (found && r->kept_len == 12 + size && r->kept_epoch == s->epoch && *pos + CAP_SPAN_HEADER + 12 * 12 <= CAP_BUDGET) {
    CapDiff d = cap_diff_list (cs, s->sse_only, &r->cmp, 1, kept);
    u32 n = 0;
    if (d.at == 1 || (d.at == 0 && cap_delta_block ((const u8 *) p, kept, r->kept_len, 12, size, (u32) d.from, hd + CAP_SPAN_HEADER, &n, 12))) {
      r->used = s->clock;
      *got = size;
      cap_big_note (s, p, kept + 12, size);
      *pos += cap_send_kept (s, cs, hd, &r->key, CAP_ALL_TRACES + at, n);
      return kept + 12;
    }
  }
  if (!found) {
    for (w = set + 1; w < set + CAP_ROOT_WAYS; w++) /* the way used least recently */
      if (s->roots[w].used < s->roots[at].used)
        at = w;
    r = &s->roots[at];
    kept = s->root_kept[at];
    r->plan = pl->plan;
    r->addr = p;
    r->prog = prog;
  }
  r->used = s->clock;
  r->kept_len = 0;
  if (*pos + CAP_SPAN_HEADER + 12 + size > CAP_BUDGET)
    return 0;
  u8 * span = hd + CAP_SPAN_HEADER;
  u32 c = cap_copy (s, cs, span + 12, p, size);
  if (c == 0)
    return 0;
  cap_header (span, p, c);
  u64 key = 0;
  /* Kept from its second call on: an argument at a new address each call (a key string, a
     temporary) would otherwise leave a span the daemon stores and nothing refers to. */
  if (found && c == size && size <= CAP_ROOT_KEPT - 12) {
    __builtin_memcpy (kept, span, 12 + size);
    r->kept_len = 12 + size;
    r->kept_epoch = s->epoch;
    r->cmp.src = p;
    r->cmp.koff = 12;
    r->cmp.len = (u16) size;
    r->cmp.nul = 0;
    r->cmp.op = 0;
    key = r->key = cap_new_key (s, CAP_ALL_TRACES + at);
    cap_sent (s, CAP_ALL_TRACES + at);
  }
  cap_span_header (hd, key, META_SPAN | (12 + c), 0);
  if (c == size)
    cap_big_note (s, p, span + 12, c);
  *pos += CAP_SPAN_HEADER + 12 + c;
  *got = c;
  return span + 12;
}

/* A struct's size bytes at p as one block at out + *pos (header, then bytes), if the budget
   allows; returns the bytes copied (0: none, nothing written). A whole big copy is noted
   for the walk's later sub-walks (cap_big_find). */
static u32 cap_block (CapScratch * s, CaptureShared * cs, u8 * out, u32 * pos, u64 p, u32 size) {
  if (size == 0 || *pos + 12 + size > CAP_BUDGET)
    return 0;
  u8 * h = out + *pos;
  u32 got = cap_copy (s, cs, h + 12, p, size);
  cs->visits++;
  if (got == 0)
    return 0;
  cap_header (h, p, got);
  if (got == size)
    cap_big_note (s, p, h + 12, got);
  *pos += 12 + got;
  return got;
}

/* A C string the roots lead to directly (or are), unless already copied or over budget. */
static void cap_root_string (CapScratch * s, CaptureShared * cs, u8 * out, u32 * pos, u64 p) {
  if (!cap_root_seen (s, p, CAP_KEY_CSTRING, 0) && *pos + 12 + CAP_STRING <= CAP_BUDGET)
    *pos += cap_string (s, cs, out + *pos, p, 64);
}

/* Walk the plan's enter (or exit) roots; the payload goes to s->buf + 4. Returns its length.
   The root structs are copied (sent as a reference or the words changed since when this
   thread sent the same one before: cap_root), and the walk from each pointee they point to
   (a sub-walk) replayed when it can be (cap_subtree): an argument is often a different struct each call
   (a row's value, a cursor's position) that points to the same, unchanged ones (the
   connection, its schema). A small pointee two sub-walks reach is copied by both (the
   daemon reads either copy: capture_view.rs), a big one once (cap_big_find). */
u32 strobe_cap_walk (const CapPlan * plan, int at_exit, const u64 * regs, const u8 * xmm, const u8 * stack, CapScratch * s, CaptureShared * cs) {
  CapParts pl;
  pl.plan = plan;
  pl.roots = (const CapRoot *) (plan + 1);
  pl.progs = (const CapProg *) (pl.roots + plan->n_enter + plan->n_exit);
  pl.edges = (const CapEdge *) (pl.progs + plan->n_progs);
  const CapRoot * r = at_exit ? pl.roots + plan->n_enter : pl.roots;
  u32 nr = at_exit ? plan->n_exit : plan->n_enter;
  u8 * out = s->buf + 4;
  u32 pos = 0, i;
  s->now = 0;
  s->n_big = 0;
  s->n_sent = 0;
  s->n_root_seen = 0;
  if (s->next_key == 0)
    s->next_key = (cap_ticks () << 8) & 0xffffffffffffUL;
  if (!s->rooms_ready)
    cap_rooms (s);
  for (i = 0; i < nr; i++) {
    u32 kind = r[i].kind;
    u64 p = 0;
    const CapProg * g;
    const u8 * data;
    u32 got = 0;
    u64 from = 0; /* where data was copied from: a struct root's address */
    if (kind >= CAP_KIND_STACK) {
      /* A value among the stack arguments at enter (a seventh parameter, a struct passed in
         memory): its bytes copied and labelled CAP_STACK_ADDR + offset; a struct's pointers
         are followed from that copy, a pointer's pointee as a register's would be. */
      u32 size = r[i].size;
      if (stack == 0 || at_exit || size == 0 || size > CAP_STACK_VALUE || pos + 12 + size > CAP_BUDGET)
        continue;
      u8 * h = out + pos;
      got = cap_copy (s, cs, h + 12, (u64) (stack + r[i].reg), size);
      if (got == 0)
        continue;
      cap_header (h, CAP_STACK_ADDR + r[i].reg, got);
      pos += 12 + got;
      if (kind == CAP_KIND_STACK) {
        if (r[i].prog >= plan->n_progs)
          continue;
        g = &pl.progs[r[i].prog];
        data = h + 12;
        goto edges;
      }
      if (got < 8)
        continue;
      __builtin_memcpy (&p, h + 12, 8);
      kind = kind == CAP_KIND_STACK_STRING ? CAP_KIND_CSTRING : CAP_KIND_STRUCT;
    } else if (kind != CAP_KIND_XMM) {
      p = regs[r[i].reg];
    }
    if (kind == CAP_KIND_XMM) {
      /* A float in an xmm register: the 16 bytes the interceptor saved (none where that
         place is unknown: the decoder says so, as the serializer does). */
      if (xmm != 0 && r[i].reg < 8 && pos + 12 + 16 <= CAP_BUDGET) {
        __builtin_memcpy (out + pos + 12, xmm + 16 * r[i].reg, 16);
        cap_header (out + pos, CAP_XMM_ADDR + 16 * r[i].reg, 16);
        pos += 12 + 16;
      }
      continue;
    }
    if (r[i].kind == CAP_KIND_INLINE) {
      /* A value in argument registers (Rust's &str, &[T], Option<&T>, a small C struct; at
         exit in rax and rdx): its bytes are the words. regs holds six words at enter, rax
         and rdx at exit. */
      u32 avail = at_exit ? (r[i].reg == 0 ? 16 : 0) : (r[i].reg < 6 ? 8 * (6 - r[i].reg) : 0);
      if (r[i].prog >= plan->n_progs)
        continue;
      g = &pl.progs[r[i].prog];
      data = (const u8 *) &regs[r[i].reg];
      got = g->size < 16 ? g->size : 16;
      if (got > avail)
        got = avail;
    } else {
      if (!cap_plausible (p))
        continue;
      if (kind != CAP_KIND_STRUCT) {
        cap_root_string (s, cs, out, &pos, p);
        continue;
      }
      if (r[i].prog >= plan->n_progs)
        continue;
      g = &pl.progs[r[i].prog];
      if (cap_root_seen (s, p, g->key, g->depth))
        continue;
      data = cap_root (s, cs, &pl, out, &pos, p, r[i].prog, g->size, &got);
      from = p;
      if (data == 0)
        continue;
    }
  edges:
    /* Its pointees in field order, as the walk pops them. */
    for (u32 k = 0; k < g->n; k++) {
      const CapEdge * ed = &pl.edges[g->first + k];
      for (u32 c = 0; c < ed->count; c++) {
        u32 d = c * ed->stride, off = ed->off + d;
        u64 q;
        CapTodo td;
        if (off + 8 > got)
          break;
        if (!cap_guard_ok (s, ed, data, got, d, 0))
          continue;
        __builtin_memcpy (&q, data + off, 8);
        if (!cap_plausible (q))
          continue;
        if (ed->kind == CAP_KIND_CSTRING) {
          cap_root_string (s, cs, out, &pos, q);
          continue;
        }
        if (!cap_todo_of (s, ed, data, got, d, 0, q, &td))
          continue;
        if (from != 0 && cap_text_inside (&td, from, got))
          continue; /* text inside the root's copy (a short std::string): read from it */
        if (ed->kind == CAP_KIND_LIST || ed->kind == CAP_KIND_TREE) { /* a node container's first nodes: remembered */
          pos = cap_subtree (s, cs, &pl, out, pos, &td);
          continue;
        }
        if (ed->kind == CAP_KIND_ARRAY || ed->kind >= CAP_KIND_LIST) { /* a buffer's elements, a Rust table's or tree's: walked, not remembered */
          pos = cap_walk (s, cs, &pl, out, pos, &td);
          continue;
        }
        if (ed->child >= plan->n_progs)
          continue;
        const CapProg * cg = &pl.progs[ed->child];
        if (cap_root_seen (s, q, cg->key, cg->depth) || cap_known_bad (s, q))
          continue; /* (an integer in a union read as a pointer, often: not worth a lookup) */
        if (cg->n > 0)
          pos = cap_subtree (s, cs, &pl, out, pos, &td);
        else /* a struct with no pointer to follow: its copy is its whole walk */
          cap_block (s, cs, out, &pos, q, cg->size);
      }
    }
  }
  return pos;
}

/* The record of the last walk was lost (the ring was full): the spans and deltas it sent
   never reach the decoder, so none is referred to before it is sent whole again. */
void strobe_cap_forget (CapScratch * s) {
  if (s->n_sent > CAP_SENT) {
    s->epoch++;
    return;
  }
  for (u32 i = 0; i < s->n_sent; i++)
    if (s->sent[i] < CAP_ALL_TRACES)
      s->traces[s->sent[i]].kept_len = 0;
    else
      s->roots[s->sent[i] - CAP_ALL_TRACES].kept_len = 0;
}
