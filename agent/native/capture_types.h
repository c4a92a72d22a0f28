/* Typed capture's walk (capture_walk.c): the plan as the agent lays it out, the counters
 * it shares with the fast path, its limits, and the per-thread scratch it works in. */
#ifndef STROBE_CAPTURE_TYPES_H
#define STROBE_CAPTURE_TYPES_H

typedef unsigned char u8;
typedef unsigned int u32;
typedef unsigned long u64;
typedef unsigned short u16;

typedef struct { u32 n_enter; u32 n_exit; u32 n_progs; u32 n_edges; } CapPlan;
typedef struct { u32 reg; u32 kind; u32 prog; u32 size; } CapRoot; /* size: a stack root's bytes */
/* base: a B-tree slot's program (capture_walk.c cap_btree) is run at base + i * size in a
   node, for each filled slot i. */
typedef struct { u32 key; u32 depth; u32 size; u32 first; u32 n; u32 base; } CapProg;
/* An edge (capture_c.ts): count pointers stride apart from off; a Rust buffer (kind
   CAP_KIND_ARRAY) also has its length word at len_off, elem-byte elements, at most max;
   gspec & 0xff, when not 0, guards it with a gspec & 0xff byte discriminant at goff: in the
   set {lo + i: bit i of mask} (gspec bit 8) or not. Offsets are from the same base. */
typedef struct { u32 off; u32 count; u32 stride; u32 kind; u32 child; u32 len_off; u32 elem; u32 max; u32 goff; u32 gspec; u32 glo_lo; u32 glo_hi; u32 gmask_lo; u32 gmask_hi; u32 aux; } CapEdge;
/* The typed capture's counters and settings, shared with the CModule (fields: capture_c.ts;
   the counters are racy increments: estimates). */
typedef struct { u32 tls_key; u32 vm_readv; u64 records; u64 bytes; u64 checked; u64 visits; u64 pushes; u64 scratch_size; u64 replayed; u64 recorded; u64 stale; u64 unchanged; u64 deltas; u32 avx2; u32 pad; } CaptureShared;

#define CAP_BUDGET (200 * 1024)
#define CAP_STRING 1024
#define CAP_TABLE 2048            /* (address, type) slots, a power of two */
#define CAP_SMALL 256             /* the table a walk starts with: stays in L1 */
#define CAP_VISITS 1536           /* distinct pointees per call: keeps the table sparse */
#define CAP_STACK 2048
#define CAP_KEY_CSTRING 0xffffffffu
#define CAP_KEY_BYTES 0xfffffffeu     /* a Rust buffer of text: its bytes, no program */
#define CAP_LEN_END 0x80000000u /* an edge's len_off: the word there is a past-the-end pointer */
#define CAP_KIND_STRUCT 0
#define CAP_KIND_CSTRING 1
#define CAP_KIND_ARRAY 2
#define CAP_KIND_INLINE 3             /* a root in argument registers (reg, reg + 1) or rax, read in place */
#define CAP_KIND_XMM 4                /* a root in xmm register reg: its 16 bytes copied from where the interceptor saved it */
/* The address an xmm root's copy is labelled with (never a user-space one): CAP_XMM_ADDR +
   16 * register (capture_view.rs XMM_ADDR). */
#define CAP_XMM_ADDR 0xfffffe0000000000UL
#define CAP_KIND_STACK 5              /* a value in the stack arguments at byte reg, size bytes (a struct: prog) */
#define CAP_KIND_STACK_POINTER 6      /* a pointer there, to a struct (prog) */
#define CAP_KIND_STACK_STRING 7       /* a pointer there, to a C string */
/* Edges to a libstdc++ node container's nodes (capture_walk.c cap_nodes): the first node's
   pointer at off, the element count at len_off, at most max nodes, each walked with program
   child; elem holds the links' offsets in a node, a byte each: a list's next link; a tree's
   parent, left and right links. */
#define CAP_KIND_LIST 8
#define CAP_KIND_TREE 9
/* An edge to a Rust hash table's elements (capture_walk.c cap_table): its control bytes at the
   pointer at off, its bucket mask at aux, the item count at len_off, at most max elements of
   elem bytes below the control bytes, each walked with program child. */
