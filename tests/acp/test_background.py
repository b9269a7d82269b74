"""berth's agent over ACP starts a process with `run_command`'s `background: true`: it runs on
after the prompt's turn, and ends when the editor closes the session (`session/close`) or the
connection; `berth workspace ps` lists it meanwhile and nothing after.
"""

import asyncio
import json
import time

import pytest
from acp import text_block

from conftest import Editor, Reply, berth, run_agent

pytestmark = pytest.mark.anyio

TICKING = "while :; do echo tick >> ticks.txt; sleep 0.1; done"


def size(path):
    return path.stat().st_size if path.exists() else 0


async def grows(path):
    """Whether the file still grows over half a second."""
    before = size(path)
    await asyncio.sleep(0.5)
    return size(path) > before


def running(home, session_id):
    """The background processes `berth workspace ps` lists for the session's workspace."""
    shown = json.loads(berth(home, "session", "show", session_id, "--json"))
    workspace = shown["session"]["workspace_id"]
    return json.loads(berth(home, "workspace", "ps", workspace, "--json"))


async def start_ticking(conn, provider, work, call_id):
    provider.push(Reply().tool(call_id, "run_command", {"command": TICKING, "background": True}))
    provider.push(Reply().text("Ticking."))
    new = await conn.new_session(cwd=str(work), mcp_servers=[])
    answer = await asyncio.wait_for(
        conn.prompt(session_id=new.session_id, prompt=[text_block("tick")]), 60
    )
    assert answer.stop_reason == "end_turn"
    return new.session_id


async def test_session_close_ends_its_background_processes(home, work, provider):
    ticks = work / "ticks.txt"
    async with run_agent(Editor(choice="allow_once"), home, provider, work) as (conn, _, _):
        session = await start_ticking(conn, provider, work, "toolu_1")
        # The turn is over; the process runs on, listed under its session.
        assert await grows(ticks)
        [listed] = running(home, session)
        assert listed["id"] == "bg-1" and listed["session"] == session
        assert listed["command"] == TICKING
        await conn.close_session(session_id=session)
        deadline = time.monotonic() + 10
        while running(home, session):
            assert time.monotonic() < deadline, "still listed after session/close"
            await asyncio.sleep(0.1)
        assert not await grows(ticks), "its loop outlived session/close"
        # berth acp still serves: the connection was not what ended it.
        assert (await conn.list_sessions()).sessions


async def test_the_connections_end_ends_its_background_processes(home, work, provider):
    ticks = work / "ticks.txt"
    async with run_agent(Editor(choice="allow_once"), home, provider, work) as (conn, proc, _):
        session = await start_ticking(conn, provider, work, "toolu_1")
        assert await grows(ticks)
    await asyncio.wait_for(proc.wait(), 10)
    assert not await grows(ticks), "its loop outlived the connection"
    assert running(home, session) == []
