"""berth's web page (`berth serve`, berth-web) in a real headless Chromium: the workspaces the
CLI made, a session that follows the transcript live, a prompt that streams the agent's answer
into the page, a permission answered on the page, a transcript that tries to run a script;
and, over plain HTTP, the token, the cookie, a device's reach and the CSRF rule.

Screenshots at a phone's and a desktop's width land in target/web-screenshots/.
"""

import subprocess
import time
import urllib.parse

import pytest

from conftest import (
    BERTH,
    DESKTOP,
    PHONE,
    TOKEN,
    Reply,
    berth,
    berth_json,
    fetch,
    screenshot,
    serving,
    sign_in,
    wait_for,
)


def by_css(driver, selector):
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, selector)


def git_repo(path):
    path.mkdir()
    for args in (
        ["init", "-q", "-b", "main"],
        ["config", "user.email", "t@example.com"],
        ["config", "user.name", "T"],
    ):
        subprocess.run(["git", *args], cwd=path, check=True)
    (path / "README.md").write_text("hello\n")
    subprocess.run(["git", "add", "."], cwd=path, check=True)
    subprocess.run(["git", "commit", "-qm", "first"], cwd=path, check=True)
    return path


def test_the_workspaces_page_lists_what_the_cli_made(home, provider, browser, tmp_path):
    repo = git_repo(tmp_path / "repo")
    berth(home, "workspace", "create", "notes", "--description", "plain <b>folder</b>")
    made = berth_json(home, "workspace", "create", "feature", "--repo", str(repo))
    worktree = made["git"]["worktree"]
    # One commit ahead of main, and one file not committed.
    (tmp_path / "x").write_text("")
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "work"], cwd=worktree, check=True)
    with open(f"{worktree}/new.txt", "w") as f:
        f.write("new\n")
    session = berth_json(home, "session", "new", "-w", "feature")["id"]
    berth(home, "session", "append", session, "hello")

    with serving(home, provider) as base:
        sign_in(browser, base)
        rows = {r.get_attribute("data-workspace"): r for r in by_css(browser, "tr[data-workspace]")}
        assert made["id"] in rows and len(rows) == 2, rows.keys()
        text = by_css(browser, "table.workspaces")[0].text
        assert "notes" in text and "feature" in text
        # The description is text, not markup.
        assert "plain <b>folder</b>" in text
        # Git's state arrives after the page: ahead 1, one changed file, one session.
        row = rows[made["id"]]
        wait_for(browser, lambda d: "↑1" in row.find_element("css selector", '[data-fill="branch"]').text)
        assert row.find_element("css selector", '[data-fill="changes"]').text == "1 file"
        assert row.find_element("css selector", '[data-fill="sessions"]').text == "1"
        screenshot(browser, "workspaces-desktop", DESKTOP)
        screenshot(browser, "workspaces-phone", PHONE)

        # Search narrows the list.
        browser.get(f"{base}/?q=feat")
        assert [r.get_attribute("data-workspace") for r in by_css(browser, "tr[data-workspace]")] == [made["id"]]

        # The workspace: its session, and its diff against main rendered as a diff.
        browser.get(f"{base}/w/{made['id']}")
        assert by_css(browser, f'a[href="/s/{session}"]')
        # The session names its workspace and the model it calls (the config's, here).
        browser.get(f"{base}/s/{session}")
        assert "feature" in by_css(browser, "p.crumbs")[0].text
        browser.get(f"{base}/w/{made['id']}")
        browser.get(f"{base}/w/{made['id']}/diff")
        added = [e.text for e in by_css(browser, "pre.diff span.add")]
        assert "+new" in added, added
        screenshot(browser, "diff-phone", PHONE)


