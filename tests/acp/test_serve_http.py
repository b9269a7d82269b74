"""`berth serve`'s `/acp` over plain HTTP, ACP's other remote transport (POST for the
client's messages, server-sent events for the agent's), with the official ACP Python SDK's
Streamable HTTP client; and, with raw HTTP, the rules it shares with the WebSocket: the token,
the prompt rate, the connection cap, the message size, a connection id that answers only to
the token that opened it, and connections that end when their token is revoked or their
client goes silent.
"""

import asyncio
import contextlib
import json

import httpx
import pytest
from acp import connect_to_agent, text_block
from acp.http import create_http_stream

from conftest import Editor, Reply, berth, berth_json, texts
from test_serve import TOKEN, serving, token_for

pytestmark = pytest.mark.anyio


@contextlib.asynccontextmanager
async def http_client(editor, address, token=TOKEN):
    """An ACP client over plain HTTP, initialized."""
    transport = create_http_stream(f"http://{address}/acp", headers={"Authorization": f"Bearer {token}"})
    conn = connect_to_agent(editor, transport)
    try:
        await conn.initialize(protocol_version=1, client_capabilities=editor.capabilities())
        yield conn
    finally:
        await conn.close()


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}


def post(address, body, token=TOKEN, connection=None):
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    if connection:
        headers["Acp-Connection-Id"] = connection
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return httpx.post(f"http://{address}/acp", content=data, headers=headers, timeout=10)


async def test_a_whole_acp_session_over_plain_http(home, work, provider):
    provider.push(
        Reply().text("Writing.").tool("toolu_1", "write_file", {"path": "out.txt", "content": "over http\n"})
    )
    provider.push(Reply().text("Written."))
    provider.push(Reply().text("Forked."))
    editor = Editor(choice="allow_once")
    with serving(home, provider, work) as address:
        async with http_client(editor, address) as conn:
            new = await conn.new_session(cwd=str(work))
            answer = await conn.prompt(session_id=new.session_id, prompt=[text_block("write out.txt")])
            assert answer.stop_reason == "end_turn"
            # The permission was asked over the event stream and answered by POST.
            assert len(editor.permissions) == 1
            assert (work / "out.txt").read_text() == "over http\n"
            assert texts(editor, session_id=new.session_id) == "Writing.Written."
            fork = await conn.fork_session(session_id=new.session_id, cwd=str(work))
            answer = await conn.prompt(session_id=fork.session_id, prompt=[text_block("go on")])
            assert answer.stop_reason == "end_turn"
        # Another connection, over the WebSocket of the same path, loads what HTTP made.
        from test_serve import client

        reader = Editor()
        async with client(reader, address) as conn:
            await conn.load_session(session_id=new.session_id, cwd=str(work))
            assert texts(reader, "user_message_chunk").startswith("write out.txt")
    shown = berth_json(home, "session", "show", fork.session_id)
    assert [m["content"] for m in shown["messages"]][-2:] == ["go on", "Forked."]


def test_the_token_size_and_connection_rules_hold_over_http(home, work, provider):
    phone = token_for(home, "phone")
    with serving(home, provider, work, "--max-connections", "1", "--max-message-bytes", "4096") as address:
        # No token, a wrong one: 401, nothing made.
        assert httpx.post(f"http://{address}/acp", json=INITIALIZE, timeout=10).status_code == 401
        assert post(address, INITIALIZE, token="wrong").status_code == 401
        # Over the size limit: 413.
        big = dict(INITIALIZE, params={"protocolVersion": 1, "pad": "x" * 8000})
        assert post(address, big).status_code == 413
        opened = post(address, INITIALIZE)
        assert opened.status_code == 200, opened.text
        connection = opened.headers["acp-connection-id"]
        assert opened.json()["result"]["agentCapabilities"]["sessionCapabilities"]["fork"] == {}
        # The one slot is taken: the next initialize waits its turn (503).
        assert post(address, INITIALIZE, token=phone).status_code == 503
        # The connection answers to the token that opened it, not to another's.
        listing = {"jsonrpc": "2.0", "id": 2, "method": "session/list", "params": {}}
        assert post(address, listing, token=phone, connection=connection).status_code == 404
        assert post(address, listing, connection=connection).status_code == 202
        gone = httpx.delete(
            f"http://{address}/acp",
            headers={"Authorization": f"Bearer {TOKEN}", "Acp-Connection-Id": connection},
            timeout=10,
        )
        assert gone.status_code in (200, 202, 204), gone.text
        # Its slot is free again.
        for _ in range(50):
            if post(address, INITIALIZE, token=phone).status_code == 200:
                break
            import time

            time.sleep(0.1)
        else:
            raise AssertionError("the slot of a deleted connection was not given back")


async def test_prompts_over_the_rate_are_refused_over_http_too(home, work, provider):
    provider.push(Reply().text("one"))
    with serving(home, provider, work, "--max-prompts-per-minute", "1") as address:
        async with http_client(Editor(), address) as conn:
            new = await conn.new_session(cwd=str(work))
            answer = await conn.prompt(session_id=new.session_id, prompt=[text_block("hi")])
            assert answer.stop_reason == "end_turn"
            with pytest.raises(Exception, match="prompts of the last minute"):
                await conn.prompt(session_id=new.session_id, prompt=[text_block("again")])
    assert len(provider.requests) == 1
    shown = berth_json(home, "session", "show", new.session_id)
    assert [m["content"] for m in shown["messages"]] == ["hi", "one"]


async def test_a_revoked_token_or_a_silent_client_ends_its_http_connection(home, work, provider):
    """Each ends its connection, which gives its slot back (one slot here)."""
    made = json.loads(berth(home, "token", "create", "--admin", "laptop", "--json"))
    listing = {"jsonrpc": "2.0", "id": 2, "method": "session/list", "params": {}}

    async def slot_freed():
        for _ in range(100):
            opened = post(address, INITIALIZE)
            if opened.status_code == 200:
                return opened.headers["acp-connection-id"]
            assert opened.status_code == 503, opened.text
            await asyncio.sleep(0.1)
        raise AssertionError("the connection kept its slot")

    with serving(home, provider, work, "--max-connections", "1", "--acp-http-idle", "2") as address:
        opened = post(address, INITIALIZE, token=made["token"])
        laptop = opened.headers["acp-connection-id"]
        assert post(address, listing, token=made["token"], connection=laptop).status_code == 202
        assert post(address, INITIALIZE).status_code == 503
        berth(home, "token", "revoke", "laptop")
        # Refused at the door at once; its connection ends within a second or so.
        assert post(address, listing, token=made["token"], connection=laptop).status_code == 401
        mine = await slot_freed()

        # A client that says nothing for longer than --acp-http-idle loses its connection:
        # its slot comes back (asked for with new connections, which leave this one silent),
        # and its id is gone.
        assert post(address, listing, connection=mine).status_code == 202
        await asyncio.sleep(2)
        await slot_freed()
        assert post(address, listing, connection=mine).status_code == 404
