// The program closing Frida's own file descriptors. Frida keeps a program's close() away from
// them (its FileDescriptorGuard), not close_range() or closefrom(): a process that closes
// every descriptor from 3 up that way — CPython's subprocess does so in each child before
// exec, by default, and so does GLib's spawn — closes the agent's connection to the host. A
// followed child then hangs in Frida's exec handling and never runs the new program
// (measured: `forker closerange`, and CPython 3.11's subprocess.run, both stopped at the first
// child). So the program's calls to close_range() and closefrom() are routed here through its
// import slots (import_slots.ts; libc's close_range is a syscall stub too short for Frida to
// intercept), now and in libraries loaded later: a range holding descriptors Frida cloaks is
// closed in pieces around them, and the program sees success, as Frida's guard does for close().
// Not covered: close_range made with syscall() directly, and calls from inside libc.

import { afterEachDlopen } from "./dlopen_watch.js";
import { newImportSlots, writeSlot } from "./import_slots.js";

/** Cloaked descriptors are looked for up to here (Frida's own are low: its connection and a
 * few eventfds); the rest of a range is closed in one piece. */
const SCAN_LIMIT = 4095;

// Native first, like the exit hook (index.ts): in a fork's child that is not followed, this
// agent is a stale copy whose JS runtime may be locked forever; there a call goes straight to
// libc. Slots are put back only when the host detaches (the `detach` RPC): at exit there is no
// need, and a followed child's fresh agent routes them to its own guard before the child runs
// on. (Putting them back from dispose(), which Frida also ran at exit then and runs in a fork's
// stale copy, made the rare fork-inside-a-traced-function race of docs/performance.md hang or crash
// the parent: 6 of 49 runs of test_lifecycle.py's followed "return" test.) Left open: a
// session Frida ends on its own (that race) frees this code with the slots still pointing
// at it, until the daemon's re-attach routes them again.
const GUARD_C = `
extern int getpid (void);
extern int load_pid;
extern int strobe_libc_close_range (unsigned int, unsigned int, int);
extern void strobe_libc_closefrom (int);
extern int strobe_close_range_js (unsigned int, unsigned int, int);
int strobe_close_range (unsigned int first, unsigned int last, int flags) {
  if (getpid () != load_pid)
    return strobe_libc_close_range (first, last, flags);
  return strobe_close_range_js (first, last, flags);
}
void strobe_closefrom (int lowfd) {
  /* Where close_range fails (an old kernel), libc's closefrom falls back to close(), which
     Frida guards itself. */
  if (getpid () != load_pid || lowfd < 0 || strobe_close_range_js ((unsigned int) lowfd, ~0U, 0) != 0)
    strobe_libc_closefrom (lowfd);
}
`;

const NAMES: ReadonlySet<string> = new Set(["close_range", "closefrom"]);

interface Guard {
    cm: CModule;
    parts: object[];
    /** Slots routed here, with what they held (put back by `releaseFdGuard`). */
    routed: { slot: NativePointer; old: NativePointer }[];
}

let guard: Guard | null = null;
const scanned = new Set<string>();
let kept = 0;

/** Route the program's close_range()/closefrom() calls around Frida's descriptors, now and
 * in libraries loaded later. Returns why not, if it cannot. */
export function guardDescriptors(loadPid: number): string | null {
    const closeRange = Module.findGlobalExportByName("close_range");
    const getpid = Module.findGlobalExportByName("getpid");
    if (closeRange === null || getpid === null) return null; // nothing to guard
    // Without closefrom in libc (glibc < 2.34) no module can import it: the symbol only links.
    const closefrom = Module.findGlobalExportByName("closefrom") ?? closeRange;
    const libcCloseRange = new NativeFunction(closeRange, "int", ["uint", "uint", "int"]);
    const pid = Memory.alloc(4);
    pid.writeS32(loadPid);
    const js = new NativeCallback((first: number, last: number, flags: number) => closeAround(libcCloseRange, first, last, flags), "int", ["uint", "uint", "int"]);
    let cm: CModule;
    try {
        cm = new CModule(GUARD_C, { getpid, load_pid: pid, strobe_libc_close_range: closeRange, strobe_libc_closefrom: closefrom, strobe_close_range_js: js });
    } catch (e) {
        return `close_range() not guarded: ${e instanceof Error ? e.message : e}`;
    }
    guard = { cm, parts: [js, pid, libcCloseRange], routed: [] };
    const route = (): void => {
        const g = guard;
        if (g === null) return;
        for (const i of newImportSlots(NAMES, scanned)) {
            const to = i.name === "closefrom" ? g.cm.strobe_closefrom : g.cm.strobe_close_range;
            g.routed.push({ slot: i.slot, old: writeSlot(i.slot, to) });
        }
    };
    route();
    afterEachDlopen(loadPid, route);
    return null;
}

/** Put the slots back (the agent is going: its code goes with it). */
export function releaseFdGuard(): void {
    const g = guard;
    if (g === null) return;
    guard = null;
    for (const r of g.routed) writeSlot(r.slot, r.old);
}

/** close_range() leaving Frida's descriptors open: the pieces between them. */
function closeAround(libc: NativeFunction<number, [number, number, number]>, first: number, last: number, flags: number): number {
    const keep: number[] = [];
    for (let fd = first; fd <= Math.min(last, SCAN_LIMIT); fd++) {
        if (Cloak.hasFileDescriptor(fd)) keep.push(fd);
    }
    if (keep.length === 0) return libc(first, last, flags);
    kept += keep.length;
    let lo = first;
    let rc = 0;
    for (const fd of keep) {
        if (fd > lo && libc(lo, fd - 1, flags) !== 0) rc = -1;
        lo = fd + 1;
    }
    if (lo <= last && libc(lo, last, flags) !== 0) rc = -1;
    return rc;
}

/** Descriptors of Frida's that the guard kept open so far, and slots routed. */
export function fdGuardStats(): { closeRangeKept: number; slots: number } {
    return { closeRangeKept: kept, slots: guard?.routed.length ?? 0 };
}
