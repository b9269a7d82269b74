"""A turn of `berth acp` end to end, with the official ACP Python SDK as the client: the
answer streams as ordered chunks, tool calls and permission questions come in order, a
rejected write writes nothing, an allowed one writes, and a cancel ends a long stream at once.
"""

import asyncio
import json
import time

import pytest
from acp import RequestError, text_block
from acp.helpers import embedded_blob_resource, embedded_text_resource, image_block, resource_block

from conftest import Editor, Reply, berth_json, run_agent, texts

pytestmark = pytest.mark.anyio


async def test_initialize_advertises_what_berth_does(home, work, provider):
    async with run_agent(Editor(), home, provider, work) as (conn, _, init):
        assert init.protocol_version == 1
        caps = init.agent_capabilities
        assert caps.load_session is True
        assert caps.prompt_capabilities.embedded_context is True
        assert caps.prompt_capabilities.image is True
        assert caps.session_capabilities.list is not None
        assert caps.session_capabilities.resume is not None
        assert caps.session_capabilities.close is not None
        assert init.agent_info.name == "berth"


async def test_the_answer_streams_in_order_and_is_kept(home, work, provider):
    chunks = [f"c{i:03d} " for i in range(200)]
    provider.push(Reply().thinking("let me ", "think").text(*chunks))
    editor = Editor()
    async with run_agent(editor, home, provider, work) as (conn, _, _):
        new = await conn.new_session(cwd=str(work))
        answer = await conn.prompt(session_id=new.session_id, prompt=[text_block("count")])
        assert answer.stop_reason == "end_turn"
        # The turn's tokens (the stand-in reports 12 in, 5 out) come with the answer, and how
        # full the context window is as a usage update.
        assert (answer.usage.input_tokens, answer.usage.output_tokens) == (12, 5)
        assert answer.usage.total_tokens == 17
        [usage] = [u for _, u in editor.updates if u.session_update == "usage_update"]
        assert (usage.used, usage.size) == (17, 200000)
    assert texts(editor) == "".join(chunks)
    assert texts(editor, "agent_thought_chunk") == "let me think"
    # The thought came before the answer, as it streamed.
    kinds = editor.kinds()
    assert kinds.index("agent_thought_chunk") < kinds.index("agent_message_chunk")
    # The ACP session is a berth session, found by `berth session show`.
    shown = berth_json(home, "session", "show", new.session_id)
    assert [m["role"] for m in shown["messages"]] == ["user", "assistant"]
    assert shown["messages"][0]["content"] == "count"
    assert shown["messages"][1]["content"] == "".join(chunks)
    assert shown["session"]["cwd"] == str(work)
    assert shown["session"]["usage"] == {"input_tokens": 12, "output_tokens": 5}
    # No [prices] entry for the model: no cost.
    assert shown["cost_usd"] is None
    assert shown["session"]["workspace_id"] == "default"
    # The model was the configured one.
    assert provider.requests[0]["model"] == "test-model"


async def test_a_rejected_write_writes_nothing_and_the_model_is_told(home, work, provider):
    provider.push(
        Reply().text("I'll write it.").tool("toolu_1", "write_file", {"path": "out.txt", "content": "hello\n"})
    )
    provider.push(Reply().text("You said no."))
    editor = Editor(choice="reject_once")
    async with run_agent(editor, home, provider, work) as (conn, _, _):
        new = await conn.new_session(cwd=str(work))
        answer = await conn.prompt(session_id=new.session_id, prompt=[text_block("write out.txt")])
        assert answer.stop_reason == "end_turn"
    assert not (work / "out.txt").exists()
    # One question, about this call, with the three choices, showing the diff.
    assert len(editor.permissions) == 1
    asked, options = editor.permissions[0]
    assert asked.tool_call_id == "toolu_1"
    assert options == ["allow_once", "allow_always", "reject_once"]
    assert asked.content[0].type == "diff" and asked.content[0].new_text == "hello\n"
    # Order: text, the call, (its diff), the question, then the failed result, then the rest.
    kinds = editor.kinds()
    first_call = kinds.index("tool_call")
    assert "agent_message_chunk" in kinds[:first_call]
    final = [u for _, u in editor.updates if u.session_update == "tool_call_update" and u.status]
    assert [u.status for u in final] == ["failed"]
    assert texts(editor).endswith("You said no.")
    # The model got the refusal as an error result tied to its call.
    sent = provider.requests[1]["messages"][-1]["content"]
    result = next(b for b in sent if b.get("type") == "tool_result")
    assert result["tool_use_id"] == "toolu_1" and result["is_error"] is True
    assert "refused" in str(result["content"])


