"""`berth run` driving an ACP agent of its own choosing: a hostile one (hostile_agent.py, on
the official ACP Python SDK's agent side) that asks its client for writes and terminals
outside its worktree. berth refuses each way out (a path or `cwd` outside, `..`, a symlink
that leads out, `.git`), records every refusal in the session's transcript, writes the one
file that stays inside and runs the one command that does, and kills the command it left
running when its process ends, after its last turn; without a policy that lets it run commands, it runs none; and an
agent that cannot load its session is not resumed, said plainly. A third-party ACP agent from
npm (Zed's Claude Agent adapter, running Claude Code against the stand-in) does its work in its
own worktree, and side by side with berth's own agent and `berth acp` in one run. An unknown
agent or model is refused before anything is made. An editor that follows a run's session over
ACP answers the question the run's agent waits on (`--ask`)."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import BERTH, Reply, berth_json


def git(cwd, *args):
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@berth.invalid", *args],
        cwd=cwd, check=True, capture_output=True,
    )


HOSTILE = f"{sys.executable} {Path(__file__).parent / 'hostile_agent.py'}"


def repository(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "commit", "-q", "--allow-empty", "-m", "first")
    return repo


def command_lines():
    """Every host process's command line."""
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit():
                yield (p / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            pass  # ended meanwhile


def pass_hostile_settings(home):
    """The hostile agent's settings come through berth's environment, which a confined agent
    gets only what `[sandbox] env` names of."""
    (home / "config.toml").write_text('[sandbox]\nenv = ["HOSTILE_MODE", "HOSTILE_COMMAND", "HOSTILE_OUTSIDE"]\n')


def hostile_run(home, tmp_path, *flags):
    """`berth run` of the hostile agent in a new repository; (events, outside folder)."""
    pass_hostile_settings(home)
    repo = repository(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    agent = HOSTILE
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
        f"term-inside:exit=4:port={port} term-killed:SIGKILL term-left:started"
    ), answer
    # Nothing landed outside, by a write or a command; the file and command inside did.
    assert list(outside.iterdir()) == []
    assert not (tmp_path / "escaped-too.txt").exists()
    assert not (tmp_path / "ran-term-dotdot").exists()
    assert (worktree / "inside.txt").read_text() == "inside\n"
    assert (worktree / "ran-term-inside").exists()
    # The command the agent left running, and the one it started in the background, were
    # killed when the agent's process ended, after its one turn (berth has exited: nothing
    # else would kill them).
    # (It ran in a PID namespace of its own, so the pid it wrote means nothing here: it is
    # looked for by its command line.)
    assert (worktree / "left.pid").exists()
    assert not any("300.0417" in line for line in command_lines()), "the command the agent left outlived the agent"
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
    assert answer.endswith("term-inside:refused term-killed:refused term-left:refused"), answer
    assert not (Path(started["worktree"]) / "ran-term-inside").exists()
    assert not (Path(started["worktree"]) / "left.pid").exists()
    shown = berth_json(home, "session", "show", started["session"])
    system = [m["content"] for m in shown["messages"] if m["role"] == "system"]
    assert any("does not allow running commands" in s for s in system), system


def test_an_agent_that_cannot_load_its_session_is_not_resumed(home, tmp_path):
    """A stopped run of an agent without `session/load`: `run resume` says why it cannot
    continue it, sends it nothing, and records nothing it did not send."""
    repo = repository(tmp_path)
    pass_hostile_settings(home)
    env = {**os.environ, "BERTH_HOME": str(home), "HOSTILE_MODE": "stall"}

    def berth_run(*args, timeout=60):
        return subprocess.run(
            [BERTH, "run", *args], cwd=repo, env=env, capture_output=True, text=True, timeout=timeout
        )

    started = berth_run("stall", "--agent-cmd", HOSTILE, "--detach")
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip()
    deadline = time.monotonic() + 30
    while True:
        [agent] = json.loads(berth_run("show", run_id, "--json").stdout)["agents"]
        if agent.get("acp_session") == "hostile-1" and agent["state"] == "working":
            break
        assert time.monotonic() < deadline, agent
        time.sleep(0.1)
    assert berth_run("stop", run_id).returncode == 0
    waited = berth_run("wait", run_id, "--json")
    assert waited.returncode == 1, waited.stderr
    [agent] = json.loads(waited.stdout)["agents"]
    assert agent["state"] == "stopped", agent
    before = berth_json(home, "session", "show", agent["session"])["messages"]
    assert [(m["role"], m["content"]) for m in before] == [
        ("user", "stall"),
        ("assistant", "stalling\n\n[interrupted]"),
    ], before

    resumed = berth_run("resume", run_id, "--json")
    assert resumed.returncode == 1, resumed.stderr + resumed.stdout
    events = [json.loads(line) for line in resumed.stdout.splitlines()]
    [ended] = [e for e in events if e["event"] == "ended"]
    assert ended["state"] == "failed", ended
    assert ended["message"] == (
        f"the ACP agent `{HOSTILE}` cannot load a session (it does not offer session/load), "
        "so its work cannot be resumed"
    ), ended
    # Nothing was prompted, so nothing new is in the transcript.
    after = berth_json(home, "session", "show", agent["session"])["messages"]
    assert after == before, after


def test_a_third_party_acp_agent_from_npm_works_in_its_worktree(home, tmp_path, provider):
    """Zed's Claude Agent ACP adapter (npm `@zed-industries/claude-agent-acp`, with the Claude
    Code it runs), against the provider stand-in: its Bash tool's command runs through berth's
    confined terminal in the agent's worktree, and the run records the call and its tokens.
    Its provider key stays in berth: Claude Code gets a stand-in and a base URL on berth's
    proxy, which puts the key in."""
    agent = os.environ.get("TEST_CLAUDE_AGENT_ACP") or str(
        Path(__file__).resolve().parents[2] / ".tools/acp-agents/node_modules/.bin/claude-agent-acp"
    )
    assert Path(agent).exists(), f"{agent} is missing: ./test.sh installs it from npm"
    provider.push(
        Reply().text("Writing it.").tool(
            "toolu_1", "Bash",
            {"command": 'echo from-claude > out.txt; echo "key=$ANTHROPIC_API_KEY"', "description": "write out.txt"},
        )
    )
    provider.push(Reply().text("Done."))
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "commit", "-q", "--allow-empty", "-m", "first")
    user_home = tmp_path / "user-home"
    user_home.mkdir()
    env = {
        **os.environ,
        "BERTH_HOME": str(home),
        "ANTHROPIC_BASE_URL": provider.url,
        "ANTHROPIC_API_KEY": "test-key",
        # Claude Code refuses to skip its own prompts as root outside a sandbox.
        "IS_SANDBOX": "1",
        "HOME": str(user_home),
    }
    done = subprocess.run(
        [BERTH, "run", "write out.txt", "--agent-cmd", agent, "--allow", "execute", "--json"],
        cwd=repo, env=env, capture_output=True, text=True, timeout=180,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    events = [json.loads(line) for line in done.stdout.splitlines()]
    [started] = [e for e in events if e["event"] == "started"]
    worktree = Path(started["worktree"])
    assert (worktree / "out.txt").read_text() == "from-claude\n"
    assert not (repo / "out.txt").exists()
    summary = events[-1]["agents"][0]
    assert summary["state"] == "done" and summary["files_changed"] == 1, summary
    # The agent reported its tokens; the session keeps them.
    assert summary["input_tokens"] > 0 and summary["output_tokens"] > 0, summary
    shown = berth_json(home, "session", "show", started["session"])
    assert shown["session"]["usage"]["output_tokens"] == summary["output_tokens"]
    roles = [m["role"] for m in shown["messages"]]
    assert roles[0] == "user" and roles[-1] == "assistant", roles
    tools = [m["content"] for m in shown["messages"] if m["role"] == "tool"]
    assert len(tools) == 1 and "echo from-claude > out.txt" in tools[0], tools
    # Claude Code, and what it runs, held a stand-in for the key, never the key.
    assert "key=berth-stand-in-ANTHROPIC_API_KEY" in tools[0] and "test-key" not in tools[0], tools
    assert "Done." in shown["messages"][-1]["content"]
    # Claude Code called the stand-in as Anthropic's API, with its own tools.
    assert provider.paths[0].startswith("/v1/messages"), provider.paths
    # With the key berth kept: Claude Code held a stand-in and called berth's proxy, which put
    # the key in on the way.
    assert provider.keys and set(provider.keys) == {"test-key"}, provider.keys
    # Its session goes on, confined again: told something more, the agent loads its session
    # (its state is its own to write, its settings are not) and answers in it.
    [run] = json.loads(
        subprocess.run([BERTH, "run", "list", "--json"], env=env, capture_output=True, text=True).stdout
    )
    provider.push(Reply().text("Still here."))
    told = subprocess.run(
        [BERTH, "run", "tell", run["id"], "anything else?", "--json"],
        cwd=repo, env=env, capture_output=True, text=True, timeout=180,
    )
    assert told.returncode == 0, told.stderr + told.stdout
    shown = berth_json(home, "session", "show", started["session"])
    assert "Still here." in shown["messages"][-1]["content"], shown["messages"]
    assert [m["content"] for m in shown["messages"] if m["role"] == "user"][-1] == "anything else?"


def test_three_kinds_of_agent_in_one_run(home, tmp_path, provider):
    """One run, three kinds of agent, each by `--agent`: berth's own (`berth`), `berth acp`
    driven over ACP (`cmd:`), and Zed's Claude Agent ACP adapter from npm by its built-in name
    (`claude-code`, found on PATH as `claude-agent-acp`). berth's two talk to one stand-in
    (berth's [providers.claude]); Claude Code to another (ANTHROPIC_BASE_URL), so that each
    gets answers in its own tools' terms. Each ends done with its work in its own worktree."""
    from provider import FakeAnthropic

    bin_dir = Path(__file__).resolve().parents[2] / ".tools/acp-agents/node_modules/.bin"
    assert (bin_dir / "claude-agent-acp").exists(), f"{bin_dir} is missing: ./test.sh installs it"
    berths = FakeAnthropic()
    try:
        # berth's own agent and `berth acp` each write out.txt, then say they are done; the
        # writes come slowly, so that both ask before either asks again.
        for _ in range(2):
            berths.push(
                Reply().text("Writing it.").tool("w1", "write_file", {"path": "out.txt", "content": "from berth\n"}).slowly(0.3)
            )
        for _ in range(2):
            berths.push(Reply().text("Done."))
        provider.push(
            Reply().text("Writing it.").tool(
                "toolu_1", "Bash", {"command": "echo from-claude > out.txt", "description": "write out.txt"}
            )
        )
        provider.push(Reply().text("Done."))
        repo = repository(tmp_path)
        user_home = tmp_path / "user-home"
        user_home.mkdir()
        env = {
            **os.environ,
            "BERTH_HOME": str(home),
            "BERTH_PROVIDER": "claude",
            "BERTH_PROVIDERS__CLAUDE__BASE_URL": berths.url,
            "BERTH_PROVIDERS__CLAUDE__MODEL": "claude-test",
            "ANTHROPIC_BASE_URL": provider.url,
            "ANTHROPIC_API_KEY": "test-key",
            "IS_SANDBOX": "1",
            "HOME": str(user_home),
            "PATH": f"{bin_dir}:{Path(BERTH).parent}:{os.environ['PATH']}",
        }
        done = subprocess.run(
            [
                BERTH, "run", "write out.txt",
                "--agent", "berth",
                "--agent", "cmd:berth acp",
                "--agent", "claude-code",
                "--allow", "write_file,edit,execute",
                "--json",
            ],
            cwd=repo, env=env, capture_output=True, text=True, timeout=240,
        )
        assert done.returncode == 0, done.stderr + done.stdout
        events = [json.loads(line) for line in done.stdout.splitlines()]
        started = {e["agent"]: e for e in events if e["event"] == "started"}
        assert [started[i]["label"] for i in range(3)] == ["berth", "berth acp", "claude-code"], started
        contents = [(Path(started[i]["worktree"]) / "out.txt").read_text() for i in range(3)]
        assert contents == ["from berth\n", "from berth\n", "from-claude\n"], contents
        summary = events[-1]["agents"]
        assert [a["state"] for a in summary] == ["done", "done", "done"], summary
        assert [a["files_changed"] for a in summary] == [1, 1, 1], summary
        assert len(berths.requests) == 4 and provider.paths[0].startswith("/v1/messages")
    finally:
        berths.stop()


def test_an_unknown_agent_or_model_is_refused_before_anything_is_made(home, tmp_path):
    repo = repository(tmp_path)
    env = {**os.environ, "BERTH_HOME": str(home), "ANTHROPIC_API_KEY": "test-key"}
    for flags, said in [
        (["--agent", "claude"], "no agent is named \"claude\": --agent takes berth, berth:MODEL, cmd:COMMAND, claude-code, codex, gemini"),
        (["--agents", "claude:1,acp:1"], "\"acp\" is neither a provider"),
        (["--agents", "nosuchprov/foo:1"], "\"nosuchprov\" is not a provider"),
        (["--agent", "berth:sonet"], "\"sonet\" is neither a provider"),
    ]:
        done = subprocess.run(
            [BERTH, "run", "do it", *flags], cwd=repo, env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 2, (flags, done.stderr)
        assert said in done.stderr, (flags, done.stderr)
    assert berth_json(home, "run", "list") == []
    assert berth_json(home, "workspace", "list") == []


@pytest.mark.anyio
async def test_an_editor_following_a_runs_session_answers_its_question(home, tmp_path, provider):
    """A run started with --ask waits on its agent's write; an editor that opens the agent's
    session over ACP (`session/load`) is asked it as session/request_permission, and its
    person's "Allow once" lets the agent go on, write and end."""
    import asyncio

    from conftest import Editor, run_agent

    provider.push(Reply().text("Writing it.").tool("w1", "write_file", {"path": "out.txt", "content": "allowed\n"}))
    provider.push(Reply().text("Done."))
    repo = repository(tmp_path)
    env = {
        **os.environ,
        "BERTH_HOME": str(home),
        "BERTH_PROVIDER": "claude",
        "BERTH_PROVIDERS__CLAUDE__BASE_URL": provider.url,
        "BERTH_PROVIDERS__CLAUDE__MODEL": "test-model",
        "ANTHROPIC_API_KEY": "test-key",
    }
    started = subprocess.run(
        [BERTH, "run", "Write out.txt", "--ask", "--detach"],
        cwd=repo, env=env, capture_output=True, text=True, timeout=60,
    )
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip()
    deadline = time.monotonic() + 30
    while not (agent := berth_json(home, "run", "show", run_id)["agents"][0]).get("waiting"):
        assert time.monotonic() < deadline, agent
        await asyncio.sleep(0.1)
    worktree = Path(agent["worktree"])
    editor = Editor(choice="allow_once")
    async with run_agent(editor, home, provider, worktree) as (conn, _, _):
        await conn.load_session(cwd=str(worktree), session_id=agent["session"], mcp_servers=[])
        while berth_json(home, "run", "show", run_id)["state"] != "ended":
            assert time.monotonic() < deadline + 30, editor.permissions
            await asyncio.sleep(0.1)
    [(asked, options)] = editor.permissions
    assert "write_file" in asked.title, asked
    assert options == ["allow_once", "allow_always", "reject_once"], options
    assert (worktree / "out.txt").read_text() == "allowed\n"
    ended = berth_json(home, "run", "show", run_id)
    assert [a["state"] for a in ended["agents"]] == ["done"], ended
