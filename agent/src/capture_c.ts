// C source of typed capture (issue 18 item 1), compiled into the fast path's CModule
// (spliced into FASTPATH_C, fastpath_c.ts): a hook whose function has a capture plan
// (src/engine/capture_plan.rs; its Fn block carries the plan right after the Fn struct)
// copies the pointees the JavaScript serializer would read into its record, natively.
//
// Plan (built by capture.ts): a header {u32 n_enter, n_exit, n_progs, n_edges}, then the
// roots {u32 reg, kind, prog, pad} (enter roots, then exit roots: reg 0 is rax; kind 3: the
// value in argument registers from reg (a Rust &str, slice, Option<&T>) or in rax at exit,
// read in place), the
// programs {u32 key, depth, size, first edge, n edges, pad} and the edges {u32 off, count,
// stride, kind, child, len_off, elem, max, goff, gspec, glo lo, hi, gmask lo, hi, aux}. A program says what
// to do with a struct of one type (key) reached with `depth` left: copy `size` bytes and
// follow its pointer edges (`count` pointers `stride` apart from `off`; kind 0: a struct,
// run program `child`; kind 1: a C string, up to 1,025 bytes, stopping at NUL; kind 2: a
// Rust buffer, min(u64 at len_off, max) elements of elem bytes, each run through program
// `child` unless it is ~0; kinds 8 and 9: a libstdc++ node container's first min(u64 at
// len_off, max) nodes from the node pointer at off, a list's or a red-black tree's in order,
// each node run through program `child`, elem the node's link offsets; kind 10: a Rust hash
// table's first min(u64 at len_off, max) full slots, its control bytes at the pointer at off
// and its bucket mask at aux, elements of elem bytes; kind 11: a Rust B-tree's first entries
// in key order from the root at off, its height at aux, each node run through `child`, elem
// the node's len and child-pointer offsets). gspec's low byte, when not 0, is the size of a Rust enum's
// discriminant at goff: the edge is followed only when it is in the set {glo + i: bit i
// of gmask} (bit 8 of gspec set) or not (clear).
//
// The walk (strobe_cap_walk in agent/native/capture_walk.c, compiled ahead of time at -O2
// by build.rs and copied into the target by capture.ts: TinyCC's code made it twice as
// slow; this file keeps the glue, the ring and the drain) copies the argument structs (an
// argument struct this thread sent before goes as a reference to that span or the windows
// changed since, like a sub-walk's: a cursor or a row changes a few words a call), then
// walks from each of their pointees, depth-first with an explicit stack; a hash table keyed
// by (address, type) skips a pointee already visited with as much depth left (cycles and
// shared pointees cost one copy), and a revisit with more depth reuses the bytes when they
// reach far enough. The walk from a pointee is remembered per thread and replayed while the
// pointer words it read are unchanged (capture_walk.c cap_subtree); two such walks may copy
// the same small pointee twice (the daemon reads either copy), big ones are copied once. A
// pointer that is null or implausible (below 64 KiB or not a user-space address) is
// skipped: the daemon prints what the serializer would for it (null, or <unreadable …>).
// The bytes one call copies are bounded (CAP_BUDGET), as are the pointees it visits
// (CAP_VISITS) and the stack (CAP_STACK): what does not fit is left out, and the daemon
// prints <unreadable …> for it — never a wrong value. Each copy goes
// into the payload as u64 address | u32 meta | bytes (meta: struct: bytes copied; C
// string: length scanned, bit 30 set, bit 31 when a NUL ended it; min(length, 1024)
// bytes follow). A replayed walk's copies may come wrapped, or instead of them (bit 31
// without bit 30, capture_types.h): a span (u64 key | META_SPAN | len | u64 0, then its
// copies, kept by the daemon under key), a reference to the span last kept under a key
// (u64 key | META_REF: memory held the same bytes), or a delta (u64 key | META_DELTA | n |
// u64 base key, then n × (u32 offset, u64 bytes): the base span with those 8-byte windows
// changed, kept under key). src/engine/capture_spans.rs puts the copies back before decoding;
// a record that could not be reserved calls strobe_cap_forget, so the spans it carried are
// sent whole again before any reference to them.
//
// Reads never fault the target: strobe_safe_copy (capture_walk.c) is a copy loop whose
// faults the agent's exception hook (capture.ts) turns into a return of the bytes not
// copied. A fault is costly (a signal and Frida's JavaScript exception dispatch, ~100 µs), and SQLite's unions alone
// make a few per call (an integer member read as a pointer), so a read touching a page not
// known readable goes through process_vm_readv on the process itself instead (~1 µs, EFAULT
// instead of a signal); the pages it read are remembered per thread (CAP_PAGES), and reads
// within them take the safe copy. A remembered page unmapped since still only faults. A
// page process_vm_readv could not read is remembered as unreadable for CAP_BAD_TICKS
// (about 10 ms): the same garbage pointer in the next calls costs nothing, and memory mapped at that
// address within those ~10 ms reads as <unreadable …> until then (never as a wrong value).
//
// Ring: a typed record takes k consecutive slots with one reservation: the header slot
// (kind 3 enter / 4 exit, laid out like the others) then u32 payload length and the payload
// across the next slots. strobe_drain sends header, words, u32 length, payload ("rec-v2").
// A typed exit with nothing to walk (kind 5) is one slot like a plain exit, no payload.

