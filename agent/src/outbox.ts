// The drain's outbox: a byte ring in shared memory that the daemon maps too, so a batch of
// ring records (fastpath.ts drainRing) travels as its place in the outbox, a small
// `events_bin` message through Frida, and its bytes never cross Frida's channel or the Python
// host. Those two copied and re-framed every byte: on the SQLite bench about 0.8 µs of CPU a
// typed row, beside the target's own ≈ 0.25 (docs/performance.md, "Fourteenth run").
//
// The memory is a memfd (MAP_SHARED). The agent offers it with an `outbox` message (its
// descriptor, size and a token written at 8); the daemon opens it as /proc/PID/fd/N, checks
// the token, maps it and sets the word at 16. Seeing that word set, the agent closes the
// descriptor (the program never sees it for long) and starts using the outbox; until then,
// and for good when the daemon has not mapped it within OFFER_MS (another user, no /proc),
// batches carry their bytes. The answer travels in the shared memory, not as a message: a
// message the agent did not ask for may sit in Frida's queues when the program forks, and the
// child would answer it on the parent's connection (forksafe.ts, "Receipts").
//
// Not where forks are followed (the fork gate, forksafe.ts): there batches carry their bytes
// with receipts, as before the outbox. With it, `tests/mcp/test_lifecycle.py`'s followed
// "return" test (a fork inside a traced function) crashed the parent or the child in 2 of 120
// runs, against none in 100 without. Later parallel loops crashed as often without it (4 of
// 120) as with it (4 of 145), and it was turned on there, but CI then failed
// `test_fork_children_are_followed` (the parent hung, its child never reported): off again
// until the cause is known. The mapping is also kept out of forked children (MADV_DONTFORK):
// only the process that made it writes there.
//
// The ring: HEADER bytes (the daemon's read cursor at 0 — logical bytes consumed —, the
// token at 8, the daemon's "mapped" word at 16), then `size` bytes. A batch is written at
// logical offset `start` (physically start % size, never across the end: the tail is
// skipped) and named in its message as `outbox: [start, length]`; the daemon copies it out
// when it reads the message and moves the cursor past it. Messages are read in order, so the
// cursor only moves forward. When it has caught up, the next batch starts over at the
// beginning: the ring's later pages are touched only while the daemon lags. A batch that
// finds no room (the daemon behind) carries its bytes instead: nothing waits and nothing is
// dropped here.

import { forksGated, sendThroughGate } from "./forksafe.js";

const HEADER = 64;
const MAPPED = 16;
/** How long an offer may go unanswered before the outbox is given up. */
const OFFER_MS = 10_000;
const MFD_CLOEXEC = 1;
const SYS_MEMFD_CREATE = 319;

interface Box {
    base: NativePointer;
    size: number;
    /** Logical end of what was written. */
    written: number;
    /** Where the current lap's batches begin (outboxRoom, when the daemon had read
     * everything): nothing before it is unread, whatever the cursor says. */
    since: number;
    token: UInt64;
    /** Open until the daemon has mapped it (or the offer is given up). */
    fd: number;
    /** When the offer was sent (0: not yet: a fork was in progress). */
    offeredAt: number;
    /** The daemon mapped it. */
    ready: boolean;
}

let box: Box | null = null;
let batches = 0;
let fallbacks = 0;
let unavailable: string | null = null;

const libc = (name: string): NativePointer => Module.getGlobalExportByName(name);

/** Create the outbox (room for eight batches of at most `maxBatch` bytes: as many as flow
 *  control lets be unacknowledged at the default batch size) and offer it to the daemon.
 *  Batches carry their own bytes if this fails. While the daemon keeps up only the ring's
 *  first quarter is touched; pages further on are given back as the daemon reads them
 *  (src/engine/outbox.rs `release_pages`). */
