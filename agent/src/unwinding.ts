// C++ exceptions and Rust panics through functions traced with Interceptor.attach. Frida
// replaces each such call's return address with its leave trampoline, which the program's
// unwinder knows nothing about: an exception thrown through the call ended in
// std::terminate, a panic in "failed to initiate panic" and an abort. (Any attach does it,
// even one with only an onEnter callback: so the unwinder's own entry points must not be
// attached to.) The native side notes every attach frame of ours (fastpath_c.ts trap_push:
// the fast path's on_enter, the JS path's onEnter through trapEnter), and:
//   _Unwind_RaiseException, _Unwind_Resume: an exception or panic starts (or, after a
//     cleanup, resumes) unwinding on this thread: the noted frames get their real return
//     addresses back (strobe_on_unwind). Entered through replaceFast and a stub that calls
//     it with the function's argument and then jumps to the original code: no frame of ours,
//     no replaced return address, is left for the unwinder to walk;
//   __cxa_begin_catch, std's __rust_panic_cleanup (catch_unwind's; both attached: they
//     return normally): it landed: the frames it unwound are dropped, the others get the
//     trampoline back, so they still return through their exit hooks (on_catch); Frida
//     drops the unwound frames' invocations itself when this hook is entered;
//   std's panic_with_hook (probed: a probe leaves the return address alone, and the panic
//     unwinds through this frame): the real return addresses go back before the panic hook
//     prints its backtrace (RUST_BACKTRACE=1, as debug_test runs tests), which otherwise
//     stops at the first traced frame (strobe_on_panic); the panic's catch re-arms them.
// Forced unwinds (pthread_cancel) and other languages' exceptions are left alone. Installed
// once, when hooks go in while libgcc_s and a catcher are loaded, with the other patches of
// that request; never removed (a thread may be inside a stub).

import { addressBytes } from "./wrapper_unwind.js";

interface Site {
    address: NativePointer;
    /** unwinder: stub in front (replaceFast); catcher: attached on_catch; panic: probed. */
    kind: "unwinder" | "catcher" | "panic";
}

let hooked = false;
/** Whether std's panic_with_hook is probed (Rust programs). */
let panicProbed = false;
/** Why a site could not be hooked (null: every site was). */
let failure: string | null = null;
const kept: unknown[] = [];
/** strobe_on_unwind / on_catch of the fast path's CModule (fastpath.ts sets them up). */
let callbacks: { onUnwind: NativePointer; onCatch: NativePointer; onPanic: NativeFunction<void, [NativePointerValue]> } | null = null;

export function setUnwindCallbacks(onUnwind: NativePointer, onCatch: NativePointer, onPanic: NativePointer): void {
    callbacks = { onUnwind, onCatch, onPanic: new NativeFunction(onPanic, "void", ["pointer"], { exceptions: "propagate" }) };
}

/**
 * The functions to hook now: libgcc_s's unwinding entry points and where a C++ exception
 * (`__cxa_begin_catch`) or a Rust panic (std's `__rust_panic_cleanup`, which catch_unwind
 * calls) is caught. None once hooked, or without libgcc_s and either catcher.
 */
export function unwindHookSites(): Site[] {
    if (hooked || callbacks === null) return [];
    const gcc = Process.findModuleByName("libgcc_s.so.1");
    const raise = gcc?.findExportByName("_Unwind_RaiseException") ?? null;
    const resume = gcc?.findExportByName("_Unwind_Resume") ?? null;
    if (raise === null || resume === null) return [];
    const cxx = Process.enumerateModules().find((m) => m.name.startsWith("libstdc++.so") || m.name.startsWith("libc++abi.so"));
    const rust = rustPanicSites();
    const catchers = [cxx?.findExportByName("__cxa_begin_catch") ?? null, rust.cleanup].filter((p): p is NativePointer => p !== null);
    if (catchers.length === 0) return [];
    const sites: Site[] = [{ address: raise, kind: "unwinder" }, { address: resume, kind: "unwinder" }, ...catchers.map((address) => ({ address, kind: "catcher" as const }))];
    if (rust.cleanup !== null && rust.panic !== null) sites.push({ address: rust.panic, kind: "panic" });
    return sites;
}

