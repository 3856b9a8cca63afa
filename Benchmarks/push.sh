#!/usr/bin/env bash
# PushRelay push-notifier benchmark.
#
#   swift build -c release && Benchmarks/push.sh
#
# 1. Throughput: JOBS devices (default 20,000) whose push URL is an nginx `return 204` receiver,
#    one stored message each (push delay 1 h), all made due at once; pushes/s while the notifier
#    drains them (counted from the relay's metrics; posting is not timed), next to what
#    `wrk -t2 -c64` alone gets from the same receiver in the same run (the ceiling), and the
#    relay's CPU time per push.
# 2. Latency: 200 pushes/s for 10 s to a python receiver that records arrivals; push delay
#    1,000 ms; latency = arrival − (accepted + delay), p50/p99.
# 3. Scheduling: 100,000 jobs pending (push delay 1 h), then made due: time until all are
#    delivered, and the relay's RSS with them pending.
# 4. APNs: the same throughput run with APNs devices, over HTTP/2 (TLS, ALPN h2) to an nginx
#    `return 200` at /3/device/, next to h2load's ceiling against the same receiver (-c4 -m100,
#    the same POST) in the same run.
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
RX=18199 PR=18198 TLSRX=18197 H2RX=18196
command -v h2load >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nghttp2-client >/dev/null; }

# A test CA and a receiver certificate for 127.0.0.1 (the https receiver; the relay trusts the CA
# through --push-ca-file, as it would a private gateway's).
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=bench-ca \
    -keyout "$TMP/ca.key" -out "$TMP/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=127.0.0.1 \
    -keyout "$TMP/rx.key" -out "$TMP/rx.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\n' >"$TMP/rx.ext"
openssl x509 -req -in "$TMP/rx.csr" -CA "$TMP/ca.pem" -CAkey "$TMP/ca.key" -CAcreateserial -days 2 \
    -extfile "$TMP/rx.ext" -out "$TMP/rx.pem" 2>/dev/null

cat >"$TMP/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $TMP/nginx.pid;
error_log $TMP/error.log warn;
events { worker_connections 4096; }
http {
    access_log off; client_body_temp_path $TMP; keepalive_requests 100000;
    server { listen 127.0.0.1:$RX; location / { return 204; } }
    server {
        listen 127.0.0.1:$TLSRX ssl; ssl_certificate $TMP/rx.pem; ssl_certificate_key $TMP/rx.key;
        location / { return 204; }
    }
    server {
        listen 127.0.0.1:$H2RX ssl http2; ssl_certificate $TMP/rx.pem; ssl_certificate_key $TMP/rx.key;
        http2_max_concurrent_streams 1000; keepalive_requests 10000000;
        location /3/device/ { return 200; }
    }
}
CONF
nginx -p "$TMP" -c "$TMP/nginx.conf" &
PIDS+=($!)
sleep 0.5

start_relay() { # extra flags
    rm -f "$TMP"/relay.sqlite*
    "$BIN" serve --listen 127.0.0.1:$PR --db "$TMP/relay.sqlite" --server-keys benchkey-0123456789 --log-level warning \
        --push-allowed-hosts "127.0.0.1:*" "$@" \
        >"$TMP/relay.out" 2>"$TMP/relay.err" &
    RELAY_PID=$!
    PIDS+=($RELAY_PID)
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PR/readyz" >/dev/null && return 0; sleep 0.1; done
    echo "relay did not start" >&2; exit 1
}
stop_relay() { kill "$RELAY_PID"; wait "$RELAY_PID" 2>/dev/null || true; }

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
pushes_per_s() { sed -E 's/.* = ([0-9]+) pushes\/s.*/\1/' <<<"$1"; }

echo "==> ceiling: wrk -t2 -c64 -d10s against the receiver (http, then https)"
CEILING=$(wrk -t2 -c64 -d10s "http://127.0.0.1:$RX/p" | awk '/Requests\/sec/ {print $2}')
TLS_CEILING=$(wrk -t2 -c64 -d10s "https://127.0.0.1:$TLSRX/p" | awk '/Requests\/sec/ {print $2}')
echo "    http $CEILING req/s, https $TLS_CEILING req/s"

