#!/usr/bin/env bash
# Two relay builds, ingest measured on each in turn in the same run: whether a change moved
# single-message and batch ingest, on a machine whose speed moves from day to day.
#
#   Benchmarks/ingest_ab.sh OLD_BINARY NEW_BINARY [ROUNDS]     (e.g. a git worktree's release build)
#
# Each round and binary: a fresh SQLite database, a 3 s warm-up, then `wrk -t2 -c64 -d10s` of
# POST /v1/messages (one recipient of 1000 users, 200-byte payload; Benchmarks/post.lua) and
# `wrk -t2 -c16 -d10s` of POST /v1/messages/batch (100 messages x 10 recipients; batch.lua).
# Prints req/s, p50 / p99, and recipient-messages/s for the batch.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
[[ $# -ge 2 ]] || { echo "usage: $0 OLD_BINARY NEW_BINARY [ROUNDS]" >&2; exit 2; }
BINARIES=("$1" "$2")
ROUNDS=${3:-3}
command -v wrk >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }
TMP=$(mktemp -d /tmp/pushrelay-ingestab.XXXXXX)
PID=""
cleanup() { [[ -n $PID ]] && kill "$PID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT INT TERM
PR=18297 KEY=benchkey-0123456789 URL=http://127.0.0.1:18297
printf -v BENCH_PAYLOAD '{"text":"%s"}' "$(printf 'x%.0s' $(seq 189))"
export BENCH_PAYLOAD

for round in $(seq "$ROUNDS"); do
    for bin in "${BINARIES[@]}"; do
        rm -f "$TMP"/relay.sqlite*
        "$bin" serve --listen 127.0.0.1:$PR --db "$TMP/relay.sqlite" --server-keys $KEY \
            --log-level warning --max-connections-per-ip 0 >"$TMP/relay.log" 2>&1 &
        PID=$!
        for _ in $(seq 300); do
            [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 1 $URL/readyz || true) == 200 ]] && break
            sleep 0.1
        done
        id="r${round}$(date +%s%N)"
        wrk -t2 -c64 -d3s -s "$ROOT/Benchmarks/post.lua" $URL/v1/messages -- "${id}w" bench $KEY 1000 >/dev/null
        single=$(wrk -t2 -c64 -d10s --latency -s "$ROOT/Benchmarks/post.lua" $URL/v1/messages -- "${id}m" bench $KEY 1000)
        batch=$(wrk -t2 -c16 -d10s -s "$ROOT/Benchmarks/batch.lua" $URL/v1/messages/batch -- "${id}b" 100 10 $KEY)
        kill "$PID"
        wait "$PID" 2>/dev/null || true
        PID=""
        rps=$(awk '/^Requests\/sec/ {printf "%d", $2}' <<<"$single")
        p50=$(awk '$1 == "50%" {print $2}' <<<"$single")
        p99=$(awk '$1 == "99%" {print $2}' <<<"$single")
        brps=$(awk '/^Requests\/sec/ {printf "%d", $2 * 1000}' <<<"$batch")
        bad=$(grep -h "Non-2xx" <<<"$single$batch" || true)
        echo "round $round $(basename "$(dirname "$(dirname "$(dirname "$bin")")")"): messages $rps req/s, p50 $p50 p99 $p99; batch $brps recipient-messages/s ${bad:+($bad)}"
    done
done
