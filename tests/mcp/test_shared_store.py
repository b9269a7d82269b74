"""Two `berth mcp --transport http` servers with different homes on one Postgres database serve
the same workspaces, sessions, storage and bindings: what one creates, the other lists at once.

The database comes from TEST_BERTH_POSTGRES_URL (./test.sh starts a throwaway server); without
it this test fails, saying how to get one, rather than skipping.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from conftest import BERTH, HttpServer, text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from postgres_db import fresh_database, home_on  # noqa: E402


def cli(home, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("BERTH_")}
    return subprocess.run(
        [BERTH, *args],
        env={**env, "BERTH_HOME": str(home)},
        cwd=home,
        capture_output=True,
        check=True,
        text=True,
    ).stdout


async def call(url, tool, args):
    async with create_mcp_http_client() as client:
        async with streamable_http_client(url, http_client=client) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                r = await s.call_tool(tool, args)
                assert not r.is_error, text(r)
                return r


async def read(url, uri):
    async with create_mcp_http_client() as client:
        async with streamable_http_client(url, http_client=client) as (read_, write):
            async with ClientSession(read_, write) as s:
                await s.initialize()
                (contents,) = (await s.read_resource(uri)).contents
                return contents.text


@pytest.mark.anyio
async def test_two_http_servers_on_one_postgres_serve_the_same_records(tmp_path):
    url = fresh_database()
    a = home_on(tmp_path, "a", url)
    b = home_on(tmp_path, "b", url)
    server_a = HttpServer(a, a)
    server_b = HttpServer(b, b)
    try:
        # A workspace created through one is listed by the other at once.
        created = await call(server_a.url, "workspace_create", {"name": "shared", "description": "via a"})
        ws = created.structured_content
        listed = await call(server_b.url, "resource_workspace_list", {})
        ids = [w["id"] for w in listed.structured_content["workspaces"]]
        assert ids == [ws["id"]]
        # Storage written through b is read through a.
        await call(
            server_b.url,
            "workspace_storage_write",
            {"workspace_identifier": "shared", "path": "notes/plan.md", "content": "# from b\n"},
        )
        got = await call(server_a.url, "workspace_storage_read", {"workspace_identifier": "shared", "path": "notes/plan.md"})
        assert text(got) == "# from b\n"
        assert await read(server_a.url, f"berth://workspace/{ws['id']}/storage/notes/plan.md") == "# from b\n"
        # A session made by the CLI on home a, written through server b, read through server a.
        sid = cli(a, "session", "new", "-w", "shared", "--title", "plan").strip()
        cli(b, "session", "append", sid, "hello from home b")
        await call(server_b.url, "session_storage_write", {"session_identifier": sid, "path": "s.txt", "content": "s"})
        got = await call(server_a.url, "session_storage_read", {"session_identifier": sid, "path": "s.txt"})
        assert text(got) == "s"
        transcript = await read(server_a.url, f"berth://session/{sid}/transcript")
        assert "hello from home b" in transcript
        sessions = await call(server_b.url, "resource_session_list", {})
        assert [s["id"] for s in sessions.structured_content["sessions"]] == [sid]
        # Bindings made on one home resolve on the other.
        bound = cli(a, "binding", "resolve", "phone").strip()
        assert cli(b, "binding", "resolve", "phone").strip() == bound
        listed = await call(server_b.url, "resource_workspace_list", {})
        assert sorted(w["id"] for w in listed.structured_content["workspaces"]) == sorted([ws["id"], bound])
        # Removed through b: gone for a.
        removed = await call(server_b.url, "workspace_remove", {"workspace_identifier": "shared"})
        assert not removed.is_error
        listed = await call(server_a.url, "resource_workspace_list", {})
        assert [w["id"] for w in listed.structured_content["workspaces"]] == [bound]
    finally:
        server_a.stop()
        server_b.stop()