/** std's functions in the program's symbol table: undefined until it was searched. */
let rustSites: { cleanup: NativePointer | null; panic: NativePointer | null } | undefined;

/** std's `__rust_panic_cleanup` and `panic_with_hook` (`rust_panic_with_hook` before Rust
 *  1.81), by their mangled names (legacy or v0), if linked in. */
function rustPanicSites(): { cleanup: NativePointer | null; panic: NativePointer | null } {
    if (rustSites === undefined) {
        rustSites = { cleanup: null, panic: null };
        for (const x of Process.mainModule.enumerateSymbols()) {
            if (x.type !== "function" || x.address.isNull()) continue;
            if (x.name.endsWith("__rust_panic_cleanup")) rustSites.cleanup = x.address;
            else if (/9panicking(15panic_with_hook|20rust_panic_with_hook)(17h[0-9a-f]{16}E)?$/.test(x.name)) rustSites.panic = x.address;
        }
    }
    return rustSites;
}

/** Hook `sites` (unwindHookSites), with the threads parked outside their prologues. */
export function hookUnwinding(sites: Site[]): void {
    const cb = callbacks;
    if (cb === null || sites.length === 0 || hooked) return;
    hooked = true;
    for (const s of sites) {
        try {
            if (s.kind === "catcher") {
                kept.push(Interceptor.attach(s.address, { onEnter: cb.onCatch }));
            } else if (s.kind === "panic") {
                const onPanic = cb.onPanic;
                kept.push(Interceptor.attach(s.address, function () {
                    onPanic(this.context.sp);
                }));
                panicProbed = true;
            } else {
                const stub = Memory.alloc(Process.pageSize);
                stub.writeByteArray(stubBytes(cb.onUnwind));
                // Published before the patch is flushed (end of this turn), as wrappers.ts does.
                const orig = Interceptor.replaceFast(s.address, stub);
                stub.add(STUB_TARGET).writePointer(orig);
                Memory.protect(stub, Process.pageSize, "r-x");
                kept.push(stub);
            }
        } catch (e) {
            failure = `${s.address}: ${e instanceof Error ? e.message : e}`;
            send({ type: "log", level: "warning", message: `a C++ exception or Rust panic through a function traced with Interceptor.attach will abort the program: hooking the unwinder at ${s.address} failed: ${e instanceof Error ? e.message : e}` });
        }
    }
}

/** Whether the unwinder is hooked, and why not (status). */
export function unwindingHooked(): object {
    return { hooked: hooked && failure === null, panicHook: panicProbed, error: failure };
}

/** Where the stub keeps the original's address (its last 8 bytes). */
const STUB_TARGET = 49;

/**
 * Save the argument registers (and rax, r10, r11), call `fn` with the first argument in rdi
 * and the address of the return address in rsi (nine pushes leave rsp 16-byte aligned),
 * restore them and jump to the original through
 * the address at STUB_TARGET: on entry to the original, registers and stack are as its
 * caller left them.
 */
function stubBytes(fn: NativePointer): number[] {
    const target = addressBytes(fn);
    const bytes = [
        0x57, 0x56, 0x52, 0x51, // push rdi, rsi, rdx, rcx
        0x41, 0x50, 0x41, 0x51, 0x41, 0x52, 0x41, 0x53, // push r8, r9, r10, r11
        0x50, // push rax
        0x48, 0x8d, 0x74, 0x24, 0x48, // lea rsi, [rsp + 72]: where the return address is
        0x48, 0xb8, ...target, // movabs rax, fn
        0xff, 0xd0, // call rax
        0x58, // pop rax
        0x41, 0x5b, 0x41, 0x5a, 0x41, 0x59, 0x41, 0x58, // pop r11, r10, r9, r8
        0x59, 0x5a, 0x5e, 0x5f, // pop rcx, rdx, rsi, rdi
        0xff, 0x25, 0x00, 0x00, 0x00, 0x00, // jmp [rip + 0]
        0, 0, 0, 0, 0, 0, 0, 0, // the original (STUB_TARGET)
    ];
    if (bytes.length !== STUB_TARGET + 8) throw new Error(`unwind stub of ${bytes.length} bytes`);
    return bytes;
}
