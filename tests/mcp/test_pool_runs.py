"""One model of a run across machines: a run MCP's `session_run` starts on one home is a kept
run in the Postgres database that home shares with another, so the other's `berth run list`
and its web page's runs (`berth serve`) show it, and its `session_status` follows it.

The database comes from TEST_BERTH_POSTGRES_URL (./test.sh starts a throwaway server); without
it this test fails, saying how to get one, rather than skipping.
"""

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import BERTH, HttpServer, text
from test_runs import provider  # noqa: F401  (the provider stand-in fixture)
from test_shared_store import call, cli

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from postgres_db import fresh_database, home_on  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "acp"))
from provider import Reply  # noqa: E402

pytestmark = pytest.mark.anyio


def serve(home):
    """`berth serve --open` on a free loopback port; the process and its base URL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BERTH_")}
    proc = subprocess.Popen(
        [BERTH, "serve", "--open", "--listen", "127.0.0.1:0"],
        env={**env, "BERTH_HOME": str(home)},
        cwd=home,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen = ""
    for line in proc.stderr:
        seen += line
        m = re.search(r"web page at (http://\S+)/", line)
        if m:
            return proc, m.group(1)
    proc.wait()
    raise AssertionError(f"berth serve did not start (exit {proc.returncode}): {seen}")


async def test_a_session_run_is_seen_by_every_node_on_the_database(tmp_path, repo, provider):  # noqa: F811
    url = fresh_database()
    a = home_on(tmp_path, "a", url)
    b = home_on(tmp_path, "b", url)
    provider.push(Reply().tool("w1", "write_file", {"path": "out.txt", "content": "pooled\n"}))
    provider.push(Reply().text("Done."))
    server_a = HttpServer(a, repo)
    server_b = HttpServer(b, repo)
    page = None
    try:
        r = await call(server_a.url, "session_run", {"task": "Write out.txt", "allow": ["write_file"]})
        started = r.structured_content
        deadline = time.monotonic() + 30
        while True:
            # Followed through the other node's server, from the shared record and events.
            state = (await call(server_b.url, "session_status", {"session_identifier": started["session_id"]}))
            state = state.structured_content
            if state["finished"]:
                break
            assert time.monotonic() < deadline, state
            time.sleep(0.1)
        assert state["state"] == "done" and state["answer"] == "Done.", state
        assert state["kept_run"] == started["kept_run"]
        # The other home's `run list` and `run show` have it, with the node it ran on.
        listed = json.loads(cli(b, "run", "list", "--json"))
        assert [r["id"] for r in listed] == [started["kept_run"]], listed
        shown = json.loads(cli(b, "run", "show", started["kept_run"], "--json"))
        assert shown["agents"][0]["state"] == "done", shown
        assert shown["agents"][0]["node"], shown
        # Neither home keeps it in files: it is the database's.
        assert not (a / "runs" / started["kept_run"] / "run.json").exists()
        # The other home's web page lists it among its runs.
        page, base = serve(b)
        with urllib.request.urlopen(f"{base}/runs/table", timeout=10) as got:
            table = got.read().decode()
        assert started["kept_run"][:8] in table, table
        assert "Write out.txt" in table
        # Each agent's node is shown: the machine that worked it.
        assert f'data-label="Node">{shown["agents"][0]["node"]}<' in table, table
    finally:
        server_a.stop()
        server_b.stop()
        if page is not None:
            page.terminate()
            page.wait(timeout=10)
