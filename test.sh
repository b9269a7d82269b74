#!/usr/bin/env bash
# Runs every berth test: unit tests, the store conformance suite, and the integration tests that
# drive the real `berth` binary (concurrency, SIGKILL crash safety, hostile input, corruption).
# It installs whatever the tests need first; today that is only the Rust toolchain, which the
# machine provides.
set -euo pipefail
cd "$(dirname "$0")"
command -v cargo >/dev/null || { echo "test.sh: cargo is required (https://rustup.rs)" >&2; exit 1; }
command -v git >/dev/null || { echo "test.sh: git is required" >&2; exit 1; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo test --workspace --locked 2>&1 | tee "$log" || status=$?
# cargo's last line is a per-binary summary (often the doc-tests' "0 passed"); end with the total.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "%d passed, %d failed\n", p, f }' "$log"
exit "$status"
