"""The seed's "Typical AI Agent Workflow" against a real git repository with an upstream, plus
prompts, completions and notifications, over stdio and HTTP."""

import json
import subprocess

import anyio
import pytest
from mcp import MCPError, types

from conftest import git, text

pytestmark = [
    pytest.mark.anyio,
    # The SDK warns that protocol 2026-07-28 drops resources/subscribe; berth serves the
    # versions that have it, and this test is about exactly that.
    pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning"),
]


@pytest.fixture
def clone(tmp_path):
    """A clone of an upstream whose default branch is `trunk`, with Cargo and npm manifests."""
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    git(upstream, "init", "-q", "-b", "trunk")
    (upstream / "Cargo.toml").write_text('[package]\nname = "demo"\n')
    (upstream / "package.json").write_text(json.dumps({"scripts": {"test": "vitest", "lint": "eslint ."}}))
    (upstream / "README.md").write_text("demo\n")
    git(upstream, "add", ".")
    git(upstream, "commit", "-q", "-m", "first")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(upstream), str(clone))
    return clone


def prompt_text(result):
    return "\n".join(m.content.text for m in result.messages)


async def test_typical_agent_workflow(connect, clone):
    async with connect(clone) as s:
        prompts = {p.name: p for p in (await s.list_prompts()).prompts}
        assert set(prompts) == {"start-issue-work", "prepare-pr", "review-workspace"}
        args = {a.name: a.required for a in prompts["start-issue-work"].arguments}
        assert args == {"issue_number": True, "issue_title": False, "issue_url": False}
        assert {a.name: a.required for a in prompts["prepare-pr"].arguments}["workspace_id"]

        # 1. Start with a prompt: real base branch, real toolchain, a ready tool call.
        start = prompt_text(
            await s.get_prompt(
                "start-issue-work",
                {"issue_number": "42", "issue_title": "Fix login\n# injected", "issue_url": "https://x/42"},
            )
        )
        assert "origin/trunk" in start, start
        assert '"name": "issue-42"' in start.replace('":"', '": "') or '"name":"issue-42"' in start
        assert "cargo test" in start and "npm run lint" in start and "npm run test" in start
        assert "\n# injected" not in start
        assert "https://x/42" in start

        # 2. Create the workspace the prompt proposed.
        r = await s.call_tool("workspace_create", {"name": "issue-42", "description": "Fix login"})
        assert not r.is_error, text(r)
        assert r.structured_content["git"]["base_branch"] == "origin/trunk"
        worktree = r.structured_content["git"]["worktree"]

        # 3. Read its details for the paths.
        detail = json.loads((await s.read_resource("amux://workspace/issue-42")).contents[0].text)
        assert detail["git"]["worktree"] == worktree
        assert detail["git_status"]["ahead"] == 0

        # 4. Browse and read files.
        files = json.loads((await s.read_resource(detail["files_uri"])).contents[0].text)
        readme = [e for e in files["entries"] if e["name"] == "README.md"][0]
        assert (await s.read_resource(readme["uri"])).contents[0].text == "demo\n"

        # Do some work: one commit, one file left uncommitted, a context file.
        with open(f"{worktree}/login.rs", "w") as f:
            f.write("// fixed\n")
        git(worktree, "add", "login.rs")
        git(worktree, "commit", "-q", "-m", "Fix the login check")
        with open(f"{worktree}/wip.txt", "w") as f:
            f.write("todo\n")
        await s.call_tool(
            "workspace_storage_write",
            {"workspace_identifier": "issue-42", "path": "context.md", "content": "# Plan\nfix ```it```\n"},
        )

        # 5. Review progress: built from the worktree's real state.
        review = prompt_text(await s.get_prompt("review-workspace", {"workspace_id": "issue-42"}))
        assert "1 commit(s) ahead of the base, 0 behind" in review, review
        assert "?? wip.txt" in review
        assert "Fix the login check" in review
        assert "fix ```it```" in review and "````markdown" in review
        assert "Commit the 1 uncommitted file(s)" in review
        assert "Created under a minute ago" in review
        assert f"cd {worktree} && cargo test" in review

        # 6. Prepare the PR, with a title that tries to break out of the shell command.
        title = "it's $(touch pwned)"
        pr = prompt_text(
            await s.get_prompt("prepare-pr", {"workspace_id": "issue-42", "pr_title": title})
        )
        assert "gh pr create --base trunk --head berth/issue-42" in pr, pr
        (line,) = [l for l in pr.splitlines() if "gh pr create" in l]
        command = line.strip().strip("`")
        # The quoted title reads back, through a real shell, as exactly the text given.
        quoted_title = command.split("--title ", 1)[1].split(" --body ", 1)[0]
        echoed = subprocess.run(
            ["sh", "-c", f"printf %s {quoted_title}"], capture_output=True, text=True, check=True
        ).stdout
        assert echoed == title
        assert "Commit or discard the 1 uncommitted file(s)" in pr
        assert "git -C" in pr and "push -u origin berth/issue-42" in pr

        # The bridge tools render the same prompts for clients without prompt support.
        r = await s.call_tool("prompt_list", {})
        assert [p["name"] for p in r.structured_content["prompts"]] == [
            "start-issue-work",
            "prepare-pr",
            "review-workspace",
        ]
        r = await s.call_tool(
            "prompt_get", {"name": "review-workspace", "arguments": {"workspace_id": "issue-42"}}
        )
        assert not r.is_error and "1 commit(s) ahead" in text(r)
        r = await s.call_tool("prompt_get", {"name": "review-workspace", "arguments": {"workspace_id": "nope"}})
        assert r.is_error and "list the workspaces" in text(r)
        r = await s.call_tool("prompt_get", {"name": "nope"})
        assert r.is_error and "start-issue-work" in text(r)

        with pytest.raises(MCPError):
            await s.get_prompt("prepare-pr", {})
        with pytest.raises(MCPError):
            await s.get_prompt("start-issue-work", {"issue_number": "../../x"})

        # Done: the branch holds unpushed work, so removal is refused until forced.
        r = await s.call_tool("workspace_remove", {"workspace_id": "issue-42"})
        assert r.is_error and "force" in text(r)


