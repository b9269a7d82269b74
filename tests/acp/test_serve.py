"""`berth serve` over the network, with independent clients: the official ACP Python SDK's
WebSocket transport on `/acp` (a whole session: a permission, a write, a cancel, a load in a
new connection), the official MCP Python SDK on `/mcp` of the same server, and plain HTTP
for `/healthz`, the token and the Origin rules.
"""

import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import websockets
from acp import connect_to_agent, text_block
from acp.schema import HttpMcpServer, McpServerStdio
from acp.ws import create_websocket_stream

from conftest import BERTH, Editor, Reply, agent_env, berth, berth_json, texts

pytestmark = pytest.mark.anyio

TOKEN = "serve-test-token"


def start_serving(home, provider, cwd, *args, token=TOKEN):
    """`berth serve` on a free loopback port: (process, address `127.0.0.1:PORT`)."""
    env = agent_env(home, provider)
    if token:
        env["BERTH_SERVE_TOKEN"] = token
    proc = subprocess.Popen(
        [BERTH, "serve", "--listen", "127.0.0.1:0", *args],
        env=env,
        cwd=str(cwd),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stderr.readline()
    found = re.search(r"wss?://([0-9.]+:[0-9]+)/acp", line)
    if not found:
        proc.kill()
        raise AssertionError(f"berth serve said: {line!r}")
    return proc, found.group(1)


@contextlib.contextmanager
def serving(home, provider, cwd, *args, token=TOKEN):
    """`berth serve` on a free loopback port; yields its address (`127.0.0.1:PORT`)."""
    proc, address = start_serving(home, provider, cwd, *args, token=token)
    try:
        yield address
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@contextlib.asynccontextmanager
async def client(editor, address, token=TOKEN, scheme="ws"):
    """An ACP client over the WebSocket, initialized."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    transport = await create_websocket_stream(f"{scheme}://{address}/acp", headers=headers)
    conn = connect_to_agent(editor, transport)
    try:
        await conn.initialize(protocol_version=1, client_capabilities=editor.capabilities())
        yield conn
    finally:
        await conn.close()


def http_status(url, headers=None):
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


async def test_a_whole_acp_session_over_a_websocket(home, work, provider):
    provider.push(
        Reply().text("Writing.").tool("toolu_1", "write_file", {"path": "out.txt", "content": "over the network\n"})
    )
    provider.push(Reply().text("Written."))
    provider.push(Reply().text(*[f"w{i} " for i in range(200)]).slowly(0.05))
    editor = Editor(choice="allow_once")
    first = asyncio.Event()
    with serving(home, provider, work) as address:
        async with client(editor, address) as conn:
            new = await conn.new_session(cwd=str(work))
            answer = await conn.prompt(session_id=new.session_id, prompt=[text_block("write out.txt")])
            assert answer.stop_reason == "end_turn"
            # The permission was asked of this client, over the socket, and its answer wrote.
            assert len(editor.permissions) == 1
            assert (work / "out.txt").read_text() == "over the network\n"
            assert texts(editor) == "Writing.Written."
            # A cancel ends a long answer.
            editor.on_update = lambda u: first.set() if u.session_update == "agent_message_chunk" else None
            prompt = asyncio.ensure_future(conn.prompt(session_id=new.session_id, prompt=[text_block("talk")]))
            await asyncio.wait_for(first.wait(), 10)
            await conn.cancel(session_id=new.session_id)
            cancelled = await asyncio.wait_for(prompt, 5)
            assert cancelled.stop_reason == "cancelled"
        # A new connection loads the session: the transcript replays, the tool call with it.
        reader = Editor()
        async with client(reader, address) as conn:
            await conn.load_session(session_id=new.session_id, cwd=str(work))
            replayed = texts(reader, "user_message_chunk")
            assert replayed.startswith("write out.txt")
            assert "tool_call" in reader.kinds()
            listed = await conn.list_sessions(cwd=str(work))
            assert [s.session_id for s in listed.sessions] == [new.session_id]
    shown = berth_json(home, "session", "show", new.session_id)
    roles = [m["role"] for m in shown["messages"]]
    assert roles[:4] == ["user", "assistant", "tool", "assistant"], roles
    assert shown["messages"][-1]["content"].endswith("[interrupted]")


async def test_a_prompt_hundreds_of_times_the_sockets_read_buffer_arrives_whole(home, work, provider):
    """The server reads a WebSocket 8 KiB at a time (tungstenite zeroes its read buffer before
    every read, so a large one costs every connection at every read); a 2 MB prompt still
    reaches the model whole and in order, and the transcript keeps it."""
    prompt = " ".join(f"word{i:07d}" for i in range(170_000))
    assert len(prompt) > 2_000_000
    provider.push(Reply().text("Read it."))
    editor = Editor()
    with serving(home, provider, work) as address:
        async with client(editor, address) as conn:
            new = await conn.new_session(cwd=str(work))
            answer = await conn.prompt(session_id=new.session_id, prompt=[text_block(prompt)])
            assert answer.stop_reason == "end_turn"
            assert texts(editor) == "Read it."
    asked = json.dumps(provider.requests[-1])
    assert prompt in asked
    shown = berth_json(home, "session", "show", new.session_id)
    assert [m["content"] for m in shown["messages"] if m["role"] == "user"] == [prompt]


async def test_mcp_on_the_same_server(home, work, provider):
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    berth_json(home, "workspace", "create", "served")
    with serving(home, provider, work) as address:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with create_mcp_http_client(headers=headers) as http, streamable_http_client(
            f"http://{address}/mcp", http_client=http
        ) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = await session.list_tools()
                assert "resource_workspace_list" in [t.name for t in tools.tools]
                listed = await session.call_tool("resource_workspace_list", {})
                assert not listed.is_error
                names = [w["name"] for w in listed.structured_content["workspaces"]]
                assert names == ["served"]


async def test_tokens_origins_and_health(home, work, provider):
    with serving(home, provider, work) as address:
        # The health check needs no token and says nothing more.
        assert http_status(f"http://{address}/healthz") == (200, '{"status":"ok"}\n')
        # Without the token, or with another: 401, for both endpoints.
        status, body = http_status(f"http://{address}/mcp")
        assert status == 401 and "Bearer" in body
        status, _ = http_status(f"http://{address}/acp", {"Authorization": "Bearer wrong"})
        assert status == 401
        with pytest.raises(Exception, match="401"):
            async with client(Editor(), address, token="wrong"):
                pass
        # A page of another origin: 403, even with the token.
        status, body = http_status(
            f"http://{address}/acp",
            {"Authorization": f"Bearer {TOKEN}", "Origin": "https://evil.example.com"},
        )
        assert status == 403 and "Origin" in body
        # A Host this server does not answer to (DNS rebinding): 403.
        status, _ = http_status(
            f"http://{address}/healthz".replace("healthz", "mcp"),
            {"Authorization": f"Bearer {TOKEN}", "Host": "evil.example.com"},
        )
        assert status == 403


def test_listening_off_loopback_without_a_token_is_refused(home, work, provider):
    env = agent_env(home, provider)
    env.pop("BERTH_SERVE_TOKEN", None)
    done = subprocess.run(
        [BERTH, "serve", "--listen", "0.0.0.0:0"],
        env=env,
        cwd=str(work),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2, done.stderr
    assert "without a token" in done.stderr


async def test_a_client_gone_mid_turn_finds_the_whole_answer_when_it_comes_back(home, work, provider):
    # 2 s of answer: 40 chunks, 50 ms apart; the client goes away after the first.
    chunks = [f"w{i} " for i in range(40)]
    provider.push(Reply().text(*chunks).slowly(0.05))
    editor = Editor()
    first = asyncio.Event()
    editor.on_update = lambda u: first.set() if u.session_update == "agent_message_chunk" else None
    with serving(home, provider, work) as address:
        async with client(editor, address) as conn:
            new = await conn.new_session(cwd=str(work))
            orphan = asyncio.ensure_future(conn.prompt(session_id=new.session_id, prompt=[text_block("talk")]))
            await asyncio.wait_for(first.wait(), 10)
        # Its answer never comes to this client: the connection is gone.
        with pytest.raises(ConnectionError):
            await orphan
        # The turn goes on without its client and keeps its whole answer.
        for _ in range(100):
            shown = berth_json(home, "session", "show", new.session_id)
            if len(shown["messages"]) == 2:
                break
            await asyncio.sleep(0.1)
        assert [m["content"] for m in shown["messages"]] == ["talk", "".join(chunks)]
        # The client that comes back sees it, and the session takes its next prompt.
        back = Editor()
        async with client(back, address) as conn:
            await conn.load_session(session_id=new.session_id, cwd=str(work))
            assert texts(back) == "".join(chunks)
            provider.push(Reply().text("again"))
            again = await conn.prompt(session_id=new.session_id, prompt=[text_block("again")])
            assert again.stop_reason == "end_turn"


async def test_a_load_mid_answer_follows_the_turn_and_the_transcript_holds_one_answer(home, work, provider):
    """A second connection of the same device reloads the session while the answer streams
    (a phone that reconnects): it is shown what is durable, then the live turn, and the
    transcript ends with the answer once, whole, never a cut-off copy beside it."""
    phone = token_for(home, "phone")
    # 3 s of answer: 60 chunks, 50 ms apart; the answer is kept aside every 300 ms meanwhile.
    chunks = [f"w{i} " for i in range(60)]
    provider.push(Reply().text(*chunks).slowly(0.05))
    first_conn, second_conn = Editor(), Editor()
    first = asyncio.Event()
    first_conn.on_update = lambda u: first.set() if u.session_update == "agent_message_chunk" else None
    with serving(home, provider, work) as address:
        async with client(first_conn, address, token=phone) as a, client(second_conn, address, token=phone) as b:
            new = await a.new_session(cwd=str(work))
            running = asyncio.ensure_future(a.prompt(session_id=new.session_id, prompt=[text_block("talk")]))
            await asyncio.wait_for(first.wait(), 10)
            # Past a kept-aside write of the live answer.
            await asyncio.sleep(0.8)
            await b.load_session(session_id=new.session_id, cwd=str(work))
            answer = await asyncio.wait_for(running, 20)
            assert answer.stop_reason == "end_turn"
            # The reloading connection saw the prompt, then the whole answer as it streamed.
            for _ in range(50):
                if texts(second_conn) == "".join(chunks):
                    break
                await asyncio.sleep(0.1)
            assert texts(second_conn, "user_message_chunk") == "talk"
            assert texts(second_conn) == "".join(chunks)
            # The session takes its next prompt from either connection.
            provider.push(Reply().text("next"))
            again = await b.prompt(session_id=new.session_id, prompt=[text_block("again")])
            assert again.stop_reason == "end_turn"
    shown = berth_json(home, "session", "show", new.session_id)
    contents = [m["content"] for m in shown["messages"]]
    assert contents == ["talk", "".join(chunks), "again", "next"], contents


def token_for(home, device):
    return json.loads(berth(home, "token", "create", "--device", device, "--json"))["token"]


async def test_a_device_token_reaches_its_own_workspace_only_and_revoking_it_cuts_it_off(
    home, work, provider
):
    phone = token_for(home, "phone")
    tablet = token_for(home, "tablet")
    # The file keeps neither token.
    kept = (home / "tokens.json").read_text()
    assert phone not in kept and tablet not in kept
    provider.push(Reply().text("hello phone"))
    with serving(home, provider, work) as address:
        tablet_editor = Editor()
        async with client(tablet_editor, address, token=tablet) as conn:
            theirs = await conn.new_session(cwd="/")
        editor = Editor()
        async with client(editor, address, token=phone) as conn:
            # A path the phone sends means nothing here: the session works in the phone's
            # workspace, which its token resolves (bound on first use).
            mine = await conn.new_session(cwd="/etc")
            shown = berth_json(home, "session", "show", mine.session_id)["session"]
            bound = berth(home, "binding", "resolve", "phone").strip()
            assert shown["workspace_id"] == bound
            assert shown["cwd"] != "/etc"
            answer = await conn.prompt(session_id=mine.session_id, prompt=[text_block("hi")])
            assert answer.stop_reason == "end_turn"
            # It names no other device, and sees no other device's session.
            with pytest.raises(Exception, match="cannot name another"):
                await conn.new_session(cwd="/", deviceId="tablet")
            listed = await conn.list_sessions()
            assert [s.session_id for s in listed.sessions] == [mine.session_id]
            with pytest.raises(Exception):
                await conn.load_session(session_id=theirs.session_id, cwd="/")
            # /mcp is the admin's.
            status, body = http_status(f"http://{address}/mcp", {"Authorization": f"Bearer {phone}"})
            assert status == 403 and "/mcp needs the admin token" in body
            # Revoked while connected: the open connection is closed within a second or so.
            berth(home, "token", "revoke", "phone")
            # (Looked for every second; a loaded machine gets some slack.) The close reaches
            # the client as the SDK's ConnectionError or as the websocket's own close,
            # depending on whether it lands while a request is sent or while one is awaited.
            with pytest.raises((ConnectionError, websockets.exceptions.ConnectionClosed)):
                for _ in range(150):
                    await conn.list_sessions()
                    await asyncio.sleep(0.1)
        # And it is refused from now on.
        with pytest.raises(Exception, match="401"):
            async with client(Editor(), address, token=phone):
                pass
        # The other device's token still works.
        async with client(Editor(), address, token=tablet) as conn:
            listed = await conn.list_sessions()
            assert [s.session_id for s in listed.sessions] == [theirs.session_id]
    listed = json.loads(berth(home, "token", "list", "--json"))
    assert [(t["name"], t["kind"], t["device"]) for t in listed] == [("tablet", "device", "tablet")]


async def test_a_server_killed_mid_answer_leaves_what_streamed_and_the_session_usable(
    home, work, provider
):
    # 10 s of answer: 200 chunks, 50 ms apart; the server is killed a second into it.
    chunks = [f"w{i} " for i in range(200)]
    provider.push(Reply().text(*chunks).slowly(0.05))
    editor = Editor()
    proc, address = start_serving(home, provider, work)
    try:
        async with client(editor, address) as conn:
            new = await conn.new_session(cwd=str(work))
            orphan = asyncio.ensure_future(
                conn.prompt(session_id=new.session_id, prompt=[text_block("talk")])
            )
            for _ in range(200):
                if texts(editor).count("w") >= 20:
                    break
                await asyncio.sleep(0.05)
            seen = texts(editor)
            proc.kill()
            proc.wait(timeout=10)
            with pytest.raises(ConnectionError):
                await orphan
    finally:
        if proc.poll() is None:
            proc.kill()
    full = "".join(chunks)
    assert full.startswith(seen) and len(seen) > 0
    # Another berth serve on the same home: session/load replays the prompt and what had
    # streamed, marked interrupted, and the session takes a new prompt.
    provider.push(Reply().text("again"))
    with serving(home, provider, work) as address:
        back = Editor()
        async with client(back, address) as conn:
            await conn.load_session(session_id=new.session_id, cwd=str(work))
            assert texts(back, "user_message_chunk") == "talk"
            replayed = texts(back)
            assert replayed.endswith("[interrupted]"), replayed
            kept = replayed[: -len("[interrupted]")].rstrip("\n")
            assert full.startswith(kept), kept
            # At most the last few pieces before the kill are missing.
            assert kept.count("w") >= 5, kept
            assert len(kept) <= len(seen) + len("w199 ") * 3
            again = await conn.prompt(session_id=new.session_id, prompt=[text_block("again")])
            assert again.stop_reason == "end_turn"
    shown = berth_json(home, "session", "show", new.session_id)
    assert [m["role"] for m in shown["messages"]] == ["user", "assistant", "user", "assistant"]
    assert shown["messages"][3]["content"] == "again"


async def test_prompts_over_a_tokens_rate_are_refused_before_the_agent(home, work, provider):
    provider.push(Reply().text("one"))
    provider.push(Reply().text("two"))
    with serving(home, provider, work, "--max-prompts-per-minute", "2") as address:
        async with client(Editor(), address) as conn:
            new = await conn.new_session(cwd=str(work))
            for _ in range(2):
                answer = await conn.prompt(session_id=new.session_id, prompt=[text_block("hi")])
                assert answer.stop_reason == "end_turn"
            with pytest.raises(Exception, match="prompts of the last minute"):
                await conn.prompt(session_id=new.session_id, prompt=[text_block("hi")])
    # The refused prompt never reached the agent: not in the transcript, not sent to the model.
    shown = berth_json(home, "session", "show", new.session_id)
    assert [m["content"] for m in shown["messages"]] == ["hi", "one", "hi", "two"]
    assert len(provider.requests) == 2


async def test_pairing_prints_a_link_and_its_qr_code_that_a_device_connects_with(home, work, provider):
    from urllib.parse import parse_qs, urlparse

    proc, address = start_serving(home, provider, work, "--pair", "phone")
    try:
        said = [proc.stderr.readline() for _ in range(2)]
        assert "pair the device phone" in said[0], said
        link = said[1].strip()
        assert link.startswith("berth://pair?"), link
        query = parse_qs(urlparse(link).query)
        assert query["url"] == [f"ws://{address}/acp"]
        assert query["device"] == ["phone"]
        # Its QR code follows, drawn with half blocks.
        code = [proc.stderr.readline() for _ in range(10)]
        assert all(set(line.strip("\n")) <= set(" █▀▄") for line in code), code
        # The link's token acts as the device.
        async with client(Editor(), address, token=query["token"][0]) as conn:
            new = await conn.new_session(cwd="/")
        shown = berth_json(home, "session", "show", new.session_id)["session"]
        assert shown["workspace_id"] == berth(home, "binding", "resolve", "phone").strip()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    # The token was made once; pairing the same name again, with no terminal to ask whether to
    # replace it, is refused before serving, naming --rotate.
    again = subprocess.run(
        [BERTH, "serve", "--listen", "127.0.0.1:0", "--pair", "phone"],
        env={**agent_env(home, provider), "BERTH_SERVE_TOKEN": TOKEN},
        cwd=str(work), capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
    )
    assert again.returncode == 4, again.stderr
    assert "paired before" in again.stderr and "--rotate" in again.stderr


async def test_tls_serves_wss_and_https_with_the_certificate_given(home, work, provider, tmp_path, monkeypatch):
    import ssl

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )
    # The clients trust this certificate alone.
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    provider.push(Reply().text("over tls"))
    proc, address = start_serving(home, provider, work, "--tls-cert", str(cert), "--tls-key", str(key))
    try:
        context = ssl.create_default_context(cafile=str(cert))
        with urllib.request.urlopen(f"https://{address}/healthz", context=context, timeout=10) as r:
            assert r.status == 200
        editor = Editor()
        async with client(editor, address, scheme="wss") as conn:
            new = await conn.new_session(cwd=str(work))
            answer = await conn.prompt(session_id=new.session_id, prompt=[text_block("hi")])
            assert answer.stop_reason == "end_turn"
        assert texts(editor) == "over tls"
        # Plain HTTP to a TLS listener gets nothing served.
        with pytest.raises(Exception):
            urllib.request.urlopen(f"http://{address}/healthz", timeout=5)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    # A key that is not there is refused at start, naming it.
    bad = subprocess.run(
        [BERTH, "serve", "--listen", "127.0.0.1:0", "--tls-cert", str(cert), "--tls-key", str(tmp_path / "nope.pem")],
        env={**agent_env(home, provider), "BERTH_SERVE_TOKEN": TOKEN},
        cwd=str(work), capture_output=True, text=True, timeout=30,
    )
    assert bad.returncode == 2, bad.stderr
    assert "nope.pem" in bad.stderr


async def test_two_servers_on_one_postgres_share_sessions_and_run_one_turn_at_a_time(
    tmp_path, work, provider
):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from postgres_db import fresh_database, home_on

    url = fresh_database()
    home_a, home_b = home_on(tmp_path, "a", url), home_on(tmp_path, "b", url)
    # 4 s of answer on node A; node B's prompt comes after.
    provider.push(Reply().text(*[f"w{i} " for i in range(200)]).slowly(0.02))
    provider.push(Reply().text("from b"))
    proc_a, address_a = start_serving(home_a, provider, work)
    proc_b, address_b = start_serving(home_b, provider, work)
    try:
        on_a, on_b = Editor(), Editor()
        first = asyncio.Event()
        on_a.on_update = lambda u: first.set() if u.session_update == "agent_message_chunk" else None
        async with client(on_a, address_a) as a, client(on_b, address_b) as b:
            new = await a.new_session(cwd=str(work))
            running = asyncio.ensure_future(
                a.prompt(session_id=new.session_id, prompt=[text_block("talk")])
            )
            await asyncio.wait_for(first.wait(), 10)
            # Node B serves the session node A made, with its transcript so far...
            await b.load_session(session_id=new.session_id, cwd=str(work))
            assert texts(on_b, "user_message_chunk") == "talk"
            # ...but not a second turn while A's runs.
            with pytest.raises(Exception, match="answering a prompt elsewhere"):
                await b.prompt(session_id=new.session_id, prompt=[text_block("hi")])
            await a.cancel(session_id=new.session_id)
            assert (await asyncio.wait_for(running, 10)).stop_reason == "cancelled"
            # A's turn over, B's runs.
            answer = await b.prompt(session_id=new.session_id, prompt=[text_block("hi")])
            assert answer.stop_reason == "end_turn"
    finally:
        for proc in (proc_a, proc_b):
            proc.terminate()
            proc.wait(timeout=10)
    shown = berth_json(home_a, "session", "show", new.session_id)
    contents = [m["content"] for m in shown["messages"]]
    assert contents[0] == "talk" and contents[1].endswith("[interrupted]"), contents
    assert contents[2:] == ["hi", "from b"], contents


async def test_a_device_starts_no_mcp_server_the_admin_did_not_allow(home, work, provider, tmp_path):
    """A device's `mcpServers` would make the server run a program or connect to a host of
    the device's choosing: refused, unless the admin named an `[[mcp_servers]]` entry in
    `[serve] device_mcp_servers` and the device asks for its very command and arguments."""
    phone = token_for(home, "phone")
    marker = tmp_path / "spawned-by-a-device"
    (home / "config.toml").write_text(
        '[serve]\ndevice_mcp_servers = ["berth"]\n'
        f'[[mcp_servers]]\nname = "berth"\ncommand = "{BERTH}"\nargs = ["mcp"]\n'
        # The admin's own, started for the admin's turns and every device's alike.
        '[[mcp_servers]]\nname = "unlisted"\ncommand = "true"\n'
    )
    provider.push(Reply().text("hello phone"))
    with serving(home, provider, work) as address:
        async with client(Editor(), address, token=phone) as conn:
            evil = McpServerStdio(name="evil", command="sh", args=["-c", f"touch {marker}"], env=[])
            with pytest.raises(Exception, match="cannot start the MCP server"):
                await conn.new_session(cwd="/", mcp_servers=[evil])
            # An entry the admin configured but did not name for devices is no better.
            unlisted = McpServerStdio(name="unlisted", command="true", args=[], env=[])
            with pytest.raises(Exception, match="device_mcp_servers"):
                await conn.new_session(cwd="/", mcp_servers=[unlisted])
            elsewhere = HttpMcpServer(name="elsewhere", url="http://127.0.0.1:9/mcp", headers=[], type="http")
            with pytest.raises(Exception, match="cannot start"):
                await conn.new_session(cwd="/", mcp_servers=[elsewhere])
            # The allowed entry's command with other arguments is not the entry.
            other_args = McpServerStdio(name="berth", command=BERTH, args=["mcp", "--home", "/"], env=[])
            with pytest.raises(Exception, match="cannot start"):
                await conn.new_session(cwd="/", mcp_servers=[other_args])
            mine = await conn.new_session(cwd="/")
            with pytest.raises(Exception, match="cannot start"):
                await conn.load_session(session_id=mine.session_id, cwd="/", mcp_servers=[evil])
            # Its very command and arguments: accepted, and the turn runs.
            allowed = McpServerStdio(name="mine", command=BERTH, args=["mcp"], env=[])
            new = await conn.new_session(cwd="/", mcp_servers=[allowed])
            answer = await conn.prompt(session_id=new.session_id, prompt=[text_block("hi")])
            assert answer.stop_reason == "end_turn"
    assert not marker.exists()


async def test_the_rate_counts_prompts_however_the_method_is_spelt(home, work, provider):
    """`session\\/prompt` is `session/prompt` to JSON: it counts against the rate, and over it
    never reaches the agent. (Prompts were once found by a substring of the frame.)"""
    import websockets

    provider.push(Reply().text("one"))
    with serving(home, provider, work, "--max-prompts-per-minute", "1") as address:
        async with websockets.connect(
            f"ws://{address}/acp", additional_headers={"Authorization": f"Bearer {TOKEN}"}
        ) as ws:
            async def ask(raw):
                await ws.send(raw)
                while True:
                    message = json.loads(await asyncio.wait_for(ws.recv(), 30))
                    if "id" in message and "method" not in message:
                        return message

            await ask('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}')
            made = await ask(
                '{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":%s,"mcpServers":[]}}'
                % json.dumps(str(work))
            )
            sid = made["result"]["sessionId"]
            prompt = '{"jsonrpc":"2.0","id":%d,"method":"session%sprompt","params":{"sessionId":"%s","prompt":[{"type":"text","text":"hi"}]}}'
            first = await ask(prompt % (3, "/", sid))
            assert first["result"]["stopReason"] == "end_turn", first
            second = await ask(prompt % (4, "\\/", sid))
            assert "prompts of the last minute" in second["error"]["message"], second
    assert len(provider.requests) == 1


async def test_revoking_an_admin_token_cuts_its_open_connection(home, work, provider):
    made = json.loads(berth(home, "token", "create", "--admin", "laptop", "--json"))
    with serving(home, provider, work) as address:
        async with client(Editor(), address, token=made["token"]) as conn:
            await conn.new_session(cwd=str(work))
            berth(home, "token", "revoke", "laptop")
            # As a device's: the SDK's ConnectionError or the websocket's own close.
            with pytest.raises((ConnectionError, websockets.exceptions.ConnectionClosed)):
                for _ in range(150):
                    await conn.list_sessions()
                    await asyncio.sleep(0.1)


def test_a_loopback_server_without_a_token_makes_one_for_the_run(home, work, provider):
    """On loopback too, any local user or process could act as the admin of a server that
    takes requests without a token (Jupyter requires one for that reason). With none set,
    berth serve makes one for the run and prints it, with a link that signs the page in."""
    env = agent_env(home, provider)
    env.pop("BERTH_SERVE_TOKEN", None)
    proc = subprocess.Popen(
        [BERTH, "serve", "--listen", "127.0.0.1:0"],
        env=env, cwd=str(work), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        address = re.search(r"ws://([0-9.]+:[0-9]+)/acp", proc.stderr.readline()).group(1)
        said = proc.stderr.readline()
        token = re.search(r"this run's is (berth_[0-9a-f]+)", said).group(1)
        assert f"http://{address}/pair#token={token}" in said, said
        assert http_status(f"http://{address}/healthz")[0] == 200
        assert http_status(f"http://{address}/")[0] == 401
        assert http_status(f"http://{address}/", {"Authorization": "Bearer nope"})[0] == 401
        assert http_status(f"http://{address}/", {"Authorization": f"Bearer {token}"})[0] == 200
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    # --open is for loopback only.
    off = subprocess.run(
        [BERTH, "serve", "--listen", "0.0.0.0:0", "--open"],
        env=env, cwd=str(work), capture_output=True, text=True, timeout=30,
    )
    assert off.returncode != 0 and "loopback only" in off.stderr, off.stderr


async def test_an_open_loopback_server_takes_no_page_of_another_origin(home, work, provider):
    """With --open, a loopback server acts as the admin for whoever reaches it; a page of
    another origin on this machine (a dev server on localhost:3000, another port of
    127.0.0.1) is refused (403), and only the server's own origin and --allow-origin get in."""
    import websockets

    with serving(home, provider, work, "--open", "--allow-origin", "http://localhost:5173", token=None) as address:
        for origin in ["http://localhost:3000", "http://127.0.0.1:1", f"https://{address}"]:
            with pytest.raises(websockets.exceptions.InvalidStatus, match="403"):
                async with websockets.connect(f"ws://{address}/acp", origin=origin):
                    pass
            status, _ = http_status(f"http://{address}/", {"Origin": origin})
            assert status == 403, origin
        for origin in [f"http://{address}", "http://localhost:5173"]:
            async with websockets.connect(f"ws://{address}/acp", origin=origin) as ws:
                await ws.send('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}')
                answer = json.loads(await asyncio.wait_for(ws.recv(), 10))
                assert answer["result"]["protocolVersion"] == 1, answer
