#!/usr/bin/env bash
# Two relay builds, the catch-up page measured on each in turn in the same run: whether a change
# moved it, on a machine whose speed moves from minute to minute.
#
#   Benchmarks/catchup_ab.sh OLD_BINARY NEW_BINARY [ROUNDS]     (e.g. a git worktree's release build)
#
# Each round and binary: a fresh SQLite database, 3 s of `wrk` posts to 1000 users (the page's rows
# lie among others), 10,000 messages to user `catchup`, then GET ...?after=0&limit=10000: the
# median of 11 requests' time (curl) and the relay's CPU per page over 50 more (/proc/PID/stat).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
[[ $# -ge 2 ]] || { echo "usage: $0 OLD_BINARY NEW_BINARY [ROUNDS]" >&2; exit 2; }
BINARIES=("$1" "$2")
ROUNDS=${3:-3}
command -v wrk >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }
TMP=$(mktemp -d /tmp/pushrelay-catchupab.XXXXXX)
PID=""
cleanup() { [[ -n $PID ]] && kill "$PID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT INT TERM
PR=18298 KEY=benchkey-0123456789 URL=http://127.0.0.1:18298
PAGE="$URL/v1/users/catchup/messages?after=0&limit=10000"
printf -v BENCH_PAYLOAD '{"text":"%s"}' "$(printf 'x%.0s' $(seq 189))"
export BENCH_PAYLOAD
ticks() { awk '{print $14 + $15}' "/proc/$PID/stat"; }

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
        wrk -t2 -c64 -d3s -s "$ROOT/Benchmarks/post.lua" $URL/v1/messages -- "r${round}$(date +%s%N)" bench $KEY 1000 \
            >/dev/null
        python3 "$ROOT/Benchmarks/bench_helper.py" fill-pushrelay $PR $KEY catchup 10000 8 >/dev/null
        times=()
        for _ in $(seq 11); do
            times+=("$(curl -s -o /dev/null -w '%{time_total}' -H "Authorization: Bearer $KEY" "$PAGE")")
        done
        before=$(ticks)
        for _ in $(seq 50); do curl -s -o /dev/null -H "Authorization: Bearer $KEY" "$PAGE"; done
        cpu_ms=$((($(ticks) - before) * 1000 / $(getconf CLK_TCK) / 50))
        kill "$PID"
        wait "$PID" 2>/dev/null || true
        PID=""
        median=$(python3 "$ROOT/Benchmarks/bench_helper.py" median "${times[@]}")
        echo "round $round $(basename "$(dirname "$(dirname "$(dirname "$bin")")")"): median $(
            python3 -c "print(f'{$median * 1000:.1f}')") ms, relay CPU $cpu_ms ms per page"
    done
done
