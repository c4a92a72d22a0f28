---@meta
-- LuaLS type stubs for the `strobe` module (not loaded at run time). Point your editor's
-- Lua language server at scripts/_meta/ ("workspace.library") for completion and checks.

---@class strobe
strobe = {}

---@class StrobeLaunchArgs
---@field command string
---@field args? string[]
---@field cwd? string
---@field projectRoot string
---@field env? table<string, string>
---@field breakpoints? StrobePointRequest[] set before the first instruction runs
---@field stopOnEntry? boolean pause at main (a Rust program's <crate>::main)

---@class StrobePointRequest
---@field function? string
---@field file? string
---@field line? integer
---@field condition? string
---@field hitCount? integer
---@field message? string makes a logpoint

---@class StrobeLaunchInfo
---@field sessionId string
---@field pid integer
---@field pendingPatternsApplied integer
---@field stagedPatterns string[]
---@field hookedFunctions integer
---@field breakpoints table[] stops set at launch: id, origin, stagedId?, function, file, line, address (static), runtimeAddress
---@field pause? table first pause after a bounded wait: status "paused"|"running"|"exited", threadId, function, file, line, arguments
---@field warnings string[]

---@class StrobeTraceResult
---@field mode "runtime"|"pending"
---@field activePatterns string[]
---@field hookedFunctions integer
---@field matchedFunctions integer
---@field warnings string[]
---@field suggestions? table

---@class StrobeEvent
---@field id string
---@field eventId integer
---@field eventType string
---@field timestampNs integer
---@field function? string
---@field sourceFile? string
---@field line? integer
---@field durationNs? integer
---@field parentEventId? string
---@field arguments? table parameters by name (typed from DWARF), or raw words where no DWARF describes them
---@field returnValue? any
---@field text? string

---@class StrobeQueryResult
---@field events StrobeEvent[]
---@field totalCount integer
---@field hasMore boolean
---@field lastEventId? integer
---@field eventsDropped boolean

---@class StrobeSession
---@field id string
---@field pid integer
local Session = {}
---@param args {add?: string[], remove?: string[], sampling?: table, argumentsAtExit?: boolean}
---@return StrobeTraceResult
function Session:trace(args) end
---@param query table  same fields as debug_query
---@return StrobeQueryResult
function Session:query(query) end
---@param query table  debug_query fields plus text? and timeoutMs?
---@return StrobeEvent|nil
function Session:wait_for(query) end
---@return table
function Session:status() end
---@param text string
function Session:stdin(text) end
---@return boolean
function Session:is_running() end
---@param args? {retain?: boolean}
---@return integer events
function Session:stop(args) end

-- Active debugger (src/lua/debugger.rs)
---@param args {add?: {["function"]?: string, file?: string, line?: integer, condition?: string, hitCount?: integer, message?: string}[], remove?: string[]}
---@return {breakpoints: table[], logpoints: table[]}
function Session:breakpoint(args) end
---@param args? {action?: "continue"|"step-over"|"step-into"|"step-out", threadId?: integer, timeoutMs?: integer}
---@return {status: "paused"|"running"|"exited", breakpointId?: string, threadId?: integer, reason?: string, file?: string, line?: integer, ["function"]?: string, exitCode?: integer, pausedThreads: integer, warnings: string[]}
function Session:continue(args) end
---@param args? {timeoutMs?: integer}
---@return table  like continue's answer; resumes nothing
function Session:wait_pause(args) end
---@return table[] paused threads {threadId, breakpointId, reason, file, line, function, address, backtrace, arguments}
function Session:paused() end
---@return {breakpoints: table[], logpoints: table[], pausedThreads: table[]} points carry `hits`
function Session:debug_state() end
---@param args? {threadId?: integer}
---@return {threadId: integer, function?: string, file?: string, line?: integer, locals: {name: string, type: string, isParameter: boolean, location: string, value?: any, error?: string}[]}
function Session:locals(args) end
---@param args {name: string, value: number|string|boolean, threadId?: integer}
---@return {name: string, type: string, location: string, previousValue: any, newValue: any}
function Session:set_local(args) end
---gdb's `print` at a pause (debug_eval): expressions over the paused frame, from DWARF.
---A plain string evaluates one expression and returns its result alone.
---@param args string|{expressions: string[], threadId?: integer, frame?: integer, depth?: integer, format?: "natural"|"hex"}
---@return table `{threadId, pid, frame, results = {{expression, type, value, address?} | {expression, error, position}}}`, or one result
function Session:eval(args) end


-- Investigations (debug_script only: scripts/lib/investigate.lua wraps its sessions).

---@class StrobeHit
---@field n integer hit number in this run
---@field thread integer
---@field pid integer
---@field breakpointId string
---@field function string|nil
---@field file string|nil
---@field line integer|nil
---@field locals table<string, any> name -> value (read on first use)
---@field vars table[] the locals with types (as Session:locals)
---@field args any[] the arguments
---@field backtrace table[]
local Hit = {}
---@param expr string C/C++/Rust expression in the paused frame (session:eval)
---@param frame? integer
---@return any
function Hit:eval(expr, frame) end
--- End the current s:run here (the thread stays paused).
function Hit:stop() end

---@param spec string|StrobePointRequest "file.c:88", a function name, or a breakpoint table
---@param fn? fun(hit: StrobeHit): string|nil return "stop" to end the run
---@return table the breakpoint
function Session:on_break(spec, fn) end
---@param opts? {stop_when?: fun(hit: StrobeHit): boolean, count?: integer, timeoutMs?: integer}
---@return {reason: "exit"|"stopped"|"until"|"count"|"timeout", hits: integer, exitCode?: integer, file?: string, line?: integer}
function Session:run(opts) end
--- The debug_script tool's primitive (tool scripts only): run `script` in a fresh state.
---@param args {script: string, sessionId?: string, args?: any, timeoutMs?: integer, maxOutputBytes?: integer}
---@return {result?: any, output: string, sessions: string[], stoppedSessions?: string[], elapsedMs: integer, error?: {code: string, message: string, line?: integer, traceback: string[]}}
function strobe.script_run(args) end
---@param args StrobeLaunchArgs
---@return StrobeSession, StrobeLaunchInfo
function strobe.launch(args) end
---@param id string
---@return StrobeSession
function strobe.session(id) end
---@return table[]
function strobe.sessions() end
---@param id string
---@param retain? boolean
---@return integer
function strobe.stop_session(id, retain) end
---@param id string
function strobe.delete_session(id) end
--- Effective settings (defaults < $STROBE_HOME/settings.json < <projectRoot>/.strobe/settings.json), read on every call.
---@param arg? string|{projectRoot?: string, sessionId?: string}
---@return {values: table<string, any>, sources: table<string, string>, warnings: string[]}
function strobe.settings(arg) end
---@param args {add?: string[], remove?: string[], clear?: boolean}
---@return StrobeTraceResult
function strobe.trace_pending(args) end
---Stage breakpoints/logpoints for the caller's next launches (ids "staged-N").
---@param args {add?: StrobePointRequest[], remove?: string[], clear?: boolean}
---@return table[]
function strobe.stage_breakpoints(args) end
---What the caller's next launch applies.
---@return {patterns: string[], breakpoints: table[]}
function strobe.staged() end
---@param binary string
---@param pattern string
---@param projectRoot? string
---@return {name: string, raw_name: string, address: integer, size: integer, file?: string, line?: integer}[]
function strobe.symbols(binary, pattern, projectRoot) end

---@param args {cmd: string[], cwd?: string, env?: table<string,string>, timeout_ms?: integer}
---@return {ok: boolean, status?: integer, stdout: string, stderr: string}
function strobe.exec(args) end

---@class StrobeProcess
---@field id integer
---@field pid? integer
local Process = {}
---@param timeout_ms? integer
---@return string|nil line, string|nil stream_or_timeout
function Process:read_line(timeout_ms) end
---@return fun(): string|nil, string|nil
function Process:lines() end
---@param text string
function Process:write(text) end
function Process:close_stdin() end
---@param timeout_ms? integer
---@return {status?: integer, ok: boolean, signal?: integer}|nil
function Process:wait(timeout_ms) end
---@return {status?: integer, ok: boolean, signal?: integer}|nil
function Process:status() end
---@return {status?: integer, ok: boolean, signal?: integer}
function Process:kill() end
function Process:close() end

---@param args {cmd: string[], cwd?: string, env?: table<string,string>, stdin?: boolean, stderr?: "pipe"|"null"}
---@return StrobeProcess
function strobe.spawn(args) end

strobe.fs = {}
---@param path string
---@return string
function strobe.fs.read(path) end
---@param path string
---@param text string
---@param opts? {append?: boolean}
function strobe.fs.write(path, text, opts) end
---@param dir string
---@return string[]
function strobe.fs.list(dir) end
---@param path string
---@return boolean
function strobe.fs.exists(path) end
---@param path string
---@return boolean
function strobe.fs.is_dir(path) end
---@param path string
function strobe.fs.mkdir(path) end
---@param path string
function strobe.fs.remove(path) end
---@param pattern string
---@return string[]
function strobe.fs.glob(pattern) end

---@class StrobeRegex
local Regex = {}
---@param s string
---@return boolean
function Regex:match(s) end
---@param s string
---@param init? integer
---@return integer|nil, integer|nil
function Regex:find(s, init) end
---@param s string
---@return table<integer|string, string>|nil
function Regex:captures(s) end
---@param s string
---@return string[]
function Regex:find_all(s) end
---@param s string
---@param replacement string
---@return string
function Regex:replace(s, replacement) end
strobe.regex = {}
---@param pattern string
---@return StrobeRegex
function strobe.regex.new(pattern) end

strobe.time = {}
---@return integer
function strobe.time.now_ms() end
---@return number
function strobe.time.monotonic_ms() end
---@param ms? integer
---@param fmt? string
---@return string
function strobe.time.format(ms, fmt) end

strobe.json = {}
---@return string
function strobe.json.encode(v) end
function strobe.json.decode(text) end
---@param t? table
---@return table
function strobe.json.array(t) end
strobe.json.null = nil

strobe.log = {}
function strobe.log.debug(...) end
function strobe.log.info(...) end
function strobe.log.warn(...) end
function strobe.log.error(...) end

---@param code string
---@param message string
function strobe.error(code, message) end
---@param ms integer
function strobe.sleep(ms) end
--- Progress of the MCP tools/call being served (notifications/progress), if its client
--- asked for it; `progress` must grow from call to call. Returns whether one was sent.
---@param progress number
---@param total? number
---@param message? string
---@return boolean
function strobe.progress(progress, total, message) end
---@return integer
function strobe.now_ms() end
---@return string
function strobe.inspect(v) end
---@param when string
---@param ctx any
---@return string[]
function strobe.hints(when, ctx) end
---@param when string
---@param ctx any
---@return string|nil
function strobe.hint(when, ctx) end
---@return table<string, table>
function strobe.scenario_steps() end

-- Test runs (debug_test): scripts/lib/testrun.lua over the core's run registry.
strobe.test = {}

---Start a test run; poll it with strobe.test.status. (async)
---@param args {projectRoot: string, framework?: string, level?: string, test?: string, command?: string, tracePatterns?: string[], watches?: table, env?: table<string,string>, killOnStuck?: boolean}
---@return {testRunId: string, status: string, framework: string, sessionId?: string}
function strobe.test.run(args) end

---@param id string
---@return {testRunId: string, status: "running"|"completed", progress?: table, result?: table, sessionId?: string}
function strobe.test.status(id) end

---Stop a run's whole process tree.
---@param id string
function strobe.test.stop(id) end

---The loaded adapters (adapters/*.lua) by name.
---@return table<string, table>
function strobe.test.adapters() end

---Spawn a test command in its own process group, collect its output, watch it for stuck tests.
---@param args {cmd: string[], cwd: string, env?: table<string,string>, meta?: table, killOnStuck?: boolean, stuckMs?: integer[]}
---@return string id
function strobe.test.start(args) end

---@param id string
---@return {status: string, elapsedMs: integer, pid?: integer, exitCode?: integer, signal?: integer, phase?: string, stdout: string, stderr: string, warnings: table[], stuck: table[], killed: boolean, meta: table, result?: table, sessionId?: string}
function strobe.test.get(id) end

---@param id string
---@param result table
function strobe.test.finish(id, result) end

---@param args {sessionId: string, meta?: table}
---@return string id
function strobe.test.track(args) end

---@param id string
function strobe.test.kill(id) end

---@return integer elapsed_ms, integer? baseline_ms
function strobe.test.current(id, test, root) end

function strobe.test.record(root, test, ms) end

---@return string dir
function strobe.test.scratch() end

strobe.xml = {}
---@param text string
---@return {tag: string, attrs: table<string,string>, children: table[], text: string}
function strobe.xml.decode(text) end

---Every rule's non-nil answer for `when` (rules may return tables).
---@return any[]
function strobe.hint_values(when, ctx) end
