"""`berth run` driving an ACP agent of its own choosing: a hostile one (hostile_agent.py, on
the official ACP Python SDK's agent side) that asks its client for writes and terminals
outside its worktree. berth refuses each way out (a path or `cwd` outside, `..`, a symlink
that leads out, `.git`), records every refusal in the session's transcript, writes the one
file that stays inside and runs the one command that does; without a policy that lets it run
commands, it runs none."""

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import BERTH, berth_json


def git(cwd, *args):
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@berth.invalid", *args],
        cwd=cwd, check=True, capture_output=True,
    )


def hostile_run(home, tmp_path, *flags):
    """`berth run` of the hostile agent in a new repository; (events, outside folder)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "commit", "-q", "--allow-empty", "-m", "first")
    outside = tmp_path / "outside"
    outside.mkdir()
    agent = f"{sys.executable} {Path(__file__).parent / 'hostile_agent.py'}"
    done = subprocess.run(
        [BERTH, "run", "try to escape", "--agent-cmd", agent, "--json", *flags],
        cwd=repo,
        env={**os.environ, "BERTH_HOME": str(home), "HOSTILE_OUTSIDE": str(outside)},
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    return [json.loads(line) for line in done.stdout.splitlines()], outside


def test_an_acp_agent_cannot_write_or_run_outside_its_worktree(home, tmp_path):
    events, outside = hostile_run(home, tmp_path, "--allow", "execute")
    [started] = [e for e in events if e["event"] == "started"]
    worktree = Path(started["worktree"])
    port = berth_json(home, "workspace", "show", started["workspace"])["ports"]["first"]
    answer = "".join(e["text"] for e in events if e["event"] == "text")
    assert answer == (
        "outside:refused dotdot:refused symlink:refused git:refused inside:written "
        "term-outside:refused term-symlink:refused term-dotdot:refused "
        f"term-inside:exit=4:port={port}"
    ), answer
    # Nothing landed outside, by a write or a command; the file and command inside did.
    assert list(outside.iterdir()) == []
    assert not (tmp_path / "escaped-too.txt").exists()
    assert not (tmp_path / "ran-term-dotdot").exists()
    assert (worktree / "inside.txt").read_text() == "inside\n"
    assert (worktree / "ran-term-inside").exists()
    # Each refusal is an event, and a line of the transcript.
    refused = [e for e in events if e["event"] == "refused"]
    assert len(refused) == 7, refused
    shown = berth_json(home, "session", "show", started["session"])
    system = [m["content"] for m in shown["messages"] if m["role"] == "system"]
    assert len(system) == 7, shown["messages"]
    writes = [s for s in system if s.startswith("berth refused fs/write_text_file")]
    terminals = [s for s in system if s.startswith("berth refused terminal/create `sh -c")]
    assert len(writes) == 4 and len(terminals) == 3, system
    assert any("outside the worktree" in s for s in writes), system
    assert any(".git" in s for s in writes), system
    assert all("outside the worktree" in s for s in terminals), terminals
    assert (shown["messages"][0]["role"], shown["messages"][0]["content"]) == ("user", "try to escape")


def test_without_a_policy_that_runs_commands_no_terminal_runs(home, tmp_path):
    events, _ = hostile_run(home, tmp_path)
    [started] = [e for e in events if e["event"] == "started"]
    answer = "".join(e["text"] for e in events if e["event"] == "text")
    assert answer.endswith("term-inside:refused"), answer
    assert not (Path(started["worktree"]) / "ran-term-inside").exists()
    shown = berth_json(home, "session", "show", started["session"])
    system = [m["content"] for m in shown["messages"] if m["role"] == "system"]
    assert any("does not allow running commands" in s for s in system), system