export function openOutbox(maxBatch: number): void {
    if (box !== null || unavailable !== null) return;
    if (forksGated()) {
        unavailable = "children are followed through the fork gate";
        return;
    }
    try {
        const size = Math.max(8 * maxBatch, 4 << 20) + 4095 & ~4095;
        const syscall = new NativeFunction(libc("syscall"), "int64", ["int64", "pointer", "uint64"]);
        const fd = syscall(SYS_MEMFD_CREATE, Memory.allocUtf8String("strobe-outbox"), MFD_CLOEXEC).toNumber();
        if (fd < 0) throw new Error("memfd_create failed");
        const ftruncate = new NativeFunction(libc("ftruncate"), "int", ["int", "int64"]);
        const mmap = new NativeFunction(libc("mmap"), "pointer", ["pointer", "size_t", "int", "int", "int", "int64"]);
        const PROT_RW = 3, MAP_SHARED = 1;
        const base = ftruncate(fd, HEADER + size) === 0 ? mmap(NULL, HEADER + size, PROT_RW, MAP_SHARED, fd, 0) : ptr(-1);
        if (base.equals(ptr(-1))) {
            closeFd(fd);
            throw new Error("cannot map a memfd");
        }
        const MADV_DONTFORK = 10;
        new NativeFunction(libc("madvise"), "int", ["pointer", "size_t", "int"])(base, HEADER + size, MADV_DONTFORK);
        // Not secret: it tells the daemon that descriptor N is this mapping, not a file the
        // program opened under the same number since.
        const token = uint64(Math.floor(Math.random() * 0xffffffff)).shl(32).or(uint64(Math.floor(Math.random() * 0xffffffff)));
        base.add(8).writeU64(token);
        box = { base, size, written: 0, since: 0, token, fd, offeredAt: 0, ready: false };
        offer(box);
    } catch (e) {
        unavailable = e instanceof Error ? e.message : String(e);
    }
}

function closeFd(fd: number): void {
    new NativeFunction(libc("close"), "int", ["int"])(fd);
}

function offer(b: Box): void {
    if (sendThroughGate(() => send({ type: "outbox", fd: b.fd, size: HEADER + b.size, token: b.token.toString() }))) b.offeredAt = Date.now();
}

/** Whether the daemon has mapped the outbox by now; closes the descriptor once it has, or
 *  once the offer is given up. */
function mapped(b: Box): boolean {
    if (forksGated()) {
        // A library loaded since brought fork() calls: batches carry their bytes from now on.
        if (b.fd >= 0) closeFd(b.fd);
        b.fd = -1;
        b.ready = false;
        unavailable = "children are followed through the fork gate";
        return false;
    }
    if (b.ready) return true;
    if (b.fd < 0) return false;
    if (b.base.add(MAPPED).readU32() === 1) {
        b.ready = true;
    } else if (b.offeredAt === 0) {
        offer(b);
        return false;
    } else if (Date.now() - b.offeredAt < OFFER_MS) {
        return false;
    } else {
        unavailable = "the daemon did not map it";
    }
    closeFd(b.fd);
    b.fd = -1;
    return b.ready;
}

/** Where a batch of at most `maxLen` bytes may be written now, or null: send its bytes. */
export function outboxRoom(maxLen: number): { at: NativePointer; start: number } | null {
    const b = box;
    if (b === null || !mapped(b) || maxLen > b.size) return null;
    const consumed = b.base.readU64().toNumber();
    let start = b.written;
    // Nothing left unread: start over at the beginning (the next lap), so that only the pages
    // the largest batch needs are ever touched — each is resident in the daemon too.
    const empty = consumed >= b.written;
    if (empty) {
        start = Math.ceil(start / b.size) * b.size;
        b.since = start;
    }
    const phys = start % b.size;
    if (phys + maxLen > b.size) start += b.size - phys;
    // Unread: from the daemon's cursor, or from where this lap's batches began if it has not
    // reached them yet (what lies between was skipped, not written).
    if (!empty && start + maxLen - Math.max(consumed, b.since) > b.size) {
        fallbacks++;
        return null;
    }
    return { at: b.base.add(HEADER + (start % b.size)), start };
}

/** The batch written at `start` (outboxRoom) holds `len` bytes and is being sent. */
export function outboxWritten(start: number, len: number): void {
    if (box === null) return;
    box.written = start + len;
    batches++;
}

export function outboxStats(): object {
    return { ready: box?.ready ?? false, unavailable, batches, fallbacks, bytes: box?.size ?? 0 };
}
