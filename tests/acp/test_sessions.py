"""Sessions of `berth acp` outlive its process: `session/load` in a new process replays the
transcript, `session/list` pages through the home's sessions (filtered by folder), resume and
close work, and the model is a config option. Phone apps name their workspace with
`_meta.sessionId`; hostile ids are refused before they touch a path.
"""

import pytest
from acp import RequestError, text_block

from conftest import Editor, Reply, berth, berth_json, run_agent, texts

pytestmark = pytest.mark.anyio


async def test_load_in_a_new_process_replays_prompt_and_answer(home, work, provider):
    provider.push(Reply().text("Paris ", "is the capital."))
    async with run_agent(Editor(), home, provider, work) as (conn, _, _):
        new = await conn.new_session(cwd=str(work))
        await conn.prompt(session_id=new.session_id, prompt=[text_block("capital of France?")])
    # A new process: nothing from the first one is left in memory.
    provider.push(Reply().text("Berlin."))
    editor = Editor()
    async with run_agent(editor, home, provider, work) as (conn, _, _):
        loaded = await conn.load_session(cwd=str(work), session_id=new.session_id, mcp_servers=[])
        assert loaded is not None
        replay = [(u.session_update, u.content.text) for _, u in editor.updates]
        assert replay == [
            ("user_message_chunk", "capital of France?"),
            ("agent_message_chunk", "Paris is the capital."),
        ]
        # And the conversation goes on with that history.
        await conn.prompt(session_id=new.session_id, prompt=[text_block("and Germany?")])
    history = provider.requests[-1]["messages"]
    assert [m["role"] for m in history] == ["user", "assistant", "user"]
    assert "Paris is the capital." in str(history[1]["content"])


async def test_an_unknown_or_hostile_session_id_cannot_be_loaded(home, work, provider):
    async with run_agent(Editor(), home, provider, work) as (conn, _, _):
        with pytest.raises(RequestError) as missing:
            await conn.load_session(cwd=str(work), session_id="no-such-session", mcp_servers=[])
        assert missing.value.code == -32002
        for hostile in ["..", "../../etc", "/etc/passwd"]:
            with pytest.raises(RequestError) as bad:
                await conn.load_session(cwd=str(work), session_id=hostile, mcp_servers=[])
            assert bad.value.code == -32602, hostile
        # A prompt for a session never opened here is refused too.
        with pytest.raises(RequestError) as closed:
            await conn.prompt(session_id="not-open", prompt=[text_block("hi")])
        assert closed.value.code == -32002


async def test_list_pages_and_filters_by_folder(home, work, tmp_path, provider):
    other = tmp_path / "other"
    other.mkdir()
    async with run_agent(Editor(), home, provider, work) as (conn, _, _):
        here = [(await conn.new_session(cwd=str(work))).session_id for _ in range(3)]
        there = (await conn.new_session(cwd=str(other))).session_id
        listed = await conn.list_sessions(cwd=str(work))
        assert sorted(s.session_id for s in listed.sessions) == sorted(here)
        assert all(s.cwd == str(work) for s in listed.sessions)
        everything = await conn.list_sessions()
        ids = {s.session_id for s in everything.sessions}
        assert set(here) | {there} <= ids
        assert everything.next_cursor is None
    # The same sessions, as the CLI lists them.
    cli = {s["id"] for s in berth_json(home, "session", "list")}
    assert set(here) | {there} <= cli


async def test_a_session_is_titled_after_its_first_prompt(home, work, provider):
    provider.push(Reply().text("ok"))
    provider.push(Reply().text("ok again"))
    async with run_agent(Editor(), home, provider, work) as (conn, _, _):
        new = await conn.new_session(cwd=str(work))
        untitled = await conn.list_sessions(cwd=str(work))
        assert [s.title for s in untitled.sessions] == [None]
        await conn.prompt(session_id=new.session_id, prompt=[text_block("Fix the parser\nthen run the tests")])
        await conn.prompt(session_id=new.session_id, prompt=[text_block("and the docs")])
        listed = await conn.list_sessions(cwd=str(work))
        assert [s.title for s in listed.sessions] == ["Fix the parser"]
    # The title is the session's, as every front end sees it; later prompts keep it.
    assert berth_json(home, "session", "show", new.session_id)["session"]["title"] == "Fix the parser"


