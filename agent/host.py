#!/usr/bin/env python3
"""Strobe's Frida host.

The Strobe daemon starts this program as a child process (one per daemon) with a Python that
has `frida` installed, and drives Frida through it. It owns the Frida device, sessions and
scripts; the daemon owns every decision.

Protocol, both directions, over stdin/stdout:

    u32 LE header_len, u32 LE payload_len, header (UTF-8 JSON object), payload (raw bytes)

Requests (daemon -> host) carry an "id" and an "op"; every request runs on its own thread and
gets exactly one reply  {"id", "ok": true, ...result}  or  {"id", "ok": false, "error",
"code"?, "errorType"?}.  Unsolicited frames (host -> daemon) have an "event" and no "id":

    {"event": "ready", "frida", "python", "pid"}             once, at start
    {"event": "output", "pid", "fd"} + bytes                  target stdout (1) / stderr (2);
                                                              empty payload: stream closed
    {"event": "message", "pid", "message", "has_data"} + bytes
                                                              the agent's send(message, data);
                                                              script errors arrive as
                                                              {"type": "script_error", ...},
                                                              console.* as {"type": "log", ...}
    {"event": "raw_message", "pid", "raw_len", "has_data"} + raw text + bytes
                                                              the same, undecoded: the payload
                                                              starts with raw_len bytes of
                                                              Frida's message JSON ({"type":
                                                              "send"|"log"|"error", ...}), then
                                                              the data bytes (the fast path)
    {"event": "exit_status", "pid", "code" | "signal"}        how a process ended, when still
                                                              knowable (best effort, before
                                                              its "detached")
    {"event": "child_added", "pid", "parent_pid", "origin", "path"}
                                                              a fork/exec of an attached process,
                                                              suspended: the daemon attaches to
                                                              it (or not) and resumes it
    {"event": "detached", "pid", "reason", "crash"?}          the session ended

stdout carries frames only: fd 1 is redirected to stderr at start, so stray prints (ours,
Frida's, native code's) land in the log. stderr is the log. On stdin EOF (the daemon is gone)
the host detaches from every session, kills the processes it spawned, and exits 0.
"""

import json
import os
import shutil
import signal
import struct
import sys
import threading
import time
import traceback

PROTOCOL_VERSION = 1
# Raw message prefixes, as frida-core 17 serializes them.
RPC_PREFIX = '{"type":"send","payload":["frida:rpc"'
EXIT_PREFIX = '{"type":"send","payload":{"type":"process_exit"'
SYNC_PREFIX = '{"type":"send","payload":{"type":"sync"}'
CRASH_PREFIX = '{"type":"send","payload":{"type":"crash"'
# A batch the agent's fork gate may hold fork() for until it is out (forksafe.ts); the
# marker (sent when the gate is built, and to ask for acks) needs nothing but its receipt.
RECEIPT_PREFIX = '{"type":"send","payload":{"rx":1,'
RECEIPT_MARKER = '{"type":"send","payload":{"rx":1,"type":"receipt"}}'
# The gate is about to call fork(): hold what we would send (_fork_intent); and its end.
FORK_MARKER = '{"type":"send","payload":{"rx":1,"type":"fork"}}'
FORKED_MARKER = '{"type":"send","payload":{"type":"forked"}}'
# At most this long without the agent's "forked" (a gate that gave up, an agent gone).
FORK_HOLD_S = 1.0
MAX_HEADER = 64 << 20
MAX_PAYLOAD = 1 << 30


def log(msg):
    try:
        sys.stderr.write("strobe-host: %s\n" % msg)
        sys.stderr.flush()
    except Exception:
        pass


class Writer:
    """Serializes frames onto the protocol stream (Frida callbacks come on Frida's threads)."""

    def __init__(self, fd):
        self._out = os.fdopen(fd, "wb", buffering=1 << 16)
        self._lock = threading.Lock()
        self.broken = False

    def send(self, header, *payload):
        """One frame; the payload is the concatenation of the `payload` parts (bytes-like or
        None), written one after the other: an event batch is not copied into one buffer."""
        parts = [p for p in payload if p]
        h = json.dumps(header, separators=(",", ":"), default=str).encode("utf-8")
        frame = struct.pack("<II", len(h), sum(len(p) for p in parts))
        with self._lock:
            if self.broken:
                return
            try:
                self._out.write(frame)
                self._out.write(h)
                for p in parts:
                    self._out.write(p)
                self._out.flush()
            except (BrokenPipeError, OSError, ValueError):
                self.broken = True


