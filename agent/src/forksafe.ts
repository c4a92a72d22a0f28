// Fork safety. fork() copies this agent, with its JS heap, pending timers and thread observer,
// into the child. With child gating on, Frida unloads that stale copy inside the child (it
// runs our dispose(), pending timers and observer callbacks while it tears the script down)
// before it reports the child and a fresh agent is attached. A send() or a ring drain the
// stale copy makes there crashed the child with SIGSEGV (measured: about 3 forks in 4 once a
// JS hook had run in the parent). So every entry point that sends or drains asks
// `isForkedCopy()` first and does nothing in a stale copy.

import { afterEachDlopen } from "./dlopen_watch.js";
import { newImportSlots, writeSlot } from "./import_slots.js";

let getpidFn: NativeFunction<number, []> | null = null;

/** getpid(), live: Process.id is fixed at load and is the parent's pid in a forked copy. */
export function livePid(): number {
    if (getpidFn === null) {
        const addr = Module.findGlobalExportByName("getpid");
        if (addr === null) return Process.id;
        getpidFn = new NativeFunction(addr, "int", [], { scheduling: "exclusive", exceptions: "propagate", traps: "none" });
    }
    return getpidFn();
}

/** The process this agent was injected into (modules are evaluated at load, there). */
const loadPid = livePid();

/** True in the copy of this agent that a fork left in the child (not the one attached there). */
export function isForkedCopy(): boolean {
    return livePid() !== loadPid;
}

// The fork gate. With child gating on, Frida's own fork() listener stops its agent thread
// before fork() and restarts it after, in the parent and in the child. A send() made in
// between (a drain on the JS thread that was running when Frida stopped its loop) leaves its
// message queued for that stopped loop: the parent delivers it after fork(), and so does the
// child, on the parent's connection that no longer works there: the child dies of SIGSEGV
// (docs/performance.md, "Fork/exec following"). So the program's calls to fork() go through
// a gate first: it closes, waits for any send in progress, calls fork() (and so Frida's
// listener), and opens again. The batch senders (events.ts, fastpath.ts) go through
// `sendThroughGate()` and keep their data for the next round while it is closed. Both sides
// use `lock`-prefixed instructions (full barriers): either the sender sees the gate closed or
// the forking thread sees the sender and waits for it.
//
// Why not Interceptor.attach on fork(): a listener the script owns there makes Frida's
// teardown of the stale agent copy in the child close the *parent's* session (measured: every
// fork). Why hand-written code in pages of our own: the forked child returns from fork()
// into the gate after Frida has unloaded the stale agent copy (a CModule would be freed), and
// the gate stays in the program's import table if the agent is unloaded while it runs.
// So: the program's import slots for fork/vfork point at this code, in an mmap'd page that
// is never freed; its counters live in a second page.

/** Machine code of the gate (x86-64 SysV); data (GATE_DATA) = [u32 forks in progress, u32
 * sends in progress, u32 batches sent and not yet confirmed by the host, u32 forks that went
 * ahead without every confirmation, u64 the fork-intent callback, u64 the fork-done callback,
 * u32 the pid they belong to]. The callbacks are called only in that process (a stale gate a
 * fork copied must not enter the stale agent) and only while set (dispose() clears them). */
