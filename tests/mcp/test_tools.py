"""The tools of `berth mcp`, over stdio and Streamable HTTP, driven by the official MCP Python
SDK as an independent client: schemas, workspace creation and removal, the six split storage
tools, the bridge tools, and failures as `isError` results rather than protocol errors.
"""

import json
import os
import subprocess
from pathlib import Path

import pytest
from mcp import MCPError

from conftest import BERTH, git, text

pytestmark = pytest.mark.anyio

# The tools that only read (readOnlyHint) and those that change something.
READ_ONLY = {
    "resource_workspace_list",
    "resource_workspace_show",
    "resource_workspace_browse",
    "resource_session_list",
    "resource_session_show",
    "prompt_list",
    "prompt_get",
    "workspace_storage_read",
    "workspace_storage_list",
    "session_storage_read",
    "session_storage_list",
    "session_status",
    "land_status",
}
WRITING = {
    "workspace_create",
    "workspace_remove",
    "workspace_storage_write",
    "session_storage_write",
    "session_run",
    "session_stop",
    "session_tell",
    "land",
}
TOOLS = READ_ONLY | WRITING
# Called with an agent at work, in test_runs.py.
RUN_TOOLS = {"session_run", "session_status", "session_stop", "session_tell"}
# Called on runs' work, in test_land.py.
RUN_TOOLS |= {"land", "land_status"}


async def test_tools_are_listed_with_precise_schemas(connect, home, tmp_path):
    async with connect(tmp_path) as s:
        tools = {t.name: t for t in (await s.list_tools()).tools}
        assert TOOLS <= set(tools)
        assert "storage_read" not in tools, "no unified storage tool"
        create = tools["workspace_create"].input_schema
        assert create["required"] == ["name"]
        assert {"name", "description", "branch", "base_branch", "agent_id", "plain"} <= set(
            create["properties"]
        )
        write = tools["workspace_storage_write"].input_schema
        assert sorted(write["required"]) == ["content", "path", "workspace_identifier"]
        assert sorted(tools["session_storage_list"].input_schema["required"]) == [
            "session_identifier"
        ]
        for t in tools.values():
            assert t.description and len(t.description) > 20, t.name




async def test_every_tool_says_what_it_does_and_what_it_returns(connect, home, tmp_path):
    async with connect(tmp_path) as s:
        tools = {t.name: t for t in (await s.list_tools()).tools}
        for name in TOOLS:
            t = tools[name]
            a = t.annotations
            assert a is not None, f"{name} has no annotations"
            assert a.read_only_hint is (name in READ_ONLY), name
            assert a.open_world_hint is False, name
            schema = t.output_schema
            assert schema and schema["type"] == "object" and schema.get("required"), name
        for name in ["workspace_storage_write", "session_storage_write"]:
            a = tools[name].annotations
            # Replacing a file whole: destructive, and the same call twice changes nothing more.
            assert a.destructive_hint is True and a.idempotent_hint is True, name
        remove = tools["workspace_remove"].annotations
        assert remove.destructive_hint is True and remove.idempotent_hint is True
        create = tools["workspace_create"].annotations
        assert create.destructive_hint is False and create.idempotent_hint is False


