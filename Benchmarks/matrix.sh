#!/usr/bin/env bash
# PushRelay as a Matrix push gateway.
#
#   swift build -c release && Benchmarks/matrix.sh
#
# 1. Throughput: `wrk -t2 -c64 -d10s` POSTs notifies (a new event each, spread over 1,000
#    devices registered with Matrix pushkeys, push delay 0) to /_matrix/push/v1/notify; every
#    notify is stored durably before its 200 and pushed to an nginx `return 204` receiver.
#    Notifies/s from wrk, pushes delivered meanwhile from the relay's metrics.
# 2. Added latency: 2,000 notifies at 200/s to a python receiver; notify sent → push arrived,
#    p50/p99 (push delay 0).
# For scale, the issue measured Sygnal on this machine at ~380 notifications/s with ~45 ms added.
# Writes Benchmarks/results/matrix.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
BIN="$ROOT/.build/release/pushrelay"
[[ -x "$BIN" ]] || { echo "build first: swift build -c release" >&2; exit 1; }
command -v nginx >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light >/dev/null; }
command -v wrk >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }
TMP=$(mktemp -d /tmp/pushrelay-matrixbench.XXXXXX)
PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT INT TERM
RX=18189 PR=18188 SECRET=bench-gateway-secret-0123

cat >"$TMP/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $TMP/nginx.pid;
error_log $TMP/error.log warn;
events { worker_connections 4096; }
http { access_log off; client_body_temp_path $TMP; keepalive_requests 100000; server { listen 127.0.0.1:$RX; location / { return 204; } } }
CONF
nginx -p "$TMP" -c "$TMP/nginx.conf" &
PIDS+=($!)
sleep 0.5

start_relay() {
    rm -f "$TMP"/relay.sqlite*
    "$BIN" serve --listen 127.0.0.1:$PR --db "$TMP/relay.sqlite" --server-keys benchkey-0123456789 --log-level warning \
        --push-allowed-hosts "127.0.0.1:*" --matrix-notify-secret "$SECRET" --push-delay-ms 0 \
        --rate-limit-server-per-s 0 >"$TMP/relay.out" 2>"$TMP/relay.err" &
    RELAY_PID=$!
    PIDS+=($RELAY_PID)
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PR/readyz" >/dev/null && return 0; sleep 0.1; done
    echo "relay did not start" >&2; exit 1
}
metric() { curl -s "http://127.0.0.1:$PR/metrics" | awk -v name="$1" '$1 == name {print $2}'; }

echo "==> throughput: wrk -t2 -c64 -d10s, notifies for 1,000 devices"
start_relay
python3 "$ROOT/Benchmarks/matrix_bench.py" register "http://127.0.0.1:$PR" "http://127.0.0.1:$RX" 1000
before=$(metric 'pushrelay_push_attempts_total{outcome="delivered",app="default"}'); before=${before:-0}
WRK=$(wrk -t2 -c64 -d10s -s "$ROOT/Benchmarks/matrix_notify.lua" \
    "http://127.0.0.1:$PR/_matrix/push/v1/notify?secret=$SECRET" -- 1000)
NOTIFIES=$(awk '/Requests\/sec/ {print $2}' <<<"$WRK")
P99=$(awk '$1 == "99%" {print $2}' <<<"$WRK" || true)
NON2XX=$(awk '/Non-2xx/ {print $NF}' <<<"$WRK")
sleep 2
after=$(metric 'pushrelay_push_attempts_total{outcome="delivered",app="default"}')
ACCEPTED=$(metric pushrelay_messages_accepted_total)
THROUGHPUT="$NOTIFIES notifies/s (${NON2XX:-0} non-2xx); $ACCEPTED messages stored; $(( ${after%.*} - ${before%.*} )) pushes delivered"
echo "    $THROUGHPUT"
kill "$RELAY_PID"; wait "$RELAY_PID" 2>/dev/null || true

echo "==> added latency at 200 notifies/s"
start_relay
LATENCY=$(python3 "$ROOT/Benchmarks/matrix_bench.py" latency "http://127.0.0.1:$PR" "$SECRET" 2000 200)
echo "    $LATENCY"
kill "$RELAY_PID"; wait "$RELAY_PID" 2>/dev/null || true

mkdir -p "$ROOT/Benchmarks/results"
{
    echo "# Matrix gateway benchmark ($(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD), $(nproc) CPUs)"
    echo
    echo "- throughput: $THROUGHPUT"
    echo "- latency: $LATENCY"
} | tee "$ROOT/Benchmarks/results/matrix.md"