class HostError(Exception):
    def __init__(self, message, code=None):
        super().__init__(message)
        self.code = code


class Target:
    def __init__(self, pid, session, script):
        self.pid = pid
        self.session = session
        self.script = script
        # Once the agent has a fork gate (its first receipt marker), the daemon's events-acks
        # ride on receipts instead of arriving unasked (see _receipt).
        self.receipts = False
        self.ack = None
        # A fork announced by the gate: until `held_until` (or "forked"), RPCs and posts
        # wait; `calls` RPCs are under way; `owed` a receipt waits for them to end.
        self.held_until = 0.0
        self.calls = 0
        self.owed = False


class Host:
    def __init__(self, frida, writer):
        self.frida = frida
        self.w = writer
        self.device = frida.get_local_device()
        self.lock = threading.Lock()
        self.fork_done = threading.Condition(self.lock)
        self.targets = {}  # pid -> Target
        self.spawned = set()  # pids we spawned and have not seen die
        self.gone = {}  # pid -> reason the session ended
        self.device.on("output", self._on_output)
        self.device.on("child-added", self._on_child_added)
        self.device.on("process-crashed", self._on_process_crashed)

    # ---- Frida callbacks (Frida's thread) ----

    def _on_output(self, pid, fd, data):
        self.w.send({"event": "output", "pid": pid, "fd": fd}, data or b"")

    def _on_child_added(self, child):
        try:
            if child.origin == "exec":
                # Same pid, new image: the old agent is gone (its session detaches with
                # "process-replaced"); the daemon attaches a new one.
                with self.lock:
                    self.targets.pop(child.pid, None)
            self.w.send({"event": "child_added", "pid": child.pid, "parent_pid": child.parent_pid,
                         "origin": child.origin, "path": child.path})
        except Exception:
            log("child-added: " + traceback.format_exc())

    def _on_process_crashed(self, crash):
        self.w.send({"event": "process_crashed", "pid": crash.pid, "summary": crash.summary,
                     "report": crash.report})

    def _make_detached_handler(self, pid, session=None):
        def on_detached(reason, crash):
            with self.lock:
                t = self.targets.get(pid)
                if t is not None and (session is None or t.session is session):
                    self.targets.pop(pid, None)
                if reason != "process-replaced":
                    self.gone[pid] = reason
            if reason == "process-terminated":
                self._report_exit_status(pid)
                self.spawned.discard(pid)
            elif reason != "process-replaced" and pid in self.spawned:
                # The session ended but the process may live on (Frida can close a parent's
                # session when a forked child's agent copy is torn down): its exit status,
                # once it comes, is the only word on how it ended.
                threading.Thread(target=self._await_exit_status, args=(pid,), daemon=True).start()
            header = {"event": "detached", "pid": pid, "reason": reason}
            if crash is not None:
                header["crash"] = {"summary": getattr(crash, "summary", None),
                                   "report": getattr(crash, "report", None)}
            self.w.send(header)
        return on_detached

    def _await_exit_status(self, pid):
        try:
            os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        except (ChildProcessError, OSError):
            return  # already reaped (by Frida), or not our child
        self._report_exit_status(pid)

    def _report_exit_status(self, pid):
        """Best effort: the exit status of a process we spawned, if Frida has not reaped it yet
        (WNOWAIT leaves it for Frida). Sent as {"event": "exit_status", "pid", "code"|"signal"}."""
        try:
            r = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG)
        except (ChildProcessError, OSError):
            return
        if r is None or r.si_pid != pid:
            return
        header = {"event": "exit_status", "pid": pid}
        if r.si_code == os.CLD_EXITED:
            header["code"] = r.si_status
        elif r.si_code in (os.CLD_KILLED, os.CLD_DUMPED):
            header["signal"] = r.si_status
        else:
            return
        self.w.send(header)

    def _make_message_handler(self, pid):
        def on_message(message, data):
            mtype = message.get("type")
            if mtype == "send":
                body = message.get("payload")
                if isinstance(body, dict) and body.get("rx") == 1:
                    self._receipt(pid)
                    if body.get("type") == "receipt":
                        return
                if isinstance(body, dict) and body.get("type") in ("process_exit", "sync"):
                    self._post_ack(pid)
                    if body.get("type") == "sync":
                        return
                if isinstance(body, dict) and body.get("type") == "crash":
                    self.w.send({"event": "message", "pid": pid, "message": body, "has_data": False})
                    self._post_ack(pid, "crash-ack")
                    return
            elif mtype == "error":
                body = {"type": "script_error", "description": message.get("description"),
                        "stack": message.get("stack"), "fileName": message.get("fileName"),
                        "lineNumber": message.get("lineNumber")}
            else:
                body = {"type": "frida_" + str(mtype), "raw": message}
            self.w.send({"event": "message", "pid": pid, "message": body, "has_data": data is not None}, data)
        return on_message

    def _hook_messages(self, pid, script):
        """Forward the agent's messages without parsing them here.

        frida-python's public path json-decodes every message (and we would re-encode it):
        ~3 us per trace event, more than the hook itself. So, with the pinned frida version,
        take the raw JSON text from the script's underlying signal and pass it through as a
        `raw_message` frame (payload = raw text + data); only RPC replies go to frida-python.
        Falls back to the public API if frida's internals are not as expected.
        """
        impl = getattr(script, "_impl", None)
        orig = getattr(script, "_on_message", None)
        if impl is not None and orig is not None:
            try:
                impl.off("message", orig)
            except Exception as e:
                log("raw message path unavailable (%s); using the public API" % e)
                impl = None
        else:
            impl = None
        if impl is None:
            script.on("message", self._make_message_handler(pid))
            script.set_log_handler(self._make_log_handler(pid))
            return

        def on_raw(raw, data):
            try:
                if raw.startswith(RPC_PREFIX):
                    orig(raw, data)
                    return
                if raw == RECEIPT_MARKER:
                    self._receipt(pid)
                    return
                if raw == FORK_MARKER:
                    self._fork_intent(pid)
                    return
                if raw == FORKED_MARKER:
                    self._forked(pid)
                    return
                if raw.startswith(EXIT_PREFIX):
                    self._post_ack(pid)
                elif raw.startswith(SYNC_PREFIX):
                    self._post_ack(pid)
                    return
                text = raw.encode("utf-8")
                self.w.send({"event": "raw_message", "pid": pid, "raw_len": len(text), "has_data": data is not None},
                            text, data)
                if raw.startswith(RECEIPT_PREFIX):
                    self._receipt(pid)
                elif raw.startswith(CRASH_PREFIX):
                    # The crashing thread waits for this; the report is already on its way.
                    self._post_ack(pid, "crash-ack")
            except Exception:
                log("message from %d: %s" % (pid, traceback.format_exc().rstrip()))

        impl.on("message", on_raw)

    def _receipt(self, pid):
        """Confirm a batch (or marker) of an agent with a fork gate, with the daemon's latest
        events-ack held for it. A message from here that the agent did not ask for could be
        in Frida's queues when the program forks, and the child would answer it on the
        parent's connection (SIGSEGV in the child); the gate waits for every receipt."""
        with self.lock:
            t = self.targets.get(pid)
            if t is None:
                return
            t.receipts = True
            message = {"type": "rx"}
            if t.ack is not None:
                message["ack"] = t.ack
                t.ack = None
        try:
            t.script.post(message)
        except Exception as e:
            log("rx to %d failed: %s" % (pid, e))

    def _fork_intent(self, pid):
        """The agent's fork gate is closed and waits for a receipt before it calls fork().
        A message from here still in Frida's queues at fork() is answered by the child on the
        parent's connection (SIGSEGV): hold new RPCs and posts, and confirm once the RPCs
        under way have their replies (Frida's thread: never blocks here)."""
        with self.lock:
            t = self.targets.get(pid)
            if t is None:
                return
            t.held_until = time.monotonic() + FORK_HOLD_S
            t.owed = t.calls > 0
        if not t.owed:
            self._receipt(pid)

    def _forked(self, pid):
        with self.lock:
            t = self.targets.get(pid)
            if t is not None:
                t.held_until = 0.0
                self.fork_done.notify_all()

    def _hold_for_fork(self, t):
        """Wait (request thread) while t's program forks; then count a call under way."""
        with self.lock:
            while True:
                left = t.held_until - time.monotonic()
                if left <= 0:
                    break
                self.fork_done.wait(left)
            t.calls += 1

    def _call_ended(self, t):
        with self.lock:
            t.calls -= 1
            owed = t.owed and t.calls == 0
            if owed:
                t.owed = False
        if owed:
            self._receipt(t.pid)

    def _post_ack(self, pid, ack="exit-ack"):
        # The exiting (or crashing) thread waits for this ack so its message gets out first.
        with self.lock:
            t = self.targets.get(pid)
        if t is not None:
            try:
                t.script.post({"type": ack})
            except Exception as e:
                log("%s to %d failed: %s" % (ack, pid, e))

    def _make_log_handler(self, pid):
        def on_log(level, text):
            self.w.send({"event": "message", "pid": pid,
                         "message": {"type": "log", "level": level, "message": text},
                         "has_data": False})
        return on_log

    # ---- helpers ----

    def _target(self, pid):
        with self.lock:
            t = self.targets.get(pid)
            reason = self.gone.get(pid)
        if t is None:
            if reason is not None:
                code = "PROCESS_EXITED" if reason in ("process-terminated", "process-replaced") else None
                raise HostError("not attached to pid %d: the session ended (%s)" % (pid, reason), code)
            raise HostError("not attached to pid %d" % pid)
        return t

    @staticmethod
    def _resolve_program(argv0, cwd, env):
        if "/" in argv0:
            path = argv0 if os.path.isabs(argv0) else os.path.join(cwd or os.getcwd(), argv0)
        else:
            search = (env or {}).get("PATH") if env else None
            path = shutil.which(argv0, path=search if search is not None else os.environ.get("PATH"))
            if path is None:
                raise HostError("'%s' was not found in PATH: the file does not exist there" % argv0)
        if not os.path.exists(path):
            raise HostError("'%s' does not exist (the file does not exist)" % path)
        if os.path.isdir(path):
            raise HostError("'%s' is a directory, not an executable" % path)
        if not os.access(path, os.X_OK):
            raise HostError("'%s' is not executable (check its permissions)" % path)
        return path

    # ---- ops ----

    def op_ping(self, req, payload):
        return {"frida": self.frida.__version__, "pid": os.getpid(), "protocol": PROTOCOL_VERSION}, b""

    def op_spawn(self, req, payload):
        argv = req.get("argv")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise HostError("spawn: argv must be a non-empty list of strings")
        cwd = req.get("cwd")
        env = req.get("env")
        if cwd is not None and not os.path.isdir(cwd):
            raise HostError("spawn: working directory '%s' does not exist" % cwd)
        program = self._resolve_program(argv[0], cwd, env)
        kwargs = {"argv": argv, "stdio": "pipe"}
        if cwd is not None:
            kwargs["cwd"] = cwd
        if env is not None:
            kwargs["envp"] = env  # the full environment, not merged with ours
        pid = self.device.spawn(program, **kwargs)
        with self.lock:
            self.spawned.add(pid)
            self.gone.pop(pid, None)
        return {"pid": pid, "program": program}, b""

    def op_attach(self, req, payload):
        pid = int(req["pid"])
        source = payload.decode("utf-8") if payload else req.get("agent_js")
        if not source:
            raise HostError("attach: no agent source (send the compiled agent as the payload)")
        with self.lock:
            if pid in self.targets:
                raise HostError("already attached to pid %d" % pid)
        # Frida's exit monitor off: at exit() it blocks the exiting thread, without a time
        # limit, until the agent's own thread has prepared for termination; after a followed
        # child's exit that wait sometimes never ended and the parent hung (docs/performance.md,
        # "The parent hang was Frida's exit monitor"). The agent's exit hook (index.ts hookExit)
        # flushes and waits for this host's ack itself.
        session = self.device.attach(pid, exit_monitor=False)
        session.on("detached", self._make_detached_handler(pid, session))
        try:
            script = session.create_script(source, name="strobe-agent")
            self._hook_messages(pid, script)
            script.load()
            # Forks and execs are suspended until the daemon has instrumented them (the
            # daemon answers every child_added event with attach + resume).
            init = dict(req.get("init") or {})
            # The daemon decides (init.followChildren); the agent then routes the program's
            # fork() calls through its fork gate (forksafe.ts).
            if init.get("followChildren") is True:
                session.enable_child_gating()
            with self.lock:
                self.targets[pid] = Target(pid, session, script)
                self.gone.pop(pid, None)
            info = script.exports_sync.init(init)
        except Exception:
            with self.lock:
                self.targets.pop(pid, None)
            try:
                session.detach()
            except Exception:
                pass
            raise
        return {"info": info}, b""

    def op_rpc(self, req, payload):
        pid = int(req["pid"])
        method = req.get("method")
        if not isinstance(method, str) or not method:
            raise HostError("rpc: method must be a non-empty string")
        args = req.get("args")
        if args is None:
            args = []
        elif not isinstance(args, list):
            args = [args]
        t = self._target(pid)
        self._hold_for_fork(t)
        try:
            result = getattr(t.script.exports_sync, method)(*args)
        finally:
            self._call_ended(t)
        if isinstance(result, (bytes, bytearray)):
            return {"result": None, "binary": True}, bytes(result)
        if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], (bytes, bytearray)):
            return {"result": result[0], "binary": True}, bytes(result[1])
        return {"result": result}, b""

    def op_resume(self, req, payload):
        self.device.resume(int(req["pid"]))
        return {}, b""

    def op_kill(self, req, payload):
        pid = int(req["pid"])
        try:
            self.device.kill(pid)
        except self.frida.ProcessNotFoundError:
            with self.lock:
                self.spawned.discard(pid)
            return {"alreadyGone": True}, b""
        except Exception as e:
            # A process that is dying (a zombie, or being reaped) makes Frida fail on its
            # /proc files ("auxv: No such process"): fall back to the kernel's answer.
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                with self.lock:
                    self.spawned.discard(pid)
                return {"alreadyGone": True}, b""
            except OSError:
                raise e
        with self.lock:
            self.spawned.discard(pid)
        return {}, b""

    def op_detach(self, req, payload):
        pid = int(req["pid"])
        t = self._target(pid)
        drained = True
        try:
            t.script.exports_sync.detach()  # the agent's own routing out of the program
        except Exception as e:
            log("detach %d: %s" % (pid, e))
        try:
            t.script.exports_sync.dispose()  # flush buffered events before we go
        except Exception as e:
            drained = False
            log("detach %d: dispose failed: %s" % (pid, e))
        try:
            t.script.unload()
        except Exception as e:
            log("detach %d: unload failed: %s" % (pid, e))
        try:
            t.session.detach()
        except Exception as e:
            log("detach %d: session detach failed: %s" % (pid, e))
        with self.lock:
            self.targets.pop(pid, None)
        return {"drained": drained}, b""

    def op_post(self, req, payload):
        # Deliver a message to the agent's recv() (e.g. "resume-<tid>" for a paused thread).
        message = req.get("message")
        if not isinstance(message, dict) or not isinstance(message.get("type"), str):
            raise HostError("post: message must be an object with a string 'type'")
        t = self._target(int(req["pid"]))
        if message["type"] == "events-ack":
            with self.lock:
                if t.receipts:
                    # Rides on the next receipt (_receipt).
                    seq = message.get("seq")
                    if isinstance(seq, int) and (t.ack is None or seq > t.ack):
                        t.ack = seq
                    return {}, b""
        self._hold_for_fork(t)  # a post has no reply: the receipt, sent after it, covers it
        try:
            t.script.post(message)
        finally:
            self._call_ended(t)
        return {}, b""

    def op_input(self, req, payload):
        self.device.input(int(req["pid"]), payload or b"")
        return {}, b""

    def op_compile(self, req, payload):
        root = req.get("project_root")
        entry = req.get("entry")
        if not root or not entry:
            raise HostError("compile: project_root and entry are required")
        compiler = self.frida.Compiler()
        diagnostics = []
        compiler.on("diagnostics", lambda d: diagnostics.extend(d))
        kwargs = {"project_root": root}
        if req.get("type_check") in ("full", "none"):
            kwargs["type_check"] = req["type_check"]
        try:
            js = compiler.build(entry, **kwargs)
        except Exception as e:
            lines = []
            for d in diagnostics:
                f = d.get("file")
                where = "%s:%s:%s: " % (f["path"], f["line"] + 1, f["character"] + 1) if f else ""
                lines.append("%s%s TS%s: %s" % (where, d.get("category"), d.get("code"), d.get("text")))
            raise HostError("compile failed: %s%s" % (e, ("\n" + "\n".join(lines)) if lines else ""))
        return {"diagnostics": len(diagnostics)}, js.encode("utf-8")

    # ---- shutdown ----

    def shutdown(self):
        with self.lock:
            targets = list(self.targets.values())
            spawned = list(self.spawned)
            self.targets.clear()
        for t in targets:
            try:
                t.session.detach()
            except Exception:
                pass
        for pid in spawned:
            try:
                self.device.kill(pid)
            except Exception:
                pass


