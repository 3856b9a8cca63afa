#!/usr/bin/env bash
# Two relay builds, one webhook drain each in turn, against the same receiver in the same run:
# whether a change moved the per-push cost, on a machine whose speed moves from day to day.
#
#   Benchmarks/push_ab.sh OLD_BINARY NEW_BINARY [ROUNDS]     (e.g. a git worktree's release build)
#
# Each drain: 20,000 devices whose push URL is an nginx `return 204`, one stored message each,
# all made due at once (Benchmarks/push_bench.py throughput); prints pushes/s and relay CPU per push.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
[[ $# -ge 2 ]] || { echo "usage: $0 OLD_BINARY NEW_BINARY [ROUNDS]" >&2; exit 2; }
BINARIES=("$1" "$2")
ROUNDS=${3:-3}
command -v nginx >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light >/dev/null; }
TMP=$(mktemp -d /tmp/pushrelay-pushab.XXXXXX)
PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT INT TERM
RX=18299 PR=18298

cat >"$TMP/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $TMP/nginx.pid;
error_log $TMP/error.log warn;
events { worker_connections 4096; }
http {
    access_log off; client_body_temp_path $TMP; keepalive_requests 100000;
    server { listen 127.0.0.1:$RX; location / { return 204; } }
}
CONF
nginx -p "$TMP" -c "$TMP/nginx.conf" &
PIDS+=($!)
sleep 0.5

for round in $(seq "$ROUNDS"); do
    for bin in "${BINARIES[@]}"; do
        rm -f "$TMP"/relay.sqlite*
        "$bin" serve --listen 127.0.0.1:$PR --db "$TMP/relay.sqlite" --server-keys benchkey-0123456789 \
            --log-level warning --push-allowed-hosts "127.0.0.1:*" --push-delay-ms 3600000 \
            >/dev/null 2>"$TMP/relay.err" &
        relay=$!
        for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PR/readyz" >/dev/null && break; sleep 0.1; done
        echo "round $round, $bin: $(python3 "$ROOT/Benchmarks/push_bench.py" throughput "http://127.0.0.1:$PR" \
            "http://127.0.0.1:$RX" "${JOBS:-20000}" "$TMP/relay.sqlite" "$relay")"
        kill "$relay"; wait "$relay" 2>/dev/null || true
    done
done
