"""`berth mcp --transport http` is berth serve's server with `/mcp` alone, behind the same
guard: the tokens of `berth token create` (an admin's reaches `/mcp`, a device's is refused,
a revoked one is 401 at once), `/healthz` without a token, a missing token answered in MCP's
terms (never the web page's sign-in page), and off loopback an admin token of the store is a
token, while a device's alone is not."""

import json
import os
import re
import signal
import subprocess
import urllib.error
import urllib.request

import pytest

from conftest import BERTH, HttpServer, berth

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


def request(url, token=None, method="POST"):
    """One request (an MCP initialize for a POST); returns (status, headers, body text)."""
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(INITIALIZE).encode() if method == "POST" else None
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode(errors="replace")


def make_token(home, *args):
    return json.loads(berth(home, "token", "create", *args, "--json"))["token"]


@pytest.fixture
def server(home, tmp_path):
    started = []

    def start(*args):
        s = HttpServer(home, tmp_path, *args)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


def test_the_tokens_of_berth_token_create_are_the_servers(server, home):
    admin = make_token(home, "--admin", "ci")
    phone = make_token(home, "--device", "phone")
    s = server("--token", "own-token")
    assert request(s.url, "own-token")[0] == 200
    assert request(s.url, admin)[0] == 200
    status, _, body = request(s.url, phone)
    assert status == 403 and "admin token" in body, body
    berth(home, "token", "revoke", "ci")
    status, headers, _ = request(s.url, admin)
    assert status == 401 and headers["WWW-Authenticate"] == "Bearer"


def test_health_needs_no_token_and_other_paths_answer_in_mcps_terms(server):
    s = server("--token", "own-token")
    base = s.url.removesuffix("/mcp")
    status, _, body = request(f"{base}/healthz", method="GET")
    assert status == 200 and json.loads(body) == {"status": "ok"}
    # Not the web page's sign-in page: there is no web page here.
    status, headers, body = request(f"{base}/", method="GET")
    assert status == 401 and headers["WWW-Authenticate"] == "Bearer", body
    assert "Authorization: Bearer" in body and "<html" not in body.lower()
    assert request(f"{base}/", "own-token", method="GET")[0] == 404


def start_public(home, tmp_path):
    """`berth mcp --transport http` on 0.0.0.0 without --token; returns the process and the
    URL it serves at over loopback, or the process that exited and what it said."""
    env = {**os.environ, "BERTH_HOME": str(home)}
    env.pop("BERTH_MCP_TOKEN", None)
    proc = subprocess.Popen(
        [BERTH, "mcp", "--transport", "http", "--listen", "0.0.0.0:0"],
        env=env, cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )
    said = ""
    for line in proc.stderr:
        said += line
        m = re.search(r"serving MCP at http://0\.0\.0\.0:(\d+)/mcp", line)
        if m:
            return proc, f"http://127.0.0.1:{m.group(1)}/mcp"
    proc.wait(timeout=10)
    return proc, said


def test_off_loopback_an_admin_token_of_the_store_is_a_token(home, tmp_path):
    phone = make_token(home, "--device", "phone")
    # A device's token alone cannot reach /mcp: a server no one could use is refused.
    proc, said = start_public(home, tmp_path)
    assert proc.returncode not in (None, 0), said
    proc.stderr.close()
    proc.stdout.close()
    assert "without a token" in said and "BERTH_MCP_TOKEN" in said, said
    assert "berth token create --admin" in said, said

    admin = make_token(home, "--admin", "ci")
    proc, url = start_public(home, tmp_path)
    try:
        assert proc.returncode is None, f"berth mcp did not start with an admin token: {url}"
        assert request(url)[0] == 401
        assert request(url, phone)[0] == 403
        assert request(url, admin)[0] == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        proc.stderr.close()
        proc.stdout.close()
