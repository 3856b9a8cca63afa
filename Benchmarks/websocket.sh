#!/usr/bin/env bash
# PushRelay WebSocket benchmark, side by side with nginx + nchan (WebSocket subscribers) and
# mosquitto (MQTT over WebSocket, persistent sessions, QoS 1), all driven by the same load tool
# (Benchmarks/LoadTool, the project's own codec in client role over epoll).
#
#   swift build -c release && Benchmarks/websocket.sh
#
# Figures: RSS growth per idle WebSocket at IDLE_CONNECTIONS (default 10,000), measured 12 s after
# connecting (PushRelay trims its heap every 5 s); publish→receive latency p50/p99 with 100
# subscribers at 1,000 msg/s and 1,000 subscribers at 5,000 msg/s. For PushRelay the path is
# POST /v1/messages (durable: committed with fsync) → WebSocket frame; for nchan POST /pub →
# WebSocket; for mosquitto an MQTT QoS 1 PUBLISH over TCP → MQTT-over-WebSocket subscriber.
# Loopback only; every run is bounded. Writes Benchmarks/results/websocket.md (and the raw
# figures as JSON to $WS_JSON when set).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
BIN="$ROOT/.build/release/pushrelay"
LOAD="$ROOT/.build/release/pushrelay-load"
IDLE_CONNECTIONS=${IDLE_CONNECTIONS:-10000}
DURATION=${DURATION:-10}
PR_PORT=18080 NG_PORT=18082 MQ_TCP=18883 MQ_WS=18901
[[ -x "$BIN" && -x "$LOAD" ]] || { echo "build first: swift build -c release" >&2; exit 1; }

need_pkg() { dpkg -s "$1" >/dev/null 2>&1 || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1" >/dev/null; }; }
command -v nginx >/dev/null || need_pkg nginx-light
need_pkg libnginx-mod-nchan
need_pkg mosquitto
NCHAN_SO=$(dpkg -L libnginx-mod-nchan | grep -m1 '/ngx_nchan_module\.so$')
ulimit -n "$(ulimit -Hn)"

TMP=$(mktemp -d /tmp/pushrelay-wsbench.XXXXXX)
PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT INT TERM

wait_port() { for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.1; done; echo "port $1 not up" >&2; exit 1; }
field() { python3 -c "import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$1" "$2"; }

# --- PushRelay
"$BIN" serve --listen 127.0.0.1:$PR_PORT --db "$TMP/pr.sqlite" --server-keys benchkey-0123456789 --log-level warning \
    --max-connections 30000 --max-connections-per-ip 0 >"$TMP/pr.out" 2>"$TMP/pr.err" &
PIDS+=($!); PR_PID=$!
wait_port $PR_PORT

# --- nginx + nchan
mkdir -p "$TMP/nginx/logs"
cat >"$TMP/nginx/nginx.conf" <<CONF
load_module $NCHAN_SO;
worker_processes 1;
worker_rlimit_nofile 40000;
daemon off;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/logs/error.log warn;
events { worker_connections 30000; }
http {
    access_log off;
    client_body_temp_path $TMP/nginx;
    server {
        listen 127.0.0.1:$NG_PORT;
        location ~ ^/pub/([^/]+)\$ { nchan_publisher; nchan_channel_id \$1; nchan_message_buffer_length 100; nchan_message_timeout 1h; }
        location ~ ^/sub/([^/]+)\$ { nchan_subscriber websocket; nchan_channel_id \$1; }
    }
}
CONF
nginx -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" &
PIDS+=($!); NG_MASTER=$!
wait_port $NG_PORT
NG_WORKER=$(pgrep -P "$NG_MASTER" | head -1)

# --- mosquitto
mkdir -p "$TMP/mosquitto"
cat >"$TMP/mosquitto/mosquitto.conf" <<CONF
per_listener_settings false
allow_anonymous true
persistence true
persistence_location $TMP/mosquitto/
max_queued_messages 100000
listener $MQ_TCP 127.0.0.1
listener $MQ_WS 127.0.0.1
protocol websockets
CONF
mosquitto -c "$TMP/mosquitto/mosquitto.conf" >"$TMP/mosquitto/log" 2>&1 &
PIDS+=($!); MQ_PID=$!
wait_port $MQ_WS

declare -A RESULT
run() { # name target url pid mode extra...
    local name=$1 target=$2 url=$3 pid=$4 mode=$5; shift 5
    local out
    out=$("$LOAD" "$mode" --target "$target" --url "$url" --mqtt-port $MQ_TCP --server-pid "$pid" "$@")
    echo "    $name $mode: $out"
    RESULT[$name.$mode.$*]=$out
}

echo "==> idle: RSS growth per WebSocket at $IDLE_CONNECTIONS connections"
run pushrelay pushrelay http://127.0.0.1:$PR_PORT $PR_PID idle --connections "$IDLE_CONNECTIONS" --hold 12
run nchan nchan http://127.0.0.1:$NG_PORT "$NG_WORKER" idle --connections "$IDLE_CONNECTIONS" --hold 12
run mosquitto mosquitto http://127.0.0.1:$MQ_WS $MQ_PID idle --connections "$IDLE_CONNECTIONS" --hold 12

echo "==> latency: 100 subscribers, 1000 msg/s; 1000 subscribers, 5000 msg/s (${DURATION}s each)"
for spec in "100 1000" "1000 5000"; do
    set -- $spec
    run pushrelay pushrelay http://127.0.0.1:$PR_PORT $PR_PID latency --subscribers "$1" --rate "$2" --duration "$DURATION"
    run nchan nchan http://127.0.0.1:$NG_PORT "$NG_WORKER" latency --subscribers "$1" --rate "$2" --duration "$DURATION"
    run mosquitto mosquitto http://127.0.0.1:$MQ_WS $MQ_PID latency --subscribers "$1" --rate "$2" --duration "$DURATION"
done

mkdir -p "$ROOT/Benchmarks/results"
{
    echo "# WebSocket benchmark ($(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD), $(nproc) CPUs)"
    echo
    echo "| server | RSS per idle WebSocket at $IDLE_CONNECTIONS (KiB) | 100 subs @ 1k msg/s p50 / p99 ms | 1000 subs @ 5k msg/s p50 / p99 ms |"
    echo "|---|---:|---:|---:|"
    for name in pushrelay nchan mosquitto; do
        idle=${RESULT[$name.idle.--connections $IDLE_CONNECTIONS --hold 12]}
        a=${RESULT[$name.latency.--subscribers 100 --rate 1000 --duration $DURATION]}
        b=${RESULT[$name.latency.--subscribers 1000 --rate 5000 --duration $DURATION]}
        echo "| $name | $(field "$idle" rssPerConnectionKiB) ($(field "$idle" open) open) | $(field "$a" p50ms) / $(field "$a" p99ms) ($(field "$a" received)/$(field "$a" sent)) | $(field "$b" p50ms) / $(field "$b" p99ms) ($(field "$b" received)/$(field "$b" sent)) |"
    done
} | tee "$ROOT/Benchmarks/results/websocket.md"
# The raw figures for `make bench`'s summary.
if [[ -n "${WS_JSON:-}" ]]; then
    {
        echo "{"
        first=1
        for key in "${!RESULT[@]}"; do
            ((first)) || echo ","
            first=0
            printf '"%s": %s' "$key" "${RESULT[$key]}"
        done
        echo "}"
    } >"$WS_JSON"
fi
