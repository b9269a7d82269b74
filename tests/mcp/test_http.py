"""The Streamable HTTP transport, checked with raw HTTP requests (http.client, kept alive) and
the SDK client: Host and Origin validation (403), the bearer token (401), no public address
without a token, the request-size limit (413); no delayed-ACK stalls on a kept-alive
connection, DELETE answered 204; sessions bounded by --max-sessions (least recently used
closed, 404) and --session-idle-timeout (a listening client is not idle), also from [mcp] in
the config; a file's content once on the wire."""

import json
import os
import subprocess
import urllib.error
import urllib.request

import pytest

from conftest import BERTH, HttpServer, session_over

pytestmark = pytest.mark.anyio

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}


def post(url, body=INITIALIZE, headers=None):
    """POSTs JSON-RPC; returns (status, headers, body text)."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(
        url,
        data=data,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **(headers or {}),
        },
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode(errors="replace")


@pytest.fixture
def server(home, tmp_path):
    started = []

    def start(*args, env=None):
        s = HttpServer(home, tmp_path, *args, env=env)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


def test_host_and_origin_are_validated(server):
    s = server()
    status, _, body = post(s.url)
    assert status == 200, body
    port = s.url.split(":")[2].split("/")[0]
    status, _, _ = post(s.url, headers={"Origin": f"http://127.0.0.1:{port}"})
    assert status == 200
    # Another page on this machine (a dev server's) is not this server's: on loopback without
    # a token it would act as the machine's own user (berth serve's rule, the same guard).
    status, _, body = post(s.url, headers={"Origin": "http://localhost:5173"})
    assert status == 403 and "--allow-origin" in body, body
    status, _, _ = post(s.url, headers={"Origin": "https://evil.example"})
    assert status == 403
    status, _, _ = post(s.url, headers={"Origin": "null"})
    assert status == 403
    status, _, _ = post(s.url, headers={"Host": f"evil.example:{port}"})
    assert status == 403
    # Another path is not the endpoint.
    status, _, _ = post(s.url.replace("/mcp", "/other"))
    assert status == 404


def test_allowed_origins_and_hosts_can_be_added(server):
    s = server(
        "--allow-origin", "https://app.example:443", "--allow-origin", "http://localhost:5173",
        "--allow-host", "berth.internal",
    )
    assert post(s.url, headers={"Origin": "https://app.example"})[0] == 200
    assert post(s.url, headers={"Origin": "http://localhost:5173"})[0] == 200
    assert post(s.url, headers={"Origin": "https://app.example:8443"})[0] == 403
    assert post(s.url, headers={"Host": "berth.internal"})[0] == 200


def test_bearer_token(server):
    s = server("--token", "s3cret-token")
    status, headers, body = post(s.url)
    assert status == 401 and headers["WWW-Authenticate"] == "Bearer"
    assert "Authorization: Bearer" in body
    assert post(s.url, headers={"Authorization": "Bearer wrong"})[0] == 401
    assert post(s.url, headers={"Authorization": "Bearer s3cret-tokenX"})[0] == 401
    assert post(s.url, headers={"Authorization": "s3cret-token"})[0] == 401
    assert post(s.url, headers={"Authorization": "Bearer s3cret-token"})[0] == 200
    # The token from the environment works the same and never shows in --help.
    s2 = server(env={"BERTH_MCP_TOKEN": "from-env"})
    assert post(s2.url)[0] == 401
    assert post(s2.url, headers={"Authorization": "Bearer from-env"})[0] == 200


async def test_sdk_client_with_token(home, tmp_path):
    headers = {"Authorization": "Bearer tok"}
    async with session_over("http", home, tmp_path, ("--token", "tok"), headers=headers) as s:
        tools = {t.name for t in (await s.list_tools()).tools}
        assert "workspace_create" in tools
        r = await s.call_tool("workspace_create", {"name": "via-http"})
        assert not r.is_error


def test_public_address_needs_a_token(home, tmp_path):
    env = {**os.environ, "BERTH_HOME": str(home)}
    env.pop("BERTH_MCP_TOKEN", None)
    r = subprocess.run(
        [BERTH, "mcp", "--transport", "http", "--listen", "0.0.0.0:0"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert r.returncode != 0
    assert "without a token" in r.stderr and "--token" in r.stderr
    assert r.stdout == ""


def test_request_size_limit(server):
    s = server("--max-request-bytes", "2048")
    padded = dict(INITIALIZE)
    padded["params"] = {**INITIALIZE["params"], "padding": "x" * 4096}
    status, _, _ = post(s.url, body=padded)
    assert status == 413
    assert post(s.url)[0] == 200


async def test_a_change_through_one_session_is_announced_to_the_others(server):
    import anyio
    from mcp import ClientSession, types
    from mcp.client.streamable_http import streamable_http_client

    s = server()
    seen = {"a": [], "b": []}

    def handler(who):
        async def on_message(message):
            if isinstance(message, types.ResourceListChangedNotification):
                seen[who].append(message)

        return on_message

    async with streamable_http_client(s.url) as (ra, wa), streamable_http_client(s.url) as (rb, wb):
        async with ClientSession(ra, wa, message_handler=handler("a")) as a, ClientSession(
            rb, wb, message_handler=handler("b")
        ) as b:
            await a.initialize()
            await b.initialize()
            r = await a.call_tool("workspace_create", {"name": "shared"})
            assert not r.is_error
            with anyio.move_on_after(10):
                while not (seen["a"] and seen["b"]):
                    await anyio.sleep(0.05)
            assert seen["a"] and seen["b"], seen
            # Both sessions see the same store.
            r = await b.call_tool("resource_workspace_show", {"workspace_identifier": "shared"})
            assert not r.is_error


def test_a_kept_alive_connection_answers_without_delayed_ack_stalls(server):
    """A client that reuses its connection (http.client, most HTTP libraries, any proxy)
    must not wait ~40 ms per request for the server's last segment (TCP_NODELAY)."""
    import http.client
    import statistics
    import time
    from urllib.parse import urlparse

    s = server()
    u = urlparse(s.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}

    def call(body, extra=None):
        conn.request("POST", u.path, json.dumps(body), {**headers, **(extra or {})})
        r = conn.getresponse()
        text = r.read().decode()
        assert r.status in (200, 202), (r.status, text)
        return r, text

    r, _ = call(INITIALIZE)
    sid = r.getheader("mcp-session-id")
    assert sid
    session = {"mcp-session-id": sid, "mcp-protocol-version": "2025-06-18"}
    call({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    times = []
    for i in range(30):
        start = time.perf_counter()
        _, text = call({"jsonrpc": "2.0", "id": 100 + i, "method": "ping"}, session)
        times.append(time.perf_counter() - start)
        assert f'"id":{100 + i}' in text.replace(" ", ""), text
    p50 = statistics.median(times)
    assert p50 < 0.010, f"ping p50 {p50 * 1000:.1f} ms on a kept-alive connection"

    # Ending the session answers 204 No Content (the Python SDK reports 202 as a failure).
    conn.request("DELETE", u.path, headers=session)
    r = conn.getresponse()
    r.read()
    assert r.status == 204, r.status
    conn.close()


def open_session(url):
    """A new MCP session over raw HTTP; returns the headers that address it."""
    status, headers, body = post(url)
    assert status == 200, body
    sid = headers["mcp-session-id"]
    session = {"mcp-session-id": sid, "mcp-protocol-version": "2025-06-18"}
    status, _, body = post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    assert status == 202, (status, body)
    return session


def ping(url, session):
    status, _, body = post(url, {"jsonrpc": "2.0", "id": 7, "method": "ping"}, session)
    return status


def test_the_least_recently_used_session_is_closed_beyond_the_cap(server):
    s = server("--max-sessions", "3")
    a, b, c = open_session(s.url), open_session(s.url), open_session(s.url)
    assert ping(s.url, a) == 200  # a is now the most recently used; b the least
    d = open_session(s.url)
    assert ping(s.url, b) == 404, "the least recently used session should have been closed"
    for kept in (a, c, d):
        assert ping(s.url, kept) == 200
    # A client whose session was closed initializes again, and is served.
    assert ping(s.url, open_session(s.url)) == 200


def test_an_idle_session_expires(server):
    import time

    s = server("--session-idle-timeout", "1")
    idle, busy = open_session(s.url), open_session(s.url)
    deadline = time.monotonic() + 2.5
    while time.monotonic() < deadline:
        assert ping(s.url, busy) == 200
        time.sleep(0.2)
    assert ping(s.url, idle) == 404
    assert ping(s.url, busy) == 200


def test_a_listening_session_is_not_idle(server):
    """A client that keeps its stream open for notifications is in use, not idle, though it
    sends nothing; one without a stream expires."""
    import http.client
    import time
    from urllib.parse import urlparse

    s = server("--session-idle-timeout", "1")
    listening, silent = open_session(s.url), open_session(s.url)
    u = urlparse(s.url)
    stream = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    stream.request("GET", u.path, headers={"Accept": "text/event-stream", **listening})
    r = stream.getresponse()
    assert r.status == 200 and r.getheader("content-type") == "text/event-stream"
    time.sleep(2.5)
    assert ping(s.url, silent) == 404
    assert ping(s.url, listening) == 200
    stream.close()


def test_sessions_bounds_come_from_the_config_and_flags_win(server, home):
    (home / "config.toml").write_text("[mcp]\nmax_sessions = 2\nsession_idle_timeout = 600\n")
    s = server()
    a, b, c = open_session(s.url), open_session(s.url), open_session(s.url)
    assert ping(s.url, a) == 404
    assert ping(s.url, b) == 200 and ping(s.url, c) == 200
    s = server("--max-sessions", "3")
    a, b, c = open_session(s.url), open_session(s.url), open_session(s.url)
    assert all(ping(s.url, x) == 200 for x in (a, b, c))


def test_bounds_of_zero_are_refused(home, tmp_path):
    env = {**os.environ, "BERTH_HOME": str(home)}
    for flag in ["--max-sessions", "--session-idle-timeout"]:
        r = subprocess.run(
            [BERTH, "mcp", "--transport", "http", "--listen", "127.0.0.1:0", flag, "0"],
            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=10,
        )
        assert r.returncode == 2 and flag in r.stderr, r.stderr
    (home / "config.toml").write_text("[mcp]\nmax_sessions = 0\n")
    r = subprocess.run(
        [BERTH, "mcp", "--transport", "http", "--listen", "127.0.0.1:0"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=10,
    )
    assert r.returncode != 0
    assert "config.toml line 2" in r.stderr and "nonzero" in r.stderr, r.stderr


def test_a_megabyte_read_is_about_a_megabyte_on_the_wire(server):
    """The file's text travels once: not again in structured content, not pretty-printed."""
    s = server()
    session = open_session(s.url)

    def call(name, arguments):
        body = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": {"name": name, "arguments": arguments}}
        status, _, text = post(s.url, body, session)
        assert status == 200, text
        return text

    call("workspace_create", {"name": "big", "plain": True})
    content = "x" * 1_000_000
    call("workspace_storage_write",
         {"workspace_identifier": "big", "path": "big.txt", "content": content})
    wire = call("workspace_storage_read", {"workspace_identifier": "big", "path": "big.txt"})
    assert content in wire
    assert 1_000_000 < len(wire.encode()) < 1_002_000, len(wire.encode())