def read_exact(f, n):
    buf = b""
    while len(buf) < n:
        chunk = f.read(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def keep_big_buffers_in_the_heap():
    """A fast-path batch (up to ~1 MB) arrives many times a second and is copied twice on its
    way through (frida's bytes, our frame). Above glibc's mmap threshold every such buffer is
    a fresh mapping whose pages fault and are zeroed on first touch, then unmapped; with the
    threshold (and the trim threshold) raised they are reused from the heap. Only this
    process: the targets' environment is not changed."""
    try:
        import ctypes
        libc = ctypes.CDLL(None)
        M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
        libc.mallopt(M_MMAP_THRESHOLD, 32 << 20)
        libc.mallopt(M_TRIM_THRESHOLD, 128 << 20)
    except Exception as e:  # not glibc: nothing to tune
        log("mallopt unavailable: %s" % e)


def main():
    keep_big_buffers_in_the_heap()
    # Keep a private handle on the real stdout for frames; point fd 1 at stderr.
    out_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    writer = Writer(out_fd)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the daemon decides when we stop

    try:
        import frida
    except Exception as e:
        log("cannot import frida with %s: %s" % (sys.executable, e))
        sys.exit(3)

    host = Host(frida, writer)
    done = threading.Event()

    def finish(code):
        if done.is_set():
            return
        done.set()
        # Never hang on the way out: a wedged Frida call must not keep us alive.
        watchdog = threading.Timer(5.0, lambda: os._exit(code))
        watchdog.daemon = True
        watchdog.start()
        try:
            host.shutdown()
        finally:
            try:
                sys.stderr.flush()
            except Exception:
                pass
            os._exit(code)

    def on_term(signum, frame):
        log("signal %d: shutting down" % signum)
        finish(0)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)

    writer.send({"event": "ready", "frida": frida.__version__, "python": sys.version.split()[0],
                 "pid": os.getpid(), "protocol": PROTOCOL_VERSION})

    ops = {name[3:]: getattr(host, name) for name in dir(host) if name.startswith("op_")}

    def handle(req, payload):
        rid = req.get("id")
        op = req.get("op")
        t0 = time.monotonic()
        try:
            fn = ops.get(op)
            if fn is None:
                raise HostError("unknown op %r" % (op,))
            result, out = fn(req, payload)
            reply = {"id": rid, "ok": True}
            reply.update(result)
            writer.send(reply, out)
        except HostError as e:
            reply = {"id": rid, "ok": False, "error": str(e), "errorType": "HostError"}
            if e.code:
                reply["code"] = e.code
            writer.send(reply)
        except Exception as e:
            text = str(e) or type(e).__name__
            if not isinstance(e, getattr(frida, "RPCException", ())):
                log("op %s failed: %s" % (op, traceback.format_exc().rstrip()))
            reply = {"id": rid, "ok": False, "error": text, "errorType": type(e).__name__}
            if isinstance(e, frida.ProcessNotFoundError):
                reply["code"] = "PROCESS_EXITED"
            writer.send(reply)
        finally:
            dt = (time.monotonic() - t0) * 1000
            if dt > 1000:
                log("op %s took %.0f ms" % (op, dt))

    stdin = sys.stdin.buffer
    while True:
        head = read_exact(stdin, 8)
        if head is None:
            break
        hlen, plen = struct.unpack("<II", head)
        if hlen > MAX_HEADER or plen > MAX_PAYLOAD:
            log("frame too large (%d, %d): protocol error" % (hlen, plen))
            break
        hbytes = read_exact(stdin, hlen)
        payload = read_exact(stdin, plen) if plen else b""
        if hbytes is None or payload is None:
            break
        try:
            req = json.loads(hbytes.decode("utf-8"))
            if not isinstance(req, dict):
                raise ValueError("header is not an object")
        except Exception as e:
            log("bad header: %s" % e)
            continue
        threading.Thread(target=handle, args=(req, payload), daemon=True).start()

    log("stdin closed: detaching and killing spawned processes")
    finish(0)


if __name__ == "__main__":
    main()
