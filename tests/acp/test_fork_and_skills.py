"""ACP's `session/fork` and the workspace's skills as slash commands, with the official ACP
Python SDK as the client: a fork starts with a copy of the first session's history and goes
its own way, the first left as it was; each skill is offered as `/name` with its description,
and a prompt `/name …` reaches the model with the skill's instructions."""

import asyncio
import json

import pytest
from acp import RequestError, text_block

from conftest import Editor, Reply, berth_json, run_agent
from test_commands import OFFERED, offered

pytestmark = pytest.mark.anyio


def said(request):
    """Everything the model was sent in one request, as text."""
    return json.dumps(request["messages"])


async def test_a_fork_copies_the_history_and_leaves_the_first_alone(home, work, provider):
    provider.push(Reply().text("Paris."))
    provider.push(Reply().text("Berlin."))
    provider.push(Reply().text("Rome."))
    editor = Editor()
    async with run_agent(editor, home, provider, work) as (conn, _, init):
        assert init.agent_capabilities.session_capabilities.fork is not None
        first = (await conn.new_session(cwd=str(work))).session_id
        await conn.prompt(session_id=first, prompt=[text_block("capital of France?")])

        fork = (await conn.fork_session(session_id=first, cwd=str(work))).session_id
        assert fork != first
        # The fork is offered the commands, as any session opened.
        await offered(editor, fork)
        shown = berth_json(home, "session", "show", fork)
        assert [m["content"] for m in shown["messages"]] == ["capital of France?", "Paris."]
        assert shown["session"]["title"].startswith("fork of")

        # The fork goes on from the copied history.
        await conn.prompt(session_id=fork, prompt=[text_block("and of Germany?")])
        sent = said(provider.requests[-1])
        assert "capital of France?" in sent and "Paris." in sent and "and of Germany?" in sent
        # The first session knows nothing of it, and goes on from its own.
        assert len(berth_json(home, "session", "show", first)["messages"]) == 2
        await conn.prompt(session_id=first, prompt=[text_block("and of Italy?")])
        sent = said(provider.requests[-1])
        assert "Germany" not in sent and "Berlin" not in sent
        assert [m["content"] for m in berth_json(home, "session", "show", fork)["messages"]][-1] == "Berlin."

        with pytest.raises(RequestError):
            await conn.fork_session(session_id="no-such-session", cwd=str(work))


async def test_skills_are_offered_as_commands_and_run_with_their_instructions(home, work, provider):
    skills = home / "xdg" / "berth" / "skills"
    for name, description, body in [
        ("deploy", "Ship the service", "DEPLOY-BODY: run make release"),
        # berth's own /clear wins over a skill of that name.
        ("clear", "A skill that shadows nothing", "CLEAR-BODY"),
    ]:
        (skills / name).mkdir(parents=True)
        (skills / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n{body}\n")
    provider.push(Reply().text("Shipped."))
    editor = Editor()
    async with run_agent(editor, home, provider, work) as (conn, _, _):
        sid = (await conn.new_session(cwd=str(work))).session_id
        [update] = await offered(editor, sid)
        names = [c.name for c in update.available_commands]
        assert names == [*OFFERED, "deploy"]
        deploy = update.available_commands[-1]
        assert deploy.description == "skill: Ship the service"
        assert deploy.input.root.hint

        answer = await conn.prompt(session_id=sid, prompt=[text_block("/deploy to staging")])
        assert answer.stop_reason == "end_turn"
        sent = said(provider.requests[-1])
        assert "/deploy to staging" in sent and "DEPLOY-BODY: run make release" in sent
        # The transcript keeps what the model was sent; the title reads as typed.
        shown = berth_json(home, "session", "show", sid)
        assert "DEPLOY-BODY" in shown["messages"][0]["content"]
        assert shown["session"]["title"].startswith("/deploy to staging")

        # A skill added during the session: the menu follows after the next prompt.
        (skills / "review").mkdir()
        (skills / "review" / "SKILL.md").write_text("---\nname: review\ndescription: Review it\n---\nR\n")
        provider.push(Reply().text("ok"))
        await conn.prompt(session_id=sid, prompt=[text_block("hello")])
        updates = await offered(editor, sid)
        for _ in range(100):
            updates = await offered(editor, sid)
            if len(updates) == 2:
                break
            await asyncio.sleep(0.05)
        assert [c.name for c in updates[-1].available_commands] == [*OFFERED, "deploy", "review"]
