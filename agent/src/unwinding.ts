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
//     drops the unwound frames' invocations itself when this hook is entered.
// Forced unwinds (pthread_cancel) and other languages' exceptions are left alone. Installed
// once, when hooks go in while libgcc_s and a catcher are loaded, with the other patches of
// that request; never removed (a thread may be inside a stub).

import { addressBytes } from "./wrapper_unwind.js";

interface Site {
    address: NativePointer;
    catches: boolean;
}

let hooked = false;
/** Why a site could not be hooked (null: every site was). */
let failure: string | null = null;
const kept: unknown[] = [];
/** strobe_on_unwind / on_catch of the fast path's CModule (fastpath.ts sets them up). */
let callbacks: { onUnwind: NativePointer; onCatch: NativePointer } | null = null;

export function setUnwindCallbacks(onUnwind: NativePointer, onCatch: NativePointer): void {
    callbacks = { onUnwind, onCatch };
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
    const catchers = [cxx?.findExportByName("__cxa_begin_catch") ?? null, rustPanicCleanup()].filter((p): p is NativePointer => p !== null);
    if (catchers.length === 0) return [];
    return [{ address: raise, catches: false }, { address: resume, catches: false }, ...catchers.map((address) => ({ address, catches: true }))];
}

/** std's `__rust_panic_cleanup`: undefined until the program's symbol table was searched. */
let rustCleanup: NativePointer | null | undefined;

/** std's `__rust_panic_cleanup` (v0-mangled, in the program's symbol table), if linked in. */
function rustPanicCleanup(): NativePointer | null {
    if (rustCleanup === undefined) {
        const s = Process.mainModule.enumerateSymbols().find((x) => x.type === "function" && x.name.endsWith("__rust_panic_cleanup") && !x.address.isNull());
        rustCleanup = s?.address ?? null;
    }
    return rustCleanup;
}

/** Hook `sites` (unwindHookSites), with the threads parked outside their prologues. */
export function hookUnwinding(sites: Site[]): void {
    const cb = callbacks;
    if (cb === null || sites.length === 0 || hooked) return;
    hooked = true;
    for (const s of sites) {
        try {
            if (s.catches) {
                kept.push(Interceptor.attach(s.address, { onEnter: cb.onCatch }));
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
    return { hooked: hooked && failure === null, error: failure };
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
