"""Fixtures for driving `berth acp` with the official ACP Python SDK (PyPI
`agent-client-protocol`) as the client, against a local stand-in for the Anthropic API.

`Editor` is the client side: it records every `session/update`, answers permission requests
with a chosen option, and, when it advertises them, serves `fs/read_text_file` from its own
buffers (which may differ from the disk) and `fs/write_text_file` into them.
"""

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from acp import RequestError
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    CreateTerminalResponse,
    KillTerminalResponse,
    ReleaseTerminalResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    WaitForTerminalExitResponse,
    DeniedOutcome,
    FileSystemCapabilities,
    ReadTextFileResponse,
    RequestPermissionResponse,
    WriteTextFileResponse,
)
from acp.stdio import spawn_agent_process

sys.path.insert(0, str(Path(__file__).parent))
from provider import FakeAnthropic, Reply  # noqa: E402

BERTH = os.environ.get("TEST_BERTH_BIN") or str(
    Path(__file__).resolve().parents[2] / "target" / "debug" / "berth"
)

__all__ = ["Reply", "Editor", "berth", "run_agent", "texts"]



def outside_base():
    """A folder outside /tmp and /var/tmp, both of which a confined process has a private copy
    of, wherever the checkout is: /var/lib/berth-tests (mode 1777, for the unprivileged user
    too) where this user may make it, as root; else ~/.cache/berth-tests. What a test writes
    "outside the sandbox" to (berth-testkit's outside_dir, for the Python suites)."""
    system = Path("/var/lib/berth-tests")
    try:
        system.mkdir(parents=True, exist_ok=True)
        system.chmod(0o1777)
        return system
    except PermissionError:
        base = Path.home() / ".cache" / "berth-tests"
        base.mkdir(parents=True, exist_ok=True)
        return base

@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def home(tmp_path):
    h = tmp_path / "home"
    h.mkdir()
    return h


@pytest.fixture
def work(tmp_path):
    w = tmp_path / "project"
    w.mkdir()
    return w


@pytest.fixture
def provider():
    p = FakeAnthropic()
    yield p
    p.stop()


def berth(home, *args):
    """Runs the berth CLI on `home`; returns its stdout."""
    return subprocess.run(
        [BERTH, *args],
        env={**os.environ, "BERTH_HOME": str(home)},
        cwd=str(home),
        capture_output=True,
        check=True,
        text=True,
    ).stdout


def berth_json(home, *args):
    return json.loads(berth(home, *args, "--json"))