/** Where a hook's Fn block (fastpath.ts) holds its plan pointer: after the Fn struct. */
export const FN_PLAN_OFFSET = 56;

/** Most ring slots one typed record may take (the drain's buffer keeps this much spare). */
export const CAPTURE_MAX_SLOTS = 2400;

export const CAPTURE_C = `
/* CaptureShared (capture_types.h): records / bytes: typed records written and their payload
   bytes; checked: reads that went through process_vm_readv (racy increments: estimates).
   vm_readv: 1 when process_vm_readv works here (capture.ts probes it; else every read takes
   the safe copy). scratch_size: bytes of a thread's scratch (CapScratch, its payload buffer
   first). replayed / recorded / stale: walks replayed from a remembered one, walks
   remembered, and remembered walks that could not be replayed (what they read had changed);
   unchanged: the replays sent as a reference to their last span (memory held the same
   bytes); deltas: those sent as the words that changed since; avx2: 1 when span comparisons
   may use AVX2 loads. */
extern CaptureShared capture;

#define KIND_TYPED_ENTER 3
#define KIND_TYPED_EXIT 4
/* A typed exit whose plan reads nothing at exit (no pointee of the return value: a scalar or
   void): one slot laid out like a plain exit, no payload; the daemon prints its return value
   with the plan's type. (agent/native/fast_hook.c writes all three.) */
#define KIND_TYPED_EXIT_BARE 5
#define FN_PLAN(f) (*(CapPlan * volatile *) ((guint8 *) (f) + ${FN_PLAN_OFFSET}))
typedef char fn_struct_ends_before_the_plan[sizeof (Fn) <= ${FN_PLAN_OFFSET} ? 1 : -1];

/* Drain side: slots of the typed record at tail position tl. */
static guint32 cap_slots_at (guint32 tl) {
  guint32 len;
  memcpy (&len, &shared.ring[(tl + 1) & shared.mask], 4);
  return rec_slots_for (len);
}

/* Copy the length and payload of the typed record at tl (k slots) to dst; clear the commit
   words its payload overwrote, so a stale byte pattern never passes for a committed record.
   Returns the bytes written. */
static guint32 cap_take (guint8 * dst, guint32 tl, guint32 k) {
  guint32 len, slot;
  memcpy (&len, &shared.ring[(tl + 1) & shared.mask], 4);
  guint32 total = 4 + len;
  guint32 first = (tl + 1) & shared.mask;
  guint32 c = ring_before_wrap (&shared, first, total);
  memcpy (dst, &shared.ring[first], c);
  if (c < total)
    memcpy (dst + c, &shared.ring[0], total - c);
  for (slot = tl + 1; slot < tl + k; slot++)
    shared.ring[slot & shared.mask].seq = 0;
  return total;
}
`;
