// Event buffer: events are batched and sent as { type: "events", format, events: [...] } every
// FLUSH_INTERVAL_MS or when MAX_BUFFERED are waiting, whichever comes first.
// Once the process is exiting, every event is sent at once (no timer will fire again).

import { isForkedCopy, sendThroughGate } from "./forksafe.js";

export const MAX_BUFFERED = 1000;
export const FLUSH_INTERVAL_MS = 10;

/**
 * Events travel as arrays, not objects: QuickJS serializes arrays about twice as fast, and
 * serialization is most of the per-call cost. The daemon (src/frida/host.rs) expands them
 * into the documented objects {k, fn, call, parent, tid, ts, args | ret, dur}.
 *
 *   enter: [0, fn, call, parent, tid, ts, arg0, arg1, ...]   args as hex strings
 *   exit:  [1, fn, call, parent, tid, ts, ret, dur]           ret as hex string, dur in ns
 *
 *   thread: [2, tid, name]                             the thread's name from here on (threads.ts)
 *   sampling: [3, fn, on, every, ts]                   cost sampling of a JS-path function
 *                                                      switched on (1) or off (0) (cost_sampling.ts)
 *
 * parent is the call id of the innermost traced call on the same thread, or null.
 */
export const ENTER = 0;
export const EXIT = 1;
export const THREAD = 2;
export const SAMPLING = 3;
export type AgentEvent = (number | string | null)[];

let buffer: AgentEvent[] = [];
let timer: ReturnType<typeof setTimeout> | null = null;
let exiting = false;
let sentTotal = 0;
let sentBatches = 0;

/** How many batches were sent so far. */
export function batchesSent(): number {
    return sentBatches;
}

export function push(ev: AgentEvent): void {
    buffer.push(ev);
    if (exiting || buffer.length >= MAX_BUFFERED) {
        flush();
    } else if (timer === null) {
        timer = setTimeout(onTimer, FLUSH_INTERVAL_MS);
    }
}

function onTimer(): void {
    timer = null;
    flush();
}

/** Send everything buffered now (synchronously queues the message). */
export function flush(): void {
    if (isForkedCopy()) {
        buffer = []; // a fork's stale copy must not send, and has no host to send to (forksafe.ts)
        return;
    }
    if (timer !== null) {
        clearTimeout(timer);
        timer = null;
    }
    if (buffer.length === 0) return;
    const sent = sendThroughGate(() => {
        const events = buffer;
        buffer = [];
        sentTotal += events.length;
        sentBatches++;
        send({ type: "events", format: "array-v1", events });
    });
    // A fork in progress (forksafe.ts): keep the events for the next round.
    if (!sent && timer === null) timer = setTimeout(onTimer, FLUSH_INTERVAL_MS);
}

/** From now on, send every event immediately: the process is going away. */
export function markExiting(): void {
    exiting = true;
    flush();
}

export function stats(): { buffered: number; sent: number } {
    return { buffered: buffer.length, sent: sentTotal };
}
