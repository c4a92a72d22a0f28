// A buffer of agent messages that leaves as one send(): every FLUSH_INTERVAL_MS, when `max`
// are waiting, or at once while the process is exiting (no timer will fire again). Trace
// events (events.ts) and logpoint messages (logpoint_messages.ts) travel this way.

import { isForkedCopy, sendThroughGate } from "./forksafe.js";

export const FLUSH_INTERVAL_MS = 10;

let exiting = false;

/** From now on every batch leaves with its first item: the process is going away. */
export function markBatchesExiting(): void {
    exiting = true;
}

export class Batch<T> {
    private items: T[] = [];
    private timer: ReturnType<typeof setTimeout> | null = null;

    /** `send` gets a non-empty batch, inside the fork gate (forksafe.ts). */
    constructor(private readonly max: number, private readonly send: (items: T[]) => void) {}

    get length(): number {
        return this.items.length;
    }

    push(item: T): void {
        this.items.push(item);
        if (exiting || this.items.length >= this.max) this.flush();
        else if (this.timer === null) this.timer = setTimeout(() => this.onTimer(), FLUSH_INTERVAL_MS);
    }

    /** Send what is waiting now (synchronously queues the message). */
    flush(): void {
        if (this.timer !== null) {
            clearTimeout(this.timer);
            this.timer = null;
        }
        if (this.items.length === 0) return; // before the fork check: it calls getpid()
        if (isForkedCopy()) {
            this.items = []; // a fork's stale copy must not send, and has no host to send to
            return;
        }
        const sent = sendThroughGate(() => {
            const items = this.items;
            this.items = [];
            this.send(items);
        });
        // A fork in progress (forksafe.ts): keep them for the next round.
        if (!sent && this.timer === null) this.timer = setTimeout(() => this.onTimer(), FLUSH_INTERVAL_MS);
    }

    private onTimer(): void {
        this.timer = null;
        this.flush();
    }
}
