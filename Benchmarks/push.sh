#!/usr/bin/env bash
# PushRelay push-notifier benchmark.
#
#   swift build -c release && Benchmarks/push.sh
#
# 1. Throughput: 1,000 devices whose push URL is an nginx `return 204` receiver; JOBS push jobs
#    (one message to 1,000 recipients at a time, push delay 0) are delivered; pushes/s is
#    counted from the relay's metrics, next to what `wrk -t2 -c64` alone gets from the same
#    receiver (the ceiling).
# 2. Latency: 200 pushes/s for 10 s to a python receiver that records arrivals; push delay
#    1,000 ms; latency = arrival − (accepted + delay), p50/p99.
# 3. Scheduling: 100,000 jobs pending (push delay 1 h), then made due: time until all are
#    delivered, and the relay's RSS with them pending.
# Loopback only; bounded. Writes Benchmarks/results/push.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
BIN="$ROOT/.build/release/pushrelay"
[[ -x "$BIN" ]] || { echo "build first: swift build -c release" >&2; exit 1; }
command -v nginx >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light >/dev/null; }
command -v wrk >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }
TMP=$(mktemp -d /tmp/pushrelay-pushbench.XXXXXX)
PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT INT TERM
RX=18199 PR=18198

cat >"$TMP/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $TMP/nginx.pid;
error_log $TMP/error.log warn;
events { worker_connections 4096; }
http { access_log off; client_body_temp_path $TMP; server { listen 127.0.0.1:$RX; keepalive_requests 100000; location / { return 204; } } }
CONF
nginx -p "$TMP" -c "$TMP/nginx.conf" &
PIDS+=($!)
sleep 0.5

start_relay() { # extra flags
    rm -f "$TMP"/relay.sqlite*
    "$BIN" serve --listen 127.0.0.1:$PR --db "$TMP/relay.sqlite" --server-keys benchkey --log-level warning \
        --push-allowed-hosts "127.0.0.1:*" "$@" \
        >"$TMP/relay.out" 2>"$TMP/relay.err" &
    RELAY_PID=$!
    PIDS+=($RELAY_PID)
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PR/readyz" >/dev/null && return 0; sleep 0.1; done
    echo "relay did not start" >&2; exit 1
}
stop_relay() { kill "$RELAY_PID"; wait "$RELAY_PID" 2>/dev/null || true; }

echo "==> ceiling: wrk -t2 -c64 -d10s against the receiver"
CEILING=$(wrk -t2 -c64 -d10s "http://127.0.0.1:$RX/p" | awk '/Requests\/sec/ {print $2}')
echo "    $CEILING req/s"

echo "==> throughput"
start_relay --push-delay-ms 0
THROUGHPUT=$(python3 "$ROOT/Benchmarks/push_bench.py" throughput "http://127.0.0.1:$PR" "http://127.0.0.1:$RX" ${JOBS:-50000})
echo "    $THROUGHPUT"
stop_relay

echo "==> latency at 200 pushes/s"
start_relay --push-delay-ms 1000
LATENCY=$(python3 "$ROOT/Benchmarks/push_bench.py" latency "http://127.0.0.1:$PR" "" 2000)
echo "    $LATENCY"
stop_relay

echo "==> 100,000 pending jobs"
start_relay --push-delay-ms 3600000
SCHEDULE=$(python3 "$ROOT/Benchmarks/push_bench.py" schedule "http://127.0.0.1:$PR" "http://127.0.0.1:$RX" 100000 "$RELAY_PID" "$TMP/relay.sqlite")
echo "    $SCHEDULE"
stop_relay

mkdir -p "$ROOT/Benchmarks/results"
{
    echo "# Push benchmark ($(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD), $(nproc) CPUs)"
    echo
    echo "- receiver ceiling (wrk -t2 -c64 against nginx return 204): $CEILING req/s"
    echo "- throughput: $THROUGHPUT"
    echo "- latency: $LATENCY"
    echo "- 100k pending: $SCHEDULE"
} | tee "$ROOT/Benchmarks/results/push.md"
