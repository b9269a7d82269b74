"""Load test of `berth mcp`: many keep-alive HTTP clients against one server, beside the same
work over stdio in the same run, and the server's memory as clients abandon sessions.

Not part of ./test.sh (it measures, it does not check). Run it with the test venv, after a
release build:

    cargo build --release
    .venv/bin/python tests/load/mcp_load.py [--clients 16] [--seconds 10] \
        [--abandon 1000,5000,20000] [--max-sessions N] [--idle 20] [--paging 500,10000] \
        [--only load|abandon|paging]

It prints:
- the latency of a ping on one kept-alive connection (no 40 ms delayed-ACK stalls);
- for keep-alive HTTP with 1 and with N clients, and for stdio: operations per second, p50
  and p99 latency, errors, and the server's resident memory before and after;
- the resident memory after each number of abandoned sessions (initialized, never closed) on
  a server with a session cap, and once its idle timeout has closed them;
- what a page of resources/list and of resource_workspace_list costs at each number of
  workspaces, which should not grow with it.
Only loopback addresses are used.
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


def ping_work(i, n):
    return {"jsonrpc": "2.0", "id": i + 1, "method": "ping"}


def run_http(url, clients, seconds, work=work):
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


class StdioClient:
    """One `berth mcp` on stdio, spoken to in JSON lines."""

    def __init__(self, berth, home):
        self.proc = subprocess.Popen(
            [berth, "mcp"],
            env={**os.environ, "BERTH_HOME": home},
            cwd=home,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
        )
        self.ids = 0
        self.request("initialize", INITIALIZE["params"])
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, msg):
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()

    def receive(self):
        while True:
            msg = json.loads(self.proc.stdout.readline())
            if "id" in msg:
                return msg

    def request(self, method, params=None):
        self.ids += 1
        msg = {"jsonrpc": "2.0", "id": self.ids, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return self.receive()

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def run_stdio(berth, home, seconds):
    """The same operations, one client, over a `berth mcp` on stdio."""
    c = StdioClient(berth, home)
    before = rss_kib(c.proc.pid)
    latencies, errors, i = [], 0, 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        start = time.perf_counter()
        c.send(work(i, 0))
        msg = c.receive()
        latencies.append(time.perf_counter() - start)
        errors += "error" in msg or bool(msg["result"].get("isError"))
        i += 1
    after = rss_kib(c.proc.pid)
    c.close()
    return latencies, errors, before, after


def run_pings(url, count):
    """Pings on one kept-alive connection: the floor of a request's latency."""
    c = HttpClient(url)
    latencies = []
    for i in range(count):
        start = time.perf_counter()
        status, _, _ = c.post({"jsonrpc": "2.0", "id": i + 1, "method": "ping"}, c.session)
        latencies.append(time.perf_counter() - start)
        assert status == 200, status
    c.conn.close()
    return latencies


