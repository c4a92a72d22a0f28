// Strobe agent: injected into the target by the Frida host. The daemon drives it through
// RPC exports (init, hooks, status, dispose); it reports through send():
//   { type: "agent_loaded" }                           at load
//   { type: "initialized", sessionId }                 after init
//   { type: "events", events: [...] }                  batched enter/exit events
//   { type: "logpoints", items: [...] }                batched logpoint messages
//                                                      (logpoint_messages.ts)
//   { type: "process_exit", code, via, ts, points }    the process called exit()/_exit() (points:
//                                                      the breakpoints' {id, hits}); the
//                                                      host answers { type: "exit-ack" }
//   { type: "sync" }                                   (host-internal, acked, not forwarded)
//                                                      at _exit, after atexit-time events
//   { type: "crash", signal, frames, registers, ... }  a fatal signal (crash.ts); the host
//                                                      answers { type: "crash-ack" }

import { setCostSampling } from "./cost_sampling.js";
import { nowNs } from "./clock.js";
import { batchesSent as jsBatchesSent, flush, markExiting, stats } from "./events.js";
import { configure as configureTracing, drainFast, fastBatchesSent, fastStats, setSampling, SamplingRequest, TracingOptions } from "./fastpath.js";
import { releasePins } from "./probe_detach.js";
import { activeCount, currentSlide, errorText, removeAll, setImageBase, updateHooks, HooksRequest, HooksResult } from "./hooks.js";
import { guardMainThread } from "./altstack.js";
import { installCrashHandler } from "./crash.js";
import { startThreadObserver } from "./threads.js";
import { fdGuardStats, guardDescriptors, releaseFdGuard } from "./fd_guard.js";
import { debuggerExports } from "./debugger_rpc.js";
import { pointStats } from "./breakpoints.js";
import { memoryExports } from "./memory.js";
import { addTypes, TypeDesc } from "./serialize.js";
import { prepareXmm } from "./xmm.js";
import { demoteWrappers } from "./wrappers.js";
import { installForkGate, ForkGateResult, retireForkGate } from "./forksafe.js";

interface InitParams {
    sessionId?: string;
    /** Static image base of the main module (hex string), for the ASLR slide. */
    imageBase?: string;
    /** The host follows forks (child gating), set by the host itself. */
    followChildren?: boolean;
    /** The process already runs its `main` (a re-attach, a fork): leave `main` unhooked. */
    mainStarted?: boolean;
}

let sessionId: string | null = null;
let exitReported = false;

function init(params: InitParams): object {
    sessionId = params.sessionId ?? null;
    const slide = setImageBase(params.imageBase ?? null);
    if (params.mainStarted !== true) guardMainThread();
    const main = Process.mainModule;
    const floatRegisters = prepareXmm();
    // Under child gating Frida unloads the agent copy a fork leaves in the child, wrapper
    // code included: a child returning through a wrapper frame would jump into freed code.
    let forkGate: ForkGateResult | null = null;
    if (params.followChildren === true) {
        const why = "the program forks and children are followed (a forked child must not return into unloaded wrapper code)";
        forkGate = installForkGate(() => demoteWrappers(`${why}: a library loaded at run time calls fork()`));
        if (forkGate.error !== null) send({ type: "log", level: "warning", message: `forked children may crash while followed: ${forkGate.error}` });
        // Only a program that forks can leave a child returning through a wrapper frame.
        if (forkGate.slots > 0 || forkGate.error !== null) demoteWrappers(why);
    }
    send({ type: "initialized", sessionId });
    return {
        pid: Process.id,
        arch: Process.arch,
        platform: Process.platform,
        mainModule: { name: main.name, path: main.path, base: main.base.toString(), size: main.size },
        slide: slide.toString(),
        monotonicNs: nowNs(),
        floatRegisters,
        forkGate,
    };
}

/** getpid(), live: Process.id is fixed at load and is wrong in a forked child. */
function currentPid(): number {
    if (getpidFn === null) {
        const addr = Module.findGlobalExportByName("getpid");
        if (addr === null) return Process.id;
        getpidFn = new NativeFunction(addr, "int", []);
    }
    return getpidFn();
}
let getpidFn: NativeFunction<number, []> | null = null;

let batchesAtAck = 0;

/** Batches of both event paths: the exit path waits until all of them are out. */
function batchesSent(): number {
    return jsBatchesSent() + fastBatchesSent();
}

function waitForAck(): void {
    recv("exit-ack", () => {}).wait();
    batchesAtAck = batchesSent();
}