#define CAP_KIND_HASH 10
#define CAP_TABLE_MASK 0xffffffffUL    /* the largest bucket mask the serializer reads */
/* An edge to a Rust B-tree's nodes (capture_walk.c cap_btree): the root's pointer at off, the
   height at aux, the entry count at len_off, at most max entries in key order, every node
   copied by program child, whose next two programs are a key slot's and a value slot's;
   elem: the offsets of a node's len (u16, low 16 bits) and child pointers (high 16 bits). */
#define CAP_KIND_BTREE 11
#define CAP_BTREE_HEIGHT 32           /* tallest tree walked (serialize.ts: "tree too tall") */
#define CAP_TREE_HEIGHT 128           /* steps one in-order successor takes at most (serialize.ts) */
#define CAP_NO_WORD 0xffffffffu
/* The label of a stack argument's copy: CAP_STACK_ADDR + its offset from the first stack
   argument (capture_view.rs STACK_ADDR). */
#define CAP_STACK_ADDR 0xfffffd0000000000UL
#define CAP_STACK_VALUE 4096          /* most bytes of one stack argument copied */
#define CAP_NO_CHILD 0xffffffffu
#define CAP_SETS_BITS 8           /* pages known readable: 256 sets of 4, by hashed page number */
#define CAP_WAYS 4
#define CAP_PAGES ((1 << CAP_SETS_BITS) * CAP_WAYS)
#define CAP_BAD_BITS 8
#define CAP_BAD_PAGES (1 << CAP_BAD_BITS) /* pages found unreadable, and when */
#define CAP_BAD_TICKS (1UL << 25) /* time stamp counter ticks: ~10 ms at 3.3 GHz */
#define CAP_IOV 24                /* pages one checked read spans at most (64 KiB structs: 17) */
#define SYS_PROCESS_VM_READV 310
#define SYS_GETPID 39
#define CAP_TRACE_BITS 6          /* sub-walks remembered for replay, per thread: 64 sets of 4 */
#define CAP_TRACE_WAYS 4
#define CAP_TRACES ((1 << CAP_TRACE_BITS) * CAP_TRACE_WAYS)
#define CAP_TRACE_OPS 32          /* copies a replayable sub-walk makes at most */
#define CAP_TRACE_CHECKS 128      /* pointer words it reads at most */
#define CAP_BIG 128               /* bytes from which a struct copy is shared within a walk */
#define CAP_BIG_COPIES 16
#define CAP_ROOT_SEEN 32          /* pointees a walk's roots lead to directly, kept to skip repeats */
#define CAP_KEPT 4096              /* bytes of a sub-walk's payload kept to send it as a reference */
/* A node container's walk from an argument (a std::map's or std::list's first nodes) is
   remembered too, in a few larger traces (any address; least recently used replaced): a
   hundred nodes are more copies and links than a sub-walk's room. An op's index is a byte. */
#define CAP_BIG_TRACES 8
#define CAP_BIG_OPS 255
#define CAP_BIG_CHECKS 1024
#define CAP_BIG_KEPT (16 * 1024)
#define CAP_ALL_TRACES (CAP_TRACES + CAP_BIG_TRACES)
#define CAP_DEFERRED 4             /* containers a struct's sub-walk leaves to their own walks */
#define CAP_KEEP_MISSES 4          /* sent whole this many times in a row: stop keeping it ... */
#define CAP_KEEP_PAUSE 64          /* ... for this many replays */
#define CAP_ROOT_BITS 6           /* argument structs remembered, per thread: 64 sets of 2 */
#define CAP_ROOT_WAYS 2
#define CAP_ROOTS ((1 << CAP_ROOT_BITS) * CAP_ROOT_WAYS)
#define CAP_ROOT_KEPT 1024        /* bytes of an argument struct kept (larger ones travel whole) */
#define CAP_SENT 32                /* traces one walk sends spans of, remembered for strobe_cap_forget */
#define META_CSTRING (1u << 30)
#define META_TERMINATED (1u << 31)
/* Bit 31 without bit 30 (a combination no block uses): a sub-walk's span, u64 key | u32
   META_SPAN | len | u64 0, then len bytes of blocks, kept by the decoder under its key (0: not
   kept); with bit 29 too, a reference to the span last kept under that key, nothing
   following (capture_c.ts). */