def test_a_session_page_shows_a_message_appended_by_the_cli_within_a_second(home, provider, browser):
    berth(home, "workspace", "create", "live")
    session = berth_json(home, "session", "new", "-w", "live")["id"]
    berth(home, "session", "append", session, "first message")
    with serving(home, provider) as base:
        sign_in(browser, base)
        browser.get(f"{base}/s/{session}")
        assert "first message" in by_css(browser, "#transcript")[0].text
        # A mark that a reload would wipe out.
        browser.execute_script("window.__notReloaded = true")
        time.sleep(0.5)  # the page's event stream is open
        berth(home, "session", "append", session, "--role", "assistant", "**appended** from the CLI")
        appended = time.monotonic()
        wait_for(
            browser,
            lambda d: any("appended from the CLI" in a.text for a in by_css(d, "#transcript article")),
            timeout=5,
        )
        took = time.monotonic() - appended
        assert took < 1.0, f"the message took {took:.2f}s to appear"
        assert browser.execute_script("return window.__notReloaded") is True
        # Rendered as Markdown.
        assert by_css(browser, "#transcript article.assistant strong")[-1].text == "appended"


def test_a_prompt_typed_on_the_page_streams_the_answer_into_it(home, provider, browser):
    berth(home, "workspace", "create", "chat")
    session = berth_json(home, "session", "new", "-w", "chat")["id"]
    provider.push(Reply().text("Hello", " from", " the", " stand-in", ".").slowly(0.3))
    with serving(home, provider) as base:
        sign_in(browser, base)
        browser.get(f"{base}/s/{session}")
        browser.execute_script("window.__notReloaded = true")
        box = by_css(browser, "#prompt-text")[0]
        box.send_keys("Say hello")
        by_css(browser, '#prompt button[type="submit"]')[0].click()
        # The answer shows while it streams: part of it, before the whole.
        seen = wait_for(browser, lambda d: (t := by_css(d, "#streaming .text")[0].text) and "stand-in" not in t and t)
        assert seen.startswith("Hello"), seen
        # Then the whole answer, as the transcript's message, and the preview goes.
        wait_for(
            browser,
            lambda d: any("Hello from the stand-in." in a.text for a in by_css(d, "#transcript article.assistant")),
        )
        wait_for(browser, lambda d: not by_css(d, "#streaming")[0].is_displayed())
        assert any("Say hello" in a.text for a in by_css(browser, "#transcript article.user"))
        assert browser.execute_script("return window.__notReloaded") is True
        screenshot(browser, "session-desktop", DESKTOP)
        screenshot(browser, "session-phone", PHONE)
        # Dark when the system is: the page follows prefers-color-scheme.
        light = browser.execute_script("return getComputedStyle(document.body).backgroundColor")
        browser.execute_cdp_cmd(
            "Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]}
        )
        dark = browser.execute_script("return getComputedStyle(document.body).backgroundColor")
        assert light == "rgb(255, 255, 255)" and dark != light, (light, dark)
        screenshot(browser, "session-phone-dark", PHONE)
    # It is the session's transcript, kept.
    shown = berth_json(home, "session", "show", session)
    assert [m["content"] for m in shown["messages"]][-2:] == ["Say hello", "Hello from the stand-in."]
    assert "Say hello" in str(provider.requests[0]["messages"])


def test_a_permission_request_is_answered_on_the_page(home, provider, browser):
    made = berth_json(home, "workspace", "create", "perm")
    session = berth_json(home, "session", "new", "-w", "perm")["id"]
    provider.push(Reply().text("Writing it.").tool("toolu_1", "write_file", {"path": "out.txt", "content": "from the page\n"}))
    provider.push(Reply().text("Done."))
    with serving(home, provider) as base:
        sign_in(browser, base)
        browser.get(f"{base}/s/{session}")
        by_css(browser, "#prompt-text")[0].send_keys("Write out.txt")
        by_css(browser, '#prompt button[type="submit"]')[0].click()
        box = wait_for(browser, lambda d: by_css(d, "#permissions .permission"))[0]
        assert "write_file" in box.text and "out.txt" in box.text
        screenshot(browser, "permission-phone", PHONE)
        box = by_css(browser, "#permissions .permission")[0]
        box.find_element("css selector", 'button[data-decision="allow_once"]').click()
        # Generous: a loaded CI machine is slow, and what the page said is kept for the failure.
        try:
            wait_for(
                browser,
                lambda d: any("Done." in a.text for a in by_css(d, "#transcript article.assistant")),
                timeout=30,
            )
        except Exception as e:
            said = by_css(browser, "#turn-status")[0].text
            raise AssertionError(f"no answer after allowing; the page said {said!r}") from e
        assert not by_css(browser, "#permissions .permission")
    with open(f"{made['path']}/out.txt") as f:
        assert f.read() == "from the page\n"
    # The model was told the write went through.
    second = str(provider.requests[1]["messages"])
    assert "tool_result" in second and "toolu_1" in second