async def test_an_allowed_write_is_written_and_shown_as_a_diff(home, work, provider):
    provider.push(Reply().tool("toolu_1", "write_file", {"path": "src/out.txt", "content": "hello\n"}))
    provider.push(Reply().text("Done."))
    editor = Editor(choice="allow_once")
    async with run_agent(editor, home, provider, work) as (conn, _, _):
        new = await conn.new_session(cwd=str(work))
        answer = await conn.prompt(session_id=new.session_id, prompt=[text_block("write it")])
        assert answer.stop_reason == "end_turn"
    assert (work / "src" / "out.txt").read_text() == "hello\n"
    start = next(u for _, u in editor.updates if u.session_update == "tool_call")
    assert start.tool_call_id == "toolu_1" and start.kind == "edit"
    assert start.locations[0].path == str(work / "src" / "out.txt")
    done = [u for _, u in editor.updates if u.session_update == "tool_call_update" and u.status == "completed"]
    assert len(done) == 1
    diffs = [c for c in done[0].content if c.type == "diff"]
    assert diffs[0].path == str(work / "src" / "out.txt") and diffs[0].old_text is None
    assert diffs[0].new_text == "hello\n"


async def test_the_models_plan_is_a_plan_update(home, work, provider):
    steps = [
        {"step": "read the failing test", "status": "completed"},
        {"step": "fix the parser", "status": "in_progress"},
        {"step": "run the tests", "status": "pending"},
    ]
    provider.push(Reply().tool("toolu_1", "update_plan", {"plan": steps}))
    # A plan that breaks the rules is the model's to fix, and never reaches the editor.
    provider.push(Reply().tool("toolu_2", "update_plan", {"plan": [{"step": "a", "status": "in_progress"}, {"step": "b", "status": "in_progress"}]}))
    provider.push(Reply().text("On it."))
    editor = Editor(choice="reject_once")
    async with run_agent(editor, home, provider, work) as (conn, _, _):
        new = await conn.new_session(cwd=str(work))
        answer = await conn.prompt(session_id=new.session_id, prompt=[text_block("fix the parser")])
        assert answer.stop_reason == "end_turn"
    plans = [u for _, u in editor.updates if u.session_update == "plan"]
    assert len(plans) == 1
    assert [(e.content, e.status) for e in plans[0].entries] == [
        ("read the failing test", "completed"),
        ("fix the parser", "in_progress"),
        ("run the tests", "pending"),
    ]
    # Showing a plan changes nothing, so nothing is asked.
    assert editor.permissions == []
    # The plan comes with its call, between its start and its end.
    kinds = editor.kinds()
    assert kinds.index("tool_call") < kinds.index("plan")
    ends = [u for _, u in editor.updates if u.session_update == "tool_call_update" and u.status]
    assert [u.status for u in ends] == ["completed", "failed"]
    # The model was told its second plan was wrong, and why.
    result = next(b for b in provider.requests[2]["messages"][-1]["content"] if b.get("type") == "tool_result")
    assert result["is_error"] is True and "only the one" in str(result["content"])


async def test_allow_always_asks_once_per_session(home, work, provider):
    for i in range(2):
        provider.push(Reply().tool(f"toolu_{i}", "write_file", {"path": f"f{i}.txt", "content": "x"}))
        provider.push(Reply().text("ok"))
    editor = Editor(choice="allow_always")
    async with run_agent(editor, home, provider, work) as (conn, _, _):
        new = await conn.new_session(cwd=str(work))
        for i in range(2):
            await conn.prompt(session_id=new.session_id, prompt=[text_block(f"write f{i}")])
    assert (work / "f0.txt").exists() and (work / "f1.txt").exists()
    assert len(editor.permissions) == 1


