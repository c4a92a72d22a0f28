// One-shot step hooks: the daemon computes where a step can end (next lines of the function,
// callees, the return address); the first of them the stepping thread reaches pauses it, and
// the whole group goes away. Other threads pass through untouched.

import { currentSlide } from "./hooks.js";
import { pause } from "./pause.js";
import { attachProbe, Probe, ScanRange, slid } from "./probes.js";

export interface StepHookSpec {
    address: string;
    noSlide?: boolean;
    scan?: ScanRange | null;
}

export interface StepRequest {
    threadId: number;
    oneShot: StepHookSpec[];
    /** Only a frame whose sp is above this (hex) stops the step: step-out ignores the frame
     *  it leaves and deeper ones (recursion through the caller's lines). */
    aboveSp?: string;
}

interface StepGroup {
    active: boolean;
    probes: Probe[];
}

const groups = new Map<number, StepGroup>();

function dispose(threadId: number, group?: StepGroup): void {
    const g = groups.get(threadId);
    if (g === undefined || (group !== undefined && g !== group)) {
        if (group !== undefined) for (const p of group.probes) p.detach();
        return;
    }
    groups.delete(threadId);
    g.active = false;
    for (const p of g.probes) {
        try {
            p.detach();
        } catch (_) {
            // already gone
        }
    }
}

export function installStepHooks(req: StepRequest): { installed: string[]; hardware: string[]; skipped: { address: string; why: string }[] } {
    dispose(req.threadId);
    const group: StepGroup = { active: true, probes: [] };
    const result = { installed: [] as string[], hardware: [] as string[], skipped: [] as { address: string; why: string }[] };
    const seen = new Set<string>();
    const aboveSp = req.aboveSp !== undefined ? ptr(req.aboveSp) : null;
    for (const spec of req.oneShot) {
        const addr = slid(spec.address, spec.noSlide);
        if (seen.has(addr.toString())) continue;
        seen.add(addr.toString());
        try {
            const probe = attachProbe(addr, spec.scan, req.threadId, (cpu) => {
                if (!group.active) return;
                if (aboveSp !== null && cpu.sp.compare(aboveSp) <= 0) return;
                group.active = false;
                // Detach from the JS loop (it runs while this thread waits), not from inside the hook.
                setTimeout(() => dispose(req.threadId, group), 0);
                pause(cpu, { step: true });
            });
            group.probes.push(probe);
            result.installed.push(spec.address);
            if (probe.kind === "hardware") result.hardware.push(spec.address);
        } catch (e) {
            result.skipped.push({ address: spec.address, why: e instanceof Error ? e.message : String(e) });
        }
    }
    groups.set(req.threadId, group);
    return result;
}

export function cancelStepHooks(threadId: number): void {
    dispose(threadId);
}

/** Static targets of direct calls in the given static ranges (for step-into). */
export function callTargets(ranges: [string, string][]): string[] {
    const s = currentSlide() ?? ptr(0);
    const out = new Set<string>();
    for (const [lo, hi] of ranges) {
        let p = slid(lo);
        const end = slid(hi);
        while (p.compare(end) < 0) {
            const ins = Instruction.parse(p) as X86Instruction;
            const op = ins.operands[0];
            if (ins.mnemonic === "call" && op !== undefined && op.type === "imm") {
                out.add(ptr(op.value.toString()).sub(s).toString());
            }
            p = ins.next;
        }
    }
    return [...out];
}