def test_a_transcript_holding_markup_runs_no_script(home, provider, browser):
    berth(home, "workspace", "create", "xss")
    session = berth_json(home, "session", "new", "-w", "xss")["id"]
    payloads = [
        "<script>document.title='pwned-script'; alert(1)</script>",
        "<img src=x onerror=\"document.title='pwned-img'; alert(2)\">",
        "[click](javascript:alert(3))",
    ]
    for p in payloads[:2]:
        berth(home, "session", "append", session, p)
    with serving(home, provider) as base:
        sign_in(browser, base)
        browser.get(f"{base}/s/{session}")
        time.sleep(0.5)
        # And one that arrives live, through the event stream.
        berth(home, "session", "append", session, "--role", "assistant", payloads[2] + "\n\n<script>document.title='pwned-live'</script>")
        wait_for(browser, lambda d: len(by_css(d, "#transcript article")) == 3)
        time.sleep(0.5)
        from selenium.common.exceptions import NoAlertPresentException

        with pytest.raises(NoAlertPresentException):
            browser.switch_to.alert.text
        assert "pwned" not in browser.title
        assert not by_css(browser, "#transcript script") and not by_css(browser, "#transcript img")
        text = by_css(browser, "#transcript")[0].text
        assert "<script>document.title='pwned-script'; alert(1)</script>" in text
        assert "<img src=x onerror=" in text
        link = by_css(browser, "#transcript a")[0]
        assert link.text == "click" and not link.get_attribute("href").startswith("javascript")


