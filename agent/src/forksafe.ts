// Fork safety. fork() copies this agent, with its JS heap, pending timers and thread observer,
// into the child. With child gating on, Frida unloads that stale copy inside the child (it
// runs our dispose(), pending timers and observer callbacks while it tears the script down)
// before it reports the child and a fresh agent is attached. A send() or a ring drain the
// stale copy makes there crashed the child with SIGSEGV (measured: about 3 forks in 4 once a
// JS hook had run in the parent). So every entry point that sends or drains asks
// `isForkedCopy()` first and does nothing in a stale copy.

let getpidFn: NativeFunction<number, []> | null = null;

/** getpid(), live: Process.id is fixed at load and is the parent's pid in a forked copy. */
export function livePid(): number {
    if (getpidFn === null) {
        const addr = Module.findGlobalExportByName("getpid");
        if (addr === null) return Process.id;
        getpidFn = new NativeFunction(addr, "int", [], { scheduling: "exclusive", exceptions: "propagate", traps: "none" });
    }
    return getpidFn();
}

/** The process this agent was injected into (modules are evaluated at load, there). */
const loadPid = livePid();

/** True in the copy of this agent that a fork left in the child (not the one attached there). */
export function isForkedCopy(): boolean {
    return livePid() !== loadPid;
}
