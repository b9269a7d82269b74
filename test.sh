#!/usr/bin/env bash
# Runs every berth test: rustfmt and clippy (warnings are errors), unit tests, the store
# conformance suite, and the integration tests that
# drive the real `berth` binary (concurrency, SIGKILL crash safety, hostile input, corruption),
# and the web page's tests in a real headless Chromium (Debian's chromium and chromium-driver,
# from apt-get when missing; Selenium from PyPI).
# It installs whatever the tests need first: the Rust toolchain comes with the machine; the
# official MCP Python SDK (the independent client of `berth mcp`) and the official ACP Python
# SDK (the independent client of `berth acp`) go into .venv from PyPI;
# Node 22, the MCP conformance suite and the MCP Inspector go into .tools from npm
# (tests/node_tools.sh); tmux,
# for the terminal tests, comes from apt-get when it is missing, and so does Debian's postgresql
# package: a throwaway Postgres server (tests/postgres.sh) runs for the tests of the Postgres
# store, and the run fails when it cannot be started.
set -euo pipefail
cd "$(dirname "$0")"
command -v cargo >/dev/null || { echo "test.sh: cargo is required (https://rustup.rs)" >&2; exit 1; }
command -v git >/dev/null || { echo "test.sh: git is required" >&2; exit 1; }
command -v python3 >/dev/null || { echo "test.sh: python3 (3.10+) is required" >&2; exit 1; }
command -v npm >/dev/null || { echo "test.sh: npm is required (it installs Node 22 and the MCP conformance suite)" >&2; exit 1; }
# The terminal tests (crates/berth-cli/tests/gc_terminal.rs) drive berth inside tmux; install it if missing.
command -v tmux >/dev/null || { command -v apt-get >/dev/null && apt-get update -qq && apt-get install -y -qq tmux >/dev/null && command -v tmux >/dev/null; } || { echo "test.sh: tmux is required for the terminal tests" >&2; exit 1; }
# `man.rs` renders `berth man`'s pages with the real man (groff), which must not warn.
command -v man >/dev/null || { command -v apt-get >/dev/null && apt-get update -qq && apt-get install -y -qq man-db groff-base >/dev/null && command -v man >/dev/null; } || { echo "test.sh: man (man-db) is required for the manual page test" >&2; exit 1; }
# The web page's tests (tests/web) drive Debian's Chromium through Debian's ChromeDriver.
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  { command -v apt-get >/dev/null && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; } \
    || echo "test.sh: cannot install chromium and chromium-driver; the web page's tests will fail" >&2
fi
# The desktop notification test (tests/web/test_notify.py) starts its own D-Bus session bus and
# has berth call notify-send on it.
if ! command -v dbus-daemon >/dev/null || ! command -v notify-send >/dev/null; then
  { command -v apt-get >/dev/null && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dbus-daemon libnotify-bin >/dev/null; } \
    || echo "test.sh: cannot install dbus-daemon and libnotify-bin; the desktop notification test will fail" >&2
fi
# The sandbox's tests (crates/berth-sandbox/tests, tests/acp/test_sandbox.py) also run berth as an
# unprivileged user when this is root; this makes that user.
if [ "$(id -u)" = 0 ] && ! id berth-sandbox-test >/dev/null 2>&1; then
  useradd --system --no-create-home --shell /usr/sbin/nologin berth-sandbox-test \
    || { echo "test.sh: cannot make the user berth-sandbox-test the sandbox's tests run as" >&2; exit 1; }
