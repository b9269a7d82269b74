"""Agents confined to their workspace: one hostile script (tests/sandbox/hostile.sh) run five
ways, as root and as an unprivileged user. Each time it must write nothing outside, read
nothing on the deny list, reach no local listener, signal no host process and leave the
worktree's `.git` pointer as it was, while `inside.txt` IS written in the workspace:

1. berth's own `run_command` under `berth run --allow-all`;
2. an ACP agent's terminal whose `cwd` is inside its worktree;
3. the `--agent-cmd` process itself;
4. `--check`;
5. a paired device's prompt over `berth serve`.

Every file lives outside /tmp (in /var/tmp), so what hides the secrets is the deny list and the
hidden berth home, not the private /tmp. What the unprivileged user runs (berth, the hostile
agent and its packages) is copied there too: the checkout may be out of its reach. And a kernel without Landlock
(simulated) gets refusals and a doctor error, never an unconfined command.
"""

import asyncio
import atexit
import json
import os
import pwd
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from acp import connect_to_agent, text_block
from acp.ws import create_websocket_stream

from conftest import BERTH, Editor, Reply, outside_base

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tests" / "sandbox" / "hostile.sh"
HOSTILE_AGENT = Path(__file__).parent / "hostile_agent.py"
# The unprivileged user ./test.sh makes.
TEST_USER = "berth-sandbox-test"
# Outside /tmp and /var/tmp, and reachable by every user wherever the checkout is.
BASE = outside_base()
SECRETS = {
    "home/.ssh/id_ed25519": "SECRET-SSH-1\n",
    "home/.aws/credentials": "SECRET-AWS-2\n",
    "home/.netrc": "SECRET-NETRC-3\n",
    # The hostile agent's settings come through berth's environment, which passes on to a
    # confined agent only what `[sandbox] env` names.
    "berth/config.toml": '# SECRET-CONFIG-4\n[sandbox]\nenv = ["HOSTILE_MODE", "HOSTILE_COMMAND", "HOSTILE_OUTSIDE", "PYTHONPATH"]\n',
}
ESCAPES = ["WROTE OUTSIDE", "READ SECRET", "CONNECTED", "SIGNALLED", "REWROTE .git", "SECRET-"]


_STAGED = {}


def staged(path):
    """A copy of `path` (a file or a folder) the unprivileged user can reach, made once."""
    if path not in _STAGED:
        if "dir" not in _STAGED:
            _STAGED["dir"] = Path(tempfile.mkdtemp(prefix="berth-sandbox-staged-", dir=BASE))
            os.chmod(_STAGED["dir"], 0o755)
            atexit.register(shutil.rmtree, _STAGED["dir"], True)
        target = _STAGED["dir"] / f"{len(_STAGED)}-{Path(path).name}"
        if Path(path).is_dir():
            shutil.copytree(path, target, symlinks=True)
        else:
            shutil.copy2(path, target)
        subprocess.run(["chmod", "-R", "a+rX", str(target)], check=True)
        _STAGED[path] = target
    return _STAGED[path]


def as_user():
    """(uid, gid) to run berth as: this process's, or, for root, the unprivileged user."""
    if os.geteuid() != 0:
        return os.geteuid(), os.getegid()
    try:
        entry = pwd.getpwnam(TEST_USER)
    except KeyError:
        raise AssertionError(f"the user {TEST_USER} is missing: ./test.sh makes it (useradd --system)")
    return entry.pw_uid, entry.pw_gid


@pytest.fixture(params=["this-user", "unprivileged"])
def world(request):
    w = World(unprivileged=request.param == "unprivileged")
    yield w
    w.close()


