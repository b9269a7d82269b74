"""Fixtures for the web page's tests: `berth serve` on a free loopback port against the local
stand-in for the Anthropic API (tests/acp/provider.py), and a real headless Chromium (Debian's
`chromium`, driven through Debian's `chromedriver` by Selenium) that signs in with a token.

A missing browser or driver fails the tests: test.sh installs both.
"""

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "acp"))
from provider import FakeAnthropic, Reply  # noqa: E402,F401

ROOT = Path(__file__).resolve().parents[2]
BERTH = os.environ.get("TEST_BERTH_BIN") or str(ROOT / "target" / "debug" / "berth")
CHROMIUM = os.environ.get("TEST_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("TEST_CHROMEDRIVER", "/usr/bin/chromedriver")
# Where the tests leave their screenshots, to be looked at.
SCREENSHOTS = Path(os.environ.get("TEST_SCREENSHOTS", ROOT / "target" / "web-screenshots"))
TOKEN = "web-test-admin-token"

PHONE = (390, 844)
DESKTOP = (1280, 900)


@pytest.fixture
def home(tmp_path):
    h = tmp_path / "home"
    h.mkdir()
    return h


@pytest.fixture
def provider():
    p = FakeAnthropic()
    yield p
    p.stop()


def env_for(home, provider):
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", str(home)),
        "BERTH_HOME": str(home),
        "ANTHROPIC_API_KEY": "test-key",
        "BERTH_PROVIDER": "claude",
        "BERTH_PROVIDERS__CLAUDE__BASE_URL": provider.url,
        "BERTH_PROVIDERS__CLAUDE__MODEL": "test-model",
    }


def berth(home, *args, cwd=None):
    """Runs the berth CLI on `home`; returns its stdout."""
    done = subprocess.run(
        [BERTH, *args],
        env={**os.environ, "BERTH_HOME": str(home)},
        cwd=str(cwd or home),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, f"berth {' '.join(args)} failed: {done.stderr}"
    return done.stdout


def berth_json(home, *args, cwd=None):
    return json.loads(berth(home, *args, "--json", cwd=cwd))


@contextlib.contextmanager
def serving(home, provider, *args, token=TOKEN, keyless=False, extra_env=None):
    """`berth serve` on a free loopback port (more flags in `args`; `keyless`: without the
    provider's API key; `extra_env`: more variables); yields its base URL
    (`http://127.0.0.1:PORT`)."""
    env = {**env_for(home, provider), **(extra_env or {})}
    if keyless:
        del env["ANTHROPIC_API_KEY"]
    if token:
        env["BERTH_SERVE_TOKEN"] = token
    proc = subprocess.Popen(
        [BERTH, "serve", "--listen", "127.0.0.1:0", *args],
        env=env,
        cwd=str(home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stderr.readline()
    found = re.search(r"web page at (http://[0-9.]+:[0-9]+)/", line)
    if not found:
        proc.kill()
        raise AssertionError(f"berth serve said: {line!r}")
    try:
        yield found.group(1)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def fetch(url, token=None, cookie=None, method="GET", data=None, headers=None):
    """(status, headers, body) of a plain HTTP request; errors are answers too."""
    request = urllib.request.Request(url, method=method, data=data)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    if cookie:
        request.add_header("Cookie", cookie)
    for k, v in (headers or {}).items():
        request.add_header(k, v)
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(request, timeout=10) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


@pytest.fixture(scope="session")
def chromium_ready():
    for path in (CHROMIUM, CHROMEDRIVER):
        if not shutil.which(path):
            pytest.fail(f"{path} is missing: test.sh installs Debian's chromium and chromium-driver")


@pytest.fixture
def browser(chromium_ready, tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    # As root, in a container, on a machine without the Internet: no sandbox, no GPU, none of
    # Chromium's own background connections.
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={tmp_path / 'chromium'}",
        f"--window-size={DESKTOP[0]},{DESKTOP[1]}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(20)
    try:
        yield driver
    finally:
        driver.quit()


def sign_in(driver, base, token=TOKEN):
    """Signs the browser in through the sign-in page, as a person would."""
    from selenium.webdriver.common.by import By

    driver.get(f"{base}/login")
    driver.find_element(By.ID, "token").send_keys(token)
    driver.find_element(By.CSS_SELECTOR, "form.login button").click()
    wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "body[data-page=workspaces]"))


def wait_for(driver, condition, timeout=10):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.05).until(condition)


def screenshot(driver, name, size):
    """Saves the page at `size` (width, height) as SCREENSHOTS/name.png; the full page's
    height, so what scrolls is in it too."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    width, height = size
    driver.set_window_size(width, height)
    full = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(width, max(height, min(full + 120, 4000)))
    path = SCREENSHOTS / f"{name}.png"
    driver.save_screenshot(str(path))
    driver.set_window_size(*DESKTOP)
    return path
