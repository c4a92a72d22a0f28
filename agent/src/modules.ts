// Loaded modules, for the daemon's per-module DWARF (src/engine/modules.rs): the list at
// attach (RPC `modules`), and each library loaded later with dlopen, reported when dlopen
// returns. The loading thread then waits for the daemon's { type: "modules-ack" }, so the
// hooks and breakpoints it installs in the library are in place before the program calls
// into it. The listener is native first (as the exit hook, index.ts): a forked child's
// stale agent copy must not enter JS.

export interface ModuleDesc {
    name: string;
    path: string;
    base: string;
    size: number;
}

const known = new Set<string>();

function describe(m: Module): ModuleDesc {
    return { name: m.name, path: m.path, base: m.base.toString(), size: m.size };
}

/** Every module now, remembered as reported. */
export function listModules(): ModuleDesc[] {
    return Process.enumerateModules().map((m) => {
        known.add(m.path + "@" + m.base);
        return describe(m);
    });
}

function newModules(): ModuleDesc[] {
    const out: ModuleDesc[] = [];
    for (const m of Process.enumerateModules()) {
        const key = m.path + "@" + m.base;
        if (known.has(key)) continue;
        known.add(key);
        if (m.name.startsWith("frida-") || !m.path.startsWith("/")) continue;
        out.push(describe(m));
    }
    return out;
}

const LOADS_C = `
#include <gum/guminterceptor.h>
extern int getpid (void);
extern int load_pid;
extern void strobe_on_load (void);
void on_leave (GumInvocationContext * ic) {
  if (getpid () != load_pid)
    return;
  strobe_on_load ();
}
`;
const parts: object[] = [];

/** Report libraries loaded by dlopen from now on (once per agent). */
export function watchLoads(): void {
    if (parts.length > 0) return;
    const getpid = Module.findGlobalExportByName("getpid");
    if (getpid === null) return;
    const pidCell = Memory.alloc(4);
    pidCell.writeS32(new NativeFunction(getpid, "int", [])() as number);
    const onLoad = new NativeCallback(() => {
        const added = newModules();
        if (added.length === 0) return;
        send({ type: "modules", modules: added });
        recv("modules-ack", () => {}).wait();
    }, "void", []);
    const cm = new CModule(LOADS_C, { getpid, load_pid: pidCell, strobe_on_load: onLoad });
    parts.push(cm, onLoad, pidCell);
    const seen = new Set<string>();
    for (const m of Process.enumerateModules()) {
        for (const name of ["dlopen", "dlmopen"]) {
            const at = m.findExportByName(name);
            if (at === null || seen.has(at.toString())) continue;
            seen.add(at.toString());
            Interceptor.attach(at, { onLeave: cm.on_leave });
        }
    }
}
