#!/usr/bin/env bash
# Starts and stops a private PostgreSQL 15 server for Reel's tests and benchmarks, entirely inside
# one directory. It listens on a Unix socket in DIR only (no TCP port, so nothing to collide
# with and no traffic off the machine) and trusts local connections as the superuser `reel`.
#
#   scripts/postgres-server.sh start DIR   create DIR (absent or empty; the postgres user must be
#                                          able to reach it when run as root), initdb, start, wait until
#                                          it answers, write DIR/env, print the conninfo
#   scripts/postgres-server.sh stop DIR    stop the server of DIR and remove DIR (idempotent)
#
# DIR/env holds `export REEL_TEST_POSTGRES='host=DIR/run port=5432 user=reel dbname=reel'`;
# `source DIR/env` before running the PostgreSQL tests.
#
# Needs Debian's postgresql-15 (its binaries under /usr/lib/postgresql/15/bin). PostgreSQL refuses
# to run as root, so as root the server runs as the `postgres` user the package creates.
set -euo pipefail

PROG=postgres-server
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
PORT=5432 # names the socket file inside DIR/run; no TCP port is opened
MARKER=.reel-postgres-server

log() { echo "$PROG: $*" >&2; }
die() { echo "$PROG: error: $*" >&2; exit 1; }

as_owner() { # runs a command as the user that owns the data directory
  if [[ $(id -u) == 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

start() {
  local dir=$1
  [[ -x $PGBIN/initdb ]] || die "$PGBIN/initdb not found: install postgresql-15"
  if [[ -e $dir ]] && [[ -n $(ls -A "$dir") ]]; then die "$dir exists and is not empty"; fi
  mkdir -p "$dir/run" "$dir/log"
  dir=$(cd "$dir" && pwd -P)
  touch "$dir/$MARKER"
  [[ $(id -u) == 0 ]] && chown -R postgres: "$dir"
  as_owner "$PGBIN/initdb" -D "$dir/data" -U reel --auth=trust -E UTF8 --no-sync >"$dir/log/initdb.log" \
    || { cat "$dir/log/initdb.log" >&2; die "initdb failed"; }
  as_owner "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/log/server.log" -w -t 60 start \
    -o "-c listen_addresses='' -k $dir/run -p $PORT -c fsync=off -c max_connections=50" >/dev/null \
    || { cat "$dir/log/server.log" >&2; die "the server did not start"; }
  local conninfo="host=$dir/run port=$PORT user=reel dbname=reel"
  as_owner "$PGBIN/createdb" -h "$dir/run" -p $PORT -U reel reel
  echo "export REEL_TEST_POSTGRES='$conninfo'" >"$dir/env"
  chmod a+r "$dir/env"
  echo "$conninfo"
}

stop() {
  local dir=$1
  [[ -e $dir ]] || return 0
  [[ -f $dir/$MARKER ]] || die "$dir is not a directory this script made"
  if [[ -f $dir/data/postmaster.pid ]]; then
    as_owner "$PGBIN/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null || log "stop failed"
  fi
  rm -rf "$dir"
}

case "${1:-}" in
  start) [[ $# == 2 ]] || die "usage: $0 start DIR"; start "$2" ;;
  stop) [[ $# == 2 ]] || die "usage: $0 stop DIR"; stop "$2" ;;
  *) sed -n '2,/as root the server runs/p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
