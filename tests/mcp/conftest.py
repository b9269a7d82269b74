"""Fixtures for driving `berth mcp` with the official MCP Python SDK.

`connect` is parametrized over both transports, so every test that uses it runs once over
stdio and once over Streamable HTTP against a real `berth mcp --transport http` process.
"""

import contextlib
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

BERTH = os.environ.get("TEST_BERTH_BIN") or str(
    Path(__file__).resolve().parents[2] / "target" / "debug" / "berth"
)


@pytest.fixture
def anyio_backend():
    return "asyncio"


def git(cwd, *args):
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@berth.invalid", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def berth(home, *args, cwd=None, input=None):
    """Runs the berth CLI on `home`; returns its stdout."""
    return subprocess.run(
        [BERTH, *args],
        env={**os.environ, "BERTH_HOME": str(home)},
        cwd=cwd or home,
        input=input,
        capture_output=True,
        check=True,
        text=True,
    ).stdout


def text(result):
    return "".join(c.text for c in result.content if c.type == "text")


@pytest.fixture
def home(tmp_path):
    h = tmp_path / "home"
    h.mkdir()
    return h


@pytest.fixture
def repo(tmp_path):
    r = tmp_path / "project"
    r.mkdir()
    git(r, "init", "-q", "-b", "main")
    (r / "README.md").write_text("hello\n")
    git(r, "add", ".")
    git(r, "commit", "-q", "-m", "first")
    return r


class HttpServer:
    """`berth mcp --transport http` on a free loopback port, stopped with SIGTERM."""

    def __init__(self, home, cwd, *args, env=None):
        self.proc = subprocess.Popen(
            [BERTH, "mcp", "--transport", "http", "--listen", "127.0.0.1:0", *args],
            env={**os.environ, "BERTH_HOME": str(home), **(env or {})},
            cwd=str(cwd),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        seen = ""
        for line in self.proc.stderr:
            seen += line
            m = re.search(r"serving MCP at (http://\S+/mcp)", line)
            if m:
                self.url = m.group(1)
                return
        self.proc.wait()
        raise AssertionError(f"berth mcp did not start (exit {self.proc.returncode}): {seen}")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError("berth mcp --transport http did not stop on SIGTERM")
        out = self.proc.stdout.read()
        self.proc.stdout.close()
        self.proc.stderr.close()
        assert code == 0, f"exit {code}"
        assert out == "", f"stdout must stay empty: {out!r}"


@contextlib.asynccontextmanager
async def session_over(transport, home, cwd, args=(), message_handler=None, headers=None):
    """A ready ClientSession to a fresh `berth mcp` over `transport`."""
    kwargs = {"message_handler": message_handler} if message_handler else {}
    if transport == "stdio":
        params = StdioServerParameters(
            command=BERTH,
            args=["mcp", *args],
            env={**os.environ, "BERTH_HOME": str(home)},
            cwd=str(cwd),
        )
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, **kwargs) as s:
                await s.initialize()
                yield s
    else:
        server = HttpServer(home, cwd, *args)
        try:
            async with create_mcp_http_client(headers=headers) as client:
                async with streamable_http_client(server.url, http_client=client) as (read, write):
                    async with ClientSession(read, write, **kwargs) as s:
                        await s.initialize()
                        yield s
        finally:
            server.stop()


@pytest.fixture(params=["stdio", "http"])
def connect(request, home):
    """`connect(cwd, *args, message_handler=...)` opens a session over the test's transport."""

    def open_session(cwd, *args, message_handler=None):
        return session_over(request.param, home, cwd, args, message_handler)

    return open_session
