#!/usr/bin/env bash
# Two relay builds, live latency measured on each in turn in the same run: whether a change moved
# the post-to-frame latency, on a machine whose speed moves from day to day.
#
#   Benchmarks/live_ab.sh OLD_BINARY NEW_BINARY [ROUNDS]     (after `swift build -c release`)
#
# Each round and binary: a fresh SQLite database, then `pushrelay-load latency` with 100
# subscribers at 1,000 msg/s and 1,000 at 5,000 msg/s (10 s each), as `Benchmarks/websocket.sh`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[[ $# -ge 2 ]] || { echo "usage: $0 OLD_BINARY NEW_BINARY [ROUNDS]" >&2; exit 2; }
LOAD=$(pwd)/.build/release/pushrelay-load
ROUNDS=${3:-3}
PR=18380
ulimit -n "$(ulimit -Hn)"
TMP=$(mktemp -d /tmp/pushrelay-liveab.XXXXXX)
PID=""
cleanup() { [[ -n $PID ]] && kill "$PID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT INT TERM
for round in $(seq "$ROUNDS"); do
    for bin in "$1" "$2"; do
        rm -f "$TMP"/pr.sqlite*
        "$bin" serve --listen 127.0.0.1:$PR --db "$TMP/pr.sqlite" --server-keys benchkey-0123456789 \
            --log-level warning --max-connections 30000 --max-connections-per-ip 0 >"$TMP/relay.log" 2>&1 &
        PID=$!
        for _ in $(seq 100); do curl -s -o /dev/null --max-time 1 http://127.0.0.1:$PR/readyz && break; sleep 0.1; done
        for load in "100 1000" "1000 5000"; do
            read -r subs rate <<<"$load"
            out=$("$LOAD" latency --target pushrelay --url http://127.0.0.1:$PR --server-pid "$PID" \
                --subscribers "$subs" --rate "$rate" --duration 10)
            echo "round $round $bin ${subs}x${rate}: $out"
        done
        kill "$PID"
        wait "$PID" 2>/dev/null || true
        PID=""
    done
done
