// Code of the agent's own that stands between a traced function and its caller on the native
// path (wrappers.ts: the wrapper chunks, their register-saving stubs, strobe_wrapped_call;
// capture.ts: the hook image with strobe_hook_enter and the walk).
// A return address there is a hook frame: backtraces of pauses and crashes leave it out, as
// Frida leaves out its attach trampolines, so they read like gdb's `bt` of the untraced
// program. No imports: frames.ts and crash.ts use it without a cycle through wrappers.ts.

const ranges: [NativePointer, NativePointer][] = [];

/** Return addresses in [start, end) are hook frames. */
export function noteHookFrames(start: NativePointer, end: NativePointer): void {
    if (!ranges.some(([s, e]) => s.equals(start) && e.equals(end))) ranges.push([start, end]);
}

export function isHookFrame(p: NativePointer): boolean {
    return ranges.some(([s, e]) => p.compare(s) >= 0 && p.compare(e) < 0);
}

/** The real return address of an attach frame of this thread whose return address lives at
 *  a slot (Frida's leave trampoline is there), or null (fastpath.ts: the noted frames). */
let trapLookup: ((slot: NativePointer) => NativePointer | null) | null = null;

export function setTrapLookup(lookup: (slot: NativePointer) => NativePointer | null): void {
    trapLookup = lookup;
}

/** The return address kept at `slot`, Frida's attach trampoline replaced by the real one. */
export function returnAddressAt(slot: NativePointer): NativePointer {
    const noted = trapLookup !== null ? trapLookup(slot) : null;
    return noted ?? slot.readPointer();
}