#define META_SPAN (1u << 31)
#define META_REF ((1u << 31) | (1u << 29))
/* A span as the one last kept under the base key with n 8-byte windows changed: u64 key |
   u32 META_DELTA | n | u64 base | n x (u32 offset in the span, u64 its bytes there; fewer at
   the span's end), applied in order. */
#define META_DELTA ((1u << 31) | (1u << 28))
#define CAP_SPAN_HEADER 20        /* key, meta, base key (0 in a span) */

/* The visit tables: address and type first, 16 bytes, so probing touches one line in four;
   what a hit needs is in CapSeenData at the same index. A walk starts with the small table
   (most visit a few dozen pointees) and moves to the big one at half its size. */
typedef struct { u64 addr; u32 key; u32 gen; } CapSeen;
typedef struct { u8 * data; u32 depth; u32 want; u32 len; u32 op; } CapSeenData;
typedef struct { u64 p; u32 kind; u32 prog; u32 n; u32 elem; u32 aux; } CapTodo; /* aux: a hash table's bucket mask, a B-tree's height */
typedef struct { u64 addr; u8 * data; u32 size; u32 pad; } CapBig;

/* A sub-walk remembered for replay (cap_subtree): what the walk from one pointee copied, in
   payload order, and every pointer word it read, with the value it found. The walk is a
   function of its start and of those words (a pointer's value decides whether it is
   followed, to what, and whether it was seen before), so while they are unchanged, copying
   the same blocks again in the same order yields the payload the walk would: no visit
   table, no stack, no edges. */
enum { CAP_OP_STRUCT, CAP_OP_STRING, CAP_OP_UNREADABLE };
typedef struct { u64 addr; u32 size; u32 kind; } CapOp;
typedef struct { u64 value; u32 op; u32 off; } CapCheck;
/* One comparison of a kept span with memory (strobe_safe_diff_list): len bytes at src with
   those at offset koff of the span, for op (t->ops); with nul 1 (a C string), also the byte
   at src + len, which must be 0: one step per string, where its NUL was a step of its own
   and a step costs as much as comparing 64 bytes (docs/performance.md). */
typedef struct { u64 src; u32 koff; u16 len; u8 nul; u8 op; } CapCmp;
/* Which sub-walk a remembered one is, apart from it: a lookup reads one set's tags (two
   cache lines), not four traces' first lines. plan NULL: none. */
typedef struct {
  const CapPlan * plan;
  u64 addr;                       /* where the sub-walk starts, with program prog */
  u32 prog;
  u32 used;                       /* scratch clock when last recorded or replayed */
  u32 n;                          /* a container's: nodes walked, and cap_container_tag */
  u32 elem;
} CapTraceTag;
typedef struct {
  u32 n_ops;
  u32 n_checks;
  u32 visits;
  u32 bound;                      /* most bytes a replay writes (strings as long as allowed) */
  /* The span last sent for it under key (kept_len bytes, in CapScratch.kept at its index):
     valid while kept_epoch is the scratch's epoch (a lost record bumps it). */
  u32 kept_len;
  u32 kept_epoch;
  u32 misses;                     /* replays in a row that sent it whole though it was kept */
  u32 pause;                      /* replays left before keeping is tried again */
  /* Its room (cap_rooms): a sub-walk's (CapTraceRoom) or a container walk's (CapBigRoom). */
  u32 max_ops;
  u32 max_checks;
  u32 max_kept;
  u64 key;
  /* While kept_len > 0: the kept span's comparisons with memory (cap_keep_cmp), and whether
     a block of it was unreadable (each is tried again by itself). */
  u32 n_cmp;
  u32 n_unreadable;
  CapCmp * cmp;
  CapOp * ops;
  /* The checks, by op once recorded: op i's are check_at[i] .. check_at[i + 1] - 1. */
  u16 * check_at;
  CapCheck * checks;
  u8 * kept;                      /* the span last sent, kept_len bytes */
  /* The node containers this sub-walk reached (a struct's member, behind a pointer): each
     walked after it and remembered on its own (a container trace), as an argument's are. Its
     first node and count are words of this walk's blocks, so a replay that holds finds the same. */
  u32 n_deferred;
  u32 pad;
  CapTodo deferred[CAP_DEFERRED];
} CapTrace;
typedef struct {
  CapCmp cmp[CAP_TRACE_OPS];
  CapOp ops[CAP_TRACE_OPS];
  u16 check_at[CAP_TRACE_OPS + 1];
  CapCheck checks[CAP_TRACE_CHECKS];
} CapTraceRoom;
typedef struct {
  CapCmp cmp[CAP_BIG_OPS];
  CapOp ops[CAP_BIG_OPS];
  u16 check_at[CAP_BIG_OPS + 1];
  CapCheck checks[CAP_BIG_CHECKS];
  u8 kept[CAP_BIG_KEPT];
} CapBigRoom;