function gateCode(data: NativePointer, fork: NativePointer, usleep: NativePointer): number[] {
    const imm64 = (p: NativePointer): number[] => {
        const out: number[] = [];
        let v = uint64(p.toString());
        for (let i = 0; i < 8; i++) {
            out.push(v.and(0xff).toNumber());
            v = v.shr(8);
        }
        return out;
    };
    const imm32 = (v: number): number[] => [v & 0xff, (v >> 8) & 0xff, (v >> 16) & 0xff, (v >>> 24) & 0xff];
    const rcxData = [0x48, 0xb9, ...imm64(data)]; //           mov rcx, data
    // Call [rcx+slot] if this is the gate's own process and the callback is set; else go
    // to `skip`. (syscall clobbers rcx and r11; rcx is reloaded.)
    const callIfOwn = (slot: number, skip: string): Asm[] => [
        [0xb8, ...imm32(39), 0x0f, 0x05], //                   mov eax, SYS_getpid; syscall
        rcxData,
        [0x3b, 0x41, GATE_DATA.pid], //                          cmp eax, [rcx+pid]
        { jcc: 0x75, to: skip }, //                               jne skip
        [0x48, 0x8b, 0x41, slot], //                             mov rax, [rcx+slot]
        [0x48, 0x85, 0xc0], //                                   test rax, rax
        { jcc: 0x74, to: skip }, //                               jz skip
        [0xff, 0xd0], //                                         call rax
    ];
    return assemble([
        [0x48, 0xb8, ...imm64(data)], //                         mov rax, data
        [0xf0, 0xff, 0x00], //                                   lock inc dword [rax]      (close)
        { label: "spin" },
        [0x8b, 0x48, 0x04], //                                   mov ecx, [rax+4]          (sends in progress)
        [0x85, 0xc9], //                                         test ecx, ecx
        { jcc: 0x74, to: "intent" }, //                           jz intent
        [0xf3, 0x90], //                                         pause
        { jcc: 0xeb, to: "spin" }, //                             jmp spin
        { label: "intent" },
        [0x53], //                                               push rbx                  (also aligns the calls)
        ...callIfOwn(GATE_DATA.intent, "receipts"), //           tell the host; it holds its messages and confirms
        { label: "receipts" },
        [0xbb, ...imm32(RECEIPT_WAITS)], //                      mov ebx, RECEIPT_WAITS
        { label: "wait" },
        [0x48, 0xb8, ...imm64(data)], //                         mov rax, data
        [0x8b, 0x48, 0x08], //                                   mov ecx, [rax+8]          (unconfirmed sends)
        [0x85, 0xc9], //                                         test ecx, ecx
        { jcc: 0x74, to: "go" }, //                               jz go
        [0xff, 0xcb], //                                         dec ebx
        { jcc: 0x74, to: "give_up" }, //                          jz give_up
        [0xbf, ...imm32(RECEIPT_WAIT_US)], //                    mov edi, RECEIPT_WAIT_US
        [0x48, 0xb8, ...imm64(usleep)], //                       mov rax, usleep
        [0xff, 0xd0], //                                         call rax
        { jcc: 0xeb, to: "wait" }, //                             jmp wait
        { label: "give_up" },
        [0xc7, 0x40, 0x08, 0, 0, 0, 0], //                       mov dword [rax+8], 0
        [0xf0, 0xff, 0x40, 0x0c], //                             lock inc dword [rax+12]   (forks that gave up)
        { label: "go" },
        [0x48, 0xb8, ...imm64(fork)], //                         mov rax, fork
        [0xff, 0xd0], //                                         call rax
        [0x89, 0xc3], //                                         mov ebx, eax              (the result, kept)
        [0x85, 0xc0], //                                         test eax, eax
        { jcc: 0x75, to: "parent" }, //                           jnz parent                (or fork failed)
        rcxData,
        [0xc7, 0x41, 0x08, 0, 0, 0, 0], //                       mov dword [rcx+8], 0      (child: no host here)
        { jcc: 0xeb, to: "open" }, //                             jmp open
        { label: "parent" },
        ...callIfOwn(GATE_DATA.done, "open"), //                 the host may send again
        { label: "open" },
        rcxData,
        [0x89, 0xd8], //                                         mov eax, ebx
        [0x5b], //                                               pop rbx
        [0xf0, 0xff, 0x09], //                                   lock dec dword [rcx]      (open; eax kept)
        [0xc3], //                                               ret
    ]);
}

/** Byte offsets in the gate's data page (gateCode). */
const GATE_DATA = { intent: 16, done: 24, pid: 32 } as const;

