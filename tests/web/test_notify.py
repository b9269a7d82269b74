"""Notifications (`[[notify]]`, docs/notify.md) against real hooks: local HTTP servers that
record each POST (one can be slow), a port with nothing listening, and a command. Every body
is checked against the schema docs/notify.md documents.

- a permission request waiting on `berth serve` (a prompt from the web page's POST, no page
  watching) sends `needs_input` naming the session, without the file's contents;
- twenty requests in a row send twenty, one each; while a page watches the session, only an
  `always` entry hears of one;
- `berth run` sends `done` naming the run when it ends, to a URL and to a command;
- dead and slow sinks add nothing measurable to a turn, and `berth doctor` shows the failure.
"""

import http.server
import json
import re
import subprocess
import threading
import time
from pathlib import Path

import jsonschema
import pytest

from conftest import BERTH, TOKEN, Reply, berth, berth_json, env_for, fetch, serving

DOCS = Path(__file__).resolve().parents[2] / "docs" / "notify.md"


def schema():
    text = DOCS.read_text()
    block = re.search(r"```json notify-schema\n(.*?)```", text, re.S)
    assert block, "docs/notify.md has no notify-schema block"
    return json.loads(block.group(1))


def valid(body):
    jsonschema.validate(body, schema(), format_checker=jsonschema.FormatChecker())
    return body


class Hook:
    """A local webhook: records each POST's JSON body; answers after `delay` seconds."""

    def __init__(self, delay=0.0):
        self.bodies = []
        # Every request as it came: (headers, raw body), for the ntfy and Slack forms.
        self.raw = []
        hook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                data = self.rfile.read(int(self.headers.get("content-length", 0)))
                time.sleep(delay)
                hook.raw.append((dict(self.headers), data.decode()))
                try:
                    hook.bodies.append(json.loads(data))
                except ValueError:
                    hook.bodies.append(None)
                self.send_response(204)
                self.end_headers()

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, count, timeout=15):
        deadline = time.monotonic() + timeout
        while len(self.bodies) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.bodies

    def stop(self):
        self.server.shutdown()


@pytest.fixture
def hook():
    h = Hook()
    yield h
    h.stop()


def dead_port():
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def page_prompt(base, session, text):
    _, _, page = fetch(f"{base}/s/{session}", token=TOKEN)
    csrf = page.split('name="berth-csrf" content="')[1].split('"')[0]
    return fetch(
        f"{base}/s/{session}/prompt",
        token=TOKEN,
        method="POST",
        data=f"text={text}".encode(),
        headers={"x-berth-csrf": csrf},
    )


def write_calls(n, content="SECRET-FILE-CONTENT"):
    reply = Reply()
    for i in range(n):
        reply.tool(f"toolu_{i}", "write_file", {"path": f"f{i}.txt", "content": content})
    return reply


def test_a_waiting_permission_posts_needs_input_naming_the_session(home, provider, hook):
    (home / "config.toml").write_text(
        f'[serve]\npermission_timeout_secs = 10\npublic_url = "https://berth.example.com"\n'
        f'[[notify]]\nurl = "{hook.url}"\n'
    )
    berth_json(home, "workspace", "create", "asks")
    session = berth_json(home, "session", "new", "-w", "asks", "-t", "Fix the login")["id"]
    provider.push(write_calls(1))
    provider.push(Reply().text("Nobody answered."))
    with serving(home, provider) as base:
        assert page_prompt(base, session, "write")[0] == 202
        [body] = hook.wait_for(1)
        # While the request waits: the notification came before the permission expired.
        assert len(provider.requests) == 1
    valid(body)
    assert body["event"] == "needs_input"
    assert body["session"] == session
    assert body["title"] == "berth: Fix the login needs you"
    assert body["summary"] == "allow write_file f0.txt?"
    assert body["link"] == f"https://berth.example.com/s/{session}"
    assert "SECRET-FILE-CONTENT" not in json.dumps(body)