async def test_list_pages_with_a_cursor(home, work, provider):
    # 105 sessions through the CLI, then pages of at most 100 through ACP.
    berth(home, "workspace", "create", "pages", "--plain")
    for _ in range(105):
        berth(home, "session", "new", "-w", "pages")
    async with run_agent(Editor(), home, provider, work) as (conn, _, _):
        first = await conn.list_sessions()
        assert len(first.sessions) == 100 and first.next_cursor
        second = await conn.list_sessions(cursor=first.next_cursor)
        assert len(second.sessions) == 5 and second.next_cursor is None
        seen = [s.session_id for s in first.sessions + second.sessions]
        assert len(set(seen)) == 105


async def test_resume_and_close(home, work, provider):
    provider.push(Reply().text("one"))
    async with run_agent(Editor(), home, provider, work) as (conn, _, _):
        new = await conn.new_session(cwd=str(work))
        await conn.prompt(session_id=new.session_id, prompt=[text_block("first")])
    provider.push(Reply().text("two"))
    editor = Editor()
    async with run_agent(editor, home, provider, work) as (conn, _, _):
        await conn.resume_session(cwd=str(work), session_id=new.session_id, mcp_servers=[])
        # Resume replays nothing, and the session takes prompts.
        assert editor.updates == []
        await conn.prompt(session_id=new.session_id, prompt=[text_block("second")])
        assert texts(editor) == "two"
        await conn.close_session(session_id=new.session_id)
        with pytest.raises(RequestError):
            await conn.prompt(session_id=new.session_id, prompt=[text_block("third")])
    shown = berth_json(home, "session", "show", new.session_id)
    assert [m["content"] for m in shown["messages"]] == ["first", "one", "second", "two"]


async def test_the_model_is_a_config_option(home, work, provider):
    async with run_agent(Editor(), home, provider, work) as (conn, _, _):
        new = await conn.new_session(cwd=str(work))
        [model] = [o for o in new.config_options if o.id == "model"]
        assert model.category == "model"
        assert model.current_value == "claude/test-model"
        with pytest.raises(RequestError) as bad:
            await conn.set_config_option(config_id="model", session_id=new.session_id, value="nope/x")
        assert "claude/test-model" in str(bad.value.data or bad.value)


async def test_a_chosen_model_outlives_the_process(home, work, provider):
    env = {"OPENAI_API_KEY": "test-openai-key"}
    async with run_agent(Editor(), home, provider, work, env) as (conn, _, _):
        new = await conn.new_session(cwd=str(work))
        [model] = [o for o in new.config_options if o.id == "model"]
        values = [o.value for o in model.options]
        assert values == ["claude/test-model", "openai/gpt-4.1"]
        changed = await conn.set_config_option(
            config_id="model", session_id=new.session_id, value="openai/gpt-4.1"
        )
        assert changed.config_options[0].current_value == "openai/gpt-4.1"
    async with run_agent(Editor(), home, provider, work, env) as (conn, _, _):
        loaded = await conn.load_session(cwd=str(work), session_id=new.session_id, mcp_servers=[])
        assert loaded.config_options[0].current_value == "openai/gpt-4.1"
    # Without the OpenAI key the config no longer offers it: the configured model again.
    async with run_agent(Editor(), home, provider, work) as (conn, _, _):
        loaded = await conn.load_session(cwd=str(work), session_id=new.session_id, mcp_servers=[])
        assert loaded.config_options[0].current_value == "claude/test-model"


