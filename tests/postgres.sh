#!/usr/bin/env bash
# A throwaway Postgres server for berth's tests: a new cluster in a temp folder, on a free
# loopback port, with trust authentication, gone when stopped.
#
#   eval "$(tests/postgres.sh start)"     # exports TEST_BERTH_POSTGRES_URL, _DIR and _BIN
#   cargo test -p berth-store-sql
#   tests/postgres.sh stop "$TEST_BERTH_POSTGRES_DIR"
#
# The variables are TEST_BERTH_*, not BERTH_*: berth reads every BERTH_* variable as config.
# It installs Debian's `postgresql` package with apt-get when no server binaries are found.
# Run as root, the cluster belongs to the `postgres` user (initdb refuses root). Anything that
# goes wrong is an error on stderr and a non-zero exit: the caller must not go on without it.
set -euo pipefail

die() { echo "tests/postgres.sh: $*" >&2; exit 1; }

bindir() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -z "$d" ] && command -v pg_ctl >/dev/null; then d=$(dirname "$(command -v pg_ctl)"); fi
  echo "$d"
}

start() {
  local bin dir port as
  bin=$(bindir)
  if [ -z "$bin" ]; then
    command -v apt-get >/dev/null || die "no Postgres server found and no apt-get to install one; install PostgreSQL (initdb, pg_ctl)"
    echo "tests/postgres.sh: installing Debian's postgresql package" >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; } >&2 \
      || die "apt-get install postgresql failed"
    bin=$(bindir)
    [ -n "$bin" ] || die "postgresql installed, but no initdb/pg_ctl under /usr/lib/postgresql/*/bin"
  fi
  dir=$(mktemp -d "${TMPDIR:-/tmp}/berth-pg.XXXXXX")
  as=()
  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || die "running as root, but there is no postgres user to run the server as"
    chown postgres "$dir"
    as=(runuser -u postgres --)
  fi
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "${as[@]}" "$bin/initdb" -D "$dir/data" -A trust -U postgres -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; die "initdb failed in $dir"; }
  "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=300" start >/dev/null \
    || { cat "$dir/server.log" >&2; die "the server did not start (log above)"; }
  echo "export TEST_BERTH_POSTGRES_URL='postgres://postgres@127.0.0.1:$port/postgres'"
  echo "export TEST_BERTH_POSTGRES_DIR='$dir'"
  echo "export TEST_BERTH_POSTGRES_BIN='$bin'"
}

stop() {
  local dir=${1:-} bin as
  [ -n "$dir" ] && [ -d "$dir/data" ] || die "stop: no cluster at '$dir'"
  bin=$(bindir)
  as=()
  [ "$(id -u)" = 0 ] && as=(runuser -u postgres --)
  "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}

case "${1:-}" in
  start) start ;;
  stop) stop "${2:-}" ;;
  *) die "usage: tests/postgres.sh start | stop DIR" ;;
esac