class World:
    """A user home with secrets, a berth home, a repository holding the script, a file path
    outside, a listener on 127.0.0.1 and a host process to signal; all owned by the user
    berth runs as."""

    def __init__(self, unprivileged):
        self.uid, self.gid = as_user() if unprivileged else (os.geteuid(), os.getegid())
        self.unprivileged = self.uid != os.geteuid()
        # berth as this user runs it: the checkout's, or a copy the unprivileged user reaches.
        self.berth_bin = str(staged(BERTH)) if self.unprivileged else BERTH
        self.root = Path(tempfile.mkdtemp(prefix="berth-sandbox-test-", dir=BASE))
        for rel, text in SECRETS.items():
            path = self.root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        self.home = self.root / "home"
        self.berth_home = self.root / "berth"
        self.outside = self.root / "outside.txt"
        self.repo = self.root / "repo"
        self.repo.mkdir()
        shutil.copy(SCRIPT, self.repo / "hostile.sh")
        git = ["git", "-c", "user.name=t", "-c", "user.email=t@berth.invalid"]
        for args in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-qm", "first"]):
            subprocess.run([*git, *args], cwd=self.repo, check=True, capture_output=True)
        subprocess.run(["chown", "-R", f"{self.uid}:{self.gid}", str(self.root)], check=True)
        os.chmod(self.root, 0o755)
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen()
        self.port = self.listener.getsockname()[1]
        self.accepted = []
        threading.Thread(target=self._accept, daemon=True).start()
        self.victim = subprocess.Popen(["sleep", "300"], user=self.uid, group=self.gid, extra_groups=[])

    def _accept(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.accepted.append(conn.recv(100))

    def command(self, then=""):
        """The script's command line (run in the folder holding it)."""
        secrets = " ".join(str(self.root / rel) for rel in SECRETS)
        return f"bash hostile.sh {self.outside} {self.port} {self.victim.pid} {secrets}{then}"

    def env(self, provider, **extra):
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(self.home),
            "BERTH_HOME": str(self.berth_home),
            "ANTHROPIC_API_KEY": "test-key",
            "BERTH_PROVIDER": "claude",
            "BERTH_PROVIDERS__CLAUDE__BASE_URL": provider.url,
            "BERTH_PROVIDERS__CLAUDE__MODEL": "test-model",
        }
        env.update(extra)
        return env

    def berth(self, *args, env, cwd=None, timeout=120):
        return subprocess.run(
            [self.berth_bin, *args], cwd=cwd or self.repo, env=env, capture_output=True, text=True,
            timeout=timeout, user=self.uid, group=self.gid, extra_groups=[],
        )

    def assert_contained(self, text, folder, git_pointer=None):
        """Every bar: nothing escaped, and the work inside was done."""
        for escape in ESCAPES:
            assert escape not in text, f"{escape!r} in:\n{text}"
        assert not self.outside.exists(), text
        assert self.accepted == [], f"a connection reached the listener: {self.accepted}"
        assert self.victim.poll() is None, "the host process was signalled"
        if git_pointer is not None:
            assert (folder / ".git").read_text() == git_pointer, text
        assert (folder / "inside.txt").read_text() == "inside\n", text

    def close(self):
        self.victim.kill()
        self.victim.wait()
        self.listener.close()
        shutil.rmtree(self.root, ignore_errors=True)