async def test_a_phone_id_makes_one_workspace_and_one_binding(home, work, provider):
    provider.push(Reply().text("hello phone"))
    async with run_agent(Editor(), home, provider, work) as (conn, _, _):
        first = await conn.new_session(cwd="/", sessionId="phone-1234")
        assert first.session_id == "phone-1234"
        await conn.prompt(session_id=first.session_id, prompt=[text_block("hi")])
        again = await conn.new_session(cwd="/", sessionId="phone-1234")
        assert again.session_id == "phone-1234"
    bindings = berth_json(home, "binding", "list")
    assert [(b["device"], b["workspace"]) for b in bindings] == [("phone-1234", "phone-1234")]
    ws = berth_json(home, "workspace", "show", "phone-1234")
    assert ws["id"] == "phone-1234"
    # The same session continues: its transcript has the first exchange.
    shown = berth_json(home, "session", "show", "phone-1234")
    assert shown["session"]["workspace_id"] == "phone-1234"
    assert [m["content"] for m in shown["messages"]] == ["hi", "hello phone"]
    # A new process, the same id: still one binding.
    async with run_agent(Editor(), home, provider, work) as (conn, _, _):
        assert (await conn.new_session(cwd="/", sessionId="phone-1234")).session_id == "phone-1234"
    assert len(berth_json(home, "binding", "list")) == 1


async def test_a_phone_id_a_session_was_given_keeps_that_session(home, work, provider):
    async with run_agent(Editor(), home, provider, work) as (conn, _, _):
        # First launch: no id yet; the app keeps the session id it is given.
        given = (await conn.new_session(cwd=str(work))).session_id
        # Restart: the app sends it back.
        again = await conn.new_session(cwd="/", sessionId=given)
        assert again.session_id == given
    bindings = berth_json(home, "binding", "list")
    assert [(b["device"], b["workspace"]) for b in bindings] == [(given, "default")]


async def test_a_device_id_resolves_through_the_bindings(home, work, provider):
    berth(home, "workspace", "create", "tablet-ws", "--plain")
    berth(home, "binding", "set", "my-tablet", "tablet-ws")
    async with run_agent(Editor(), home, provider, work) as (conn, _, _):
        new = await conn.new_session(cwd="/", deviceId="my-tablet")
        fresh = await conn.new_session(cwd="/", deviceId="new-phone")
    ws = berth_json(home, "workspace", "show", "tablet-ws")
    assert berth_json(home, "session", "show", new.session_id)["session"]["workspace_id"] == ws["id"]
    bound = {b["device"]: b["workspace"] for b in berth_json(home, "binding", "list")}
    assert bound["my-tablet"] == ws["id"]
    assert berth_json(home, "session", "show", fresh.session_id)["session"]["workspace_id"] == bound["new-phone"]


async def test_hostile_phone_ids_are_refused_and_touch_nothing(home, work, tmp_path, provider):
    async with run_agent(Editor(), home, provider, work) as (conn, _, _):
        for hostile in ["..", "/etc/passwd", "a/../../b", "", ".hidden", "a b"]:
            with pytest.raises(RequestError) as refused:
                await conn.new_session(cwd="/", sessionId=hostile)
            assert refused.value.code == -32602, hostile
        with pytest.raises(RequestError):
            await conn.new_session(cwd="/", sessionId=42)
    assert berth_json(home, "binding", "list") == []
    names = [w["id"] for w in berth_json(home, "workspace", "list")]
    assert names == [] or names == ["default"]
    assert not (tmp_path / "b").exists() and not (home.parent / "b").exists()
    assert not (home / "workspaces" / "passwd").exists()


async def test_a_relative_or_missing_cwd_is_refused(home, work, provider):
    async with run_agent(Editor(), home, provider, work) as (conn, _, _):
        for cwd in ["relative/dir", str(work / "missing")]:
            with pytest.raises(RequestError) as bad:
                await conn.new_session(cwd=cwd)
            assert bad.value.code == -32602
