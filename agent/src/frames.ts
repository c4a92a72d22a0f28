// Raw stack frames for the daemon to symbolize (src/engine/backtrace.rs): each return
// address with its module and module-relative offset, and Frida's nearest symbol for code
// the daemon cannot read. Shared by pauses (pause.ts) and crashes (crash.ts).

export interface RawFrame {
    /** Runtime address. */
    address: string;
    module: string | null;
    modulePath: string | null;
    /** address - module base, hex. */
    offset: string | null;
    /** Nearest ELF symbol, when the daemon has no DWARF for the module. */
    symbol: string | null;
}

export function isCode(p: NativePointer): boolean {
    try {
        const r = Process.findRangeByAddress(p);
        return r !== null && r.protection.indexOf("x") >= 0;
    } catch (_) {
        return false;
    }
}

export function rawFrame(address: NativePointer): RawFrame {
    const f: RawFrame = { address: address.toString(), module: null, modulePath: null, offset: null, symbol: null };
    try {
        const m = Process.findModuleByAddress(address);
        if (m !== null) {
            f.module = m.name;
            f.modulePath = m.path;
            f.offset = "0x" + address.sub(m.base).toString(16);
        }
    } catch (_) {
        // unmapped: the address alone
    }
    try {
        const s = DebugSymbol.fromAddress(address);
        if (s.name !== null && !s.name.startsWith("0x")) f.symbol = s.name;
    } catch (_) {
        // no symbol
    }
    return f;
}

/**
 * The frames of a thread stopped at `cpu` (a breakpoint or step probe): the pc, then the
 * return addresses. An accurate backtrace from a mid-function context can start with a
 * stack address or with the pc itself: neither is a caller.
 */
export function stackFrames(cpu: CpuContext, max: number): RawFrame[] {
    let callers: NativePointer[] = [];
    try {
        callers = Thread.backtrace(cpu, Backtracer.ACCURATE).filter(isCode);
    } catch (_) {
        callers = [];
    }
    if (callers.length > 0 && callers[0].equals(cpu.pc)) callers.shift();
    return [cpu.pc, ...callers].slice(0, max).map(rawFrame);
}
