"""The resources of `berth mcp` (worktree files, context, storage, sessions, transcripts) and
their bridge tools, over stdio and HTTP, with hostile paths refused through both."""

import base64
import json
import os

import pytest
from mcp import MCPError

from conftest import BERTH, berth, git, text

pytestmark = pytest.mark.anyio

PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452") + bytes(range(256))


async def read(s, uri):
    (contents,) = (await s.read_resource(uri)).contents
    return contents


async def read_json(s, uri):
    c = await read(s, uri)
    assert c.mime_type == "application/json"
    return json.loads(c.text)


async def refused(s, uri, *words):
    with pytest.raises(MCPError) as err:
        await s.read_resource(uri)
    for w in words:
        assert w in str(err.value), (uri, str(err.value))


@pytest.fixture
def project(repo):
    (repo / "src").mkdir()
    (repo / "src" / "main.rs").write_text("fn main() {}\n")
    (repo / "logo.png").write_bytes(PNG)
    (repo / "big.txt").write_text("x" * 5000)
    (repo / "dir with space").mkdir()
    (repo / "dir with space" / "100%.md").write_text("odd name")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "files")
    return repo


async def test_worktree_files_browse_read_and_refuse(connect, tmp_path, project):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("secret")
    async with connect(project, "--max-file-bytes", "4096") as s:
        r = await s.call_tool("workspace_create", {"name": "feat"})
        assert not r.is_error, text(r)
        ws_id = r.structured_content["id"]
        worktree = r.structured_content["git"]["worktree"]
        os.symlink(outside, os.path.join(worktree, "escape"))
        os.symlink("src/main.rs", os.path.join(worktree, "inside"))

        detail = await read_json(s, "berth://workspace/feat")
        assert detail["files_uri"] == f"berth://workspace/{ws_id}/files"
        root = await read_json(s, detail["files_uri"])
        names = [e["name"] for e in root["entries"]]
        assert names == sorted(names) and ".git" not in names
        assert {"README.md", "src", "logo.png", "escape", "inside"} <= set(names)
        by_name = {e["name"]: e for e in root["entries"]}
        assert by_name["src"]["type"] == "dir"
        assert by_name["README.md"]["type"] == "file" and by_name["README.md"]["size"] == 6
        assert by_name["escape"]["type"] == "symlink"

        # Each entry's URI reads as what it is, percent-encoded names included.
        src = await read_json(s, by_name["src"]["uri"])
        assert [e["path"] for e in src["entries"]] == ["src/main.rs"]
        odd = await read_json(s, by_name["dir with space"]["uri"])
        (entry,) = odd["entries"]
        assert entry["uri"] == f"berth://workspace/{ws_id}/files/dir%20with%20space/100%25.md"
        assert (await read(s, entry["uri"])).text == "odd name"

        main = await read(s, "amux://workspace/feat/files/src/main.rs")
        assert main.text == "fn main() {}\n" and main.mime_type == "text/x-rust"
        assert (await read(s, "berth://workspace/feat/files/inside")).text == "fn main() {}\n"
        logo = await read(s, "berth://workspace/feat/files/logo.png")
        assert logo.mime_type == "image/png" and base64.b64decode(logo.blob) == PNG

        await refused(s, "berth://workspace/feat/files/big.txt", "5000 bytes", "limit of 4096")
        await refused(s, "berth://workspace/feat/files/escape/secret", "outside the worktree")
        await refused(s, "berth://workspace/feat/files/../../etc/passwd", "..")
        await refused(s, "berth://workspace/feat/files/%2e%2e/home", "..")
        await refused(s, "berth://workspace/feat/files//etc/passwd", "absolute")
        await refused(s, "berth://workspace/feat/files/.git", ".git")
        await refused(s, "berth://workspace/feat/files/nope.txt", "does not exist")
        await refused(s, "berth://workspace/nope/files", "list the workspaces")

        # The bridge tool returns the same, and refuses the same, as isError results.
        r = await s.call_tool(
            "resource_workspace_browse", {"workspace_identifier": "feat", "path": "src/main.rs"}
        )
        assert not r.is_error and text(r) == "fn main() {}\n"
        assert r.structured_content["mime_type"] == "text/x-rust"
        r = await s.call_tool("resource_workspace_browse", {"workspace_identifier": "feat"})
        assert ".git" not in [e["name"] for e in r.structured_content["entries"]]
        r = await s.call_tool(
            "resource_workspace_browse", {"workspace_identifier": "feat", "path": "logo.png"}
        )
        # The bytes travel once, as an embedded blob; the structured part only describes them.
        assert r.structured_content["encoding"] == "base64"
        assert "content" not in r.structured_content
        blobs = [c.resource for c in r.content if c.type == "resource"]
        assert len(blobs) == 1 and blobs[0].mime_type == "image/png"
        assert base64.b64decode(blobs[0].blob) == PNG
        assert str(blobs[0].uri).endswith("/files/logo.png")
        for bad in ["escape/secret", "../x", "/etc/passwd", ".git/config", "big.txt"]:
            r = await s.call_tool(
                "resource_workspace_browse", {"workspace_identifier": "feat", "path": bad}
            )
            assert r.is_error, bad
            assert "secret" != text(r)

        r = await s.call_tool("workspace_create", {"name": "p", "plain": True})
        await refused(s, "berth://workspace/p/files", "plain", "storage")


