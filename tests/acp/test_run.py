"""`berth run` driving an ACP agent of its own choosing: a hostile one (hostile_agent.py, on
the official ACP Python SDK's agent side) that asks its client for writes outside its worktree.
berth refuses each way out (a path outside, `..`, a symlink that leads out, `.git`), records
every refusal in the session's transcript, and writes the one file that stays inside."""

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


def test_an_acp_agent_cannot_write_outside_its_worktree(home, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "commit", "-q", "--allow-empty", "-m", "first")
    outside = tmp_path / "outside"
    outside.mkdir()
    agent = f"{sys.executable} {Path(__file__).parent / 'hostile_agent.py'}"
    done = subprocess.run(
        [BERTH, "run", "try to escape", "--agent-cmd", agent, "--json"],
        cwd=repo,
        env={**os.environ, "BERTH_HOME": str(home), "HOSTILE_OUTSIDE": str(outside)},
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    events = [json.loads(line) for line in done.stdout.splitlines()]
    answer = "".join(e["text"] for e in events if e["event"] == "text")
    assert answer == (
        "outside:refused dotdot:refused symlink:refused git:refused inside:written"
    ), answer
    # Nothing landed outside; the one file inside did.
    assert list(outside.iterdir()) == []
    assert not (tmp_path / "escaped-too.txt").exists()
    [started] = [e for e in events if e["event"] == "started"]
    worktree = Path(started["worktree"])
    assert (worktree / "inside.txt").read_text() == "inside\n"
    # Each refusal is an event, and a line of the transcript.
    refused = [e for e in events if e["event"] == "refused"]
    assert len(refused) == 4, refused
    shown = berth_json(home, "session", "show", started["session"])
    system = [m["content"] for m in shown["messages"] if m["role"] == "system"]
    assert len(system) == 4, shown["messages"]
    assert all(s.startswith("berth refused fs/write_text_file") for s in system), system
    assert any("outside the worktree" in s for s in system), system
    assert any(".git" in s for s in system), system
    assert (shown["messages"][0]["role"], shown["messages"][0]["content"]) == ("user", "try to escape")
