"""When the client advertises `terminal` and the sandbox is off, `run_command` runs in the
client's terminal, shown under its tool call, and only after the person allowed it; berth's
keys are blanked in the terminal's environment, and a cancel kills the command. With the
sandbox on (the default) berth runs it itself, confined: the client's terminal would run it
with all of the user's rights.
"""

import asyncio
import json
import time
import uuid
from pathlib import Path

import pytest
from acp import text_block

from conftest import Editor, Reply, outside_base, run_agent

pytestmark = pytest.mark.anyio


def tool_result_text(request):
    block = next(b for b in request["messages"][-1]["content"] if b.get("type") == "tool_result")
    content = block["content"]
    text = content if isinstance(content, str) else "".join(c.get("text", "") for c in content)
    return block, text


# The client's terminal is used only where nothing is confined.
UNCONFINED = {"BERTH_SANDBOX__MODE": "off"}


async def test_with_the_sandbox_on_berth_runs_the_command_itself_confined(home, work, provider):
    # Outside /tmp and /var/tmp, wherever the checkout is: a confined process has its own.
    escaped = outside_base() / f"berth-escaped-{uuid.uuid4().hex}.txt"
    command = f"echo hello > inside.txt; echo x > {escaped}"
    provider.push(Reply().tool("toolu_c", "run_command", {"command": command}))
    provider.push(Reply().text("done"))
    editor = Editor(choice="allow_once", terminal=True)
    async with run_agent(editor, home, provider, work) as (conn, _, _):
        new = await conn.new_session(cwd=str(work))
        await conn.prompt(session_id=new.session_id, prompt=[text_block("run it")])
    assert editor.terminals == {}
    # Asked whether to run it unconfined, and answered no.
    assert len(editor.permissions) == 2 and "without the sandbox" in editor.permissions[1][0].title
    assert (work / "inside.txt").read_text() == "hello\n"
    assert not escaped.exists()
    block, text = tool_result_text(provider.requests[1])
    assert block["is_error"] is True
    assert "[berth sandbox]" in text and escaped.name in text, text


async def test_a_command_runs_in_the_clients_terminal(home, work, provider):
    command = "echo hello; echo oops >&2; exit 3"
    provider.push(Reply().tool("toolu_c", "run_command", {"command": command}))
    provider.push(Reply().text("it failed"))
    editor = Editor(choice="allow_once", terminal=True)
    async with run_agent(editor, home, provider, work, UNCONFINED) as (conn, _, _):
        new = await conn.new_session(cwd=str(work))
        await conn.prompt(session_id=new.session_id, prompt=[text_block("run it")])
    [(tid, term)] = editor.terminals.items()
    assert term["command"] == "sh" and term["args"] == ["-c", command]
    assert term["cwd"] == str(work) and term["released"]
    # The key berth calls its provider with is blanked in the terminal.
    blanked = {v.name: v.value for v in term["env"]}
    assert blanked.get("ANTHROPIC_API_KEY") == ""
    # The call showed the terminal, and ended failed with the output.
    shown = [
        c.terminal_id
        for _, u in editor.updates
        if u.session_update == "tool_call_update" and u.content
        for c in u.content
        if c.type == "terminal"
    ]
    assert tid in shown
    block, text = tool_result_text(provider.requests[1])
    assert block["is_error"] is True
    assert "exit status 3" in text and "hello" in text and "oops" in text


async def test_a_rejected_command_never_reaches_a_terminal(home, work, provider):
    provider.push(Reply().tool("toolu_c", "run_command", {"command": "touch made"}))
    provider.push(Reply().text("ok"))
    editor = Editor(choice="reject_once", terminal=True)
    async with run_agent(editor, home, provider, work) as (conn, _, _):
        new = await conn.new_session(cwd=str(work))
        await conn.prompt(session_id=new.session_id, prompt=[text_block("run it")])
    assert editor.terminals == {}
    assert not (work / "made").exists()


async def test_cancel_kills_the_terminals_command(home, work, provider):
    provider.push(Reply().tool("toolu_c", "run_command", {"command": "sleep 30"}))
    editor = Editor(choice="allow_once", terminal=True)
    async with run_agent(editor, home, provider, work, UNCONFINED) as (conn, _, _):
        new = await conn.new_session(cwd=str(work))
        prompt = asyncio.ensure_future(conn.prompt(session_id=new.session_id, prompt=[text_block("wait")]))
        for _ in range(100):
            if editor.terminals:
                break
            await asyncio.sleep(0.05)
        assert editor.terminals, "the command never started"
        started = time.monotonic()
        await conn.cancel(session_id=new.session_id)
        answer = await asyncio.wait_for(prompt, 5)
        assert answer.stop_reason == "cancelled"
        assert time.monotonic() - started < 1
    [term] = editor.terminals.values()
    assert term["proc"].returncode is not None


async def test_a_person_may_run_a_refused_command_once_without_the_sandbox(home, work, provider):
    """The sandbox refuses a write outside; the client's person is then asked, in a question
    of its own with no "always", whether to run it once unconfined; allowed, it runs so."""
    escaped = outside_base() / f"berth-escaped-{uuid.uuid4().hex}.txt"
    provider.push(Reply().tool("toolu_c", "run_command", {"command": f"echo x > {escaped}"}))
    provider.push(Reply().text("done"))
    editor = Editor(choice="allow_once", unconfined="allow_once")
    try:
        async with run_agent(editor, home, provider, work) as (conn, _, _):
            new = await conn.new_session(cwd=str(work))
            await conn.prompt(session_id=new.session_id, prompt=[text_block("run it")])
        assert escaped.read_text() == "x\n"
    finally:
        escaped.unlink(missing_ok=True)
    assert len(editor.permissions) == 2, editor.permissions
    (first, first_options), (second, options) = editor.permissions
    assert "allow_always" in first_options
    assert options == ["allow_once", "reject_once"]
    assert "without the sandbox" in second.title and str(escaped) in json.dumps(second.model_dump(mode="json"))
    block, text = tool_result_text(provider.requests[1])
    assert block["is_error"] is False, text
    assert "run again without the sandbox, as the user allowed once" in text, text