fi
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import mcp, acp, websockets, pytest, pytest_timeout, selenium, jeepney' 2>/dev/null; then
  python3 -m venv .venv
  .venv/bin/pip install --quiet --disable-pip-version-check -r tests/mcp/requirements.txt -r tests/acp/requirements.txt -r tests/web/requirements.txt
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# The Postgres store's tests (conformance, several servers on one database, crashes) need a
# server: a new cluster in a temp folder on a free port, stopped and removed on exit.
pg_env=$(tests/postgres.sh start) || { echo "test.sh: cannot start the Postgres server the tests need (see above)" >&2; exit 1; }
eval "$pg_env"
trap 'rm -f "$log"; tests/postgres.sh stop "$TEST_BERTH_POSTGRES_DIR"' EXIT
status=0
# A fresh clone gains nothing from incremental compilation, which would add gigabytes of
# build state to a disk CI shares with the machine's other work.
if [ "${CI:-}" = true ]; then export CARGO_INCREMENTAL=0; fi
# The code's own checks first: formatting, and clippy with every warning an error (the
# workspace's [lints] included). A failure fails the run, after every test has run too.
cargo fmt --version >/dev/null 2>&1 && cargo clippy --version >/dev/null 2>&1 \
  || { echo "test.sh: rustfmt and clippy are required (rustup component add rustfmt clippy)" >&2; exit 1; }
if ! cargo fmt --all --check; then
  echo "test.sh: the code is not formatted as cargo fmt formats it (run cargo fmt)" >&2
  status=1
fi
if ! cargo clippy --workspace --all-targets --locked -- -D warnings; then
  echo "test.sh: clippy found something (see above)" >&2
  status=1
fi
# --no-fail-fast: a failing test binary must not hide the results of the ones after it.
cargo test --workspace --locked --no-fail-fast 2>&1 | tee "$log" || status=$?
# Node 22, the MCP conformance suite and the MCP Inspector (whose CLI tests/mcp drives too).
node_tools=$(tests/node_tools.sh) || { echo "test.sh: cannot install Node and the MCP tools from npm" >&2; exit 1; }
eval "$node_tools"
export TEST_NODE="$NODE" TEST_MCP_INSPECTOR="$INSPECTOR"
# The MCP server against the official Python SDK; cargo test has built the binary.
TEST_BERTH_BIN="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/debug/berth" .venv/bin/python -m pytest tests/mcp -q -p no:cacheprovider --timeout=120 2>&1 | tee -a "$log" || status=$?
# A third-party ACP agent from npm for `berth run` (tests/acp/test_run.py): Zed's Claude Agent
# ACP adapter, pinned, into .tools/acp-agents; the test fails (never skips) without it.
CLAUDE_AGENT_ACP_VERSION=0.23.1
acp_agents=.tools/acp-agents
if [ ! -f "$acp_agents/.installed-$CLAUDE_AGENT_ACP_VERSION" ]; then
  rm -rf "$acp_agents" && mkdir -p "$acp_agents"
  npm install --prefix "$acp_agents" --no-save --no-audit --no-fund --loglevel=error \
    "@zed-industries/claude-agent-acp@$CLAUDE_AGENT_ACP_VERSION" >&2 \
    && touch "$acp_agents/.installed-$CLAUDE_AGENT_ACP_VERSION" \
    || echo "test.sh: cannot install @zed-industries/claude-agent-acp; its test will fail" >&2
fi
export TEST_CLAUDE_AGENT_ACP="$PWD/$acp_agents/node_modules/.bin/claude-agent-acp"
# berth's agent over ACP against the official ACP Python SDK, with a local stand-in for the
# provider's API.
TEST_BERTH_BIN="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/debug/berth" .venv/bin/python -m pytest tests/acp -q -p no:cacheprovider --timeout=120 2>&1 | tee -a "$log" || status=$?
# The web page of `berth serve` in a real headless Chromium (screenshots: target/web-screenshots).
TEST_BERTH_BIN="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/debug/berth" .venv/bin/python -m pytest tests/web -q -p no:cacheprovider --timeout=120 2>&1 | tee -a "$log" || status=$?
# The official MCP conformance suite against `berth mcp --transport http` (installs Node 22).
tests/conformance.sh "$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/debug/berth" 2>&1 | tee -a "$log" || status=$?
# cargo's last line is a per-binary summary (often the doc-tests' "0 passed"); end with the total.
# pytest's summary ("5 passed in 1.2s", "1 failed, 4 passed in …") and the conformance
# suite's ("conformance: 7 passed, 0 failed") count the same way.
awk '/^test result:/ || /^=* ?[0-9]+ (passed|failed)/ || /^conformance: [0-9]+ passed/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "%d passed, %d failed\n", p, f }' "$log"
exit "$status"