def test_twenty_requests_send_twenty_and_a_watched_one_only_to_always(home, provider, hook):
    always = Hook()
    try:
        (home / "config.toml").write_text(
            "[serve]\npermission_timeout_secs = 1\n"
            f'[[notify]]\nurl = "{hook.url}"\nevents = ["needs_input"]\n'
            f'[[notify]]\nurl = "{always.url}"\nevents = ["needs_input"]\nalways = true\n'
        )
        berth_json(home, "workspace", "create", "many")
        session = berth_json(home, "session", "new", "-w", "many")["id"]
        provider.push(write_calls(20))
        provider.push(Reply().text("Twenty refused."))
        provider.push(write_calls(1))
        provider.push(Reply().text("Watched."))
        with serving(home, provider) as base:
            assert page_prompt(base, session, "write twenty")[0] == 202
            bodies = hook.wait_for(20, timeout=60)
            assert len(bodies) == 20, len(bodies)
            # Each request once: twenty different files, no repeats.
            assert sorted(b["summary"] for b in bodies) == sorted(f"allow write_file f{i}.txt?" for i in range(20))
            for b in bodies:
                valid(b)
            # The turn ends once the last request expired.
            deadline = time.monotonic() + 30
            while berth_json(home, "session", "show", session)["messages"][-1]["content"] != "Twenty refused.":
                assert time.monotonic() < deadline, "the turn did not end"
                time.sleep(0.2)
            assert len(always.bodies) == 20
            # A page watches now: its event stream is open while the next request waits.
            import urllib.request

            seen = []

            def watch():
                request = urllib.request.Request(f"{base}/s/{session}/events")
                request.add_header("Authorization", f"Bearer {TOKEN}")
                with urllib.request.urlopen(request, timeout=30) as stream:
                    for line in stream:
                        seen.append(line.decode())
                        if '"type":"ended"' in line.decode():
                            return

            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()
            time.sleep(0.5)
            assert page_prompt(base, session, "one more")[0] == 202
            watcher.join(timeout=30)
            assert any('"type":"permission"' in line for line in seen), seen
            time.sleep(1)
            assert len(always.bodies) == 21, "the always entry heard nothing of the watched request"
            assert len(hook.bodies) == 20, "a watched request was sent to an entry without always"
    finally:
        always.stop()