/** Code with labels and short jumps (`jcc` is the one-byte opcode: 0x74 jz, 0x75 jnz, 0xeb jmp). */
type Asm = number[] | { label: string } | { jcc: number; to: string };

function assemble(parts: Asm[]): number[] {
    const at = new Map<string, number>();
    let pc = 0;
    for (const p of parts) {
        if (Array.isArray(p)) pc += p.length;
        else if ("label" in p) at.set(p.label, pc);
        else pc += 2;
    }
    const out: number[] = [];
    for (const p of parts) {
        if (Array.isArray(p)) out.push(...p);
        else if ("jcc" in p) {
            const to = at.get(p.to);
            const rel = to === undefined ? NaN : to - (out.length + 2);
            if (!(rel >= -128 && rel <= 127)) throw new Error(`fork gate: jump to ${p.to} out of range`);
            out.push(p.jcc, rel & 0xff);
        }
    }
    return out;
}

/** How long the gate waits for the host to confirm messages already sent: at most
 * RECEIPT_WAITS sleeps of RECEIPT_WAIT_US (≈ 0.25 s), then fork() goes ahead anyway. */
const RECEIPT_WAITS = 500;
const RECEIPT_WAIT_US = 500;

const GATE_C = `
extern volatile unsigned int gate[2]; /* [0] forks in progress, [1] sends in progress */

static inline unsigned int xadd32 (volatile unsigned int * p, unsigned int v) {
  asm volatile ("lock; xaddl %0, %1" : "+r" (v), "+m" (*p) : : "memory");
  return v;
}

int strobe_send_begin (void) {
  xadd32 (&gate[1], 1);
  if (xadd32 (&gate[0], 0) == 0)
    return 1;
  xadd32 (&gate[1], (unsigned int) -1);
  return 0;
}

void strobe_send_end (void) {
  xadd32 (&gate[1], (unsigned int) -1);
}
`;

interface Gate {
    cm: CModule;
    /** The gate's machine code (import slots point here). */
    code: NativePointer;
    /** Import slots of fork/vfork routed through the gate. */
    slots: number;
    /** The gate's counters (gateCode). */
    data: NativePointer;
    begin: NativeFunction<number, []>;
    end: NativeFunction<void, []>;
    /** The gate calls these around fork() (kept referenced: the gate holds their addresses). */
    callbacks: NativeCallback<"void", []>[];
}

let gate: Gate | null = null;

/** What `installForkGate` did: whether the program calls fork() itself, or why there is no gate. */
export interface ForkGateResult {
    /** Import slots of fork/vfork now routed through the gate (0: the program does not fork). */
    slots: number;
    /** Why fork() calls are not gated, if they are not. */
    error: string | null;
    /** Batches sent and not yet confirmed by the host (receipts, below). */
    unconfirmed: number;
    /** Receipts the host sent back so far. */
    confirmed: number;
    /** Forks that waited ≈ 0.25 s for receipts and went ahead without them. */
    receiptTimeouts: number;
}

/** Route the program's fork() calls through the gate (children are followed), now and in
 * libraries it loads later: `onLateForker` runs (on the loading thread, before dlopen
 * returns) when a library loaded later brings fork() calls of its own. */
export function installForkGate(onLateForker: () => void): ForkGateResult {
    if (gateError !== null || loadsWatched) return forkGateStats();
    if (Process.arch !== "x64" || Process.platform !== "linux") {
        gateError = `no fork gate on ${Process.platform}/${Process.arch}`;
        return forkGateStats();
    }
    const slots = newForkImportSlots();
    if (slots.length > 0) routeThroughGate(slots);
    if (gateError === null) watchLibraryLoads(onLateForker);
    return forkGateStats();
}

/** Whether the program's fork() calls go through the gate (it forks, children are followed). */
export function forksGated(): boolean {
    return gate !== null && gate.slots > 0;
}

/** The gate's state: slots routed through it so far, or why fork() calls are not gated. */
export function forkGateStats(): ForkGateResult {
    return { slots: gate?.slots ?? 0, error: gateError, unconfirmed: getUnconfirmed(), confirmed, receiptTimeouts: gate?.data.add(12).readU32() ?? 0 };
}

