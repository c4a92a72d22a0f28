// RPC exports of the active debugger (spread into rpc.exports by index.ts). The daemon
// resolves DWARF (addresses, variable locations); these install hooks and touch the frame.

import { removePoint, setPoint, PointSpec, pointStats } from "./breakpoints.js";
import { pausedThreadIds, readLocals, threadsPausedOn, writeLocal } from "./pause.js";
import { callTargets, cancelStepHooks, installStepHooks, StepRequest } from "./stepping.js";
import { VarRecipe } from "./values.js";
import { listModules, watchLoads } from "./modules.js";

export const debuggerExports = {
    setBreakpoint(spec: PointSpec): object {
        return setPoint(spec, false);
    },
    /** Returns the threads paused on it: the daemon resumes them (no new pause starts). */
    removeBreakpoint(id: string): object {
        const removed = removePoint(id);
        return { removed, pausedThreads: threadsPausedOn(id) };
    },
    setLogpoint(spec: PointSpec): object {
        return setPoint(spec, true);
    },
    removeLogpoint(id: string): boolean {
        return removePoint(id);
    },
    installStepHooks(req: StepRequest): object {
        return installStepHooks(req);
    },
    cancelStepHooks(threadId: number): void {
        cancelStepHooks(threadId);
    },
    callTargets(ranges: [string, string][]): string[] {
        return callTargets(ranges);
    },
    readLocals(threadId: number, recipes: VarRecipe[]): object {
        return readLocals(threadId, recipes);
    },
    writeLocal(threadId: number, recipe: VarRecipe, value: number | string | boolean): object {
        return writeLocal(threadId, recipe, value);
    },
    /** Loaded modules and the main module's slide; libraries loaded later are reported. */
    modules(): object {
        watchLoads();
        return { modules: listModules() };
    },
    debuggerStatus(): object {
        return { paused: pausedThreadIds(), points: pointStats() };
    },
};
