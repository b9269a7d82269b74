"""berth's slash commands in an editor, with the official ACP Python SDK as the client: the
editor is offered them (`available_commands_update`) for each session it opens, and a prompt
that is one runs it on the session (one message from berth) without calling the model.
"""

import asyncio

import pytest
from acp import text_block

from conftest import Editor, Reply, berth_json, run_agent, texts

pytestmark = pytest.mark.anyio

OFFERED = ["workspace", "clear", "context", "model", "mcp", "help"]


async def offered(editor, session_id):
    """The commands the editor was offered for the session, once they come."""
    for _ in range(200):
        got = [
            u
            for s, u in editor.updates
            if s == session_id and u.session_update == "available_commands_update"
        ]
        if got:
            return got
        await asyncio.sleep(0.025)
    raise AssertionError(f"no available_commands_update for {session_id}: {editor.kinds()}")


async def test_each_opened_session_is_offered_the_commands(home, work, provider):
    provider.push(Reply().text("hi"))
    editor = Editor()
    async with run_agent(editor, home, provider, work) as (conn, _, _):
        new = await conn.new_session(cwd=str(work))
        [update] = await offered(editor, new.session_id)
        names = [c.name for c in update.available_commands]
        assert names == OFFERED
        by_name = {c.name: c for c in update.available_commands}
        assert "transcript is emptied" in by_name["clear"].description
        # /model takes a name, typed after it; the others take nothing.
        assert by_name["model"].input.root.hint == "[NAME]"
        assert by_name["clear"].input is None
        await conn.prompt(session_id=new.session_id, prompt=[text_block("hello")])
    # A new process loading the session offers them again, after the replay.
    editor = Editor()
    async with run_agent(editor, home, provider, work) as (conn, _, _):
        await conn.load_session(cwd=str(work), session_id=new.session_id, mcp_servers=[])
        kinds = editor.kinds(new.session_id)
        assert kinds[-1] == "available_commands_update"
        assert kinds[:-1] == ["user_message_chunk", "agent_message_chunk"]


async def test_a_turn_ends_with_a_usage_update_and_clear_calls_no_model(home, work, provider):
    provider.push(Reply().text("Paris."))
    provider.push(Reply().text("Berlin."))
    editor = Editor()
    async with run_agent(editor, home, provider, work) as (conn, _, _):
        new = await conn.new_session(cwd=str(work))
        sid = new.session_id
        answer = await conn.prompt(session_id=sid, prompt=[text_block("capital of France?")])
        assert answer.stop_reason == "end_turn"
        # The turn's end says how full the window is, before the answer.
        [usage] = [u for _, u in editor.updates if u.session_update == "usage_update"]
        assert usage.used > 0 and usage.size == 200000
        assert len(berth_json(home, "session", "show", sid)["messages"]) == 2

        editor.updates.clear()
        cleared = await conn.prompt(session_id=sid, prompt=[text_block("/clear")])
        assert cleared.stop_reason == "end_turn"
        # One message from berth, no call of the model, and the transcript is empty.
        assert len(provider.requests) == 1
        assert editor.kinds(sid) == ["agent_message_chunk"]
        assert texts(editor).startswith(f"cleared session {sid}")
        assert berth_json(home, "session", "show", sid)["messages"] == []

        # The next prompt starts afresh: the model sees it alone.
        await conn.prompt(session_id=sid, prompt=[text_block("capital of Germany?")])
    assert len(provider.requests) == 2
    assert [m["role"] for m in provider.requests[-1]["messages"]] == ["user"]
    assert "France" not in str(provider.requests[-1]["messages"])


async def test_model_context_and_the_rest_are_answered_by_berth(home, work, provider):
    provider.push(Reply().text("ok"))
    provider.push(Reply().text("ok"))
    editor = Editor()
    async with run_agent(editor, home, provider, work) as (conn, _, _):
        new = await conn.new_session(cwd=str(work))
        sid = new.session_id

        async def say(line):
            editor.updates.clear()
            answer = await conn.prompt(session_id=sid, prompt=[text_block(line)])
            assert answer.stop_reason == "end_turn"
            return texts(editor)

        assert "claude/test-model (the workspace's config)" in await say("/model")
        assert "messages   0" in await say("/context")
        shown = await say("/workspace")
        assert "id         default" in shown
        assert f"session    {sid}" in shown and f"folder     {work}" in shown
        helped = await say("/help")
        assert "/clear" in helped and "/load" not in helped
        # Chat's own commands say what an editor does instead; a misused one, how to type it.
        assert "is berth chat's" in await say("/new")
        assert "takes no argument" in await say("/clear now")
        # A provider without a key is refused now, and nothing changes.
        refused = await say("/model openai/gpt-4.1")
        assert refused.startswith("/model: cannot switch to openai/gpt-4.1")
        assert len(provider.requests) == 0

        # A switch is kept with the session, and the editor's model option follows it.
        assert await say("/model other-model") == "this session now calls claude/other-model"
        [options] = [u for _, u in editor.updates if u.session_update == "config_option_update"]
        [model] = options.config_options
        assert model.current_value == "claude/other-model"
        await conn.prompt(session_id=sid, prompt=[text_block("hi")])
        assert provider.requests[-1]["model"] == "other-model"

        # An unknown /name is a prompt (a path, say); // sends a line starting with /.
        await conn.prompt(session_id=sid, prompt=[text_block("//clear is a command?")])
        assert provider.requests[-1]["messages"][-1]["content"][0]["text"] == "/clear is a command?"
    assert len(provider.requests) == 2
