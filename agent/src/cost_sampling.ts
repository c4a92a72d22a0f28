// Sampling that follows cost, for JS-path hooks (hooks.ts). Rate sampling (fastpath_c.ts)
// catches functions called more than 100 k times a second; a hook that serializes structs in
// JavaScript can cost hundreds of µs a call and slow a program a thousandfold at a few
// thousand calls a second, far below that. So each JS-path function measures what its hooks
// cost: over a window (WINDOW_NS of wall time), the time spent in its onEnter/onLeave against
// the wall time of the threads that called it. Above `costShare` (the `tracing.costShare`
// setting, default 0.5: the hooks take more than half of those threads' time) the function
// is sampled: 1 call in `sampleEvery` is recorded, the others return at once. It is reported
// like rate sampling: a sampling record in the event stream ([SAMPLING, fn, on, every, ts],
// events.ts), so the daemon lists it in `sampledFunctions` and marks its events `sampled`.
// Sampling stops after two windows whose estimated full cost is below half the share.
//
// The measuring itself reads the clock twice more per call; only 1 call in MEASURE_EVERY is
// measured (and counted MEASURE_EVERY times).

import { nowNs } from "./clock.js";
import { push, SAMPLING } from "./events.js";

const WINDOW_NS = 100_000_000;
const MIN_CALLS = 8;
const MEASURE_EVERY = 8;

let costShare = 0.5;
let sampleEvery = 100;
const meters = new Map<number, CostMeter>();

export class CostMeter {
    private calls = 0;
    private windowStart = 0;
    private windowCalls = 0;
    private hookNs = 0;
    private threads = new Set<number>();
    private quietWindows = 0;
    sampling = false;
    /** 0 once the user turned sampling off for this function. */
    auto = true;
    private every = sampleEvery;

    constructor(readonly fnId: number) {}

    /**
     * At a call's entry: -1 to skip the call (sampled out), 1 to record and measure it, 0
     * to record it unmeasured.
     */
    admit(tid: number): number {
        const n = this.calls++;
        if (this.sampling && n % this.every !== 0) return -1;
        if (n % MEASURE_EVERY !== 0) return 0;
        const now = nowNs();
        if (this.windowStart === 0) this.windowStart = now;
        this.threads.add(tid);
        this.windowCalls++;
        if (now - this.windowStart >= WINDOW_NS && this.windowCalls >= MIN_CALLS / MEASURE_EVERY) this.closeWindow(now);
        return 1;
    }

    /** Time a measured hook took (ns). */
    charge(ns: number): void {
        this.hookNs += ns * MEASURE_EVERY;
    }

    private closeWindow(now: number): void {
        const wall = (now - this.windowStart) * Math.max(1, this.threads.size);
        const share = this.hookNs / wall;
        // While sampling only 1 call in `every` pays: what recording all of them would cost.
        const full = this.sampling ? share * this.every : share;
        this.windowStart = now;
        this.windowCalls = 0;
        this.hookNs = 0;
        this.threads.clear();
        if (!this.sampling) {
            if (this.auto && costShare > 0 && full > costShare) this.switchTo(true);
            return;
        }
        if (full < costShare / 2 || costShare === 0) {
            if (++this.quietWindows >= 2) this.switchTo(false);
        } else {
            this.quietWindows = 0;
        }
    }

    /** `report`: false when the daemon already knows (the user turned it off). */
    switchTo(on: boolean, report = true): void {
        if (this.sampling === on) return;
        this.sampling = on;
        this.quietWindows = 0;
        this.every = sampleEvery;
        if (report) push([SAMPLING, this.fnId, on ? 1 : 0, this.every, nowNs()]);
    }
}

/** The meter of a JS-path function (kept for its id: a re-added hook keeps its state). */
export function costMeter(fnId: number): CostMeter {
    let m = meters.get(fnId);
    if (m === undefined) {
        m = new CostMeter(fnId);
        meters.set(fnId, m);
    }
    return m;
}

/** `tracing.costShare` (0 turns cost sampling off, and ends it where it is on) and the rate. */
export function setCostOptions(opts: { costShare?: number; sampleEvery?: number }): void {
    if (typeof opts.sampleEvery === "number") sampleEvery = Math.max(1, Math.floor(opts.sampleEvery));
    if (typeof opts.costShare !== "number" || !(opts.costShare >= 0)) return;
    costShare = Math.min(1, opts.costShare);
    if (costShare === 0) for (const m of meters.values()) m.switchTo(false);
}

export function costOptions(): { costShare: number } {
    return { costShare };
}

/** The user's `sampling: {disable, enable}` for JS-path functions; returns the ids changed. */
export function setCostSampling(disable: number[], enable: number[]): { disabled: number[]; enabled: number[] } {
    const r = { disabled: [] as number[], enabled: [] as number[] };
    for (const id of disable) {
        const m = meters.get(id);
        if (m === undefined) continue;
        m.auto = false;
        m.switchTo(false, false);
        r.disabled.push(id);
    }
    for (const id of enable) {
        const m = meters.get(id);
        if (m === undefined) continue;
        m.auto = true;
        r.enabled.push(id);
    }
    return r;
}