// The exit hook is native first: in a forked child (no child gating) the agent copy is
// stale, and its JS runtime may be locked by a thread the fork did not copy (the JS thread
// was draining at fork time): entering JS there would hang the child's exit forever. The C
// side checks the pid and only then calls into JS.
const EXIT_HOOK_C = `
#include <gum/guminterceptor.h>
extern int getpid (void);
extern int load_pid;
extern void strobe_on_exit (int code, int which);
void on_enter (GumInvocationContext * ic) {
  if (getpid () != load_pid)
    return;
  strobe_on_exit ((int) (gsize) gum_invocation_context_get_nth_argument (ic, 0),
      (int) (gsize) gum_invocation_context_get_listener_function_data (ic));
}
`;

/** The exit hook's CModule, callback and pid cell live as long as the agent. */
const exitHookParts: object[] = [];
const EXIT_NAMES = ["exit", "_exit"];

function onProcessExit(code: number, which: number): void {
    const name = EXIT_NAMES[which] ?? "exit";
    markExiting();
    drainFast(true); // everything left, regardless of flow control
    // A plain send() here is lost most of the time: the process dies before the message
    // leaves. Waiting for the host's ack makes it reliable (the host acks in its message
    // callback; unload also releases the wait).
    if (!exitReported) {
        exitReported = true;
        // With the points' hit counts: after the exit they can no longer be asked for.
        send({ type: "process_exit", code, via: name, ts: nowNs(), points: pointStats() });
        waitForAck();
    } else if (batchesSent() !== batchesAtAck) {
        // exit() ends in _exit(): events of atexit handlers and destructors were sent in
        // between; make sure they are out too.
        send({ type: "sync" });
        waitForAck();
    }
}

function hookExit(): void {
    // Frida reaps the child, so the exit status is only visible here. The host attaches with
    // Frida's exit monitor off (host.py op_attach): nothing of Frida's runs before this hook
    // at exit, so it flushes both event paths itself; everything after it is sent at once.
    const getpid = Module.findGlobalExportByName("getpid");
    if (getpid === null) {
        send({ type: "log", level: "warning", message: "cannot hook exit: getpid() not found" });
        return;
    }
    const pid = Memory.alloc(4);
    pid.writeS32(currentPid());
    const onExit = new NativeCallback(onProcessExit, "void", ["int", "int"]);
    const cm = new CModule(EXIT_HOOK_C, { getpid, load_pid: pid, strobe_on_exit: onExit });
    exitHookParts.push(cm, onExit, pid);
    const seen = new Set<string>();
    EXIT_NAMES.forEach((name, which) => {
        const addr = Module.findGlobalExportByName(name);
        if (addr === null || seen.has(addr.toString())) return;
        seen.add(addr.toString());
        try {
            Interceptor.attach(addr, { onEnter: cm.on_enter }, ptr(which));
        } catch (e) {
            send({ type: "log", level: "warning", message: `cannot hook ${name}: ${errorText(e)}` });
        }
    });
}

rpc.exports = {
    ...debuggerExports,
    ...memoryExports,
    init(params: InitParams): object {
        return init(params ?? {});
    },
    hooks(req: HooksRequest & { types?: Record<string, TypeDesc> }): HooksResult {
        addTypes(req.types); // DWARF types of the functions' serialize recipes
        const r = updateHooks(req);
        flush();
        return r;
    },
    status(): object {
        const s = stats();
        return { sessionId, activeCount: activeCount(), slide: currentSlide()?.toString() ?? null, buffered: s.buffered, sent: s.sent, fastPath: fastStats(), fdGuard: fdGuardStats() };
    },
    dispose(): void {
        // Called by the host before detaching, and by Frida itself at process exit.
        retireForkGate();
        releasePins();
        flush();
        drainFast(true);
    },
    detach(): void {
        // The host's detach, first: the program's slots must not point at code that goes
        // with this agent. Not in dispose(): Frida calls that at exit and in a fork's stale
        // copy too, where the slots are left as they are (fd_guard.ts).
        releaseFdGuard();
    },
    tracingConfig(opts: TracingOptions): object {
        return configureTracing(opts ?? {});
    },
    sampling(req: SamplingRequest): object {
        const r = setSampling(req ?? {});
        const js = setCostSampling(req?.disable ?? [], req?.enable ?? []);
        drainFast();
        return { disabled: [...r.disabled, ...js.disabled], enabled: [...r.enabled, ...js.enabled] };
    },
    shutdown(): void {
        removeAll();
        flush();
    },
};

hookExit();
{
    const unguarded = guardDescriptors(currentPid());
    if (unguarded !== null) send({ type: "log", level: "warning", message: unguarded });
}
startThreadObserver(drainFast);
{
    const loadedPid = currentPid();
    installCrashHandler(() => currentPid() === loadedPid, () => {
        markExiting();
        drainFast(true);
    });
}
send({ type: "agent_loaded" });
