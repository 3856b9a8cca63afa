#!/usr/bin/env bash
# Idle cost of the relay after some work: 20 devices registered and 20 messages stored (to users
# without devices, so no push is pending), then, once that work has settled, CPU ticks
# (utime + stime, 1/100 s) and wake-ups (context switches of every thread, `perf stat`) over
# SECONDS_TO_WATCH (default 60). Nothing to do must mean nothing runs.
#   Benchmarks/idle_cpu.sh [BINARY]        IDLE_JSON=path also writes the figures as JSON
set -euo pipefail
BIN=${1:-.build/release/pushrelay}
SECONDS_TO_WATCH=${SECONDS_TO_WATCH:-60}
command -v perf >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq linux-perf >/dev/null; }
TMP=$(mktemp -d /tmp/pushrelay-idle.XXXXXX)
# Retention runs pruneIntervalS after the last write (then at the next expiry, days away): 2 s
# here, so that this one pass happens before the measurement, not in it.
PUSHRELAY_PRUNE_INTERVAL_S=2 "$BIN" serve --listen 127.0.0.1:0 --db "$TMP/relay.sqlite" --server-keys idle-server-key-0123 \
    --push-allowed-hosts '127.0.0.1:*' --access-log false >"$TMP/out" 2>"$TMP/err" &
PID=$!
trap 'kill $PID 2>/dev/null || true; wait $PID 2>/dev/null || true; rm -rf "$TMP"' EXIT
for _ in $(seq 100); do grep -qs "listening on" "$TMP/out" && break; sleep 0.1; done
URL=$(sed -n 's/.*listening on //p' "$TMP/out")
for n in $(seq 20); do
    curl -sf -o /dev/null -X PUT "$URL/v1/users/u$n/devices/phone" -H 'Authorization: Bearer idle-server-key-0123' \
        -H 'Content-Type: application/json' -d '{"pushUrl":"http://127.0.0.1:9/push"}'
    curl -sf -o /dev/null -X POST "$URL/v1/messages" -H 'Authorization: Bearer idle-server-key-0123' \
        -H 'Content-Type: application/json' -d "{\"id\":\"idle-$n\",\"recipients\":[\"nodevice$n\"],\"payload\":{}}"
done
sleep 8 # the last connection's sweep, the retention pass, the heap trim
ticks() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
before=$(ticks)
# perf prints "<not counted>" with a running time of 0 when no thread of the process ran at all
# in the window: that is 0 wake-ups. Anything else unreadable (no perf events here) is "?".
switches=$(perf stat -x, -e context-switches -p "$PID" -- sleep "$SECONDS_TO_WATCH" 2>&1 >/dev/null | awk -F, '
    /context-switches/ { if ($1 ~ /^[0-9]+$/) print $1; else if ($1 == "<not counted>" && $4 == "0") print 0; else print "?" }')
after=$(ticks)
used=$((after - before))
echo "idle: $used CPU ticks and ${switches:-?} wake-ups (context switches) in ${SECONDS_TO_WATCH} s" \
    "= $(awk "BEGIN {printf \"%.2f\", $used / $SECONDS_TO_WATCH}") % of a core"
if [[ -n "${IDLE_JSON:-}" ]]; then
    # Not counted (no perf events here): null, never a made-up 0.
    [[ "${switches:-?}" =~ ^[0-9]+$ ]] || switches=null
    printf '{"seconds":%s,"ticks":%s,"wakeups":%s}\n' "$SECONDS_TO_WATCH" "$used" "$switches" >"$IDLE_JSON"
fi
