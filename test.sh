#!/usr/bin/env bash
# Runs every berth test: unit tests, the store conformance suite, and the integration tests that
# drive the real `berth` binary (concurrency, SIGKILL crash safety, hostile input, corruption).
# It installs whatever the tests need first; today that is only the Rust toolchain, which the
# machine provides.
set -euo pipefail
cd "$(dirname "$0")"
command -v cargo >/dev/null || { echo "test.sh: cargo is required (https://rustup.rs)" >&2; exit 1; }
command -v git >/dev/null || { echo "test.sh: git is required" >&2; exit 1; }
cargo test --workspace --locked