class Editor:
    """The client: records updates, answers permission with `choice` (an option id, or
    None for "cancelled"), and keeps buffers for the fs methods it advertises."""

    def __init__(self, choice="reject_once", fs=False, buffers=None, terminal=False, unconfined="reject_once"):
        self.choice = choice
        # The answer to berth's question of running a command once without the sandbox.
        self.unconfined = unconfined
        self.fs = fs
        self.terminal = terminal
        self.terminals = {}  # id -> {"request": ..., "proc": ..., "output": ..., "released": bool}
        self.buffers = dict(buffers or {})
        self.updates = []  # (session_id, update)
        self.permissions = []  # the tool_call of each permission request
        self.reads = []
        self.writes = []
        self.on_update = None

    def capabilities(self):
        return ClientCapabilities(
            fs=FileSystemCapabilities(read_text_file=self.fs, write_text_file=self.fs),
            terminal=self.terminal,
        )

    def on_connect(self, conn):
        self.conn = conn

    async def session_update(self, session_id, update, **kwargs):
        self.updates.append((session_id, update))
        if self.on_update:
            self.on_update(update)

    async def request_permission(self, options, session_id, tool_call, **kwargs):
        self.permissions.append((tool_call, [o.option_id for o in options]))
        if "without the sandbox" in (tool_call.title or ""):
            return RequestPermissionResponse(
                outcome=AllowedOutcome(outcome="selected", option_id=self.unconfined)
            )
        if self.choice is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=self.choice)
        )

    async def read_text_file(self, path, session_id, line=None, limit=None, **kwargs):
        self.reads.append(path)
        if path not in self.buffers:
            raise RequestError.resource_not_found(path)
        return ReadTextFileResponse(content=self.buffers[path])

    async def write_text_file(self, content, path, session_id, **kwargs):
        self.writes.append((path, content))
        self.buffers[path] = content
        return WriteTextFileResponse()

    # Terminals: the command runs as a child of the client, as an editor's terminal would.

    async def create_terminal(self, command, session_id, args=None, cwd=None, env=None, output_byte_limit=None, **kwargs):
        full_env = {**os.environ, **{v.name: v.value for v in (env or [])}}
        proc = await asyncio.create_subprocess_exec(
            command, *(args or []), cwd=cwd, env=full_env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )
        tid = f"term-{len(self.terminals) + 1}"
        entry = {"command": command, "args": args, "cwd": cwd, "env": env, "proc": proc, "output": b"", "released": False}
        self.terminals[tid] = entry

        async def pump():
            while chunk := await proc.stdout.read(4096):
                entry["output"] += chunk

        entry["pump"] = asyncio.ensure_future(pump())
        return CreateTerminalResponse(terminal_id=tid)

    def _status(self, proc):
        if proc.returncode is None:
            return None
        if proc.returncode < 0:
            return TerminalExitStatus(signal=str(-proc.returncode))
        return TerminalExitStatus(exit_code=proc.returncode)

    async def wait_for_terminal_exit(self, session_id, terminal_id, **kwargs):
        entry = self.terminals[terminal_id]
        await entry["proc"].wait()
        await entry["pump"]
        status = self._status(entry["proc"])
        return WaitForTerminalExitResponse(exit_code=status.exit_code, signal=status.signal)

    async def terminal_output(self, session_id, terminal_id, **kwargs):
        entry = self.terminals[terminal_id]
        return TerminalOutputResponse(
            output=entry["output"].decode(), truncated=False, exit_status=self._status(entry["proc"])
        )

    async def kill_terminal(self, session_id, terminal_id, **kwargs):
        proc = self.terminals[terminal_id]["proc"]
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        return KillTerminalResponse()

    async def release_terminal(self, session_id, terminal_id, **kwargs):
        self.terminals[terminal_id]["released"] = True
        return ReleaseTerminalResponse()

    async def close_terminals(self):
        for entry in self.terminals.values():
            if entry["proc"].returncode is None:
                entry["proc"].kill()
            await entry["proc"].wait()
            await entry["pump"]
            entry["proc"]._transport.close()

    def kinds(self, session_id=None):
        return [
            u.session_update
            for s, u in self.updates
            if session_id is None or s == session_id
        ]


def texts(editor, kind="agent_message_chunk", session_id=None):
    """The text of every update of `kind`, joined in the order received."""
    return "".join(
        u.content.text
        for s, u in editor.updates
        if u.session_update == kind and (session_id is None or s == session_id)
    )


def agent_env(home, provider, extra=None):
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", str(home)),
        "BERTH_HOME": str(home),
        # The person's own skills and memory: the test's, never the machine's.
        "XDG_CONFIG_HOME": str(Path(home) / "xdg"),
        "ANTHROPIC_API_KEY": "test-key",
        "BERTH_PROVIDER": "claude",
        "BERTH_PROVIDERS__CLAUDE__BASE_URL": provider.url,
        "BERTH_PROVIDERS__CLAUDE__MODEL": "test-model",
    }
    env.update(extra or {})
    return env


@contextlib.asynccontextmanager
async def run_agent(editor, home, provider, cwd, extra_env=None):
    """`berth acp` as a child process, initialized; yields (connection, process, initialize
    response). Its stderr is passed through (a piped, unread stderr would block it)."""
    async with spawn_agent_process(
        editor,
        BERTH,
        "acp",
        env=agent_env(home, provider, extra_env),
        cwd=str(cwd),
        transport_kwargs={"stderr": None},
    ) as (conn, proc):
        init = await conn.initialize(protocol_version=1, client_capabilities=editor.capabilities())
        try:
            yield conn, proc, init
        finally:
            await editor.close_terminals()
