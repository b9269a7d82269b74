"""Listings a page at a time: `resources/list` and the list bridge tools return every
workspace and session exactly once across their pages, and refuse a bad cursor clearly.
"""

import os
import subprocess

import pytest
from mcp import MCPError, types

from conftest import BERTH, text

pytestmark = pytest.mark.anyio

WORKSPACES = 260  # more than one page of resources/list (two resources a workspace, 500 a page)


@pytest.fixture
def many(home):
    """A home with WORKSPACES workspaces (half of them named) and 3 sessions."""
    env = {**os.environ, "BERTH_HOME": str(home)}
    ids = []
    for i in range(WORKSPACES):
        args = [BERTH, "workspace", "create", "--plain"]
        if i % 2 == 0:
            args += [f"ws-{i:03}", "-d", f"number {i}"]
        out = subprocess.run(args, env=env, cwd=home, capture_output=True, text=True, check=True)
        ids.append(out.stdout.strip())
    sessions = []
    for i in range(3):
        out = subprocess.run(
            [BERTH, "session", "new", "-w", ids[i], "--provider", "claude", "--model", "m"],
            env=env, cwd=home, capture_output=True, text=True, check=True,
        )
        sessions.append(out.stdout.strip())
    return ids, sessions


async def test_resources_list_pages_cover_everything_once(connect, many, tmp_path):
    ids, sessions = many
    async with connect(tmp_path) as s:
        uris, cursor, pages = [], None, 0
        while True:
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await s.list_resources(params=params)
            pages += 1
            uris += [str(r.uri) for r in page.resources]
            cursor = page.next_cursor
            if not cursor:
                break
        assert pages >= 2
        assert len(uris) == len(set(uris)), "a resource was listed twice"
        assert uris[:2] == ["berth://workspace", "berth://session"]
        for wid in ids:
            assert f"berth://workspace/{wid}" in uris
            assert f"berth://workspace/{wid}/context" in uris
        for sid in sessions:
            assert f"berth://session/{sid}" in uris
        assert len(uris) == 2 + 2 * len(ids) + len(sessions)

        with pytest.raises(MCPError) as err:
            await s.list_resources(params=types.PaginatedRequestParams(cursor="not-a-cursor"))
        assert err.value.error.code == -32602 and "cursor" in err.value.error.message
        with pytest.raises(MCPError) as err:
            await s.list_resources(params=types.PaginatedRequestParams(cursor="w/../../etc"))
        assert err.value.error.code == -32602 and "cursor" in err.value.error.message


async def test_list_tools_page_filter_and_stay_compact(connect, many, tmp_path):
    ids, sessions = many
    async with connect(tmp_path) as s:
        seen, cursor = [], None
        while True:
            args = {"limit": 37}
            if cursor:
                args["cursor"] = cursor
            r = await s.call_tool("resource_workspace_list", args)
            assert not r.is_error, text(r)
            page = r.structured_content["workspaces"]
            assert len(page) <= 37
            seen += [w["id"] for w in page]
            # The text is a line a workspace, not a second copy of the JSON.
            assert len(text(r)) < len(str(r.structured_content))
            cursor = r.structured_content["next_cursor"]
            if not cursor:
                break
            assert "cursor" in text(r)
        assert sorted(seen) == sorted(ids) and len(seen) == len(set(seen))

        r = await s.call_tool("resource_workspace_list", {"query": "NUMBER 12", "limit": 1000})
        names = sorted(w["name"] for w in r.structured_content["workspaces"])
        want = sorted(f"ws-{i:03}" for i in range(0, WORKSPACES, 2) if str(i).startswith("12"))
        assert names == want

        r = await s.call_tool("resource_workspace_list", {})
        assert len(r.structured_content["workspaces"]) == 100  # the default page

        r = await s.call_tool("resource_session_list", {"limit": 2})
        first = [x["id"] for x in r.structured_content["sessions"]]
        r = await s.call_tool(
            "resource_session_list", {"cursor": r.structured_content["next_cursor"]}
        )
        rest = [x["id"] for x in r.structured_content["sessions"]]
        assert sorted(first + rest) == sorted(sessions)
        assert r.structured_content["next_cursor"] is None

        r = await s.call_tool("resource_workspace_list", {"limit": 0})
        assert r.is_error and r.structured_content["error"]["kind"] == "invalid"
        assert "limit" in text(r)

        r = await s.call_tool("resource_workspace_list", {"cursor": "../x"})
        assert r.is_error and r.structured_content["error"]["kind"] == "invalid"
        assert "cursor" in text(r)
