// The program's import slots (GOT entries) of chosen libc functions, in the main module and
// its libraries (not libc's own, nor Frida's): pointing a slot elsewhere routes the program's
// calls without patching libc's code, where a function too short to patch (a syscall stub
// such as close_range) cannot be intercepted. Used by forksafe.ts and fd_guard.ts.

export interface ImportSlot {
    name: string;
    slot: NativePointer;
}

/** Import slots named in `names`, in modules not in `scanned` yet (which it then adds). */
export function newImportSlots(names: ReadonlySet<string>, scanned: Set<string>): ImportSlot[] {
    const out: ImportSlot[] = [];
    for (const m of Process.enumerateModules()) {
        const key = `${m.path}@${m.base}`;
        if (scanned.has(key)) continue;
        scanned.add(key);
        if (/^(libc|ld-linux|libpthread)[.-]/.test(m.name) || m.name.startsWith("frida-")) continue;
        if (!m.path.startsWith("/") || m.path.startsWith("/memfd:")) continue;
        for (const i of m.enumerateImports()) {
            if (names.has(i.name) && i.slot !== undefined) out.push({ name: i.name, slot: i.slot });
        }
    }
    return out;
}

/** Point `slot` at `target`; returns what it held. Import tables are read-only after
 * relocation (RELRO): the page is opened for the write. */
export function writeSlot(slot: NativePointer, target: NativePointer): NativePointer {
    const page = slot.and(ptr(Process.pageSize - 1).not());
    const before = Process.findRangeByAddress(slot)?.protection ?? "r--";
    Memory.protect(page, Process.pageSize, "rw-");
    const old = slot.readPointer();
    slot.writePointer(target);
    Memory.protect(page, Process.pageSize, before);
    return old;
}
