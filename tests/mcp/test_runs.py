"""Runs over MCP (amux's session_run): an orchestrating agent starts berth's agent on a task
in a new git workspace, follows it, reads its session, and stops a second one. The agent
talks to a local stand-in for the Anthropic Messages API (tests/acp/provider.py). The SDK
validates every result against the tool's outputSchema."""

import json
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from conftest import berth, text

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "acp"))
from provider import FakeAnthropic, Reply  # noqa: E402

pytestmark = pytest.mark.anyio


@pytest.fixture
def provider(monkeypatch):
    p = FakeAnthropic()
    monkeypatch.setenv("BERTH_PROVIDER", "claude")
    monkeypatch.setenv("BERTH_PROVIDERS__CLAUDE__BASE_URL", p.url)
    monkeypatch.setenv("BERTH_PROVIDERS__CLAUDE__MODEL", "test-model")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    yield p
    p.stop()


async def until_finished(s, session_id, seconds=30):
    deadline = time.monotonic() + seconds
    while True:
        r = await s.call_tool("session_status", {"session_identifier": session_id})
        assert not r.is_error, text(r)
        if r.structured_content["finished"]:
            return r.structured_content
        assert time.monotonic() < deadline, r.structured_content
        await anyio.sleep(0.1)


async def test_session_run_works_in_a_new_worktree_and_is_followed_to_its_end(connect, repo, provider, home):
    write = {"path": "out.txt", "content": "from a run\n"}
    provider.push(Reply().tool("w1", "write_file", write))
    provider.push(Reply().text("Done ", "writing."))
    async with connect(repo) as s:
        r = await s.call_tool(
            "session_run",
            {"task": "Write out.txt", "allow": ["write_file"], "check": "test -f out.txt"},
        )
        assert not r.is_error, text(r)
        started = r.structured_content
        assert started["run_id"] == started["session_id"]
        worktree = Path(started["worktree"])
        state = await until_finished(s, started["session_id"])
        assert state["state"] == "done" and state["stop"] == "end_turn", state
        assert state["answer"] == "Done writing."
        assert state["last_tool"] == "write_file"
        assert state["check_passed"] is True
        assert (worktree / "out.txt").read_text() == "from a run\n"
        assert not (repo / "out.txt").exists()
        # The session resource shows the run; its transcript has the task and the answer.
        shown = json.loads((await s.read_resource(started["uri"])).contents[0].text)
        assert shown["run"]["state"] == "done"
        transcript = (await s.read_resource(f"{started['uri']}/transcript")).contents[0].text
        assert "Write out.txt" in transcript and "Done writing." in transcript
        # A session this server never ran is not found, said as such.
        other = await s.call_tool("session_status", {"session_identifier": "no-such-session"})
        assert other.is_error and other.structured_content["error"]["kind"] == "not_found"
    # One model of a run: the CLI's `run list` and `run show` see the run MCP started, ended,
    # with its session; and another server's `session_status` reads it too.
    listed = json.loads(berth(home, "run", "list", "--json"))
    kept = [r for r in listed if r["agents"][0]["session"] == started["session_id"]]
    assert len(kept) == 1, listed
    assert kept[0]["id"] == started["kept_run"] and kept[0]["state"] == "ended", kept
    assert kept[0]["request"]["task"] == "Write out.txt"
    shown = json.loads(berth(home, "run", "show", started["kept_run"], "--json"))
    assert shown["agents"][0]["state"] == "done", shown
    async with connect(repo) as other_server:
        again = await other_server.call_tool("session_status", {"session_identifier": started["session_id"]})
        assert not again.is_error, text(again)
        assert again.structured_content["state"] == "done"
        assert again.structured_content["answer"] == "Done writing."
        # A follow-up to the agent that ended, in its own session, from any server.
        provider.push(Reply().text("Also ", "done."))
        told = await other_server.call_tool(
            "session_tell", {"session_identifier": started["session_id"], "text": "Say it again"}
        )
        assert not told.is_error, text(told)
        state = await until_finished(other_server, started["session_id"])
        assert state["state"] == "done" and state["answer"] == "Also done.", state
        transcript = (await other_server.read_resource(f"{started['uri']}/transcript")).contents[0].text
        assert transcript.index("Done writing.") < transcript.index("Say it again") < transcript.index("Also done.")
        empty = await other_server.call_tool(
            "session_tell", {"session_identifier": started["session_id"], "text": " "}
        )
        assert empty.is_error and empty.structured_content["error"]["kind"] == "invalid"


async def test_session_stop_cancels_a_run_and_refusals_are_reported(connect, repo, provider, home):
    provider.push(Reply().text(*[f"w{i} " for i in range(400)]).slowly(0.02))
    async with connect(repo) as s:
        r = await s.call_tool("session_run", {"task": "Talk for a while", "name": "talker"})
        assert not r.is_error, text(r)
        session_id = r.structured_content["session_id"]
        await anyio.sleep(0.5)
        stopped = await s.call_tool("session_stop", {"session_identifier": session_id})
        assert not stopped.is_error, text(stopped)
        state = await until_finished(s, session_id)
        assert state["state"] == "stopped" and state["stop"] == "cancelled", state
        assert 0 < len(state["answer"]) < len("".join(f"w{i} " for i in range(400)))
        # The CLI stops a run MCP started, as it stops its own: the server supervises it.
        provider.push(Reply().text(*[f"v{i} " for i in range(400)]).slowly(0.02))
        r = await s.call_tool("session_run", {"task": "Talk again", "name": "talker-two"})
        assert not r.is_error, text(r)
        await anyio.sleep(0.5)
        berth(home, "run", "stop", r.structured_content["kept_run"])
        state = await until_finished(s, r.structured_content["session_id"])
        assert state["state"] == "stopped" and state["stop"] == "cancelled", state
        # A write without `allow` is refused, and the run says so.
        provider.push(Reply().tool("w1", "write_file", {"path": "x.txt", "content": "x"}))
        provider.push(Reply().text("Could not."))
        r = await s.call_tool("session_run", {"task": "Write x.txt", "name": "refused"})
        state = await until_finished(s, r.structured_content["session_id"])
        assert state["refused"] == ["write_file"], state
        assert not (Path(r.structured_content["worktree"]) / "x.txt").exists()


async def test_session_run_without_a_key_is_not_configured_and_makes_nothing(connect, repo, home, monkeypatch):
    """The same kind the CLI's exit status 7 is: refused before a workspace, worktree, branch
    or session is made, with the variable to set."""
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("BERTH_PROVIDER", "claude")
    branches = subprocess.run(["git", "branch", "--list"], cwd=repo, capture_output=True, text=True).stdout
    async with connect(repo) as s:
        r = await s.call_tool("session_run", {"task": "Fix it", "check": "true"})
        assert r.is_error, text(r)
        assert r.structured_content["error"]["kind"] == "not_configured", r.structured_content
        assert "ANTHROPIC_API_KEY" in text(r)
    after = subprocess.run(["git", "branch", "--list"], cwd=repo, capture_output=True, text=True).stdout
    assert after == branches
    worktrees = subprocess.run(["git", "worktree", "list"], cwd=repo, capture_output=True, text=True).stdout
    assert len(worktrees.splitlines()) == 1, worktrees
    workspaces = home / "workspaces"
    made = [p.name for p in workspaces.iterdir() if not p.name.startswith(".")] if workspaces.exists() else []
    assert made == [], made