let gateError: string | null = null;
let loadsWatched = false;
/** Modules whose imports were looked at (path@base: a library loaded again elsewhere is new). */
const scanned = new Set<string>();

/** The gate itself (once), then each slot pointed at it. Sets `gateError` if it cannot be built. */
function routeThroughGate(slots: NativePointer[]): void {
    if (gate === null) {
        const fork = Module.findGlobalExportByName("fork");
        const usleep = Module.findGlobalExportByName("usleep");
        const mmapAddr = Module.findGlobalExportByName("mmap");
        if (fork === null || usleep === null || mmapAddr === null) {
            gateError = "fork(), usleep() or mmap() not found";
            return;
        }
        const mmap = new NativeFunction(mmapAddr, "pointer", ["pointer", "size_t", "int", "int", "int", "size_t"]);
        const PROT_RW = 3, MAP_PRIVATE_ANON = 0x22;
        const pages = mmap(NULL, 2 * Process.pageSize, PROT_RW, MAP_PRIVATE_ANON, -1, 0);
        if (pages.equals(ptr(-1))) {
            gateError = "mmap failed";
            return;
        }
        const code = pages;
        const data = pages.add(Process.pageSize);
        code.writeByteArray(gateCode(data, fork, usleep));
        Memory.protect(code, Process.pageSize, "r-x");
        const cm = new CModule(GATE_C, { gate: data });
        const opts = { scheduling: "exclusive", exceptions: "propagate", traps: "none" } as const;
        const intent = new NativeCallback(announceFork, "void", []);
        const done = new NativeCallback(() => send({ type: "forked" }), "void", []);
        gate = {
            cm,
            code,
            slots: 0,
            data,
            begin: new NativeFunction(cm.strobe_send_begin, "int", [], opts),
            end: new NativeFunction(cm.strobe_send_end, "void", [], opts),
            callbacks: [intent, done],
        };
        data.add(GATE_DATA.pid).writeU32(loadPid);
        data.add(GATE_DATA.intent).writePointer(intent);
        data.add(GATE_DATA.done).writePointer(done);
        requestReceipt(); // confirms every batch sent before the gate existed
    }
    for (const slot of slots) writeSlot(slot, gate.code);
    gate.slots += slots.length;
}

const FORK_NAMES: ReadonlySet<string> = new Set(["fork", "vfork"]);

/** Import slots of fork/vfork in modules not looked at before. */
function newForkImportSlots(): NativePointer[] {
    return newImportSlots(FORK_NAMES, scanned).map((i) => i.slot);
}

/** Libraries loaded later: their fork() imports are routed when dlopen returns
 * (dlopen_watch.ts). A constructor that forks while dlopen runs is not covered. */
function watchLibraryLoads(onLateForker: () => void): void {
    loadsWatched = true;
    afterEachDlopen(loadPid, () => {
        if (gateError !== null) return;
        const slots = newForkImportSlots();
        if (slots.length === 0) return;
        routeThroughGate(slots);
        if (gateError !== null) send({ type: "log", level: "warning", message: `forked children may crash while followed: ${gateError}` });
        onLateForker();
    });
}

/**
 * Run `send` unless a fork is in progress; true if it ran. Callers keep what they would have
 * sent and try again later. Without the gate (children not followed), always runs.
 */
export function sendThroughGate(send: () => void): boolean {
    const g = gate;
    if (g === null || gateDepth > 0) {
        // Nested (a drain flushing JS events first): the outer call holds the gate open, and
        // what it sends must not overtake what the inner call would have deferred.
        send();
        return true;
    }
    if (g.begin() === 0) return false;
    gateDepth++;
    try {
        send();
    } finally {
        gateDepth--;
        g.end();
    }
    return true;
}

/** Gated sends running on this (JS) thread; JS runs under one lock, so one counter does. */
let gateDepth = 0;