async def test_every_tools_results_match_its_output_schema(connect, home, repo):
    """The SDK validates a result's structured content against the tool's outputSchema on
    every call_tool (and raises when it does not match): each tool is called here on real data,
    text and binary files, folders, git and plain workspaces."""
    async with connect(repo) as s:
        tools = {t.name: t for t in (await s.list_tools()).tools}
        called = set()

        async def call(name, args):
            r = await s.call_tool(name, args)
            assert not r.is_error, (name, text(r))
            assert r.structured_content is not None, name
            called.add(name)
            return r.structured_content

        git_ws = await call("workspace_create", {"name": "feat", "description": "d"})
        assert git_ws["start"]["sha"] and git_ws["warnings"] == []
        plain = await call("workspace_create", {"name": "notes", "plain": True})
        assert plain["git"] is None and plain["start"] is None
        await call("workspace_storage_write", {"workspace_identifier": "notes", "path": "a/b.md", "content": "hi"})
        await call("workspace_storage_read", {"workspace_identifier": "notes", "path": "a/b.md"})
        await call("workspace_storage_list", {"workspace_identifier": "notes"})
        await call("workspace_storage_list", {"workspace_identifier": "notes", "path": "a"})
        worktree = Path(git_ws["git"]["worktree"])
        (worktree / "blob.bin").write_bytes(bytes(range(256)))
        browsed = await call("resource_workspace_browse", {"workspace_identifier": "feat"})
        assert "entries" in browsed
        binary = await call("resource_workspace_browse", {"workspace_identifier": "feat", "path": "blob.bin"})
        assert binary["encoding"] == "base64"
        readme = await call("resource_workspace_browse", {"workspace_identifier": "feat", "path": "README.md"})
        assert readme["encoding"] == "utf-8"
        await call("resource_workspace_list", {})
        await call("resource_workspace_show", {"workspace_identifier": "feat"})
        await call("resource_workspace_show", {"workspace_identifier": "notes"})

        sid = subprocess.run(
            [BERTH, "session", "new", "--workspace", "notes", "--title", "t", "--json"],
            env={**os.environ, "BERTH_HOME": str(home)},
            capture_output=True, check=True, text=True,
        )
        session_id = json.loads(sid.stdout)["id"]
        await call("session_storage_write", {"session_identifier": session_id, "path": "x.txt", "content": "y"})
        await call("session_storage_read", {"session_identifier": session_id, "path": "x.txt"})
        await call("session_storage_list", {"session_identifier": session_id})
        await call("resource_session_list", {})
        await call("resource_session_show", {"session_identifier": session_id})
        await call("prompt_list", {})
        await call("prompt_get", {"name": "review-workspace", "arguments": {"workspace_id": "feat"}})
        removed = await call("workspace_remove", {"workspace_id": "notes"})
        assert removed["removed"] is True

        assert called == TOOLS - RUN_TOOLS, TOOLS - RUN_TOOLS - called


async def test_plain_workspace_storage_round_trip(connect, home, tmp_path):
    async with connect(tmp_path) as s:
        created = await s.call_tool("workspace_create", {"name": "notes", "description": "d"})
        assert not created.is_error, text(created)
        ws = created.structured_content
        assert ws["name"] == "notes" and ws["git"] is None
        wrote = await s.call_tool(
            "workspace_storage_write",
            {"workspace_identifier": "notes", "path": "plan/today.md", "content": "# Plan\n## User\n"},
        )
        assert not wrote.is_error, text(wrote)
        assert wrote.structured_content["size"] == len("# Plan\n## User\n")
        read = await s.call_tool(
            "workspace_storage_read", {"workspace_identifier": ws["id"][:8], "path": "plan/today.md"}
        )
        assert text(read) == "# Plan\n## User\n"
        assert read.structured_content["encoding"] == "utf-8"
        listed = await s.call_tool(
            "workspace_storage_list", {"workspace_identifier": "notes", "path": "plan"}
        )
        entries = listed.structured_content["entries"]
        assert [(e["path"], e["kind"], e["size"]) for e in entries] == [
            ("plan/today.md", "file", 15)
        ]
    # What the server wrote is what the CLI reads: one store.
    out = subprocess.run(
        [BERTH, "workspace", "storage", "read", "notes", "plan/today.md"],
        env={**os.environ, "BERTH_HOME": str(home)},
        capture_output=True,
        check=True,
    )
    assert out.stdout == b"# Plan\n## User\n"


async def test_session_storage(connect, home, tmp_path):
    env = {**os.environ, "BERTH_HOME": str(home)}
    subprocess.run([BERTH, "workspace", "create", "w"], env=env, cwd=tmp_path, check=True, capture_output=True)
    sid = subprocess.run(
        [BERTH, "session", "new", "-w", "w"], env=env, capture_output=True, check=True, text=True
    ).stdout.strip()
    async with connect(tmp_path) as s:
        r = await s.call_tool(
            "session_storage_write", {"session_identifier": sid, "path": "a.txt", "content": "x"}
        )
        assert not r.is_error, text(r)
        r = await s.call_tool("session_storage_read", {"session_identifier": sid[:6], "path": "a.txt"})
        assert text(r) == "x"
        r = await s.call_tool("session_storage_list", {"session_identifier": sid})
        assert [e["name"] for e in r.structured_content["entries"]] == ["a.txt"]


