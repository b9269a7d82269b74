"""Errors keep their kind through MCP: a corrupt record is never reported as "not found" (a
client that hears "not found" may create a new one), bad input is invalid params, and tool
failures carry the kind in structured content beside the message.
"""

import pytest
from mcp import MCPError

from conftest import berth, text

pytestmark = pytest.mark.anyio

RESOURCE_NOT_FOUND = -32002
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


def corrupt(home, name):
    """Creates a plain workspace and breaks its workspace.toml on line 2; returns its id."""
    wid = berth(home, "workspace", "create", name, "--plain").strip()
    (home / "workspaces" / wid / "workspace.toml").write_text('id = "x"\nname = [unclosed\n')
    return wid


async def read_error(s, uri):
    with pytest.raises(MCPError) as err:
        await s.read_resource(uri)
    return err.value.error


async def test_a_corrupt_record_is_an_internal_error_naming_file_and_line(connect, home, tmp_path):
    wid = corrupt(home, "broken")
    async with connect(tmp_path) as s:
        for ident in [wid, "broken"]:
            for uri in [
                f"berth://workspace/{ident}",
                f"berth://workspace/{ident}/context",
                f"berth://workspace/{ident}/storage",
                f"berth://workspace/{ident}/storage/notes.md",
                f"berth://workspace/{ident}/files",
            ]:
                e = await read_error(s, uri)
                assert e.code == INTERNAL_ERROR, (uri, e)
                assert "workspace.toml" in e.message and "line 2" in e.message, (uri, e)
                assert e.data == {"kind": "corrupt"}, (uri, e)

        calls = [
            ("workspace_storage_read", {"workspace_identifier": "broken", "path": "a.md"}),
            (
                "workspace_storage_write",
                {"workspace_identifier": "broken", "path": "a.md", "content": "x"},
            ),
            ("workspace_storage_list", {"workspace_identifier": "broken"}),
            ("resource_workspace_show", {"workspace_identifier": "broken"}),
            ("resource_workspace_browse", {"workspace_identifier": "broken"}),
            ("workspace_remove", {"workspace_id": "broken"}),
            ("prompt_get", {"name": "review-workspace", "arguments": {"workspace_id": "broken"}}),
            ("prompt_get", {"name": "prepare-pr", "arguments": {"workspace_id": "broken"}}),
        ]
        for tool, args in calls:
            r = await s.call_tool(tool, args)
            assert r.is_error, (tool, r)
            assert "workspace.toml" in text(r) and "line 2" in text(r), (tool, text(r))
            assert r.structured_content["error"]["kind"] == "corrupt", (tool, r)

        # The file is as it was: nothing overwrote it.
        toml = (home / "workspaces" / wid / "workspace.toml").read_text()
        assert toml == 'id = "x"\nname = [unclosed\n'

        # Deleting by full id is how a person repairs it, through MCP as through the CLI.
        r = await s.call_tool("workspace_remove", {"workspace_id": wid})
        assert not r.is_error, text(r)
        assert not (home / "workspaces" / wid).exists()


async def test_kinds_of_protocol_errors(connect, home, tmp_path):
    berth(home, "workspace", "create", "plain", "--plain")
    berth(home, "workspace", "storage", "write", "plain", "dir/a.md", "x")
    async with connect(tmp_path) as s:
        e = await read_error(s, "berth://workspace/nope")
        assert e.code == RESOURCE_NOT_FOUND and "list the workspaces" in e.message and e.data == {"kind": "not_found"}, e
        e = await read_error(s, "berth://workspace/plain/storage/nothing.md")
        assert e.code == RESOURCE_NOT_FOUND, e
        e = await read_error(s, "berth://workspace/plain/storage/../escape")
        assert e.code == INVALID_PARAMS and e.data == {"kind": "invalid"}, e
        e = await read_error(s, "berth://workspace/plain/files")
        assert e.code == INVALID_PARAMS and "plain workspace" in e.message, e

        r = await s.call_tool(
            "workspace_storage_read", {"workspace_identifier": "plain", "path": "dir"}
        )
        assert r.is_error and r.structured_content["error"]["kind"] == "is_folder", r
        r = await s.call_tool(
            "workspace_storage_read", {"workspace_identifier": "nope", "path": "a"}
        )
        assert r.is_error and r.structured_content["error"]["kind"] == "not_found", r
        r = await s.call_tool("workspace_create", {"name": "plain", "plain": True})
        assert r.is_error and r.structured_content["error"]["kind"] == "conflict", r
