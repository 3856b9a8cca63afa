#!/usr/bin/env bash
# Idle CPU of the relay: 20 devices registered, no traffic, CPU ticks (utime + stime, 1/100 s)
# the process uses over SECONDS (default 60). Usage: Benchmarks/idle_cpu.sh [BINARY]
set -euo pipefail
BIN=${1:-.build/release/pushrelay}
SECONDS_TO_WATCH=${SECONDS_TO_WATCH:-60}
TMP=$(mktemp -d /tmp/pushrelay-idle.XXXXXX)
"$BIN" serve --listen 127.0.0.1:0 --db "$TMP/relay.sqlite" --server-keys idle-key \
    --push-allowed-hosts '127.0.0.1:*' --access-log false >"$TMP/out" 2>"$TMP/err" &
PID=$!
trap 'kill $PID 2>/dev/null || true; wait $PID 2>/dev/null || true; rm -rf "$TMP"' EXIT
for _ in $(seq 100); do grep -qs "listening on" "$TMP/out" && break; sleep 0.1; done
URL=$(sed -n 's/.*listening on //p' "$TMP/out")
for n in $(seq 20); do
    curl -sf -o /dev/null -X PUT "$URL/v1/users/u$n/devices/phone" -H 'Authorization: Bearer idle-key' \
        -H 'Content-Type: application/json' -d '{"pushUrl":"http://127.0.0.1:9/push"}'
done
sleep 2
ticks() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
before=$(ticks)
sleep "$SECONDS_TO_WATCH"
after=$(ticks)
used=$((after - before))
echo "idle CPU: $used ticks in ${SECONDS_TO_WATCH} s = $(awk "BEGIN {printf \"%.2f\", $used / $SECONDS_TO_WATCH}") % of a core"