async def test_failures_are_tool_errors_that_say_what_to_do(connect, home, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("s")
    async with connect(tmp_path) as s:
        await s.call_tool("workspace_create", {"name": "w"})
        r = await s.call_tool("workspace_storage_read", {"workspace_identifier": "nope", "path": "a"})
        assert r.is_error and "list the workspaces" in text(r)
        r = await s.call_tool("session_storage_read", {"session_identifier": "nope", "path": "a"})
        assert r.is_error
        for bad in ["../x", "/etc/passwd", "a/../../x", ""]:
            r = await s.call_tool(
                "workspace_storage_write", {"workspace_identifier": "w", "path": bad, "content": "x"}
            )
            assert r.is_error, bad
        # A symlink out of storage is refused when used.
        storage = home / "workspaces"
        (wsdir,) = [p for p in storage.iterdir() if not p.name.startswith(".")]
        (wsdir / "storage").mkdir(exist_ok=True)
        os.symlink(outside, wsdir / "storage" / "out")
        r = await s.call_tool("workspace_storage_read", {"workspace_identifier": "w", "path": "out/secret"})
        assert r.is_error, text(r)
        r = await s.call_tool(
            "workspace_storage_write", {"workspace_identifier": "w", "path": "out/secret", "content": "pwned"}
        )
        assert r.is_error
        assert (outside / "secret").read_text() == "s"
        r = await s.call_tool("workspace_create", {"name": "bad/name"})
        assert r.is_error and "workspace name" in text(r)
        r = await s.call_tool("workspace_create", {"name": "w"})
        assert r.is_error and "already exists" in text(r)
        r = await s.call_tool("workspace_create", {"name": "x", "branch": "main"})
        assert r.is_error and "name a repository" in text(r) and "--repo" not in text(r)


async def test_git_workspace_create_and_guarded_remove(connect, home, repo):
    async with connect(repo) as s:
        r = await s.call_tool("workspace_create", {"name": "fix", "description": "fix it"})
        assert not r.is_error, text(r)
        ws = r.structured_content
        assert ws["git"]["branch"] == "berth/fix" and ws["git"]["base_branch"] == "main"
        worktree = Path(ws["git"]["worktree"])
        assert (worktree / "README.md").read_text() == "hello\n"
        (worktree / "wip.txt").write_text("draft")
        r = await s.call_tool("workspace_remove", {"workspace_id": "fix"})
        # The refusal names this tool's argument, not the CLI's flag.
        assert r.is_error and "uncommitted" in text(r) and "force=true" in text(r), text(r)
        assert "--force" not in text(r)
        assert worktree.exists()
        r = await s.call_tool("workspace_remove", {"workspace_id": "fix", "force": True})
        assert not r.is_error, text(r)
        assert not worktree.exists()
        # Even forced, the draft is kept on a ref the result names.
        lost = f"refs/berth/lost/{ws['id']}"
        assert lost in text(r) and lost in r.structured_content["warning"]
        assert git(repo, "show", f"{lost}:wip.txt") == "draft"
        branches = subprocess.run(
            ["git", "branch", "--format=%(refname:short)"], cwd=repo, capture_output=True, text=True
        ).stdout.split()
        assert branches == ["main"]
        r = await s.call_tool("workspace_create", {"name": "p", "plain": True})
        assert not r.is_error and r.structured_content["git"] is None
        r = await s.call_tool("workspace_create", {"name": "q", "plain": True, "branch": "main"})
        assert r.is_error and "plain" in text(r)


async def test_git_workspace_create_says_where_it_starts_and_warns(connect, home, repo):
    # The main checkout is on a branch ahead of main, the default base.
    git(repo, "switch", "-q", "-c", "work")
    (repo / "later.txt").write_text("later\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "later")
    (home / "config.toml").write_text('[git]\ncopy = [".env"]\n')
    async with connect(repo) as s:
        r = await s.call_tool("workspace_create", {"name": "old"})
        assert not r.is_error, text(r)
        sha = git(repo, "rev-parse", "--short", "main").strip()
        assert r.structured_content["start"] == {"ref": "main", "sha": sha}
        warnings = r.structured_content["warnings"]
        assert len(warnings) == 2, warnings
        assert "1 commit(s) behind work" in warnings[0] and 'base_branch="work"' in warnings[0]
        assert "--base" not in text(r)
        assert ".env" in warnings[1] and ".env" in text(r)
        r = await s.call_tool("workspace_create", {"name": "new", "base_branch": "work"})
        assert not r.is_error, text(r)
        assert [w for w in r.structured_content["warnings"] if "behind" in w] == []


async def test_workspace_resources_and_their_bridge_tools(connect, home, repo):
    async with connect(repo) as s:
        r = await s.call_tool("workspace_create", {"name": "feat"})
        assert not r.is_error, text(r)
        ws_id = r.structured_content["id"]
        (Path(r.structured_content["git"]["worktree"]) / "new.txt").write_text("x")

        listed = [str(res.uri) for res in (await s.list_resources()).resources]
        assert listed == [
            "berth://workspace",
            "berth://session",
            f"berth://workspace/{ws_id}",
            f"berth://workspace/{ws_id}/context",
        ]
        templates = [t.uri_template for t in (await s.list_resource_templates()).resource_templates]
        assert templates == [
            "berth://workspace/{id}",
            "berth://workspace/{id}/files{/path*}",
            "berth://workspace/{id}/context",
            "berth://workspace/{id}/memory",
            "berth://workspace/{id}/storage{/path*}",
            "berth://session/{id}",
            "berth://session/{id}/transcript",
            "berth://session/{id}/storage{/path*}",
        ]

        all_ws = json.loads((await s.read_resource("berth://workspace")).contents[0].text)
        assert [w["uri"] for w in all_ws["workspaces"]] == [f"berth://workspace/{ws_id}"]

        # By id prefix, by name, and through the seed's amux:// alias.
        for uri in [f"berth://workspace/{ws_id[:6]}", "berth://workspace/feat", "amux://workspace/feat"]:
            got = await s.read_resource(uri)
            assert got.contents[0].mime_type == "application/json"
            detail = json.loads(got.contents[0].text)
            assert detail["id"] == ws_id
            assert detail["git_status"]["health"] == "ok"
            assert detail["git_status"]["changed_files"] == 1
            assert detail["git_status"]["base_branch"] == "main"

        # Not found, said as every protocol says it, with no CLI command an MCP client lacks.
        with pytest.raises(MCPError) as err:
            await s.read_resource("berth://workspace/nope")
        assert err.value.data == {"kind": "not_found"}, err.value
        assert "berth workspace list" not in err.value.message
        with pytest.raises(MCPError) as err:
            await s.read_resource("berth://session/nope")
        assert err.value.data == {"kind": "not_found"}, err.value
        with pytest.raises(MCPError) as err:
            await s.read_resource("berth://elsewhere")
        assert err.value.data == {"kind": "not_found"}, err.value

        r = await s.call_tool("resource_workspace_list", {})
        assert [w["id"] for w in r.structured_content["workspaces"]] == [ws_id]
        r = await s.call_tool("resource_workspace_show", {"workspace_identifier": "feat"})
        assert r.structured_content["git_status"]["changed_files"] == 1
        r = await s.call_tool("resource_workspace_show", {"workspace_identifier": "nope"})
        assert r.is_error


async def test_server_refills_spare_checkouts_after_a_create(connect, home, repo):
    import anyio

    (home / "config.toml").write_text("[git]\nspare_worktrees = 1\n")

    def ready():
        out = subprocess.run(
            [BERTH, "workspace", "spares", "--json", "--repo", str(repo)],
            env={**os.environ, "BERTH_HOME": str(home)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return json.loads(out)["ready"]

    async def refilled():
        with anyio.move_on_after(20):
            while ready() < 1:
                await anyio.sleep(0.1)
        assert ready() == 1

    assert ready() == 0
    async with connect(repo) as s:
        # After each create the server tops the pool up in the background, by itself.
        for name in ["a", "b"]:
            r = await s.call_tool("workspace_create", {"name": name})
            assert not r.is_error, text(r)
            await refilled()


async def test_a_files_content_travels_once(connect, home, tmp_path):
    """A 1 MB read answers about 1 MB: the text once, not again in structured content."""
    async with connect(tmp_path) as s:
        await s.call_tool("workspace_create", {"name": "big", "plain": True})
        body = "x" * 1_000_000
        w = await s.call_tool(
            "workspace_storage_write",
            {"workspace_identifier": "big", "path": "big.txt", "content": body},
        )
        assert not w.is_error, text(w)
        r = await s.call_tool(
            "workspace_storage_read", {"workspace_identifier": "big", "path": "big.txt"}
        )
        assert not r.is_error
        assert text(r) == body
        size = len(json.dumps(r.structured_content)) + sum(
            len(c.text) for c in r.content if c.type == "text"
        )
        assert size < 1_001_000, size
        assert r.structured_content["size"] == 1_000_000
        assert r.structured_content["uri"].endswith("/storage/big.txt")


async def test_workspace_remove_takes_either_argument_name(connect, home, tmp_path):
    async with connect(tmp_path) as s:
        for name, key in [("one", "workspace_id"), ("two", "workspace_identifier")]:
            r = await s.call_tool("workspace_create", {"name": name, "plain": True})
            assert not r.is_error, text(r)
            r = await s.call_tool("workspace_remove", {key: name})
            assert not r.is_error, (key, text(r))
            assert r.structured_content["removed"] is True
        r = await s.call_tool("resource_workspace_list", {})
        assert r.structured_content["workspaces"] == []
