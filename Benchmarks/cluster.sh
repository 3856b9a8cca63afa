#!/usr/bin/env bash
# The PostgreSQL store and two nodes, beside SQLite, in one run each (RUNS, default 2):
#   ingest  wrk -t2 -c64 POST /v1/messages over 1,000 users: SQLite; PostgreSQL, one node;
#           PostgreSQL, two nodes (two wrk -t1 -c32, one per node, at the same time; summed; the
#           same 1,000 users, the second wrk 500 users ahead so that the two are not in lockstep)
#   live    100 subscribers x 1,000 msg/s for DURATION_S: SQLite one node; PostgreSQL one node;
#           PostgreSQL cross-node (subscribers on A, posts to B)
#   catch-up of 10,000 messages in one request on PostgreSQL (median of 5)
# PostgreSQL 15 runs in a temporary directory (Tests/Postgres/pg.sh; fsync and
# synchronous_commit on). Prints a markdown table and writes it to Benchmarks/results/cluster.md.
#
#   Benchmarks/cluster.sh          (after `swift build -c release`)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
BIN=.build/release/pushrelay
LOAD=.build/release/pushrelay-load
RUNS=${RUNS:-2}
DURATION_S=${DURATION_S:-10}
KEY=benchkey-0123456789
# The payload of every posted message (as in run.sh: 200 bytes of JSON).
printf -v BENCH_PAYLOAD '{"text":"%s"}' "$(printf 'x%.0s' $(seq 189))"
export BENCH_PAYLOAD
[[ -x $BIN && -x $LOAD ]] || { echo "build first: swift build -c release" >&2; exit 1; }
command -v wrk >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk; }

TMP=$(mktemp -d /tmp/pushrelay-cluster.XXXXXX)
chmod 755 "$TMP"
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    Tests/Postgres/pg.sh stop "$TMP/pg" || true
    rm -rf "$TMP"
}
trap cleanup EXIT
Tests/Postgres/pg.sh start "$TMP/pg" >/dev/null
PG_VERSION=$(psql -h "$TMP/pg" -U postgres -Atc "SHOW server_version")

start() { # port db -> pid in $STARTED
    "$BIN" serve --listen "127.0.0.1:$1" --db "$2" --server-keys "$KEY" --log-level warning \
        --rate-limit-server-per-s 0 >"$TMP/relay-$1.log" 2>&1 &
    STARTED=$!
    PIDS+=("$STARTED")
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$1/readyz" >/dev/null && return; sleep 0.1; done
    echo "relay on $1 did not start: $(cat "$TMP/relay-$1.log")" >&2
    exit 1
}
stop() { kill "$@"; wait "$@" 2>/dev/null || true; }
database() { createdb -h "$TMP/pg" -U postgres "$1"; echo "postgresql:///$1?host=$TMP/pg&port=5432&user=postgres"; }
rps() { awk '/Requests\/sec/ {print $2}'; }
wrk_post() { # port prefix threads connections [user offset]
    wrk -t"$3" -c"$4" -d3s -s Benchmarks/post.lua "http://127.0.0.1:$1/v1/messages" -- "w$2" bench "$KEY" 1000 "${5:-0}" >/dev/null
    wrk -t"$3" -c"$4" -d10s -s Benchmarks/post.lua "http://127.0.0.1:$1/v1/messages" -- "$2" bench "$KEY" 1000 "${5:-0}" | rps
}
latency() { # subscribers-url publish-url -> "p50 / p99"
    "$LOAD" latency --url "$1" --publish-url "$2" --key "$KEY" --subscribers 100 --rate 1000 \
        --duration "$DURATION_S" | python3 -c 'import json,sys; d=json.load(sys.stdin); print("%.2f / %.2f" % (d["p50ms"], d["p99ms"]))'
}

ROWS=()
for ((run = 1; run <= RUNS; run++)); do
    echo "=== run $run of $RUNS" >&2
    start 18300 "$TMP/s$run.sqlite"; a=$STARTED
    sqlite_rps=$(wrk_post 18300 "s$run" 2 64)
    sqlite_live=$(latency http://127.0.0.1:18300 http://127.0.0.1:18300)
    stop "$a"
    echo "    SQLite: $sqlite_rps req/s, live $sqlite_live ms" >&2

    db=$(database "one$run")
    start 18301 "$db"; a=$STARTED
    pg1_rps=$(wrk_post 18301 "p$run" 2 64)
    pg1_live=$(latency http://127.0.0.1:18301 http://127.0.0.1:18301)
    # Catch-up of 10,000 on PostgreSQL.
    python3 Benchmarks/bench_helper.py fill-pushrelay 18301 "$KEY" catchup 10000 8 >/dev/null
    times=()
    for _ in 1 2 3 4 5; do
        times+=("$(curl -s -o /dev/null -w '%{time_total}' -H "Authorization: Bearer $KEY" \
            "http://127.0.0.1:18301/v1/users/catchup/messages?after=0&limit=10000")")
    done
    pg_catchup=$(printf '%s\n' "${times[@]}" | sort -n | awk 'NR == 3 {printf "%.1f", $1 * 1000}')
    stop "$a"
    echo "    PostgreSQL one node: $pg1_rps req/s, live $pg1_live ms, catch-up $pg_catchup ms" >&2

    db=$(database "two$run")
    start 18302 "$db"; a=$STARTED
    start 18303 "$db"; b=$STARTED
    wrk_post 18302 "qa$run" 1 32 >"$TMP/wa" &
    first=$!
    wrk_post 18303 "qb$run" 1 32 500 >"$TMP/wb"
    wait "$first"
    pg2_rps=$(awk -v a="$(cat "$TMP/wa")" -v b="$(cat "$TMP/wb")" 'BEGIN {printf "%.0f", a + b}')
    cross_live=$(latency http://127.0.0.1:18302 http://127.0.0.1:18303)
    stop "$a" "$b"
    echo "    PostgreSQL two nodes: $pg2_rps req/s (sum), cross-node live $cross_live ms" >&2
    ROWS+=("| $run | $sqlite_rps | $pg1_rps | $pg2_rps | $sqlite_live | $pg1_live | $cross_live | $pg_catchup |")
    if [[ -n "${CLUSTER_JSON:-}" ]]; then  # for `make bench`'s table (Benchmarks/bench.sh)
        python3 Benchmarks/bench_helper.py set "$CLUSTER_JSON" "run$run" "$(printf \
            '{"sqlite": %s, "pg1": %s, "pg2": %s, "pg1_live": "%s", "cross_live": "%s", "pg_catchup_ms": %s}' \
            "$sqlite_rps" "$pg1_rps" "$pg2_rps" "$pg1_live" "$cross_live" "$pg_catchup")"
    fi
done

{
    echo "Benchmarks/cluster.sh, $(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD), PostgreSQL $PG_VERSION, $(nproc) cores"
    echo
    echo "| run | ingest SQLite, req/s | ingest PostgreSQL 1 node | ingest PostgreSQL 2 nodes (sum) | live SQLite p50 / p99 ms | live PostgreSQL 1 node | live cross-node (subs on A, posts to B) | catch-up 10,000 on PostgreSQL, median ms |"
    echo "|---|---:|---:|---:|---|---|---|---:|"
    printf '%s\n' "${ROWS[@]}"
} | tee "$ROOT/Benchmarks/results/cluster.md"