/* An argument struct (a walk's root) as this thread last sent it, kept to send it next time
   as a reference or the words changed since (a cursor or a row changes a few a call): a span
   of one block, its bytes in CapScratch.root_kept at the same index. plan NULL: none. */
typedef struct {
  const CapPlan * plan;
  u64 addr;
  u32 prog;
  u32 used;                       /* scratch clock when last sent */
  u32 kept_len;                   /* 0: nothing kept */
  u32 kept_epoch;
  u64 key;
  CapCmp cmp;                     /* the block against memory */
} CapRootSpan;

/* Per thread (allocated zeroed by the TinyCC side, scratch_size bytes). The payload buffer
   comes first: the caller finds it at the scratch's address (u32 length, then the walk's
   bytes). */
typedef struct {
  u8 buf[4 + CAP_BUDGET + CAP_STRING + 64];
  u32 gen;
  u32 visits;
  u32 big;                        /* this walk uses the big table */
  u32 sse_only;                   /* this call's hook runs no VEX code (Fn.sse_only) */
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
  /* The walk being recorded (NULL: none), and whether it still may be replayed. */
  CapTrace * rec;
  u32 rec_ok;
  u32 pad2;
  u32 clock;
  u32 pad3;
  u64 trusted;                    /* page number + 1 of a page a replay knows readable */
  u64 now;                        /* cap_now */
  /* What this walk's roots led to directly (cap_root_seen): a dozen a call at most in the
     SQLite bench, scanned in order (as fast as the hash table this was, and no generation
     to wrap). */
  u32 n_root_seen;
  u32 pad6;
  u64 root_seen_addr[CAP_ROOT_SEEN];
  u32 root_seen_key[CAP_ROOT_SEEN];
  u32 root_seen_depth[CAP_ROOT_SEEN];
  /* The big struct copies of this walk (cap_big_note, cap_big_find): separate sub-walks often reach the
     same big struct (SQLite's connection from a cursor's tree, its shared tree and its key
     info), and one copy serves them all. */
  u32 n_big;
  u32 pad4;
  CapBig big_copies[CAP_BIG_COPIES];
  /* A lost record's spans and deltas never reach the decoder: strobe_cap_forget drops the
     kept spans of the traces that sent them (sent), or all (a bumped epoch), so no reference
     names a span the decoder never got. next_key: their keys' low 48 bits (started from the
     clock: a later agent in the same process does not reuse keys). */
  u32 epoch;
  u32 n_sent;                     /* traces this walk sent a kept span or delta of (~0: too many) */
  u64 next_key;
  u16 sent[CAP_SENT];
  u32 rooms_ready;                /* the traces' room pointers are set (cap_rooms) */
  u32 pad5;
  /* Sub-walks (set by hashed start) first, then node container walks (any): a slot's index
     is its number in keys; the argument structs' slots follow (CAP_ALL_TRACES + index). */
  CapTraceTag trace_tags[CAP_ALL_TRACES];
  CapTrace traces[CAP_ALL_TRACES];
  CapTraceRoom rooms[CAP_TRACES];
  u8 kept[CAP_TRACES][CAP_KEPT];
  CapBigRoom big_rooms[CAP_BIG_TRACES];
  /* Room of one call's work on a trace: cap_replay's block copies, cap_checks_by_op's sort. */
  u8 * replay_data[CAP_BIG_OPS];
  CapCheck sorted[CAP_BIG_CHECKS];
  CapRootSpan roots[CAP_ROOTS];
  u8 root_kept[CAP_ROOTS][CAP_ROOT_KEPT + 8];
} CapScratch;

#endif
