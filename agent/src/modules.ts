// Loaded modules, for the daemon's per-module DWARF (src/engine/modules.rs): the list at
// attach (RPC `modules`), and each library loaded later with dlopen, reported when dlopen
// returns. The loading thread then waits for the daemon's { type: "modules-ack" }, so the
// hooks and breakpoints it installs in the library are in place before the program calls
// into it (dlopen_watch.ts).

import { afterEachDlopen } from "./dlopen_watch.js";
import { livePid } from "./forksafe.js";

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

/** Report libraries loaded by dlopen from now on (once per agent). */
export function watchLoads(): void {
    if (watching) return;
    watching = true;
    afterEachDlopen(livePid(), () => {
        const added = newModules();
        if (added.length === 0) return;
        send({ type: "modules", modules: added });
        recv("modules-ack", () => {}).wait();
    });
}
let watching = false;
