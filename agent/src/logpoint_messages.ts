// Logpoint messages leave in batches, like trace events (events.ts):
//   { type: "logpoints", items: [[logpointId, message, threadId, ts], ...] }
// every FLUSH_INTERVAL_MS or when MAX_BATCH are waiting, and with every events flush (before
// a pause is reported, at exit, at a crash, at unload). One send() per message cost the hit's
// thread a Frida message of its own and the host one frame each: at the budget (2,000 a
// second), on a loaded two-core machine, the host fell behind and an RPC reply queued behind
// its backlog for 60 s (docs/performance.md).

import { Batch } from "./batch.js";
import { flushAlongside } from "./events.js";
import { sendBatch } from "./forksafe.js";

const MAX_BATCH = 500;

const messages = new Batch<[string, string, number, number]>(MAX_BATCH, (items) => sendBatch({ type: "logpoints", items }));

/** Queue one logpoint message (sent within FLUSH_INTERVAL_MS). */
export function queueLogpointMessage(logpointId: string, message: string, threadId: number, ts: number): void {
    messages.push([logpointId, message, threadId, ts]);
}

flushAlongside(() => messages.flush());
