"""When the client advertises `fs/read_text_file` and `fs/write_text_file`, berth's file tools
go through it: the agent reads the editor's buffers (unsaved changes included), its writes
land in the editor, and confinement holds all the same.
"""

import os

import pytest
from acp import text_block

from conftest import Editor, Reply, run_agent

pytestmark = pytest.mark.anyio


def tool_result(request):
    """The tool_result block of the last user message of a provider request."""
    content = request["messages"][-1]["content"]
    return next(b for b in content if b.get("type") == "tool_result")


def result_text(block):
    content = block["content"]
    if isinstance(content, str):
        return content
    return "".join(c.get("text", "") for c in content)


async def test_the_agent_reads_the_editors_buffer_not_the_disk(home, work, provider):
    (work / "notes.md").write_text("what the disk says\n")
    path = str(work / "notes.md")
    provider.push(Reply().tool("toolu_r", "read_file", {"path": "notes.md"}))
    provider.push(Reply().text("read"))
    editor = Editor(fs=True, buffers={path: "what the editor shows, unsaved\n"})
    async with run_agent(editor, home, provider, work) as (conn, _, _):
        new = await conn.new_session(cwd=str(work))
        await conn.prompt(session_id=new.session_id, prompt=[text_block("read notes.md")])
    assert editor.reads == [path]
    seen = result_text(tool_result(provider.requests[1]))
    assert "what the editor shows, unsaved" in seen
    assert "what the disk says" not in seen


async def test_writes_and_edits_land_in_the_editor(home, work, provider):
    path = str(work / "src" / "lib.rs")
    provider.push(Reply().tool("toolu_w", "write_file", {"path": "src/new.rs", "content": "fn new() {}\n"}))
    provider.push(Reply().tool("toolu_e", "edit_file", {"path": "src/lib.rs", "old_text": "old", "new_text": "new"}))
    provider.push(Reply().text("done"))
    editor = Editor(choice="allow_once", fs=True, buffers={path: "fn old() {}\n"})
    async with run_agent(editor, home, provider, work) as (conn, _, _):
        new = await conn.new_session(cwd=str(work))
        await conn.prompt(session_id=new.session_id, prompt=[text_block("change things")])
    assert editor.writes == [
        (str(work / "src" / "new.rs"), "fn new() {}\n"),
        (path, "fn new() {}\n"),
    ]
    # Through the editor only: the disk was not touched.
    assert not (work / "src").exists()
    # The edit's question showed the editor's text as the diff's old side.
    edit_question = editor.permissions[1][0]
    diff = edit_question.content[0]
    assert diff.type == "diff" and diff.old_text == "fn old() {}\n" and diff.new_text == "fn new() {}\n"


async def test_confinement_holds_through_the_editor(home, work, tmp_path, provider):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("top secret\n")
    os.symlink(outside, work / "link")
    provider.push(Reply().tool("toolu_1", "read_file", {"path": "link/secret"}))
    provider.push(Reply().tool("toolu_2", "read_file", {"path": "../outside/secret"}))
    provider.push(Reply().text("refused twice"))
    editor = Editor(fs=True, buffers={str(outside / "secret"): "top secret\n", str(work / "link" / "secret"): "top secret\n"})
    async with run_agent(editor, home, provider, work) as (conn, _, _):
        new = await conn.new_session(cwd=str(work))
        await conn.prompt(session_id=new.session_id, prompt=[text_block("read the secret")])
    # The editor was never asked for either path.
    assert editor.reads == []
    for request in provider.requests[1:3]:
        block = tool_result(request)
        assert block["is_error"] is True
        assert "top secret" not in result_text(block)
        assert "outside the working directory" in result_text(block)
