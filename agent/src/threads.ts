// Thread names for events. Names come from Frida's thread observer (added, renamed, removed)
// and, for a thread the observer has not reported, from the kernel (/proc/self/task/TID/comm).
//
// Names travel in the event stream itself, as records [THREAD, tid, name]: for every thread
// the observer reports (added or renamed), and just before a thread's first JS-path event.
// The daemon reads them in order, so every event carries the name its thread had when the
// event happened, and trace records stay free of a per-event string. Events of the native
// fast path travel separately: `beforeRename` drains them first, so events from before a
// rename keep the old name.

import { flush, push, THREAD } from "./events.js";
import { isForkedCopy } from "./forksafe.js";

const names = new Map<number, string | null>();
const announced = new Set<number>();
const changed = new Set<number>();
let observer: ThreadObserver | null = null;
let scheduled = false;

function schedule(beforeRename: () => void): void {
    if (scheduled) return;
    scheduled = true;
    setTimeout(() => {
        scheduled = false;
        beforeRename();
        for (const tid of changed) {
            announced.add(tid);
            // The name now, not the one the observer saw: a thread that named itself right
            // after it started (before the observer noticed the rename) has already had its
            // fast-path events announced under the new name, and a stale record sent after
            // them would relabel its next events.
            const live = liveName(tid);
            if (live !== undefined) names.set(tid, live);
            push([THREAD, tid, names.get(tid) ?? null]);
        }
        changed.clear();
        flush();
    }, 0);
}

/** Start watching thread creation and renames (idempotent). */
export function startThreadObserver(beforeRename: () => void = () => {}): void {
    if (observer !== null) return;
    try {
        observer = Process.attachThreadObserver({
            // Observer callbacks also run inside Frida's fork handling (its own threads come
            // and go): sending from there stalls the fork (measured: children not reported
            // for seconds). So they only note the change; a timer sends it.
            onAdded(t) {
                if (isForkedCopy()) return; // Frida tearing down a fork's stale copy
                names.set(t.id, t.name ?? null);
                changed.add(t.id);
                schedule(beforeRename);
            },
            onRenamed(t) {
                if (isForkedCopy()) return; // Frida tearing down a fork's stale copy
                names.set(t.id, t.name ?? null);
                if (t.id === Process.getCurrentThreadId()) {
                    // A thread naming itself (pthread_setname_np(pthread_self(), ...)): its
                    // next events must carry the new name, so the record goes out now, even
                    // with other threads' changes pending (deferred, its next fast-path
                    // records would be drained and labelled before it).
                    changed.delete(t.id);
                    beforeRename();
                    announced.add(t.id);
                    push([THREAD, t.id, t.name ?? null]);
                    flush();
                    return;
                }
                changed.add(t.id);
                schedule(beforeRename);
            },
            onRemoved(t) {
                if (isForkedCopy()) return; // Frida tearing down a fork's stale copy
                names.delete(t.id);
                // A recycled thread id must be announced again with its new name.
                announced.delete(t.id);
            },
        });
    } catch (_) {
        // No observer (older Frida, unusual platform): names are looked up on first sight.
    }
}

/** The kernel's name of thread `tid` now; undefined if it cannot be read (gone). */
function liveName(tid: number): string | null | undefined {
    try {
        // The kernel's name rather than Process.enumerateThreads(): enumerating from inside a
        // hook of a forked child crashes it (SIGSEGV, seen with JS-path hooks).
        return File.readAllText(`/proc/self/task/${tid}/comm`).trim() || null;
    } catch (_) {
        return undefined; // the thread is gone or /proc is unavailable
    }
}

/** The current name of thread `tid`, or null if it has none or is unknown. */
export function threadName(tid: number): string | null {
    const known = names.get(tid);
    if (known !== undefined) return known;
    const name = liveName(tid) ?? null;
    names.set(tid, name);
    return name;
}

/**
 * Called before a thread's first event: puts its name into the stream once. `name`: the name
 * the thread had at that event, when the caller knows it (the fast path reads it natively;
 * null: unknown, none is announced rather than reading /proc from inside a drain, which can
 * run in an observer callback where file I/O stalls the target).
 */
export function announceThread(tid: number, name?: string | null): void {
    if (announced.has(tid)) return;
    announced.add(tid);
    push([THREAD, tid, name !== undefined ? (name ?? names.get(tid) ?? null) : threadName(tid)]);
}
