// Floating-point arguments and return values. System V passes them in xmm registers, and
// Frida's CpuContext has no xmm fields. Frida's interceptor does save the SSE state on the
// stack before it runs a callback, at a fixed distance from the context's `sp` (one for
// onEnter, another for onLeave); that distance is an implementation detail of Frida, so it
// is not hard-coded: calibrate() measures it once per agent by hooking a probe function of
// known arguments and finding them below `sp`. If the probe cannot prove a distance (a
// future Frida lays its frame out differently), xmmAddress() returns null and floats show
// as not captured, as before — never as wrong numbers.

interface Offsets {
    enter: number;
    leave: number;
}

let offsets: Offsets | null | undefined;

/** Measure the offsets; at init, never inside a hook callback (Frida does not run hooks
 *  re-entered from a callback, so the probe would prove nothing there). */
export function prepareXmm(): boolean {
    if (offsets === undefined) offsets = calibrate();
    return offsets !== null;
}

/** The saved copy of xmm `index` during the current onEnter (`leaving` false) or onLeave. */
export function xmmAddress(ctx: CpuContext, index: number, leaving: boolean): NativePointer | null {
    if (offsets === undefined || offsets === null || index < 0 || index > 7) return null;
    return ctx.sp.add((leaving ? offsets.leave : offsets.enter) + 16 * index);
}

/** Kept here for the agent's life: a CModule holds only the address. */
let savedCell: NativePointer | null = null;

/** The offsets for the native hooks (fastpath_c.ts `xmm_saved`): three int32s, whether
 *  they are known, then the onEnter and onLeave distances from `sp`. */
export function xmmSavedCell(): NativePointer {
    if (savedCell !== null) return savedCell;
    const cell = Memory.alloc(12);
    const known = prepareXmm() && offsets !== null && offsets !== undefined;
    cell.writeS32(known ? 1 : 0);
    cell.add(4).writeS32(known ? offsets!.enter : 0);
    cell.add(8).writeS32(known ? offsets!.leave : 0);
    savedCell = cell;
    return cell;
}

export const XMM_UNAVAILABLE = "float in an xmm register (not captured: this Frida's saved-register layout is unknown)";

const SCAN_BYTES = 4096;

/** Offsets o below sp where sp+o, +16, +32 hold the three values (xmm0, xmm1, xmm2). */
function matches(sp: NativePointer, v: number[]): number[] {
    const out: number[] = [];
    const bytes = sp.sub(SCAN_BYTES).readByteArray(SCAN_BYTES);
    if (bytes === null) return out;
    const view = new DataView(bytes);
    for (let at = 0; at + 48 <= SCAN_BYTES; at += 8) {
        if (v.every((x, i) => view.getFloat64(at + 16 * i, true) === x)) out.push(at - SCAN_BYTES);
    }
    return out;
}

function calibrate(): Offsets | null {
    if (Process.arch !== "x64") return null;
    try {
        // At exit xmm0 holds the result and xmm1, xmm2 are left as they came in (the probe
        // only copies), so the leave scan looks for the same three values as the enter scan.
        const cm = new CModule("double strobe_xmm_probe (double a, double b, double c) { return a; }");
        const probe = new NativeFunction(cm.strobe_xmm_probe, "double", ["double", "double", "double"]);
        const seen: { enter: number[]; leave: number[] }[] = [];
        let current: number[] = [];
        const listener = Interceptor.attach(cm.strobe_xmm_probe, {
            onEnter() {
                seen.push({ enter: matches(this.context.sp, current), leave: [] });
            },
            onLeave() {
                const s = seen[seen.length - 1];
                if (s !== undefined) s.leave = matches(this.context.sp, current);
            },
        });
        // Two calls with unrelated values: an offset must hold for both.
        for (const values of [[1234.5, -0.125, 7.75], [-98765.25, 3.0625, -1e-3]]) {
            current = values;
            if (probe(values[0], values[1], values[2]) !== values[0]) throw new Error("probe returned a wrong value");
        }
        listener.detach();
        Interceptor.flush();
        if (seen.length !== 2) return null;
        const common = (x: number[], y: number[]) => x.filter((o) => y.indexOf(o) >= 0);
        const enter = common(seen[0].enter, seen[1].enter);
        const leave = common(seen[0].leave, seen[1].leave);
        // Copies the caller made (here: the JS engine's own frames) lie deeper in the stack;
        // the saved registers are the copy nearest sp.
        if (enter.length === 0 || leave.length === 0) return null;
        keep.push(cm);
        return { enter: Math.max(...enter), leave: Math.max(...leave) };
    } catch {
        return null;
    }
}

const keep: CModule[] = [];
