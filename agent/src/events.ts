// Trace events leave in batches (batch.ts): { type: "events", format, events: [...] } every
// FLUSH_INTERVAL_MS or when MAX_BUFFERED are waiting, whichever comes first. Once the process
// is exiting, every event is sent at once (no timer will fire again).

import { Batch, markBatchesExiting } from "./batch.js";
import { sendBatch } from "./forksafe.js";

const MAX_BUFFERED = 1000;

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

let sentTotal = 0;
let sentBatches = 0;

const events = new Batch<AgentEvent>(MAX_BUFFERED, (batch) => {
    sentTotal += batch.length;
    sentBatches++;
    sendBatch({ type: "events", format: "array-v1", events: batch });
});

/** Other batches that leave whenever the events do (logpoint_messages.ts). */
const alongside: (() => void)[] = [];

/** Run `f` at every flush, before the events are sent. */
export function flushAlongside(f: () => void): void {
    alongside.push(f);
}

/** How many batches were sent so far. */
export function batchesSent(): number {
    return sentBatches;
}

export function push(ev: AgentEvent): void {
    events.push(ev);
}

/** Send everything buffered now (synchronously queues the message). */
export function flush(): void {
    for (const f of alongside) f();
    events.flush();
}

/** From now on, send every event immediately: the process is going away. */
export function markExiting(): void {
    markBatchesExiting();
    flush();
}

export function stats(): { buffered: number; sent: number } {
    return { buffered: events.length, sent: sentTotal };
}