def timed(f, repeat):
    """The median time of `repeat` calls of f, in ms."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def run_paging(berth, sizes, repeat):
    """What a page costs as workspaces grow: resources/list (first page, a page deep in the
    listing, every page), resource_workspace_list (a page of 100, and a query), each the
    median of `repeat` runs, on one stdio server whose home grows between the rows."""
    home = tempfile.mkdtemp(prefix="berth-paging-")
    c = StdioClient(berth, home)
    print(f"{'workspaces':>10} {'page 1 ms':>10} {'deep ms':>10} {'all pages ms':>13} {'pages':>6} "
          f"{'tool ms':>8} {'query ms':>9} {'create/s':>9}")
    made = 0
    try:
        for size in sizes:
            start, before = time.perf_counter(), made
            while made < size:
                r = c.request("tools/call", {"name": "workspace_create",
                                             "arguments": {"name": f"w{made:05}", "plain": True,
                                                           "description": f"workspace {made}"}})
                assert not r["result"].get("isError"), r
                made += 1
            create_rate = (made - before) / max(time.perf_counter() - start, 1e-9)

            def page(cursor=None):
                r = c.request("resources/list", {"cursor": cursor} if cursor else {})
                assert "result" in r, r
                return r["result"].get("nextCursor")

            cursors, cursor = [], None
            while True:
                cursor = page(cursor)
                if not cursor:
                    break
                cursors.append(cursor)
            # A page of workspaces from the middle of the listing.
            deep = [c for c in cursors if c.startswith("w/")]
            deep = deep[len(deep) // 2] if deep else None

            def every():
                n, cur = 0, None
                while True:
                    cur = page(cur)
                    n += 1
                    if not cur:
                        return n

            pages = every()

            def tool(args):
                r = c.request("tools/call", {"name": "resource_workspace_list", "arguments": args})
                assert not r["result"].get("isError"), r

            print(f"{size:>10} {timed(page, repeat):>10.2f} {timed(lambda: page(deep), repeat):>10.2f} "
                  f"{timed(every, 3):>13.1f} {pages:>6} {timed(lambda: tool({}), repeat):>8.2f} "
                  f"{timed(lambda: tool({'query': 'workspace 1234'}), 5):>9.1f} {create_rate:>9.0f}")
    finally:
        c.close()


def report(name, latencies, errors, seconds, before, after):
    ms = sorted(x * 1000 for x in latencies)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    print(
        f"{name:<34} {len(ms) / seconds:>9.0f} {statistics.median(ms):>9.2f} {p99:>9.2f} "
        f"{errors:>7} {before / 1024:>9.1f} {after / 1024:>9.1f}"
    )
    return statistics.median(ms)


def start_server(berth, home, *extra):
    """`berth mcp --transport http` on a free loopback port: (process, URL)."""
    server = subprocess.Popen(
        [berth, "mcp", "--transport", "http", "--listen", "127.0.0.1:0", *extra],
        env={**os.environ, "BERTH_HOME": home}, cwd=home, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    for line in server.stderr:
        m = re.search(r"serving MCP at (http://\S+/mcp)", line)
        if m:
            return server, m.group(1)
    raise SystemExit("berth mcp did not start")


def stop(server):
    server.terminate()
    server.wait(timeout=10)


def run_abandon(berth, home, targets, max_sessions, idle):
    """Sessions initialized and never closed, on a server of its own with the given cap and
    idle timeout: resident memory as they pile up, then after the idle timeout closed them."""
    extra = ["--session-idle-timeout", str(idle)]
    if max_sessions:
        extra += ["--max-sessions", str(max_sessions)]
    server, url = start_server(berth, home, *extra)
    try:
        cap = max_sessions or "default (1000)"
        print(f"abandoned sessions (initialized, never closed); --max-sessions {cap}, "
              f"--session-idle-timeout {idle}")
        print(f"{'sessions':>9} {'RSS MiB':>9} {'s':>6}")
        print(f"{0:>9} {rss_kib(server.pid) / 1024:>9.1f}")
        u = urlparse(url)
        # Twice: the second round shows whether what the first left is reused or leaked.
        for round in ("", " again"):
            opened, start = 0, time.monotonic()
            for target in targets:
                while opened < target:
                    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
                    conn.request("POST", u.path, json.dumps(INITIALIZE),
                                 {"Content-Type": "application/json", "Accept": ACCEPT})
                    r = conn.getresponse()
                    r.read()
                    conn.close()
                    assert r.status == 200, r.status
                    opened += 1
                print(f"{target:>9} {rss_kib(server.pid) / 1024:>9.1f} "
                      f"{time.monotonic() - start:>6.1f}{round}")
            # The sweep runs every tenth of the timeout; give it one more.
            time.sleep(idle * 1.2 + 1)
            print(f"{'expired':>9} {rss_kib(server.pid) / 1024:>9.1f}{round:>7}")
    finally:
        stop(server)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--berth", default=str(ROOT / "target" / "release" / "berth"))
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--pings", type=int, default=500)
    ap.add_argument("--abandon", default="1000,5000,20000")
    ap.add_argument("--max-sessions", type=int, default=None,
                    help="the cap of the abandoned-sessions server (default: berth's)")
    ap.add_argument("--idle", type=int, default=20,
                    help="the abandoned-sessions server's --session-idle-timeout")
    ap.add_argument("--paging", default="500,10000",
                    help="workspace counts to time listing pages at ('' to skip)")
    ap.add_argument("--only", choices=["load", "abandon", "paging"], default=None)
    args = ap.parse_args()
    if not Path(args.berth).exists():
        sys.exit(f"{args.berth} does not exist; run `cargo build --release` first")
    print(f"berth mcp load test; {os.cpu_count()} cores")

    if args.only in (None, "load"):
        home = tempfile.mkdtemp(prefix="berth-load-")
        subprocess.run([args.berth, "workspace", "create", "load", "--plain"],
                       env={**os.environ, "BERTH_HOME": home}, cwd=home, check=True,
                       capture_output=True)
        server, url = start_server(args.berth, home)
        try:
            pings = sorted(x * 1000 for x in run_pings(url, args.pings))
            print(f"ping on one kept-alive connection: p50 {statistics.median(pings):.2f} ms, "
                  f"p99 {pings[int(len(pings) * 0.99)]:.2f} ms ({args.pings} pings)")
            print()
            print(f"storage writes and reads (1 KiB, one write in four) for {args.seconds:.0f} s; "
                  f"RSS of the server before and after")
            print(f"{'transport':<34} {'ops/s':>9} {'p50 ms':>9} {'p99 ms':>9} {'errors':>7} "
                  f"{'RSS0 MiB':>9} {'RSS1 MiB':>9}")
            before = rss_kib(server.pid)
            lat, errors = run_http(url, 1, args.seconds)
            one_p50 = report("HTTP keep-alive, 1 client", lat, errors, args.seconds, before,
                             rss_kib(server.pid))
            before = rss_kib(server.pid)
            lat, errors = run_http(url, args.clients, args.seconds)
            report(f"HTTP keep-alive, {args.clients} clients", lat, errors, args.seconds, before,
                   rss_kib(server.pid))
            before = rss_kib(server.pid)
            lat, errors = run_http(url, args.clients, args.seconds, ping_work)
            report(f"HTTP keep-alive, {args.clients} clients, ping", lat, errors, args.seconds,
                   before, rss_kib(server.pid))
            lat, errors, b, a = run_stdio(args.berth, home, args.seconds)
            stdio_p50 = report("stdio, 1 client", lat, errors, args.seconds, b, a)
            # Like with like: one client each. With many clients on few cores, p50 is queueing.
            print(f"HTTP p50 / stdio p50, one client each = {one_p50 / stdio_p50:.2f} (goal <= 3)")
        finally:
            stop(server)
        print()

    if args.only in (None, "abandon") and args.abandon:
        home = tempfile.mkdtemp(prefix="berth-abandon-")
        targets = sorted(int(x) for x in args.abandon.split(","))
        run_abandon(args.berth, home, targets, args.max_sessions, args.idle)
        print()

    if args.only in (None, "paging") and args.paging:
        print("listing pages as workspaces grow (stdio; medians)")
        run_paging(args.berth, sorted(int(x) for x in args.paging.split(",")), 20)


if __name__ == "__main__":
    main()
