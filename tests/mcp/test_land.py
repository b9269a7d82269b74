"""Lands over MCP (`land`, `land_status`): an orchestrating agent starts a run with
session_run, asks what landing it would do (dry_run, which moves nothing), lands it in the
server's background and follows it with land_status to its end, where the base holds the
agent's work and the run says merged. A check that fails on the combined tree leaves the
agent with the reason; bad arguments are tool errors of their kind. The agent talks to a
local stand-in for the Anthropic Messages API (tests/acp/provider.py); the SDK validates
every result against the tool's outputSchema."""

import json
import sys
import time
from pathlib import Path

import anyio
import pytest

from conftest import berth, git, text

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


async def finished_run(s, provider, check):
    """A run of one agent that writes out.txt, over; its kept run's id."""
    provider.push(Reply().tool("w1", "write_file", {"path": "out.txt", "content": "landed\n"}))
    provider.push(Reply().text("Done."))
    r = await s.call_tool(
        "session_run", {"task": "Write out.txt", "allow": ["write_file"], "check": check}
    )
    assert not r.is_error, text(r)
    session = r.structured_content["session_id"]
    deadline = time.monotonic() + 30
    while True:
        r = await s.call_tool("session_status", {"session_identifier": session})
        assert not r.is_error, text(r)
        if r.structured_content["finished"]:
            return r.structured_content["kept_run"]
        assert time.monotonic() < deadline, r.structured_content
        await anyio.sleep(0.1)


async def until_landed(s, land_id, seconds=60):
    deadline = time.monotonic() + seconds
    while True:
        r = await s.call_tool("land_status", {"land_id": land_id})
        assert not r.is_error, text(r)
        if r.structured_content["finished"]:
            return r.structured_content
        assert time.monotonic() < deadline, r.structured_content
        await anyio.sleep(0.1)


async def test_a_run_is_planned_then_landed_in_the_background_and_followed(connect, repo, provider, home):
    main_before = git(repo, "rev-parse", "main").strip()
    async with connect(repo) as s:
        run = await finished_run(s, provider, "test -f out.txt")

        r = await s.call_tool("land", {"runs": [run[:8]], "dry_run": True})
        assert not r.is_error, text(r)
        plan = r.structured_content["plan"]
        assert [(i["run"], i["agent"], i["action"], i["into"], i["conflicts"]) for i in plan["items"]] == [
            (run, 1, "land", "main", [])
        ], plan
        assert plan["items"][0]["check"] == "test -f out.txt", plan
        assert git(repo, "rev-parse", "main").strip() == main_before, "a dry run moves nothing"
        assert json.loads(berth(home, "land", "list", "--json")) == []

        r = await s.call_tool("land", {"runs": [f"{run}:1"]})
        assert not r.is_error, text(r)
        started = r.structured_content
        assert started["dry_run"] is False and started["state"] == "landing", started
        assert [i["run"] for i in started["items"]] == [run]

        done = await until_landed(s, started["land_id"][:6])
        assert done["state"] == "over", done
        assert done["landed"] == [f"{run}:1"] and done["left"] == [], done
        item = done["items"][0]
        assert item["state"] == "landed" and item["into"] == "main", item
        steps = [st["step"] for st in done["steps"]]
        assert steps[0] == "started" and "checked" in steps and steps[-1] == "over", steps
    # The base holds the agent's work; the run says merged; the CLI sees the same land.
    assert git(repo, "show", "main:out.txt") == "landed\n"
    shown = json.loads(berth(home, "run", "show", run, "--json"))
    assert shown["agents"][0]["outcome"] == "merged", shown
    lands = json.loads(berth(home, "land", "list", "--json"))
    assert [(l["id"], l["state"]) for l in lands] == [(started["land_id"], "over")], lands


async def test_a_check_that_fails_on_the_combined_tree_leaves_the_agent_with_the_reason(connect, repo, provider, home):
    async with connect(repo) as s:
        # Green where the agent worked; red once the base has later.txt, which it gets now.
        run = await finished_run(s, provider, "test ! -f later.txt")
        (repo / "later.txt").write_text("meanwhile\n")
        git(repo, "add", "later.txt")
        git(repo, "commit", "-q", "-m", "meanwhile")
        main_before = git(repo, "rev-parse", "main").strip()

        r = await s.call_tool("land", {"runs": [run], "resolve": False, "mode": "squash"})
        assert not r.is_error, text(r)
        done = await until_landed(s, r.structured_content["land_id"])
        assert done["state"] == "over" and done["left"] == [f"{run}:1"], json.dumps(done, indent=1)
        item = done["items"][0]
        assert item["state"] == "left" and "check" in item["reason"], item
    assert git(repo, "rev-parse", "main").strip() == main_before, "nothing landed"
    shown = json.loads(berth(home, "run", "show", run, "--json"))
    assert shown["agents"][0].get("outcome") != "merged", shown


async def test_bad_lands_are_tool_errors_of_their_kind(connect, repo, home):
    async with connect(repo) as s:
        for args, kind in [
            ({"runs": []}, "invalid"),
            ({"runs": ["not a run!"]}, "invalid"),
            ({"runs": ["abcd1234"], "mode": "octopus"}, "invalid"),
            ({"runs": ["abcd1234"]}, "not_found"),
            ({"runs": ["abcd1234"], "dry_run": True}, "not_found"),
        ]:
            r = await s.call_tool("land", args)
            assert r.is_error, (args, r.structured_content)
            assert r.structured_content["error"]["kind"] == kind, (args, r.structured_content)
            assert text(r), args
        for land_id, kind in [("ffff0000", "not_found"), ("../x", "invalid")]:
            r = await s.call_tool("land_status", {"land_id": land_id})
            assert r.is_error and r.structured_content["error"]["kind"] == kind, r.structured_content
    assert json.loads(berth(home, "land", "list", "--json")) == [], "nothing was recorded"