def test_tokens_cookies_devices_and_csrf(home, provider):
    berth(home, "workspace", "create", "admins-only")
    berth(home, "workspace", "create", "twin-one", "--plain", "--id", "abcd0001")
    berth(home, "workspace", "create", "twin-two", "--plain", "--id", "abcd0002")
    phone = berth_json(home, "token", "create", "--device", "phone")["token"]
    berth_json(home, "token", "create", "--device", "laptop")
    laptop_ws = berth(home, "binding", "resolve", "laptop").strip()
    phone_ws = berth(home, "binding", "resolve", "phone").strip()
    laptop_session = berth_json(home, "session", "new", "-w", laptop_ws)["id"]
    with serving(home, provider) as base:
        # No token: the sign-in page, 401; the assets need none.
        status, _, body = fetch(f"{base}/")
        assert status == 401 and 'action="/login"' in body
        # It says where a token comes from.
        for where in ("BERTH_SERVE_TOKEN", "berth token create", "berth serve --pair NAME"):
            assert where in body, where
        assert fetch(f"{base}/s/{laptop_session}")[0] == 401
        assert fetch(f"{base}/assets/berth.js")[0] == 200
        # A wrong token signs nobody in.
        status, headers, _ = fetch(f"{base}/login", method="POST", data=b"token=nope")
        assert status == 401 and headers.get("Set-Cookie") is None
        # The phone's token signs in: a cookie scripts cannot read, sent to this site only.
        form = urllib.parse.urlencode({"token": phone}).encode()
        status, headers, _ = fetch(f"{base}/login", method="POST", data=form)
        assert status == 303 and headers["Location"] == "/"
        cookie = headers["Set-Cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
        jar = cookie.split(";")[0]
        # The phone sees its own workspace, and no other.
        status, _, body = fetch(f"{base}/", cookie=jar)
        assert status == 200 and phone_ws in body
        assert laptop_ws not in body and "admins-only" not in body
        assert fetch(f"{base}/w/{laptop_ws}", cookie=jar)[0] == 404
        assert fetch(f"{base}/s/{laptop_session}", cookie=jar)[0] == 404
        assert fetch(f"{base}/s/{laptop_session}/events", cookie=jar)[0] == 404
        assert fetch(f"{base}/runs", cookie=jar)[0] == 403
        assert fetch(f"{base}/w/{phone_ws}", cookie=jar)[0] == 200
        assert fetch(f"{base}/w/{phone_ws[:6]}", cookie=jar)[0] == 200
        # A prefix several workspaces share is plain "not found" to a device: the error once
        # named each of them.
        status, _, body = fetch(f"{base}/w/abcd", cookie=jar)
        assert status == 404 and "abcd0001" not in body and "twin" not in body, body
        status, _, body = fetch(f"{base}/w/abcd", token=TOKEN)
        assert status != 200 and "abcd0001" in body, body
        # The admin sees everything.
        status, _, body = fetch(f"{base}/", token=TOKEN)
        assert laptop_ws in body and phone_ws in body and "admins-only" in body
        # A state change without the page's CSRF header is refused, even with the cookie.
        status, _, _ = fetch(f"{base}/w/{phone_ws}/sessions", cookie=jar, method="POST", data=b"")
        assert status == 403
        # Another site's page is refused by its Origin before anything else.
        status, _, _ = fetch(
            f"{base}/w/{phone_ws}/sessions",
            cookie=jar,
            method="POST",
            data=b"",
            headers={"Origin": "https://evil.example.com"},
        )
        assert status == 403
        # With the page's header, from its own origin, it goes through.
        _, _, page = fetch(f"{base}/w/{phone_ws}", cookie=jar)
        csrf = page.split('name="berth-csrf" content="')[1].split('"')[0]
        status, _, body = fetch(
            f"{base}/w/{phone_ws}/sessions",
            cookie=jar,
            method="POST",
            data=b"",
            headers={"x-berth-csrf": csrf, "Origin": base},
        )
        assert status == 200 and '"/s/' in body
        # A revoked token's cookie signs nobody in any more.
        berth(home, "token", "revoke", "phone")
        status, _, body = fetch(f"{base}/", cookie=jar)
        assert status == 401 and "not valid any more" in body


def test_the_runs_page_follows_a_run_and_stops_it(home, provider, browser, tmp_path):
    from conftest import env_for

    repo = git_repo(tmp_path / "repo")
    # An answer that takes about ten seconds: the run is still working when the page looks.
    provider.push(Reply().text(*[f"part {i} " for i in range(40)]).slowly(0.25))
    started = subprocess.run(
        [BERTH, "run", "count slowly", "--detach", "--json"],
        cwd=repo,
        env=env_for(home, provider),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert started.returncode == 0, started.stderr
    with serving(home, provider) as base:
        sign_in(browser, base)
        browser.get(f"{base}/runs")
        run = wait_for(browser, lambda d: by_css(d, 'section.run[data-state="running"]'))[0]
        assert "count slowly" in run.text
        # The table follows the agent without a reload: its state, then its tokens.
        wait_for(browser, lambda d: "working" in by_css(d, "section.run table.agents")[0].text)
        screenshot(browser, "runs-desktop", DESKTOP)
        screenshot(browser, "runs-phone", PHONE)
        by_css(browser, "section.run button.js-post")[0].click()
        browser.switch_to.alert.accept()
        wait_for(browser, lambda d: by_css(d, 'section.run[data-state="ended"]'), timeout=30)
        assert "stopped" in by_css(browser, "section.run table.agents")[0].text
    listed = berth_json(home, "run", "list")
    assert listed[0]["state"] == "ended", listed


def test_prompts_from_the_page_count_against_the_token_rate(home, provider):
    made = berth_json(home, "workspace", "create", "rate")
    session = berth_json(home, "session", "new", "-w", "rate")["id"]
    provider.push(Reply().text("one"))
    provider.push(Reply().text("two"))
    with serving(home, provider, "--max-prompts-per-minute", "1") as base:
        _, _, page = fetch(f"{base}/s/{session}", token=TOKEN)
        csrf = page.split('name="berth-csrf" content="')[1].split('"')[0]
        send = lambda: fetch(  # noqa: E731
            f"{base}/s/{session}/prompt",
            token=TOKEN,
            method="POST",
            data=b"text=hello",
            headers={"x-berth-csrf": csrf},
        )
        assert send()[0] == 202
        status, _, body = send()
        assert status == 429 and "prompts of the last minute" in body
        # The first prompt reaches the model; the refused one never does.
        deadline = time.monotonic() + 10
        while not provider.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)
        assert len(provider.requests) == 1
    assert made["id"]


def test_file_views_stay_inside_the_workspace(home, provider, tmp_path):
    repo = git_repo(tmp_path / "repo")
    made = berth_json(home, "workspace", "create", "files", "--repo", str(repo))
    worktree = made["git"]["worktree"]
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "key.txt").write_text("do not show\n")
    subprocess.run(["ln", "-s", str(secret), f"{worktree}/escape"], check=True)
    subprocess.run(
        [BERTH, "workspace", "storage", "write", "files", "notes/plan.md"],
        input="# Plan\n\n**bold** then <script>alert(1)</script>\n",
        text=True,
        env={**__import__("os").environ, "BERTH_HOME": str(home)},
        check=True,
    )
    ws = made["id"]
    with serving(home, provider) as base:
        # Storage, browsed and read: Markdown rendered, its HTML as text.
        status, _, body = fetch(f"{base}/w/{ws}/files?path=notes", token=TOKEN)
        assert status == 200 and "plan.md" in body
        status, _, body = fetch(f"{base}/w/{ws}/files?path=notes/plan.md", token=TOKEN)
        assert status == 200 and "<h1>Plan</h1>" in body and "<strong>bold</strong>" in body
        assert "<script>alert" not in body and "&lt;script&gt;alert(1)&lt;/script&gt;" in body
        # The worktree, browsed and read.
        status, _, body = fetch(f"{base}/w/{ws}/files?root=worktree&path=README.md", token=TOKEN)
        assert status == 200 and "hello" in body
        # No way out: `..`, an absolute path, a symlink out.
        for root, path in [
            ("storage", "../../../../etc/passwd"),
            ("storage", "/etc/passwd"),
            ("worktree", "../secret/key.txt"),
            ("worktree", "escape/key.txt"),
            ("worktree", str(secret / "key.txt")),
        ]:
            query = urllib.parse.urlencode({"root": root, "path": path})
            status, _, body = fetch(f"{base}/w/{ws}/files?{query}", token=TOKEN)
            assert 400 <= status < 500, (root, path, status)
            assert "do not show" not in body and "root:x" not in body, (root, path)