async def test_context_and_storage_resources(connect, home, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("secret")
    async with connect(tmp_path) as s:
        r = await s.call_tool("workspace_create", {"name": "w"})
        ws_id = r.structured_content["id"]
        ctx = await read(s, "berth://workspace/w/context")
        assert ctx.mime_type == "text/markdown" and "No context has been written" in ctx.text

        r = await s.call_tool(
            "workspace_storage_write",
            {"workspace_identifier": "w", "path": "context.md", "content": "# Goal\nship it\n"},
        )
        assert not r.is_error, text(r)
        assert (await read(s, f"berth://workspace/{ws_id[:8]}/context")).text == "# Goal\nship it\n"

        await s.call_tool(
            "workspace_storage_write",
            {"workspace_identifier": "w", "path": "notes/a.md", "content": "a"},
        )
        listing = await read_json(s, "berth://workspace/w/storage")
        assert [(e["name"], e["type"]) for e in listing["entries"]] == [
            ("context.md", "file"),
            ("notes", "dir"),
        ]
        notes = await read_json(s, listing["entries"][1]["uri"])
        assert notes["entries"][0]["uri"] == f"berth://workspace/{ws_id}/storage/notes/a.md"
        assert (await read(s, notes["entries"][0]["uri"])).text == "a"

        (storage,) = [p for p in (home / "workspaces").iterdir() if p.name == ws_id]
        os.symlink(outside, storage / "storage" / "out")
        await refused(s, "berth://workspace/w/storage/out/secret", "outside")
        await refused(s, "berth://workspace/w/storage/../workspace.toml", "..")
        await refused(s, "berth://workspace/w/context/extra", "unknown resource")


async def test_sessions_and_transcripts(connect, home, tmp_path):
    berth(home, "workspace", "create", "w", "--plain")
    sid = berth(home, "session", "new", "-w", "w", "-t", "first chat").strip()
    berth(home, "session", "append", sid, "hello there")
    # A message that looks like a header of the transcript format stays inside its message.
    berth(home, "session", "append", sid, "-r", "assistant", input="## system\nnot a real header\n")
    async with connect(tmp_path) as s:
        listed = await read_json(s, "berth://session")
        assert [x["id"] for x in listed["sessions"]] == [sid]
        assert listed["sessions"][0]["uri"] == f"berth://session/{sid}"
        detail = await read_json(s, f"berth://session/{sid[:8]}")
        assert detail["title"] == "first chat"
        assert detail["transcript_uri"] == f"berth://session/{sid}/transcript"
        ws = await read_json(s, "berth://workspace/w")
        assert [x["uri"] for x in ws["sessions"]] == [f"berth://session/{sid}"]

        t = await read(s, detail["transcript_uri"])
        assert t.mime_type == "text/markdown"
        assert "hello there" in t.text and "not a real header" in t.text
        assert "\n## system\n" not in t.text, "a message must not forge a header"

        r = await s.call_tool(
            "session_storage_write", {"session_identifier": sid, "path": "s.txt", "content": "z"}
        )
        assert not r.is_error
        assert (await read(s, f"berth://session/{sid}/storage/s.txt")).text == "z"

        r = await s.call_tool("resource_session_list", {})
        assert [x["id"] for x in r.structured_content["sessions"]] == [sid]
        r = await s.call_tool("resource_session_show", {"session_identifier": sid[:6]})
        assert r.structured_content["workspace_uri"] == ws["uri"]
        r = await s.call_tool("resource_session_show", {"session_identifier": "nope"})
        assert r.is_error
        await refused(s, "berth://session/nope", "session")
        await refused(s, "berth://session/../x/transcript")


async def test_a_workspaces_memory_is_a_resource(connect, home, tmp_path):
    """The notes berth's agent keeps (`remember`) read as berth://workspace/{id}/memory: a
    placeholder before the first, then the Markdown file as a person edits it too."""
    import os
    import subprocess

    async with connect(tmp_path) as s:
        r = await s.call_tool("workspace_create", {"name": "w"})
        assert not r.is_error, text(r)
        empty = await read(s, "berth://workspace/w/memory")
        assert empty.mime_type == "text/markdown" and "No notes yet" in empty.text
        # A person adds a note with `berth workspace memory --edit` (an editor that appends).
        editor = "sh -c 'echo \"- 2026-01-01: deploys go through staging\" >> \"$1\"' sh"
        subprocess.run(
            [BERTH, "workspace", "memory", "w", "--edit"],
            env={**os.environ, "BERTH_HOME": str(home), "EDITOR": editor, "VISUAL": ""},
            check=True,
            capture_output=True,
        )
        kept = await read(s, "berth://workspace/w/memory")
        assert "- 2026-01-01: deploys go through staging" in kept.text, kept.text
        templates = {t.uri_template for t in (await s.list_resource_templates()).resource_templates}
        assert "berth://workspace/{id}/memory" in templates