def agent_python(world):
    """The interpreter for hostile_agent.py, and its environment: this one; or, for the
    unprivileged user (who cannot enter /root, where pyenv may keep this one), Debian's
    python3 of the same version with this venv's packages."""
    if not world.unprivileged:
        return sys.executable, {}
    system = "/usr/bin/python3"
    version = subprocess.run(
        [system, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True
    )
    assert version.stdout.strip() == str(tuple(sys.version_info[:2])), (
        f"{system} is not Python {sys.version_info[:2]}: the unprivileged user needs an interpreter it can run"
    )
    import sysconfig

    site = staged(sysconfig.get_paths()["purelib"])
    # A confined process sees only what it needs: the packages are shown to it by name.
    config = world.root / "berth" / "config.toml"
    if "readable" not in config.read_text():
        with open(config, "a") as f:
            f.write(f'readable = ["{site}"]\n')
    return system, {"PYTHONPATH": str(site)}


def run_events(done):
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def worktree_of(events):
    [started] = [e for e in events if e["event"] == "started"]
    return Path(started["worktree"]), started


def pointer_before(world):
    """What a new worktree's `.git` holds: `gitdir: <repo>/.git/worktrees/<name>`."""
    return re.compile(r"gitdir: " + re.escape(str(world.repo / ".git" / "worktrees")) + r"/\S+\n")


def session_messages(world, env, session):
    done = world.berth("session", "show", session, "--json", env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["messages"]


def test_run_command_under_berth_run_allow_all(world, provider):
    provider.push(Reply().text("Running it.").tool("toolu_1", "run_command", {"command": world.command()}))
    provider.push(Reply().text("Done."))
    env = world.env(provider)
    done = world.berth("run", "escape", "--allow-all", "--json", env=env)
    assert done.returncode == 0, done.stderr + done.stdout
    worktree, started = worktree_of(run_events(done))
    assert pointer_before(world).fullmatch((worktree / ".git").read_text())
    pointer = (worktree / ".git").read_text()
    tool = [m["content"] for m in session_messages(world, env, started["session"]) if m["role"] == "tool"]
    assert len(tool) == 1, tool
    world.assert_contained(tool[0], worktree, pointer)
    # The tool record keeps the denial, naming the rule and the path.
    assert "[berth sandbox]" in tool[0] and str(world.outside) in tool[0], tool[0]
    assert "deny list" in tool[0], tool[0]
    # berth run has no one to ask: it never runs the command again unconfined.
    assert "without the sandbox" not in tool[0], tool[0]
    # What the model was sent holds no secret either.
    assert "SECRET-" not in json.dumps(provider.requests)


def test_an_acp_agents_terminal_inside_its_worktree(world, provider):
    python, extra = agent_python(world)
    agent = staged(str(HOSTILE_AGENT)) if world.unprivileged else HOSTILE_AGENT
    env = world.env(provider, HOSTILE_MODE="script", HOSTILE_COMMAND=world.command(), **extra)
    done = world.berth(
        "run", "escape", "--agent-cmd", f"{python} {agent}", "--allow", "execute", "--json",
        env=env,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    worktree, started = worktree_of(run_events(done))
    said = [m["content"] for m in session_messages(world, env, started["session"]) if m["role"] == "assistant"]
    assert said and "wrote inside.txt" in said[-1], said
    world.assert_contained(said[-1], worktree, pointer_before(world).fullmatch((worktree / ".git").read_text())[0])
    assert "[berth sandbox]" in said[-1], said[-1]


def test_the_agent_cmd_process_itself(world, provider):
    env = world.env(provider)
    agent = world.command(" > hostile.log 2>&1")
    done = world.berth("run", "escape", "--agent-cmd", agent, "--json", env=env)
    worktree, _ = worktree_of(run_events(done))
    assert (worktree / "hostile.log").exists(), done.stdout + done.stderr
    text = (worktree / "hostile.log").read_text()
    assert "wrote inside.txt" in text, text
    world.assert_contained(text, worktree, pointer_before(world).fullmatch((worktree / ".git").read_text())[0])
    # The agent process may reach its provider's port, and no other: the listener's refusal
    # is Landlock's, not a missing network.
    # Refused by the kernel: a read-only root where the folder is shown only as a mount point.
    assert "Permission denied" in text or "Read-only file system" in text, text


def test_the_check(world, provider):
    # The agent changes something, so its check runs.
    provider.push(Reply().tool("toolu_1", "write_file", {"path": "note.txt", "content": "x\n"}))
    provider.push(Reply().text("Done."))
    env = world.env(provider)
    # The script passes; the check then fails on purpose, so its output is kept.
    done = world.berth(
        "run", "escape", "--allow", "write_file", "--check", world.command("; exit 1"), "--json", env=env
    )
    events = run_events(done)
    worktree, _ = worktree_of(events)
    check = events[-1]["agents"][0]["check"]
    assert check["passed"] is False, check
    text = check["output"]
    assert "wrote inside.txt" in text, text
    world.assert_contained(text, worktree, pointer_before(world).fullmatch((worktree / ".git").read_text())[0])
    assert "[berth sandbox]" in text, text


async def test_a_paired_devices_prompt_over_berth_serve(world, provider):
    env = world.env(provider, BERTH_SERVE_TOKEN="admin-token-for-sandbox")
    made = world.berth("token", "create", "--device", "phone", "--json", env=env)
    assert made.returncode == 0, made.stderr
    phone = json.loads(made.stdout)["token"]
    server = subprocess.Popen(
        [world.berth_bin, "serve", "--listen", "127.0.0.1:0"], env=env, cwd=world.repo,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        user=world.uid, group=world.gid, extra_groups=[],
    )
    try:
        line = server.stderr.readline()
        address = re.search(r"wss?://([0-9.]+:[0-9]+)/acp", line).group(1)
        editor = Editor(choice="allow_once")
        transport = await create_websocket_stream(
            f"ws://{address}/acp", headers={"Authorization": f"Bearer {phone}"}
        )
        conn = connect_to_agent(editor, transport)
        try:
            await conn.initialize(protocol_version=1, client_capabilities=editor.capabilities())
            new = await conn.new_session(cwd="/")
            bound = world.berth("binding", "resolve", "phone", env=env).stdout.strip()
            folder = Path(world.berth("workspace", "path", bound, env=env).stdout.strip())
            shutil.copy(SCRIPT, folder / "hostile.sh")
            provider.push(Reply().text("Running it.").tool("toolu_1", "run_command", {"command": world.command()}))
            provider.push(Reply().text("Done."))
            answer = await asyncio.wait_for(
                conn.prompt(session_id=new.session_id, prompt=[text_block("escape")]), 60
            )
            assert answer.stop_reason == "end_turn"
        finally:
            await conn.close()
    finally:
        server.terminate()
        server.wait(timeout=10)
    tool = [m["content"] for m in session_messages(world, env, new.session_id) if m["role"] == "tool"]
    assert len(tool) == 1, tool
    world.assert_contained(tool[0], folder)
    # A device's person is asked to allow the command, never to lift the sandbox.
    assert len(editor.permissions) == 1, editor.permissions
    assert "[berth sandbox]" in tool[0], tool[0]
    assert "SECRET-" not in json.dumps(provider.requests)


def test_a_kernel_without_landlock_refuses_commands_and_doctor_says_so(world, provider):
    """`BERTH_SANDBOX_PRETEND=no-landlock` makes berth see a kernel without Landlock: the
    command is refused (never run unconfined), the refusal names `mode = "off"`, and
    `berth doctor` reports an error."""
    # It writes a file first (berth's own file tool), so its check runs too.
    provider.push(Reply().tool("toolu_0", "write_file", {"path": "note.txt", "content": "x\n"}))
    provider.push(Reply().text("Running it.").tool("toolu_1", "run_command", {"command": world.command()}))
    provider.push(Reply().text("Done."))
    env = world.env(provider, BERTH_SANDBOX_PRETEND="no-landlock")
    done = world.berth("run", "escape", "--allow-all", "--check", "touch checked.txt", "--json", env=env)
    events = run_events(done)
    worktree, started = worktree_of(events)
    assert not (worktree / "inside.txt").exists()
    assert not (worktree / "checked.txt").exists()
    tool = [m["content"] for m in session_messages(world, env, started["session"]) if m["role"] == "tool"]
    refused = [t for t in tool if "no Landlock" in t]
    assert len(tool) == 2 and len(refused) == 1 and 'mode = \\"off\\"' in json.dumps(refused[0]), tool
    check = events[-1]["agents"][0]["check"]
    assert check["passed"] is False and "no Landlock" in check["outcome"], check
    doctor = world.berth("doctor", "--json", env=env)
    assert doctor.returncode != 0
    findings = json.loads(doctor.stdout)
    sandbox = [f for f in findings["findings"] if f["check"] == "sandbox"]
    assert sandbox and sandbox[0]["status"] == "error" and "no Landlock" in sandbox[0]["message"], findings


def test_claude_agent_acp_works_confined_and_what_it_writes_outside_is_refused(tmp_path, provider):
    """Zed's Claude Agent ACP adapter (pinned in test.sh), confined as every --agent-cmd is,
    against the provider stand-in: its Bash call writes in its worktree, while a Bash write
    and a Write call outside the worktree, both made by Claude Code's own tools in its own
    process, are refused, and the run still ends done."""
    agent = os.environ.get("TEST_CLAUDE_AGENT_ACP") or str(
        REPO / ".tools/acp-agents/node_modules/.bin/claude-agent-acp"
    )
    assert Path(agent).exists(), f"{agent} is missing: ./test.sh installs it from npm"
    world = World(unprivileged=False)
    try:
        outside = world.root / "claude-outside"
        outside.mkdir()
        provider.push(
            Reply().text("Writing.").tool(
                "toolu_1", "Bash",
                {"command": f"echo from-claude > out.txt; echo x > {outside}/bash.txt", "description": "write"},
            )
        )
        provider.push(
            Reply().tool("toolu_2", "Write", {"file_path": str(outside / "write.txt"), "content": "x\n"})
        )
        provider.push(Reply().text("Done."))
        env = {
            **world.env(provider),
            "ANTHROPIC_BASE_URL": provider.url,
            # Claude Code refuses to skip its own prompts as root outside a sandbox.
            "IS_SANDBOX": "1",
        }
        done = world.berth("run", "write out.txt", "--agent-cmd", agent, "--allow", "execute,edit", "--json", env=env,
                           timeout=180)
        assert done.returncode == 0, done.stderr + done.stdout
        events = run_events(done)
        worktree, started = worktree_of(events)
        assert (worktree / "out.txt").read_text() == "from-claude\n"
        assert list(outside.iterdir()) == []
        assert events[-1]["agents"][0]["state"] == "done", events[-1]
        tools = [m["content"] for m in session_messages(world, env, started["session"]) if m["role"] == "tool"]
        # Claude Code ran both itself, in its confined process: the kernel refused each.
        assert len(tools) == 2, tools
        # The folder is not in its root at all.
        assert "bash.txt: No such file or directory" in tools[0], tools[0]
        assert ("ENOENT" in tools[1] or "EACCES" in tools[1]) and "write.txt" in tools[1], tools[1]
        # Its state went where it may write: the folder berth made for it.
        assert (world.home / ".claude").is_dir()
    finally:
        world.close()


def test_a_plain_workspaces_agent_cannot_change_berths_files_beside_its_work(world, provider):
    """A plain workspace's folder holds berth's files beside the agent's work: its record,
    its config layer (where `[sandbox] mode = "off"` or an MCP server's command would lift
    the sandbox for the next command), its transcripts. The agent's command writes its own
    file there, and none of berth's; the next command is still confined."""
    env = world.env(provider)
    made = world.berth("workspace", "create", "plain-one", "--plain", env=env)
    assert made.returncode == 0, made.stderr
    folder = Path(world.berth("workspace", "path", "plain-one", env=env).stdout.strip())
    # Its block of ports first: its first command would have berth give it one, a change to
    # the record that is berth's own, not the agent's.
    ports = world.berth("workspace", "ports", "plain-one", env=env)
    assert ports.returncode == 0, ports.stderr
    record = (folder / "workspace.toml").read_text()
    attack = (
        "printf '[sandbox]\\nmode = \"off\"\\n' > config.toml; "
        "echo forged >> workspace.toml; "
        "mkdir -p sessions/x && echo forged > sessions/x/session.md; "
        "echo mine > mine.txt"
    )
    provider.push(Reply().tool("toolu_1", "run_command", {"command": attack}))
    provider.push(Reply().tool("toolu_2", "run_command", {"command": f"echo pwned > {world.outside}"}))
    provider.push(Reply().text("Done."))
    done = world.berth(
        "chat", "-p", "go", "--workspace", "plain-one", "--allow", "run_command", env=env, cwd=folder
    )
    assert done.returncode == 0, done.stderr + done.stdout
    assert (folder / "mine.txt").read_text() == "mine\n"
    assert (folder / "config.toml").read_text() == ""
    assert (folder / "workspace.toml").read_text() == record
    assert not (folder / "sessions" / "x").exists()
    assert not world.outside.exists()
    shown = world.berth("config", "show", "--workspace", "plain-one", env=env)
    assert 'mode = "on"' in shown.stdout, shown.stdout + shown.stderr


def test_a_plain_workspaces_folder_worked_in_from_another_workspaces_session(world, provider):
    """A session of one workspace whose command runs in another, plain, workspace's folder:
    that folder's record and config layer are berth's all the same, read-only to the command
    (a `[sandbox] mode = "off"` written there would lift the sandbox for that workspace's
    next command), and its config layer is hidden."""
    env = world.env(provider)
    for name in ("plain-two", "other"):
        made = world.berth("workspace", "create", name, "--plain", env=env)
        assert made.returncode == 0, made.stderr
    folder = Path(world.berth("workspace", "path", "plain-two", env=env).stdout.strip())
    (folder / "config.toml").write_text("# SECRET-WS-CONFIG-9\n")
    record = (folder / "workspace.toml").read_text()
    attack = (
        "cat config.toml; "
        "printf '[sandbox]\\nmode = \"off\"\\n' > config.toml; "
        "echo forged >> workspace.toml; "
        "echo mine > mine.txt"
    )
    provider.push(Reply().tool("toolu_1", "run_command", {"command": attack}))
    provider.push(Reply().text("Done."))
    done = world.berth(
        "chat", "-p", "go", "--workspace", "other", "--allow", "run_command", env=env, cwd=folder
    )
    assert done.returncode == 0, done.stderr + done.stdout
    assert (folder / "mine.txt").read_text() == "mine\n"
    assert (folder / "config.toml").read_text() == "# SECRET-WS-CONFIG-9\n"
    assert (folder / "workspace.toml").read_text() == record
    assert "SECRET-WS-CONFIG-9" not in done.stdout + done.stderr
    [session] = json.loads(world.berth("session", "list", "-w", "other", "--json", env=env).stdout)
    tool = [m["content"] for m in session_messages(world, env, session["id"]) if m["role"] == "tool"]
    assert tool and "SECRET-WS-CONFIG-9" not in tool[0], tool
