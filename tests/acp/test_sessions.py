"""Sessions of `berth acp` outlive its process: `session/load` in a new process replays the
transcript, `session/list` pages through the home's sessions (filtered by folder), resume and
close work, and the model is a config option. Phone apps name their workspace with
`_meta.sessionId`; hostile ids are refused before they touch a path.
"""

import subprocess

import pytest
from acp import RequestError, text_block

from conftest import BERTH, Editor, Reply, agent_env, berth, berth_json, run_agent, texts

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
        replay = [
            (u.session_update, u.content.text)
            for _, u in editor.updates
            if u.session_update != "available_commands_update"
        ]
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


async def test_acp_and_mcp_errors_carry_the_same_kind(home, work, provider):
    """One failure, two protocols, one spelling of its kind: ACP's error data and MCP's."""
    import os

    from mcp import ClientSession, MCPError, StdioServerParameters
    from mcp.client.stdio import stdio_client

    # A session whose workspace config names no key: a turn cannot start (not configured, as
    # MCP's `session_run` and the CLI's exit status 7 say it).
    berth(home, "workspace", "create", "w")
    sid = berth(home, "session", "new", "-w", "w").strip()
    acp_kinds = {}
    async with run_agent(Editor(), home, provider, work) as (conn, _, _):
        for name, session_id in [("missing", "no-such-session"), ("hostile", "..")]:
            with pytest.raises(RequestError) as e:
                await conn.load_session(cwd=str(work), session_id=session_id, mcp_servers=[])
            acp_kinds[name] = e.value.data["kind"]
    async with run_agent(Editor(), home, provider, work, {"ANTHROPIC_API_KEY": ""}) as (conn, _, _):
        await conn.load_session(cwd=str(work), session_id=sid, mcp_servers=[])
        with pytest.raises(RequestError) as e:
            await conn.prompt(session_id=sid, prompt=[text_block("hi")])
        acp_kinds["no key"] = e.value.data["kind"]
        assert "ANTHROPIC_API_KEY" in str(e.value)
        # A new session no prompt could be answered in is refused at once, and not made.
        before = berth(home, "session", "list", "--all", "--json")
        with pytest.raises(RequestError) as e:
            await conn.new_session(cwd=str(work))
        assert e.value.data["kind"] == "not_configured", e.value
        assert "ANTHROPIC_API_KEY" in str(e.value)
        assert berth(home, "session", "list", "--all", "--json") == before
    mcp_kinds = {}
    params = StdioServerParameters(
        command=BERTH, args=["mcp"], env={**os.environ, "BERTH_HOME": str(home)}, cwd=str(work)
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            for name, session_id in [("missing", "no-such-session"), ("hostile", "..")]:
                with pytest.raises(MCPError) as e:
                    await s.read_resource(f"berth://session/{session_id}")
                mcp_kinds[name] = e.value.data["kind"]
                r = await s.call_tool("resource_session_show", {"session_identifier": session_id})
                assert r.is_error and r.structured_content["error"]["kind"] == mcp_kinds[name]
    assert acp_kinds["missing"] == mcp_kinds["missing"] == "not_found"
    assert acp_kinds["hostile"] == mcp_kinds["hostile"] == "invalid"
    assert acp_kinds["no key"] == "not_configured"


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
        # A cursor is a page's last id, checked as every front end checks one.
        for bad in ["../etc", "not a cursor"]:
            with pytest.raises(RequestError) as refused:
                await conn.list_sessions(cursor=bad)
            assert refused.value.data == {"kind": "invalid"}, bad
            assert "bad cursor" in str(refused.value)
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
        assert "claude/test-model" in str(bad.value)
        assert bad.value.data == {"kind": "invalid"}


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


def openai_env(provider):
    """A second provider the session can switch to: OpenAI, on the stand-in's OpenAI path."""
    return {
        "OPENAI_API_KEY": "test-openai-key",
        "BERTH_PROVIDERS__OPENAI__BASE_URL": f"{provider.url}/v1",
        "BERTH_PROVIDERS__OPENAI__MODEL": "gpt-test",
    }


def chat_p(home, provider, work, *args):
    """`berth chat -p` with the same environment `berth acp` gets."""
    return subprocess.run(
        [BERTH, "chat", *args],
        env=agent_env(home, provider, openai_env(provider)),
        cwd=str(work),
        capture_output=True,
        text=True,
        timeout=60,
    )


async def test_a_model_chosen_in_an_editor_is_the_one_a_script_calls(home, work, provider):
    env = openai_env(provider)
    async with run_agent(Editor(), home, provider, work, env) as (conn, _, _):
        new = await conn.new_session(cwd=str(work))
        await conn.set_config_option(config_id="model", session_id=new.session_id, value="openai/gpt-test")
    provider.push(Reply().text("from gpt"))
    done = chat_p(home, provider, work, "-p", "hello", "--session", new.session_id)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "from gpt\n"
    assert provider.paths[-1] == "/v1/chat/completions"
    assert provider.requests[-1]["model"] == "gpt-test"
    # A new session from the same script follows the config: the kept choice is the session's.
    provider.push(Reply().text("from claude"))
    done = chat_p(home, provider, work, "-p", "hello")
    assert done.returncode == 0, done.stderr
    assert provider.paths[-1] == "/v1/messages"
    assert provider.requests[-1]["model"] == "test-model"


async def test_a_model_chosen_in_chat_is_the_one_acp_loads_and_calls(home, work, provider):
    provider.push(Reply().text("first"))
    done = chat_p(home, provider, work, "-p", "hello")
    assert done.returncode == 0, done.stderr
    [session] = berth_json(home, "session", "list")
    # `--model` keeps the choice as `/model` does (one ops call behind both).
    provider.push(Reply().text("second"))
    done = chat_p(home, provider, work, "-p", "again", "--session", session["id"], "--model", "openai")
    assert done.returncode == 0, done.stderr
    assert provider.paths[-1] == "/v1/chat/completions"
    assert provider.requests[-1]["model"] == "gpt-test"
    provider.push(Reply().text("third"))
    async with run_agent(Editor(), home, provider, work, openai_env(provider)) as (conn, _, _):
        loaded = await conn.load_session(cwd=str(work), session_id=session["id"], mcp_servers=[])
        assert loaded.config_options[0].current_value == "openai/gpt-test"
        await conn.prompt(session_id=session["id"], prompt=[text_block("and now?")])
    assert provider.paths[-1] == "/v1/chat/completions"
    assert provider.requests[-1]["model"] == "gpt-test"
    # Without the OpenAI key the choice is set aside, with the same warning everywhere.
    provider.push(Reply().text("fourth"))
    env = agent_env(home, provider)
    done = subprocess.run(
        [BERTH, "chat", "-p", "last", "--session", session["id"]],
        env=env, cwd=str(work), capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert provider.paths[-1] == "/v1/messages"
    assert "chosen model openai/gpt-test is not offered" in done.stderr, done.stderr


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