// Receipts. The gate alone left a rarer crash of followed children (7 of 300 runs of
// tracing_wrappers' plugin fork test beside two busy loops; docs/performance.md). Its core
// dumps show the child inside Frida's fork recovery, answering a D-Bus call that had reached
// the parent's agent just before fork() (GDBus's call_in_idle_cb, then a reply on the
// parent's connection, whose worker the child does not have: SIGSEGV). The host sends such
// calls when it posts to the agent; the one it sent unasked, all the time, was the daemon's
// events-ack (flow control, fastpath.ts). So once there is a gate:
//   - every batch asks the host for a receipt (`rx: 1`, first in the payload), and the
//     host answers { type: "rx", ack? } (agent/host.py), carrying the latest events-ack,
//     which it no longer posts on its own; an agent out of credit asks with a marker;
//   - the gate, once closed, waits until every receipt asked for has arrived (at most
//     ≈ 0.25 s): then no message from the host is on its way (RPCs too: below).
// Messages arrive in order, so the receipt of a marker sent when the gate is built covers
// what was sent before it. Programs that never fork get no gate and no receipts.

let confirmed = 0;

/** send() for the batch senders: with a receipt once there is a gate. */
export function sendBatch(message: object, data?: ArrayBuffer | null): void {
    if (gate === null) {
        send(message, data);
        return;
    }
    expectReceipt(gate);
    send({ rx: 1, ...message }, data);
}

/** The gate's count of receipts asked for and not yet here (the gate zeroes it when it gives
 * up waiting, and in the child). */
function unconfirmedWord(g: Gate): NativePointer {
    return g.data.add(8);
}

function expectReceipt(g: Gate): void {
    const word = unconfirmedWord(g);
    word.writeU32(word.readU32() + 1);
}

function getUnconfirmed(): number {
    return gate === null ? 0 : unconfirmedWord(gate).readU32();
}

/** Called with the daemon's events-ack when one rides on a receipt (fastpath.ts). */
let ackListener: ((seq: number) => void) | null = null;

export function onPiggybackedAck(listener: (seq: number) => void): void {
    ackListener = listener;
}

/** Ask the host for a receipt (and so for the daemon's latest events-ack, which the host
 * holds for receipts once there is a gate) unless one is on its way. */
export function requestReceipt(): void {
    if (gate !== null && getUnconfirmed() === 0) {
        expectReceipt(gate);
        send({ rx: 1, type: "receipt" });
    }
}

// Messages the host starts (RPCs: a status poll's hit count, a trace added, a memory read)
// could be in Frida's queues at fork() too, with the crash above: a tight `debug_session
// status` loop on a program forking 40 times crashed 12 children in 120 (each lock incl with
// rdi = 0 in frida-agent, the D-Bus reply on the parent's connection). So the gate, closed,
// announces the fork (`announceFork`, on the forking thread, before fork()): the host holds
// new RPCs and posts for this process, waits for the replies of those under way, then sends
// the receipt the gate waits for; after fork() the parent says "forked" and the host goes on
// (agent/host.py `_fork_intent`).

/** The gate's first callback: ask the host to hold its messages, with a receipt. */
function announceFork(): void {
    if (gate === null) return;
    expectReceipt(gate);
    send({ rx: 1, type: "fork" });
}

/** The gate outlives this agent (its page is never freed): it must not call into a runtime
 * that is gone. dispose() runs before an unload and in a fork's stale copy. */
export function retireForkGate(): void {
    if (gate === null) return;
    gate.data.add(GATE_DATA.intent).writePointer(NULL);
    gate.data.add(GATE_DATA.done).writePointer(NULL);
}

function onReceipt(message: { ack?: number }): void {
    if (typeof message.ack === "number") ackListener?.(message.ack);
    confirmed++;
    const n = getUnconfirmed();
    if (gate !== null && n > 0) unconfirmedWord(gate).writeU32(n - 1);
    recv("rx", onReceipt);
}
recv("rx", onReceipt);
