// The drain's outbox: a byte ring in shared memory that the daemon maps too, so a batch of
// ring records (fastpath.ts drainRing) travels as its place in the outbox, a small
// `events_bin` message through Frida, and its bytes never cross Frida's channel or the Python
// host. Those two copied and re-framed every byte: on the SQLite bench about 0.8 µs of CPU a
// typed row, beside the target's own ≈ 0.25 (docs/performance.md, "Fourteenth run").
//
// The memory is a memfd (MAP_SHARED). The daemon opens it as /proc/PID/fd/N, checks the
// token written here, maps it and answers `outbox-ok`; the descriptor is closed then, so the
// program never sees it for long. Until that answer (or when the daemon cannot open it:
// another user, no /proc) batches carry their bytes as before.
//
// The ring: HEADER bytes (the daemon's read cursor at 0 — logical bytes consumed — and the
// token at 8), then `size` bytes. A batch is written at logical offset `start` (physically
// start % size, never across the end: the tail is skipped) and named in its message as
// `outbox: [start, length]`; the daemon copies it out when it reads the message and moves
// the cursor past it. Messages are read in order, so the cursor only moves forward. A batch
// that finds no room (the daemon behind) carries its bytes instead: nothing waits and nothing
// is dropped here.

import { isForkedCopy } from "./forksafe.js";

const HEADER = 64;
const MFD_CLOEXEC = 1;
const SYS_MEMFD_CREATE = 319;

interface Box {
    base: NativePointer;
    size: number;
    /** Logical end of what was written. */
    written: number;
    fd: number;
    /** The daemon mapped it. */
    ready: boolean;
}

let box: Box | null = null;
let batches = 0;
let fallbacks = 0;
let unavailable: string | null = null;

const libc = (name: string): NativePointer => Module.getGlobalExportByName(name);

/** Create the outbox (room for a few batches of at most `maxBatch` bytes) and offer it to
 *  the daemon. Batches carry their own bytes if this fails. */
export function openOutbox(maxBatch: number): void {
    if (box !== null || unavailable !== null) return;
    try {
        const size = Math.max(4 * maxBatch, 4 << 20) + 4095 & ~4095;
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
        // Not secret: it tells the daemon that descriptor N is this mapping, not a file the
        // program opened under the same number since.
        const token = uint64(Math.floor(Math.random() * 0xffffffff)).shl(32).or(uint64(Math.floor(Math.random() * 0xffffffff)));
        base.add(8).writeU64(token);
        box = { base, size, written: 0, fd, ready: false };
        send({ type: "outbox", fd, size: HEADER + size, token: token.toString() });
    } catch (e) {
        unavailable = e instanceof Error ? e.message : String(e);
    }
}

function closeFd(fd: number): void {
    new NativeFunction(libc("close"), "int", ["int"])(fd);
}

function onAnswer(message: { ok?: boolean; why?: string }): void {
    recv("outbox-ok", onAnswer);
    if (box === null || box.fd < 0 || isForkedCopy()) return;
    closeFd(box.fd);
    box.fd = -1;
    if (message.ok === true) box.ready = true;
    else unavailable = message.why ?? "the daemon could not map it";
}
recv("outbox-ok", onAnswer);

/** Where a batch of at most `maxLen` bytes may be written now, or null: send its bytes. */
export function outboxRoom(maxLen: number): { at: NativePointer; start: number } | null {
    const b = box;
    if (b === null || !b.ready || maxLen > b.size) return null;
    let start = b.written;
    const phys = start % b.size;
    if (phys + maxLen > b.size) start += b.size - phys;
    if (start + maxLen - b.base.readU64().toNumber() > b.size) {
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