async def test_cancel_ends_a_long_stream_promptly(home, work, provider):
    # 10 s of answer: 200 chunks, 50 ms apart.
    provider.push(Reply().text(*[f"w{i} " for i in range(200)]).slowly(0.05))
    editor = Editor()
    first = asyncio.Event()
    editor.on_update = lambda u: first.set() if u.session_update == "agent_message_chunk" else None
    async with run_agent(editor, home, provider, work) as (conn, _, _):
        new = await conn.new_session(cwd=str(work))
        started = time.monotonic()
        prompt = asyncio.ensure_future(conn.prompt(session_id=new.session_id, prompt=[text_block("talk")]))
        await asyncio.wait_for(first.wait(), 10)
        await asyncio.sleep(0.3)
        cancelled_at = time.monotonic()
        await conn.cancel(session_id=new.session_id)
        answer = await asyncio.wait_for(prompt, 5)
        latency = time.monotonic() - cancelled_at
        assert answer.stop_reason == "cancelled"
        print(f"cancel latency: {latency * 1000:.1f} ms")
        assert latency < 0.5, f"{latency:.3f} s"
        assert time.monotonic() - started < 3
        # The session takes the next prompt at once.
        provider.push(Reply().text("again"))
        again = await conn.prompt(session_id=new.session_id, prompt=[text_block("again")])
        assert again.stop_reason == "end_turn"
    shown = berth_json(home, "session", "show", new.session_id)
    assert shown["messages"][1]["content"].endswith("[interrupted]")


async def test_a_second_prompt_on_a_busy_session_is_refused(home, work, provider):
    provider.push(Reply().text(*["x"] * 40).slowly(0.05))
    editor = Editor()
    async with run_agent(editor, home, provider, work) as (conn, _, _):
        new = await conn.new_session(cwd=str(work))
        first = asyncio.ensure_future(conn.prompt(session_id=new.session_id, prompt=[text_block("one")]))
        await asyncio.sleep(0.3)
        with pytest.raises(RequestError) as refused:
            await conn.prompt(session_id=new.session_id, prompt=[text_block("two")])
        assert "still answering" in str(refused.value)
        assert refused.value.data == {"kind": "refused"}
        assert (await first).stop_reason == "end_turn"


async def test_embedded_files_go_into_the_model_input(home, work, provider):
    provider.push(Reply().text("seen"))
    editor = Editor()
    async with run_agent(editor, home, provider, work) as (conn, _, _):
        new = await conn.new_session(cwd=str(work))
        resource = resource_block(embedded_text_resource(f"file://{work}/notes.md", "the secret is 42\n"))
        await conn.prompt(session_id=new.session_id, prompt=[text_block("what is it?"), resource])
    user = provider.requests[0]["messages"][-1]
    sent = json_text(user)
    assert "what is it?" in sent and "the secret is 42" in sent and "notes.md" in sent


# A 1x1 PNG.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg=="


async def test_images_go_to_the_model_and_the_transcript_notes_them(home, work, provider):
    provider.push(Reply().text("a red dot"))
    provider.push(Reply().text("still a dot"))
    editor = Editor()
    async with run_agent(editor, home, provider, work) as (conn, _, _):
        new = await conn.new_session(cwd=str(work))
        screenshot = resource_block(embedded_blob_resource(f"file://{work}/shot.png", PNG, mime_type="image/png"))
        await conn.prompt(
            session_id=new.session_id,
            prompt=[text_block("what is this?"), image_block(PNG, "image/png"), screenshot],
        )
        await conn.prompt(session_id=new.session_id, prompt=[text_block("and now?")])
        # What no provider takes is refused, and nothing is sent.
        with pytest.raises(RequestError) as refused:
            await conn.prompt(session_id=new.session_id, prompt=[image_block(PNG, "image/tiff")])
        assert "PNG, JPEG, GIF or WebP" in str(refused.value)
        assert refused.value.data == {"kind": "invalid"}
        with pytest.raises(RequestError) as refused:
            await conn.prompt(session_id=new.session_id, prompt=[image_block("%%%", "image/png")])
        assert "not base64" in str(refused.value)
    assert len(provider.requests) == 2
    # Both images, as Anthropic documents them, before the text.
    content = provider.requests[0]["messages"][-1]["content"]
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
    assert content[:2] == [image, image]
    assert "what is this?" in json_text(provider.requests[0]["messages"][-1])
    # The transcript is text: it notes the images, and the next turn sees the note.
    shown = berth_json(home, "session", "show", new.session_id)
    first = shown["messages"][0]["content"]
    assert first.startswith("what is this?")
    assert first.count("[image attached: image/png, 1 KB]") == 2
    earlier = provider.requests[1]["messages"][0]
    assert "[image attached: image/png" in json_text(earlier)
    assert all(b.get("type") != "image" for b in earlier["content"])


