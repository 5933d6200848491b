#!/usr/bin/env bash
# A throwaway PostgreSQL server on loopback for tests/test_distributed.py (Optuna's RDB storage).
#   .ci/postgres.sh start DIR   install PostgreSQL from the distribution's packages if it is missing
#                               (apt-get, as root), start a cluster in DIR on a free 127.0.0.1 port,
#                               create the database indexer_test and print its URL on stdout.
#                               Exits non-zero, saying why on stderr, where that is not possible.
#   .ci/postgres.sh stop DIR    stop it.
set -uo pipefail
cmd=${1:?start or stop}
dir=${2:?a directory}
say() { echo "postgres.sh: $*" >&2; }
pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }
as_owner() {  # initdb and the server refuse to run as root: run them as the postgres user
  if [ "$(id -u)" = 0 ]; then
    if command -v runuser >/dev/null; then runuser -u postgres -- "$@"; else su postgres -s /bin/sh -c "$(printf '%q ' "$@")"; fi
  else
    "$@"
  fi
}

case $cmd in
start)
  bin=$(pg_bin)
  if [ -z "$bin" ] && command -v initdb >/dev/null; then bin=$(dirname "$(command -v initdb)"); fi
  if [ -z "$bin" ]; then
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
      say "no PostgreSQL installed and no apt-get as root to install it"; exit 1
    fi
    say "installing postgresql (apt-get)"
    timeout 300 sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql' >&2 \
      || { say "apt-get install postgresql failed"; exit 1; }
    bin=$(pg_bin)
    [ -n "$bin" ] || { say "postgresql installed but no initdb found"; exit 1; }
  fi
  mkdir -p "$dir" && chmod 755 "$dir"
  [ "$(id -u)" = 0 ] && chown postgres "$dir"
  port=$( (command -v python3 >/dev/null && python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])') || echo $((40000 + $$ % 20000)))
  as_owner "$bin/initdb" -D "$dir/data" -U postgres -A trust --no-sync >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; say "initdb failed"; exit 1; }
  as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-h 127.0.0.1 -p $port -k $dir -c fsync=off -c max_connections=50" start >&2 \
    || { cat "$dir/server.log" >&2; say "the server did not start"; exit 1; }
  "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres indexer_test >&2 || { say "createdb failed"; exit 1; }
  echo "postgresql://postgres@127.0.0.1:$port/indexer_test"
  ;;
stop)
  bin=$(pg_bin)
  [ -n "$bin" ] || bin=$(dirname "$(command -v pg_ctl 2>/dev/null || echo /nonexistent/pg_ctl)")
  [ -f "$dir/data/postmaster.pid" ] && as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >&2
  ;;
*)
  say "unknown command $cmd (start or stop)"; exit 2
  ;;
esac
