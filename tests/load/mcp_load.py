"""Load test of `berth mcp`: many keep-alive HTTP clients against one server, beside the same
work over stdio in the same run, and the server's memory as clients abandon sessions.

Not part of ./test.sh (it measures, it does not check). Run it with the test venv, after a
release build:

    cargo build --release
    .venv/bin/python tests/load/mcp_load.py [--clients 16] [--seconds 10] [--abandon 1000,5000,20000]

It prints, for each transport: operations per second, p50 and p99 latency, errors, and the
server's resident memory before and after; then the resident memory after each number of
abandoned sessions (initialized, never closed). Only loopback addresses are used.
"""

import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[2]
ACCEPT = "application/json, text/event-stream"
PROTOCOL = "2025-06-18"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": PROTOCOL,
        "capabilities": {},
        "clientInfo": {"name": "load", "version": "1"},
    },
}
CONTENT = "x" * 1024


def rss_kib(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def message_of(body, content_type):
    """The JSON-RPC message of a response, whether JSON or one SSE event."""
    if "text/event-stream" in (content_type or ""):
        for line in body.splitlines():
            if line.startswith("data:") and line[5:].strip():
                return json.loads(line[5:])
        return None
    return json.loads(body) if body.strip() else None


def call(name, args, id_):
    return {
        "jsonrpc": "2.0",
        "id": id_,
        "method": "tools/call",
        "params": {"name": name, "arguments": args},
    }


def work(i, n):
    """The i-th operation of client n: a 1 KiB write, then reads of it."""
    path = f"load/client-{n}.txt"
    if i % 4 == 0:
        return call(
            "workspace_storage_write",
            {"workspace_identifier": "load", "path": path, "content": CONTENT},
            i + 1,
        )
    return call("workspace_storage_read", {"workspace_identifier": "load", "path": path}, i + 1)


class HttpClient:
    """One MCP session on one kept-alive connection."""

    def __init__(self, url):
        u = urlparse(url)
        self.path = u.path
        self.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        status, headers, _ = self.post(INITIALIZE, {})
        assert status == 200, status
        self.session = {"mcp-session-id": headers["mcp-session-id"], "mcp-protocol-version": PROTOCOL}
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, self.session)

    def post(self, body, extra):
        self.conn.request(
            "POST",
            self.path,
            json.dumps(body),
            {"Content-Type": "application/json", "Accept": ACCEPT, **extra},
        )
        r = self.conn.getresponse()
        text = r.read().decode()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, (text, r.getheader("content-type"))

    def request(self, body):
        status, _, (text, ctype) = self.post(body, self.session)
        if status != 200:
            return False
        msg = message_of(text, ctype)
        return msg is not None and "error" not in msg and not msg["result"].get("isError")


def run_http(url, clients, seconds):
    latencies, errors, lock = [], [0], threading.Lock()
    deadline = time.monotonic() + seconds

    def client(n):
        c = HttpClient(url)
        mine, bad, i = [], 0, 0
        while time.monotonic() < deadline:
            start = time.perf_counter()
            ok = c.request(work(i, n))
            mine.append(time.perf_counter() - start)
            bad += not ok
            i += 1
        with lock:
            latencies.extend(mine)
            errors[0] += bad

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, errors[0]


def run_stdio(berth, home, seconds):
    """The same operations, one client, over a `berth mcp` on stdio."""
    proc = subprocess.Popen(
        [berth, "mcp"],
        env={**os.environ, "BERTH_HOME": home},
        cwd=home,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        bufsize=1,
    )

    def send(msg):
        proc.stdin.write(json.dumps(msg) + "\n")
        proc.stdin.flush()

    def receive():
        while True:
            msg = json.loads(proc.stdout.readline())
            if "id" in msg:
                return msg

    send(INITIALIZE)
    receive()
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    before = rss_kib(proc.pid)
    latencies, errors, i = [], 0, 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        start = time.perf_counter()
        send(work(i, 0))
        msg = receive()
        latencies.append(time.perf_counter() - start)
        errors += "error" in msg or bool(msg["result"].get("isError"))
        i += 1
    after = rss_kib(proc.pid)
    proc.stdin.close()
    proc.wait(timeout=10)
    return latencies, errors, before, after


def report(name, latencies, errors, seconds, before, after):
    ms = sorted(x * 1000 for x in latencies)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    print(
        f"{name:<34} {len(ms) / seconds:>9.0f} {statistics.median(ms):>9.2f} {p99:>9.2f} "
        f"{errors:>7} {before / 1024:>9.1f} {after / 1024:>9.1f}"
    )
    return statistics.median(ms)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--berth", default=str(ROOT / "target" / "release" / "berth"))
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--abandon", default="1000,5000,20000")
    ap.add_argument("--max-sessions", type=int, default=None)
    args = ap.parse_args()
    if not Path(args.berth).exists():
        sys.exit(f"{args.berth} does not exist; run `cargo build --release` first")

    home = tempfile.mkdtemp(prefix="berth-load-")
    env = {**os.environ, "BERTH_HOME": home}
    subprocess.run([args.berth, "workspace", "create", "load", "--plain"], env=env, cwd=home,
                   check=True, capture_output=True)
    extra = ["--max-sessions", str(args.max_sessions)] if args.max_sessions else []
    server = subprocess.Popen(
        [args.berth, "mcp", "--transport", "http", "--listen", "127.0.0.1:0", *extra],
        env=env, cwd=home, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True,
    )
    url = None
    for line in server.stderr:
        m = re.search(r"serving MCP at (http://\S+/mcp)", line)
        if m:
            url = m.group(1)
            break
    assert url, "berth mcp did not start"
    try:
        print(f"berth mcp load test: {args.clients} keep-alive HTTP clients for {args.seconds:.0f} s "
              f"beside one stdio client; {os.cpu_count()} cores")
        print(f"{'transport':<34} {'ops/s':>9} {'p50 ms':>9} {'p99 ms':>9} {'errors':>7} "
              f"{'RSS0 MiB':>9} {'RSS1 MiB':>9}")
        before = rss_kib(server.pid)
        lat, errors = run_http(url, 1, args.seconds)
        one_p50 = report("HTTP, 1 client", lat, errors, args.seconds, before, rss_kib(server.pid))
        before = rss_kib(server.pid)
        lat, errors = run_http(url, args.clients, args.seconds)
        report(f"HTTP, {args.clients} clients", lat, errors, args.seconds, before,
               rss_kib(server.pid))
        lat, errors, b, a = run_stdio(args.berth, home, args.seconds)
        stdio_p50 = report("stdio, 1 client", lat, errors, args.seconds, b, a)
        # Like with like: one client each. With many clients on few cores, p50 is queueing.
        print(f"HTTP p50 / stdio p50, one client each = {one_p50 / stdio_p50:.2f} (goal <= 3)")

        print()
        print("abandoned sessions (initialized, never closed):")
        print(f"{'sessions':>9} {'RSS MiB':>9}")
        print(f"{0:>9} {rss_kib(server.pid) / 1024:>9.1f}")
        u = urlparse(url)
        opened = 0
        for target in sorted(int(x) for x in args.abandon.split(",")):
            while opened < target:
                conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
                conn.request("POST", u.path, json.dumps(INITIALIZE),
                             {"Content-Type": "application/json", "Accept": ACCEPT})
                r = conn.getresponse()
                r.read()
                conn.close()
                assert r.status == 200, r.status
                opened += 1
            print(f"{target:>9} {rss_kib(server.pid) / 1024:>9.1f}")
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