async def test_completions_of_identifiers(connect, home, tmp_path):
    async with connect(tmp_path) as s:
        for name in ["alpha", "alpine", "beta"]:
            await s.call_tool("workspace_create", {"name": name})
        got = await s.complete(
            types.PromptReference(type="ref/prompt", name="review-workspace"),
            {"name": "workspace_id", "value": "al"},
        )
        assert got.completion.values == ["alpha", "alpine"]
        got = await s.complete(
            types.ResourceTemplateReference(type="ref/resource", uri="berth://workspace/{id}/files{/path*}"),
            # "bet": a letter no hex id holds, so a random id cannot match by chance.
            {"name": "id", "value": "bet"},
        )
        assert got.completion.values == ["beta"]
        r = await s.call_tool("resource_workspace_list", {})
        ids = sorted(w["id"] for w in r.structured_content["workspaces"])
        got = await s.complete(
            types.ResourceTemplateReference(type="ref/resource", uri="berth://workspace/{id}"),
            {"name": "id", "value": ids[0][:2]},
        )
        assert ids[0] in got.completion.values
        got = await s.complete(
            types.PromptReference(type="ref/prompt", name="start-issue-work"),
            {"name": "issue_number", "value": "4"},
        )
        assert got.completion.values == []
        # Outside a repository the prompts say what the workspace will be.
        start = prompt_text(await s.get_prompt("start-issue-work", {"issue_number": "7"}))
        assert "no repository" in start and "plain folder" in start
        review = prompt_text(await s.get_prompt("review-workspace", {"workspace_id": "alpha"}))
        assert "plain workspace" in review.lower()
        with pytest.raises(MCPError) as err:
            await s.get_prompt("prepare-pr", {"workspace_id": "alpha"})
        assert "no branch" in str(err.value)


async def eventually(check, what):
    with anyio.move_on_after(10):
        while not check():
            await anyio.sleep(0.05)
    assert check(), f"no {what} within 10 s"


async def test_list_changed_and_subscriptions(connect, home, tmp_path):
    seen = []

    async def on_message(message):
        if isinstance(message, types.ServerNotification) or hasattr(message, "method"):
            seen.append(message)

    def methods():
        return [getattr(m, "method", None) for m in seen]

    def updated():
        return [m.params.uri for m in seen if getattr(m, "method", None) == "notifications/resources/updated"]

    async with connect(tmp_path, message_handler=on_message) as s:
        r = await s.call_tool("workspace_create", {"name": "w"})
        ws_id = r.structured_content["id"]
        await eventually(lambda: "notifications/resources/list_changed" in methods(), "list_changed after create")

        # Subscribed by name; written by id: the notification carries the subscribed URI.
        await s.subscribe_resource("berth://workspace/w/context")
        await s.subscribe_resource(f"berth://workspace/{ws_id}/storage/notes.md")
        await s.call_tool(
            "workspace_storage_write",
            {"workspace_identifier": ws_id, "path": "context.md", "content": "c"},
        )
        await eventually(lambda: "berth://workspace/w/context" in updated(), "updated for context")
        await s.call_tool(
            "workspace_storage_write",
            {"workspace_identifier": "w", "path": "other.md", "content": "o"},
        )
        await s.call_tool(
            "workspace_storage_write",
            {"workspace_identifier": "w", "path": "notes.md", "content": "n"},
        )
        await eventually(lambda: f"berth://workspace/{ws_id}/storage/notes.md" in updated(), "updated for notes")
        assert not any("other.md" in u for u in updated())
        # One notification per write, however the client subscribed.
        assert updated().count("berth://workspace/w/context") == 1

        await s.unsubscribe_resource("berth://workspace/w/context")
        before = len(updated())
        await s.call_tool(
            "workspace_storage_write",
            {"workspace_identifier": "w", "path": "context.md", "content": "c2"},
        )
        await s.call_tool("resource_workspace_list", {})
        assert len(updated()) == before

        with pytest.raises(MCPError):
            await s.subscribe_resource("berth://workspace")
        with pytest.raises(MCPError):
            await s.subscribe_resource("berth://workspace/nope/context")

        count = methods().count("notifications/resources/list_changed")
        r = await s.call_tool("workspace_remove", {"workspace_id": "w"})
        assert not r.is_error, text(r)
        await eventually(
            lambda: methods().count("notifications/resources/list_changed") > count, "list_changed after remove"
        )