echo "==> throughput, http receiver"
start_relay --push-delay-ms 3600000
THROUGHPUT=$(python3 "$ROOT/Benchmarks/push_bench.py" throughput "http://127.0.0.1:$PR" "http://127.0.0.1:$RX" \
    "${JOBS:-20000}" "$TMP/relay.sqlite" "$RELAY_PID")
THROUGHPUT="$THROUGHPUT; $(ratio "$(pushes_per_s "$THROUGHPUT")" "$CEILING") of the ceiling"
echo "    $THROUGHPUT"
stop_relay

echo "==> throughput, https receiver"
start_relay --push-delay-ms 3600000 --push-ca-file "$TMP/ca.pem"
TLS_THROUGHPUT=$(python3 "$ROOT/Benchmarks/push_bench.py" throughput "http://127.0.0.1:$PR" \
    "https://127.0.0.1:$TLSRX" "${JOBS:-20000}" "$TMP/relay.sqlite" "$RELAY_PID")
TLS_THROUGHPUT="$TLS_THROUGHPUT; $(ratio "$(pushes_per_s "$TLS_THROUGHPUT")" "$TLS_CEILING") of the https ceiling"
echo "    $TLS_THROUGHPUT"
stop_relay

echo "==> APNs over HTTP/2: h2load ceiling, then the relay"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$TMP/apns.p8" 2>/dev/null
printf '{"aps":{"alert":{"title":"t","body":"b"},"badge":1}}' >"$TMP/apns.json"
H2_CEILING=$(h2load -n 200000 -c 4 -m 100 -d "$TMP/apns.json" -H 'apns-topic: com.example.bench' \
    "https://127.0.0.1:$H2RX/3/device/$(printf 'ab%.0s' $(seq 32))" | awk '/^finished in/ {print $4}')
echo "    h2load $H2_CEILING req/s"
start_relay --push-delay-ms 3600000 --push-ca-file "$TMP/ca.pem" --apns-key-file "$TMP/apns.p8" \
    --apns-key-id BENCH12345 --apns-team-id TEAM123456 --apns-topic com.example.bench \
    --apns-url "https://127.0.0.1:$H2RX" --apns-sandbox-url "https://127.0.0.1:$H2RX"
APNS=$(python3 "$ROOT/Benchmarks/push_bench.py" throughput "http://127.0.0.1:$PR" apns \
    "${JOBS:-20000}" "$TMP/relay.sqlite" "$RELAY_PID")
APNS="$APNS; $(ratio "$(pushes_per_s "$APNS")" "$H2_CEILING") of the h2load ceiling"
echo "    $APNS"
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
    echo "- receiver ceiling (wrk -t2 -c64 against nginx return 204): http $CEILING req/s, https $TLS_CEILING req/s"
    echo "- throughput, http: $THROUGHPUT"
    echo "- throughput, https: $TLS_THROUGHPUT"
    echo "- APNs over HTTP/2 (h2load -c4 -m100 ceiling $H2_CEILING req/s): $APNS"
    echo "- latency: $LATENCY"
    echo "- 100k pending: $SCHEDULE"
} | tee "$ROOT/Benchmarks/results/push.md"

# For `make bench`'s table (Benchmarks/bench.sh sets PUSH_JSON): the ceilings and each line as printed.
if [[ -n "${PUSH_JSON:-}" ]]; then
    record() { python3 "$ROOT/Benchmarks/bench_helper.py" set "$PUSH_JSON" "$1" "$2"; }
    record ceiling_http "$CEILING"
    record ceiling_https "$TLS_CEILING"
    record ceiling_h2 "$H2_CEILING"
    record http "\"$THROUGHPUT\""
    record https "\"$TLS_THROUGHPUT\""
    record apns "\"$APNS\""
    record latency "\"$LATENCY\""
fi
