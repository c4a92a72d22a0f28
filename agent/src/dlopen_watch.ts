// Run a callback on the loading thread each time dlopen/dlmopen returns (the library is
// relocated by then; Frida's module observer reports it before). The listener is native
// first, like the exit hook (index.ts): a forked child's stale agent copy keeps it until
// Frida unloads that copy, and Frida's injection of the child's fresh agent calls dlopen
// there; entering the stale JS runtime would hang the child. Used by forksafe.ts (fork
// imports of late libraries) and modules.ts (their DWARF).

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

/** Each listener's CModule, callback and pid cell live as long as the agent. */
const parts: object[] = [];

/** Call `onLoad` after every dlopen/dlmopen in process `pid` (this agent's). */
export function afterEachDlopen(pid: number, onLoad: () => void): void {
    const getpid = Module.findGlobalExportByName("getpid");
    if (getpid === null) return;
    const pidCell = Memory.alloc(4);
    pidCell.writeS32(pid);
    const callback = new NativeCallback(onLoad, "void", []);
    const cm = new CModule(LOADS_C, { getpid, load_pid: pidCell, strobe_on_load: callback });
    parts.push(cm, callback, pidCell);
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