def test_a_slash_command_from_the_page_runs_without_the_model(home, provider, browser):
    berth(home, "workspace", "create", "cmds")
    session = berth_json(home, "session", "new", "-w", "cmds")["id"]
    berth(home, "session", "append", session, "old message")
    with serving(home, provider) as base:
        sign_in(browser, base)
        browser.get(f"{base}/s/{session}")
        assert "old message" in by_css(browser, "#transcript")[0].text
        by_css(browser, "#prompt-text")[0].send_keys("/context")
        by_css(browser, '#prompt button[type="submit"]')[0].click()
        said = wait_for(browser, lambda d: (e := by_css(d, "#said")[0]).is_displayed() and e)
        assert "context" in said.text.lower() and "tokens" in said.text.lower(), said.text
        # /clear empties the transcript; the page follows.
        by_css(browser, "#prompt-text")[0].send_keys("/clear")
        by_css(browser, '#prompt button[type="submit"]')[0].click()
        wait_for(browser, lambda d: not by_css(d, "#transcript article"))
    assert berth_json(home, "session", "show", session)["messages"] == []
    assert provider.requests == []


def test_a_permission_nobody_answers_expires_and_is_recorded(home, provider):
    """A permission request shown on the page once waited forever, holding the session's
    turn; unanswered for `[serve] permission_timeout_secs` it is answered "no", recorded, and
    the session takes prompts again."""
    (home / "config.toml").write_text("[serve]\npermission_timeout_secs = 1\n")
    berth_json(home, "workspace", "create", "waits")
    session = berth_json(home, "session", "new", "-w", "waits")["id"]
    provider.push(Reply().tool("toolu_1", "write_file", {"path": "a.txt", "content": "x"}))
    provider.push(Reply().text("Nobody answered."))
    provider.push(Reply().text("again"))
    with serving(home, provider) as base:
        _, _, page = fetch(f"{base}/s/{session}", token=TOKEN)
        csrf = page.split('name="berth-csrf" content="')[1].split('"')[0]
        send = lambda text: fetch(  # noqa: E731
            f"{base}/s/{session}/prompt",
            token=TOKEN,
            method="POST",
            data=f"text={text}".encode(),
            headers={"x-berth-csrf": csrf},
        )
        assert send("write")[0] == 202
        deadline = time.monotonic() + 20
        while len(provider.requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(provider.requests) == 2, "the turn never went on"
        # The session's turn is free again.
        deadline = time.monotonic() + 10
        while send("again")[0] != 202:
            assert time.monotonic() < deadline, "the session stayed busy"
            time.sleep(0.2)
    shown = berth_json(home, "session", "show", session)
    tools = [m["content"] for m in shown["messages"] if m["role"] == "tool"]
    assert len(tools) == 1 and "nobody answered" in tools[0], tools


def test_a_session_no_prompt_could_be_answered_in_is_not_made(home, provider):
    """Without the provider's key the page's "new session" is refused before anything is made:
    503, with the variable to set, the kind the CLI's exit status 7 and MCP's `not_configured`
    say."""
    ws = berth_json(home, "workspace", "create", "keyless")["id"]
    with serving(home, provider, keyless=True) as base:
        _, _, page = fetch(f"{base}/w/{ws}", token=TOKEN)
        csrf = page.split('name="berth-csrf" content="')[1].split('"')[0]
        status, _, body = fetch(
            f"{base}/w/{ws}/sessions",
            token=TOKEN,
            method="POST",
            data=b"",
            headers={"x-berth-csrf": csrf, "Origin": base},
        )
        assert status == 503 and "ANTHROPIC_API_KEY" in body, (status, body)
    assert berth_json(home, "session", "list") == []


def test_a_run_started_over_mcp_is_on_the_runs_page(home, provider):
    """One model of a run: `session_run` on the server's MCP endpoint makes a kept run, which
    the runs page lists (and `berth run list` too) like one the CLI started."""
    import anyio
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    berth_json(home, "workspace", "create", "orchestrated")
    provider.push(Reply().text("Looked around."))

    async def start_over_mcp(base):
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with create_mcp_http_client(headers=headers) as client:
            async with streamable_http_client(f"{base}/mcp", http_client=client) as (read, write):
                async with ClientSession(read, write) as s:
                    await s.initialize()
                    r = await s.call_tool(
                        "session_run",
                        {"task": "Look around the place", "workspace_identifier": "orchestrated"},
                    )
                    assert not r.is_error, r.content
                    return r.structured_content

    with serving(home, provider) as base:
        started = anyio.run(start_over_mcp, base)
        for _ in range(100):
            status, _, table = fetch(f"{base}/runs/table", token=TOKEN)
            assert status == 200
            if "Look around the place" in table and "done" in table:
                break
            time.sleep(0.1)
        else:
            raise AssertionError(table)
    listed = berth_json(home, "run", "list")
    assert [r["id"] for r in listed] == [started["kept_run"]], listed
    assert listed[0]["agents"][0]["session"] == started["session_id"]


def test_fork_on_the_session_page_opens_a_copy_and_leaves_the_first(home, provider, browser):
    berth(home, "workspace", "create", "forked")
    session = berth_json(home, "session", "new", "-w", "forked", "-t", "plan")["id"]
    berth(home, "session", "append", session, "Make a plan")
    berth(home, "session", "append", session, "--role", "assistant", "Step one")
    with serving(home, provider) as base:
        sign_in(browser, base)
        browser.get(f"{base}/s/{session}")
        by_css(browser, "#fork")[0].click()
        wait_for(browser, lambda d: f"/s/{session}" not in d.current_url and "/s/" in d.current_url)
        fork = browser.current_url.rsplit("/s/", 1)[1]
        assert "fork of plan" in by_css(browser, "h1")[0].text
        assert "Step one" in by_css(browser, "#transcript")[0].text
    shown = berth_json(home, "session", "show", fork)
    assert [m["content"] for m in shown["messages"]] == ["Make a plan", "Step one"]
    assert len(berth_json(home, "session", "show", session)["messages"]) == 2
