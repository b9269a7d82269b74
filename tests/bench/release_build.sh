#!/usr/bin/env bash
# README's first command, measured: a cold `cargo build --release` of the workspace into a new
# target folder, its wall and CPU time, the crates that took longest, the size of the `berth`
# binary as built and stripped, and whether a panic's backtrace names berth's files and lines.
#
#   tests/bench/release_build.sh              # a new target folder under ${TMPDIR:-/tmp}, removed after
#   BENCH_TARGET_DIR=DIR tests/bench/release_build.sh   # build into DIR (empty it first for a cold build)
#   BENCH_NICE=19 tests/bench/release_build.sh          # under `nice -n 19` on a shared machine
#   BENCH_BINARY=PATH tests/bench/release_build.sh      # no build: sizes and backtrace of PATH only
#
# Cargo's registry cache is kept: a cold build here is every crate compiled, not downloaded.
# The figures depend on the machine and on what else runs on it; compare the CPU time (user +
# system) and the per-crate times of two runs on the same machine, not only the wall time.
#
# The backtrace: berth has no way to panic on purpose, and gets none for this. `berth acp`
# starts a thread for standard output and panics (expect) when it cannot; run it as a user that
# may not have another thread (RLIMIT_NPROC = 1, which root ignores, so as `nobody` when run as
# root) and the panic is real. With RUST_BACKTRACE=1 its frames must say `at …/crates/berth-…rs:LINE`.
set -euo pipefail

die() { echo "tests/bench/release_build.sh: $*" >&2; exit 1; }
cd "$(dirname "$0")/../.."

human() { awk -v b="$1" 'BEGIN { printf "%.1f MB (%d bytes)", b / 1000000, b }'; }

binary=${BENCH_BINARY:-}
if [ -z "$binary" ]; then
  command -v cargo >/dev/null || die "cargo is required"
  target=${BENCH_TARGET_DIR:-}
  cleanup=
  if [ -z "$target" ]; then
    target=$(mktemp -d "${TMPDIR:-/tmp}/berth-release-bench.XXXXXX")
    # mktemp's folder is its owner's alone; the backtrace check runs the binary as nobody.
    chmod 755 "$target"
    cleanup=$target
  fi
  trap '[ -n "$cleanup" ] && rm -rf "$cleanup"' EXIT
  nice_cmd=()
  [ -n "${BENCH_NICE:-}" ] && nice_cmd=(nice -n "$BENCH_NICE")
  echo "cold release build into $target (cores: $(nproc), load average: $(cut -d' ' -f1-3 /proc/loadavg))"
  ticks_before=$(awk '{print $16 + $17}' /proc/$$/stat)
  start=$(date +%s.%N)
  CARGO_TARGET_DIR=$target "${nice_cmd[@]}" cargo build --release --locked --timings \
    >"$target/build.log" 2>&1 || { tail -n 30 "$target/build.log" >&2; die "the build failed"; }
  end=$(date +%s.%N)
  # CPU time of the build's processes (children of this shell, waited for), in clock ticks.
  ticks=$(awk '{print $16 + $17}' /proc/$$/stat)
  hz=$(getconf CLK_TCK)
  awk -v s="$start" -v e="$end" -v t="$ticks" -v b="$ticks_before" -v hz="$hz" 'BEGIN {
    w = e - s; printf "wall time: %dm %02ds (%.0f s)\n", w / 60, w % 60, w
    printf "CPU time (user + system of the build): %.0f s\n", (t - b) / hz
  }'
  timing=$target/cargo-timings/cargo-timing.html
  if command -v python3 >/dev/null && [ -f "$timing" ]; then
    python3 - "$timing" <<'EOF'
import json, re, sys
html = open(sys.argv[1]).read()
units = json.loads(re.search(r"const UNIT_DATA = (\[.*?\]);\n", html, re.S).group(1))
units.sort(key=lambda u: -u["duration"])
print("longest units (wall seconds each, while others ran beside them):")
for u in units[:10]:
    kind = " (build script)" if u["mode"] == "run-custom-build" else ""
    print(f"  {u['duration']:6.1f}  {u['name']} {u['version']}{kind}")
EOF
  fi
  binary=$target/release/berth
fi

[ -x "$binary" ] || die "no binary at $binary"
stripped=$(mktemp "${TMPDIR:-/tmp}/berth-stripped.XXXXXX")
strip -o "$stripped" "$binary"
echo "binary as built: $(human "$(stat -c %s "$binary")")"
echo "stripped:        $(human "$(stat -c %s "$stripped")")"
rm -f "$stripped"
dwp=${binary}.dwp
[ -f "$dwp" ] && echo "debug info beside it ($(basename "$dwp")): $(human "$(stat -c %s "$dwp")")"

# The backtrace of a real panic (see the top of this file).
home=$(mktemp -d "${TMPDIR:-/tmp}/berth-bt-home.XXXXXX")
as=()
if [ "$(id -u)" = 0 ]; then
  command -v setpriv >/dev/null || die "setpriv is needed to run the panic as nobody"
  chown nobody "$home"
  as=(setpriv --reuid="$(id -u nobody)" --regid="$(id -g nobody)" --clear-groups)
  # nobody must be able to reach the binary.
  case "$binary" in /root/*) echo "note: a binary under /root may be out of nobody's reach" >&2 ;; esac
fi
out=$(BERTH_HOME=$home RUST_BACKTRACE=1 "${as[@]}" prlimit --nproc=1 -- "$binary" acp </dev/null 2>&1 || true)
rm -rf "$home"
if ! grep -q "panicked at crates/berth-acp/src/transport.rs" <<<"$out"; then
  echo "$out" | head -n 20 >&2
  die "berth acp did not panic as expected; no backtrace to check"
fi
frames=$(grep -E '^ +at .*crates/berth-[a-z-]+/src/[^ ]+\.rs:[0-9]+:[0-9]+$' <<<"$out" || true)
if [ -z "$frames" ]; then
  echo "$out" | head -n 40 >&2
  die "the backtrace names no file and line of berth's code"
fi
echo "backtrace names berth's files and lines, e.g.:"
head -n 3 <<<"$frames" | sed 's/^ */  /'
