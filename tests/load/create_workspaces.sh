#!/usr/bin/env bash
# Creates N plain workspaces (default 10,000) through the `berth` command line, one process
# each, in a new temporary home with the default config, and says how long it took.
#
#   cargo build --release && tests/load/create_workspaces.sh [N] [BERTH-BINARY]
#
# The binary defaults to target/release/berth under $CARGO_TARGET_DIR (or ./target). A
# workspace takes no ports when it is made, so N may exceed the 1,000 blocks of the default
# [ports] range; the script then gives the last workspace its block, to show that giving one
# still works with N workspaces in the home. It measures, it does not check a target; the
# home is removed at the end. Not part of ./test.sh.
set -euo pipefail

count=${1:-10000}
root=$(cd "$(dirname "$0")/../.." && pwd)
berth=${2:-${CARGO_TARGET_DIR:-$root/target}/release/berth}
[ -x "$berth" ] || { echo "no berth binary at $berth; run cargo build --release, or name one" >&2; exit 1; }
case "$count" in '' | *[!0-9]*) echo "N must be a number, not '$count'" >&2; exit 1 ;; esac

home=$(mktemp -d "${TMPDIR:-/tmp}/berth-create-bench.XXXXXX")
# Removing N workspace folders can take as long as making them on some filesystems.
trap 'echo "removing $home" >&2; rm -rf "$home"' EXIT
export BERTH_HOME=$home
# Outside any repository, and with no BERTH_* setting of the caller's: the default config.
cd "$home"
for var in $(compgen -e); do
  case "$var" in BERTH_HOME) ;; BERTH_*) unset "$var" ;; esac
done

echo "$($berth --version): $count plain workspaces, one 'berth workspace create' each, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
# The floor: starting the process and exiting, 100 times.
floor_start=$(date +%s.%N)
for ((i = 1; i <= 100; i++)); do "$berth" --version >/dev/null; done
floor_end=$(date +%s.%N)
# Whether a create costs more with more workspaces: the first and the last 1,000 are timed
# apart (the first 1,000 of a smaller N are all of them).
tenth=$((count < 1000 ? count : 1000))
start=$(date +%s.%N)
for ((i = 1; i <= count; i++)); do
  "$berth" workspace create "$(printf 'w%05d' "$i")" --plain >/dev/null
  if ((i == tenth)); then first_done=$(date +%s.%N); fi
  if ((i == count - tenth)); then last_start=$(date +%s.%N); fi
done
end=$(date +%s.%N)
last_start=${last_start:-$start}
made=$("$berth" workspace list --json | grep -c '"id":' || true)
last=$(printf 'w%05d' "$count")
ports=$("$berth" workspace ports "$last")
awk -v n="$count" -v s="$start" -v e="$end" -v made="$made" -v last="$last" -v ports="$ports" \
  -v fs="$floor_start" -v fe="$floor_end" -v tenth="$tenth" -v fd="$first_done" -v ls="$last_start" 'BEGIN {
  t = e - s
  printf "berth --version (start-up floor): %.2f ms\n", 1000 * (fe - fs) / 100
  printf "created %d in %.1f s: %.2f ms per create, %.0f creates/s\n", made, t, 1000 * t / n, n / t
  printf "the first %d: %.2f ms per create; the last %d: %.2f ms per create\n", tenth, 1000 * (fd - s) / tenth, tenth, 1000 * (e - ls) / tenth
  printf "then workspace ports %s: %s\n", last, ports
}'
[ "$made" -eq "$count" ] || { echo "only $made of $count workspaces were listed" >&2; exit 1; }