async def test_stop_reasons_reach_the_client(home, work, provider):
    provider.push(Reply().text("cut").stop_reason("max_tokens"))
    provider.push(Reply().text("no").stop_reason("refusal"))
    editor = Editor()
    async with run_agent(editor, home, provider, work) as (conn, _, _):
        new = await conn.new_session(cwd=str(work))
        a = await conn.prompt(session_id=new.session_id, prompt=[text_block("a")])
        b = await conn.prompt(session_id=new.session_id, prompt=[text_block("b")])
    assert (a.stop_reason, b.stop_reason) == ("max_tokens", "refusal")


async def test_too_many_tool_rounds_stop_with_max_turn_requests(home, work, provider):
    (work / "a.txt").write_text("a\n")
    for i in range(3):
        provider.push(Reply().tool(f"toolu_{i}", "read_file", {"path": "a.txt"}))
    editor = Editor()
    env = {"BERTH_AGENT__MAX_TOOL_ITERATIONS": "2"}
    async with run_agent(editor, home, provider, work, env) as (conn, _, _):
        new = await conn.new_session(cwd=str(work))
        answer = await conn.prompt(session_id=new.session_id, prompt=[text_block("loop")])
    assert answer.stop_reason == "max_turn_requests"
    assert len(provider.requests) == 3


async def test_a_provider_error_is_an_error_answer(home, work, provider):
    provider.push(Reply().text("par").fail_with("overloaded_error", "Overloaded right now"))
    editor = Editor()
    async with run_agent(editor, home, provider, work) as (conn, _, _):
        new = await conn.new_session(cwd=str(work))
        with pytest.raises(RequestError) as failed:
            await conn.prompt(session_id=new.session_id, prompt=[text_block("a")])
        assert "Overloaded right now" in str(failed.value)


def json_text(message):
    content = message["content"]
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content)


async def test_the_clients_mcp_servers_join_the_tools(home, work, provider):
    from pathlib import Path
    import sys as _sys

    from acp.schema import McpServerStdio

    fixture = Path(__file__).resolve().parents[2] / "crates" / "berth-agent" / "tests" / "fixtures" / "mcp_fixture.py"
    provider.push(Reply().tool("toolu_m", "mcp__fx__echo", {"text": "ping from the model"}))
    provider.push(Reply().text("echoed"))
    editor = Editor()
    async with run_agent(editor, home, provider, work) as (conn, _, init):
        assert init.agent_capabilities.mcp_capabilities.http is True
        server = McpServerStdio(name="fx", command=_sys.executable, args=[str(fixture)], env=[])
        new = await conn.new_session(cwd=str(work), mcp_servers=[server])
        answer = await conn.prompt(session_id=new.session_id, prompt=[text_block("echo it")])
        assert answer.stop_reason == "end_turn"
    offered = [t["name"] for t in provider.requests[0]["tools"]]
    assert "mcp__fx__echo" in offered
    # Read-only by the server's own mark: no question asked; the result reached the model.
    assert editor.permissions == []
    sent = provider.requests[1]["messages"][-1]["content"]
    result = next(b for b in sent if b.get("type") == "tool_result")
    assert result["tool_use_id"] == "toolu_m" and not result.get("is_error")
    assert "ping from the model" in json.dumps(result)


async def test_the_first_prompt_titles_the_session_and_session_delete_removes_it(home, work, provider):
    provider.push(Reply().text("ok"))
    editor = Editor()
    async with run_agent(editor, home, provider, work) as (conn, _, init):
        assert init.agent_capabilities.session_capabilities.delete is not None
        new = await conn.new_session(cwd=str(work))
        await conn.prompt(session_id=new.session_id, prompt=[text_block("Plan the release\nin detail")])
        # The editor is told the title the first prompt gave, before the answer.
        infos = [u for s, u in editor.updates if u.session_update == "session_info_update"]
        assert [i.title for i in infos] == ["Plan the release"]
        # session/delete (the SDK has no method for it yet: sent as the protocol says).
        await conn._conn.send_request("session/delete", {"sessionId": new.session_id})
        listed = await conn.list_sessions(cwd=str(work))
        assert listed.sessions == []
        with pytest.raises(RequestError):
            await conn._conn.send_request("session/delete", {"sessionId": new.session_id})
    # Gone from berth with its transcript; its workspace stays.
    assert berth_json(home, "session", "list") == []
    assert [w["id"] for w in berth_json(home, "workspace", "list")] == ["default"]
