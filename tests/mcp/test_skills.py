"""The MCP skills extension (SEP-2640) of `berth mcp`: each workspace's skills (the
repository's, the workspace's own, the person's) listed with `skills/list`, fetched with
`skills/get`, their files read as resources and their folders with
`resources/directory/read`, confined to each skill's folder. Through the official MCP Python
SDK (which has no skills calls of its own, so the requests are sent as the SDK sends any
request) and through the MCP Inspector's CLI, a client none of us wrote."""

import hashlib
import json
import os
import subprocess
from typing import Any

import pytest
from mcp import MCPError, types
from pydantic import TypeAdapter

from conftest import BERTH, git, text

pytestmark = pytest.mark.anyio

RAW = TypeAdapter(dict[str, Any])
SKILLS = "io.modelcontextprotocol/skills"


async def call(s, method, params=None):
    return await s.send_request(types.Request[dict[str, Any] | None, str](method=method, params=params), RAW)


def skill_md(name, description, body):
    return f"---\nname: {name}\ndescription: {description}\n---\n{body}\n"


@pytest.fixture
def person(tmp_path, monkeypatch):
    """The person's config folder, with one skill of their own."""
    config = tmp_path / "xdg"
    (config / "berth" / "skills" / "notes").mkdir(parents=True)
    (config / "berth" / "skills" / "notes" / "SKILL.md").write_text(skill_md("notes", "Take notes", "N"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    return config


@pytest.fixture
def project(repo):
    deploy = repo / ".claude" / "skills" / "deploy"
    (deploy / "scripts").mkdir(parents=True)
    (deploy / "SKILL.md").write_text(skill_md("deploy", "Ship the service to production", "Run scripts/ship.sh."))
    (deploy / "scripts" / "ship.sh").write_text("#!/bin/sh\necho shipped\n")
    broken = repo / ".agents" / "skills" / "broken"
    broken.mkdir(parents=True)
    (broken / "SKILL.md").write_text("no front matter\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "skills")
    return repo


def workspace_skill(home, ws_id, outside):
    """The workspace's own skill `triage`, with a file and a symlink that leads out."""
    triage = home / "workspaces" / ws_id / "skills" / "triage"
    triage.mkdir(parents=True)
    (triage / "SKILL.md").write_text(skill_md("triage", "Sort bug reports by severity", "Read severity.md."))
    (triage / "severity.md").write_text("P0 is an outage")
    (outside / "id_rsa").write_text("PRIVATE KEY")
    os.symlink(outside / "id_rsa", triage / "key")


async def test_skills_list_get_read_and_browse(connect, home, tmp_path, person, project):
    outside = tmp_path / "outside"
    outside.mkdir()
    async with connect(project) as s:
        caps = s.server_capabilities
        assert caps.extensions[SKILLS] == {"directoryRead": True}, caps
        r = await s.call_tool("workspace_create", {"name": "w"})
        assert not r.is_error, text(r)
        ws_id = r.structured_content["id"]
        workspace_skill(home, ws_id, outside)

        listed = await call(s, "skills/list")
        skills = {sk["frontmatter"]["name"]: sk for sk in listed["skills"]}
        # The malformed one is left out; the person's, the workspace's and the repository's are in.
        assert sorted(skills) == ["deploy", "notes", "triage"], listed
        deploy = skills["deploy"]
        assert deploy["uri"] == f"skill://{ws_id}/deploy/SKILL.md"
        assert deploy["frontmatter"]["description"] == "Ship the service to production"
        assert deploy["_meta"]["berth"]["source"] == "worktree"
        assert skills["triage"]["_meta"]["berth"]["source"] == "workspace"
        files = {f["uri"]: f for f in deploy["resources"]}
        assert sorted(files) == [
            f"skill://{ws_id}/deploy/SKILL.md",
            f"skill://{ws_id}/deploy/scripts/ship.sh",
        ]
        # The symlink out of `triage` is no file of it.
        assert [f["uri"].rsplit("/", 1)[1] for f in skills["triage"]["resources"]] == ["SKILL.md", "severity.md"]

        # Each file reads as its manifest says: the same bytes, digest and size.
        for uri, entry in files.items():
            (c,) = (await s.read_resource(uri)).contents
            data = c.text.encode()
            assert entry["size"] == len(data), uri
            assert entry["digest"] == "sha256:" + hashlib.sha256(data).hexdigest(), uri
        got = await call(s, "skills/get", {"uri": deploy["uri"]})
        assert got["skill"] == deploy

        d = await call(s, "resources/directory/read", {"uri": f"skill://{ws_id}/deploy"})
        entries = {e["name"]: e for e in d["resources"]}
        assert sorted(entries) == ["SKILL.md", "scripts"]
        assert entries["scripts"]["mimeType"] == "inode/directory"
        d = await call(s, "resources/directory/read", {"uri": entries["scripts"]["uri"]})
        assert [e["name"] for e in d["resources"]] == ["ship.sh"]

        # Confined: the symlink out, `..`, and a skill that is not there are refused, and the
        # secret never shows.
        for uri, words in [
            (f"skill://{ws_id}/triage/key", "outside"),
            (f"skill://{ws_id}/triage/../deploy/SKILL.md", ""),
            (f"skill://{ws_id}/triage/%2e%2e/%2e%2e/config.toml", ""),
            (f"skill://{ws_id}/nope/SKILL.md", "no skill is named"),
            ("skill://no-such-workspace/deploy/SKILL.md", ""),
        ]:
            with pytest.raises(MCPError) as err:
                await s.read_resource(uri)
            assert words in str(err.value), (uri, str(err.value))
            assert "PRIVATE KEY" not in str(err.value)
        with pytest.raises(MCPError):
            await call(s, "skills/get", {"uri": f"skill://{ws_id}/nope/SKILL.md"})

        # A changed skill is seen at once, without a restart.
        worktree = r.structured_content["git"]["worktree"]
        with open(os.path.join(worktree, ".claude/skills/deploy/SKILL.md"), "w") as f:
            f.write(skill_md("deploy", "Ship with the new pipeline", "B"))
        listed = await call(s, "skills/list")
        again = {sk["frontmatter"]["name"]: sk for sk in listed["skills"]}
        assert again["deploy"]["frontmatter"]["description"] == "Ship with the new pipeline"


def test_the_inspector_lists_and_verifies_berths_skills(home, tmp_path, person, project):
    """The MCP Inspector's CLI (tests/node_tools.sh installs it; the test fails without it)."""
    node = os.environ.get("TEST_NODE")
    inspector = os.environ.get("TEST_MCP_INSPECTOR")
    assert node and inspector, "TEST_NODE and TEST_MCP_INSPECTOR are set by test.sh (tests/node_tools.sh)"
    env = {**os.environ, "BERTH_HOME": str(home), "HOME": str(tmp_path)}
    made = subprocess.run(
        [BERTH, "workspace", "create", "w", "--json"], cwd=project, env=env, capture_output=True, text=True, check=True
    )
    ws_id = json.loads(made.stdout)["id"]
    outside = tmp_path / "outside"
    outside.mkdir()
    workspace_skill(home, ws_id, outside)

    def inspect(*args):
        r = subprocess.run(
            # The Inspector starts the server with a few variables of its own only: the home
            # is a flag, the person's config folder is passed on.
            [node, inspector, "--cli", "--cwd", str(project), "-e", f"XDG_CONFIG_HOME={person}",
             *args, "--format", "json", "--", BERTH, "--home", str(home), "mcp"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return r

    r = inspect("--method", "skills/list")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    out = out.get("result", out)
    names = sorted(sk["frontmatter"]["name"] for sk in out["skills"])
    assert names == ["deploy", "notes", "triage"], out
    # --verify reads every file of every manifest and checks its digest and size.
    r = inspect("--method", "skills/list", "--verify")
    assert r.returncode == 0, (r.stdout, r.stderr)
    reports = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    assert len(reports) == 3, r.stdout
    r = inspect("--method", "resources/directory/read", "--uri", f"skill://{ws_id}/deploy")
    assert r.returncode == 0, r.stderr
    assert "scripts" in r.stdout and "SKILL.md" in r.stdout
