"""A fresh Postgres database for a Python test, on the server ./test.sh starts
(TEST_BERTH_POSTGRES_URL), and a berth home whose store it is. Without the server the test
fails: it is never skipped."""

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest


def fresh_database():
    url = os.environ.get("TEST_BERTH_POSTGRES_URL")
    if not url:
        pytest.fail(
            "TEST_BERTH_POSTGRES_URL is not set: this test needs a Postgres server. Run ./test.sh, "
            'which starts a throwaway one, or `eval "$(tests/postgres.sh start)"` first'
        )
    psql = shutil.which("psql") or str(Path(os.environ.get("TEST_BERTH_POSTGRES_BIN", "")) / "psql")
    name = "berth_t_" + uuid.uuid4().hex
    subprocess.run([psql, url, "-qc", f"CREATE DATABASE {name}"], check=True, capture_output=True)
    base, _, query = url.partition("?")
    base = base.rsplit("/", 1)[0]
    return f"{base}/{name}" + (f"?{query}" if query else "")


def home_on(tmp_path, name, url):
    home = tmp_path / name
    home.mkdir()
    (home / "config.toml").write_text(f"[store]\nurl = {json.dumps(url)}\n")
    return home
