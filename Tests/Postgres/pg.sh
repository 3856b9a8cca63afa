#!/usr/bin/env bash
# A throw-away PostgreSQL for the tests: `pg.sh start DIR` initializes a cluster in DIR (as the
# `postgres` user: PostgreSQL refuses to run as root, and CI is root), starts it on a Unix socket
# in DIR (no TCP port to clash with) and prints the base URI; `pg.sh stop DIR` stops it and
# removes DIR; `pg.sh createdb DIR NAME` creates a database and prints its URI;
# `pg.sh run COMMAND…` runs COMMAND with a PostgreSQL started for it in a temporary directory
# (named by PUSHRELAY_TEST_POSTGRES) and stopped afterwards, whatever happens; `pg.sh pause DIR`
# and `pg.sh resume DIR` stop and start it again (the outage tests).
#
# The pause is a crash (`-m immediate`), not a fast stop: a fast stop waits for a checkpoint,
# and with the hundreds of databases the tests make, one took 234 s on a busy machine (42,240
# files to fsync), past pg_ctl's 60 s. The restart replays the WAL; `syncfs` makes its flush of
# the data directory one call instead of one per file. pg_ctl waits up to 10 minutes either way.
set -euo pipefail
command="$1"
if [ "$command" = run ]; then
  shift
  dir=$(mktemp -d /tmp/pushrelay-pg.XXXXXX)
  trap '"$0" stop "$dir"' EXIT
  "$0" start "$dir" >/dev/null
  PUSHRELAY_TEST_POSTGRES="$dir" "$@"
  exit
fi
dir="$2"
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
port=5432
# fsync stays on: a 2xx means committed, in the tests as in production.
serve() {
  as_postgres "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 600 \
    -o "-k $dir -p $port -c listen_addresses='' -c max_connections=300 -c recovery_init_sync_method=syncfs" \
    start >/dev/null
}
as_postgres() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; elif [ "$(id -un)" = postgres ]; then "$@"; else sudo -u postgres "$@"; fi
}
case "$command" in
start)
  mkdir -p "$dir"
  chmod 0755 "$dir"
  chown postgres "$dir" 2>/dev/null || true
  as_postgres "$bin/initdb" -D "$dir/data" -A trust -U postgres --locale=C.UTF-8 -E UTF8 >"$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log" >&2; exit 1; }
  serve
  echo "postgresql:///postgres?host=$dir&port=$port&user=postgres"
  ;;
createdb)
  as_postgres "$bin/createdb" -h "$dir" -p $port -U postgres "$3"
  echo "postgresql:///$3?host=$dir&port=$port&user=postgres"
  ;;
pause)
  as_postgres "$bin/pg_ctl" -D "$dir/data" -m immediate -w -t 600 stop >/dev/null
  ;;
resume)
  serve
  ;;
stop)
  as_postgres "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$dir"
  ;;
*)
  echo "usage: pg.sh run COMMAND… | pg.sh start|stop|pause|resume|createdb DIR [NAME]" >&2
  exit 2
  ;;
esac
