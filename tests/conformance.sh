#!/usr/bin/env bash
# Runs the official MCP conformance suite (@modelcontextprotocol/conformance) against
# `berth mcp --transport http`. The suite needs Node 22 or newer; tests/node_tools.sh installs
# both (pinned) into .tools/node from the npm registry whatever Node the machine has.
# Usage: tests/conformance.sh PATH/TO/berth
# Prints one line per scenario and ends with "conformance: N passed, M failed"; exits non-zero
# if any scenario failed or the server could not start.
set -euo pipefail
cd "$(dirname "$0")/.."
berth=${1:?usage: tests/conformance.sh PATH/TO/berth}
# The generic server scenarios; the others test the reference "everything" server's own
# fixtures (test://static-text and the like), which berth does not and should not serve.
SCENARIOS=(server-initialize ping tools-list resources-list prompts-list completion-complete dns-rebinding-protection)

eval "$(tests/node_tools.sh)"
node=$NODE
suite=$CONFORMANCE

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
