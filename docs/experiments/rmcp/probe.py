"""Send Strobe's hardening cases to an MCP server over stdio; report what comes back."""
import json, os, select, subprocess, sys, time, resource

def run(cmd):
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
    def send(b): p.stdin.write(b); p.stdin.flush()
    def recv(t=5):
        r, _, _ = select.select([p.stdout], [], [], t)
        if not r: return "<no reply>"
        l = p.stdout.readline()
        return l.decode(errors="replace").strip() if l else "<closed>"
    def alive():
        send(b'{"jsonrpc":"2.0","id":4242,"method":"ping"}\n'); return recv()
    out = {}
    send(b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}\n'); out["before initialize"] = recv(3)
    send(json.dumps({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"p","version":"0"}}}).encode()+b"\n")
    out["initialize"] = recv()[:120]
    send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    out["ping"] = alive()
    send(b'{"jsonrpc":"2.0","id":18446744073709551617,"method":"ping"}\n'); out["id 2^64+1"] = recv(3)
    out["alive after big id"] = alive()
    send(b'{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}\n'); out["id 2^53+1"] = recv(3)
    send(b'[]\n'); out["empty batch"] = recv(3)
    out["alive after batch"] = alive()
    send(b'{"jsonrpc":"2.0","id":2,"method":"ping","x":"\xff\xfe"}\n'); out["invalid utf8"] = recv(3)
    out["alive after utf8"] = alive()
    send(b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"nope","arguments":{}}}\n'); out["unknown tool"] = recv(3)
    send(b'{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"debug_query","arguments":{"limit":5.0}}}\n'); out["schema (limit 5.0, no sessionId)"] = recv(3)[:200]
    send(b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"debug_query","arguments":' + b'['*200 + b']'*200 + b'}}\n'); out["deep nesting"] = recv(3)[:200]
    out["alive after deep"] = alive()
    t = time.time()
    send(b'{"jsonrpc":"2.0","id":6,"method":"ping","params":{"pad":"' + b"x" * (64 << 20) + b'"}}\n'); out["64 MiB line"] = recv(30)[:150]
    out["64 MiB line seconds"] = round(time.time() - t, 1)
    try:
        with open(f"/proc/{p.pid}/status") as f:
            out["VmHWM after 64 MiB line"] = [l.split(":")[1].strip() for l in f if l.startswith("VmHWM")][0]
    except OSError as e:
        out["VmHWM"] = str(e)
    out["alive at end"] = alive()
    p.stdin.close(); p.wait(5)
    out["stderr"] = p.stderr.read().decode(errors="replace")[-400:]
    for k, v in out.items(): print(f"{k:35} {v}")

run(sys.argv[1:])