def test_a_run_posts_done_naming_the_run_to_a_url_and_a_command(home, provider, hook, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    for args in (["init", "-q", "-b", "main"], ["config", "user.email", "t@e.x"], ["config", "user.name", "T"]):
        subprocess.run(["git", *args], cwd=repo, check=True)
    (repo / "README.md").write_text("hi\n")
    subprocess.run(["git", "add", "."], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "first"], cwd=repo, check=True)
    got = tmp_path / "from-command.json"
    (home / "config.toml").write_text(
        f'[[notify]]\nurl = "{hook.url}"\nevents = ["done", "failed"]\n'
        f"[[notify]]\ncommand = \"cat > '{got}'\"\nevents = [\"done\"]\n"
    )
    provider.push(Reply().text("All done."))
    done = subprocess.run(
        [BERTH, "run", "Tidy the README", "--json"],
        env=env_for(home, provider),
        cwd=str(repo),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    [run] = berth_json(home, "run", "list")
    run_id = run["id"]
    [body] = hook.wait_for(1)
    valid(body)
    assert body["event"] == "done"
    assert body["run"] == run_id
    assert body["title"] == "berth run: Tidy the README"
    assert body["summary"].startswith("1 of 1 agent(s) done")
    assert body["session"] and body["workspace"]
    from_command = valid(json.loads(got.read_text()))
    assert from_command["run"] == run_id and from_command["event"] == "done"


def answering(base, session, csrf):
    """A page watching `session`: it allows each permission request as it is shown."""
    import urllib.request

    def watch():
        request = urllib.request.Request(f"{base}/s/{session}/events")
        request.add_header("Authorization", f"Bearer {TOKEN}")
        with urllib.request.urlopen(request, timeout=60) as stream:
            for raw in stream:
                line = raw.decode()
                if not line.startswith("data:"):
                    continue
                data = json.loads(line[5:])
                if data.get("type") == "permission":
                    fetch(
                        f"{base}/s/{session}/permission",
                        token=TOKEN,
                        method="POST",
                        data=f"id={data['id']}&decision=allow_once".encode(),
                        headers={"x-berth-csrf": csrf},
                    )
                if data.get("type") == "ended":
                    return

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_the_ntfy_and_slack_forms(home, provider, tmp_path):
    ntfy, slack = Hook(), Hook()
    try:
        (home / "config.toml").write_text(
            '[serve]\npublic_url = "https://berth.example.com"\n'
            f'[[notify]]\nurl = "{ntfy.url}"\nformat = "ntfy"\n'
            f'[[notify]]\nurl = "{slack.url}"\nformat = "slack"\n'
        )
        repo = tmp_path / "repo"
        repo.mkdir()
        for args in (["init", "-q", "-b", "main"], ["config", "user.email", "t@e.x"], ["config", "user.name", "T"]):
            subprocess.run(["git", *args], cwd=repo, check=True)
        (repo / "README.md").write_text("hi\n")
        subprocess.run(["git", "add", "."], cwd=repo, check=True)
        subprocess.run(["git", "commit", "-qm", "first"], cwd=repo, check=True)
        provider.push(Reply().text("All done."))
        done = subprocess.run(
            [BERTH, "run", "Tidy the README"], env=env_for(home, provider), cwd=str(repo),
            capture_output=True, text=True, timeout=120,
        )
        assert done.returncode == 0, done.stderr
        [run] = berth_json(home, "run", "list")
        ntfy.wait_for(1)
        [(headers, body)] = ntfy.raw
        headers = {k.lower(): v for k, v in headers.items()}
        assert headers["title"] == "berth run: Tidy the README"
        assert headers["tags"] == "done"
        assert headers["click"] == f"https://berth.example.com/runs/{run['id']}"
        assert body.startswith("1 of 1 agent(s) done")
        [text] = [b["text"] for b in slack.wait_for(1)]
        assert text.startswith("*berth run: Tidy the README*\n1 of 1 agent(s) done")
        assert text.endswith(f"<https://berth.example.com/runs/{run['id']}|open>")
    finally:
        ntfy.stop()
        slack.stop()


def test_dead_and_slow_sinks_add_nothing_to_a_turn_and_the_doctor_says_so(home, provider):
    slow = Hook(delay=30)
    try:
        timings = {}
        for case, entries in [
            ("none", ""),
            (
                # `always`: the page watching the session does not spare them.
                "dead",
                f'[[notify]]\nurl = "http://127.0.0.1:{dead_port()}/x"\nalways = true\n'
                f'[[notify]]\nurl = "{slow.url}"\nalways = true\n',
            ),
        ]:
            (home / "config.toml").write_text(entries)
            berth_json(home, "workspace", "create", f"w-{case}")
            session = berth_json(home, "session", "new", "-w", f"w-{case}")["id"]
            provider.push(write_calls(1))
            provider.push(Reply().text("Written."))
            with serving(home, provider) as base:
                _, _, page = fetch(f"{base}/s/{session}", token=TOKEN)
                csrf = page.split('name="berth-csrf" content="')[1].split('"')[0]
                watcher = answering(base, session, csrf)
                time.sleep(0.3)
                started = time.monotonic()
                assert page_prompt(base, session, "write")[0] == 202
                watcher.join(timeout=30)
                assert not watcher.is_alive(), "the turn did not end"
                timings[case] = time.monotonic() - started
            shown = berth_json(home, "session", "show", session)
            assert shown["messages"][-1]["content"] == "Written.", shown
        # A sink in the turn's way would add its 10 s timeout (the slow one, 30 s); what is
        # left is the machine's own noise.
        assert timings["dead"] < timings["none"] + 3.0, timings
        # The slow sink is still sleeping; the dead port's failure is kept once its tries end.
        deadline = time.monotonic() + 10
        while True:
            report = subprocess.run(
                [BERTH, "doctor", "--json"], env=env_for(home, provider), capture_output=True, text=True
            )
            findings = json.loads(report.stdout)["findings"]
            dead = [f for f in findings if f["check"].startswith("notify http://127.0.0.1")]
            if any(f["status"] == "warn" and "failed" in f["message"] for f in dead):
                break
            assert time.monotonic() < deadline, findings
            time.sleep(0.5)
    finally:
        slow.stop()


def test_the_page_notifies_when_allowed_and_out_of_sight(home, provider, browser):
    from conftest import sign_in, wait_for

    (home / "config.toml").write_text("[serve]\npermission_timeout_secs = 5\n")
    berth_json(home, "workspace", "create", "seen")
    session = berth_json(home, "session", "new", "-w", "seen", "-t", "Page plan")["id"]
    provider.push(write_calls(1))
    provider.push(Reply().text("Nobody answered."))
    with serving(home, provider) as base:
        sign_in(browser, base)
        browser.get(f"{base}/s/{session}")
        # Offered while the browser has not been asked.
        button = browser.find_element("id", "notify-me")
        assert button.is_displayed()
        # The person allows it (granted through the driver, as the browser's prompt would).
        browser.execute_cdp_cmd("Browser.grantPermissions", {"origin": base, "permissions": ["notifications"]})
        browser.get(f"{base}/s/{session}")
        assert browser.execute_script("return Notification.permission") == "granted"
        assert not browser.find_element("id", "notify-me").is_displayed()
        # Every notification the page makes is recorded, and still made.
        browser.execute_script(
            """
            window.__notified = [];
            const Real = window.Notification;
            window.Notification = new Proxy(Real, {
              construct(target, args) { window.__notified.push(args[0]); return new target(...args); },
              get(target, prop) { return target[prop]; },
            });
            """
        )
        page = browser.current_window_handle
        time.sleep(0.5)  # its event stream is open
        # Out of sight: another tab in front.
        browser.switch_to.new_window("tab")
        assert page_prompt(base, session, "write")[0] == 202
        time.sleep(2)
        browser.close()
        browser.switch_to.window(page)
        notified = wait_for(browser, lambda d: d.execute_script("return window.__notified"))
        assert any(title.endswith("needs you") for title in notified), notified


def test_a_desktop_entry_shows_on_the_session_bus(home, provider, tmp_path):
    """A real D-Bus session bus (dbus-daemon) with a notification service on it: a
    `desktop = true` entry's notices arrive as the desktop's notifications, a waiting request
    as critical."""
    import os
    import sys

    bus = subprocess.Popen(
        ["dbus-daemon", "--session", "--nofork", "--print-address=1"],
        stdout=subprocess.PIPE,
        text=True,
    )
    service = None
    try:
        address = bus.stdout.readline().strip()
        assert address, "dbus-daemon printed no address"
        env = {**os.environ, "DBUS_SESSION_BUS_ADDRESS": address}
        service = subprocess.Popen(
            [sys.executable, str(Path(__file__).parent / "fake_notifications.py")],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert service.stdout.readline().strip() == "ready"
        (home / "config.toml").write_text(
            "[serve]\npermission_timeout_secs = 2\n[[notify]]\ndesktop = true\nevents = [\"needs_input\"]\n"
        )
        berth_json(home, "workspace", "create", "desk")
        session = berth_json(home, "session", "new", "-w", "desk", "-t", "Desk work")["id"]
        provider.push(write_calls(1))
        provider.push(Reply().text("Nobody answered."))
        env_serve = {"DBUS_SESSION_BUS_ADDRESS": address}
        with serving(home, provider, extra_env=env_serve) as base:
            assert page_prompt(base, session, "write")[0] == 202
            line = service.stdout.readline()
        shown = json.loads(line)
        assert shown == {
            "app": "berth",
            "summary": "berth: Desk work needs you",
            "body": "allow write_file f0.txt?",
            "urgency": 2,
        }, shown
    finally:
        if service:
            service.kill()
        bus.kill()
