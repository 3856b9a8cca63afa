#!/usr/bin/env bash
# PushRelay ingest, batch and catch-up benchmark (one run), beside its anchors measured in the
# same run: nginx `return 204` (the HTTP ceiling), nginx + nchan publish, a bare libmicrohttpd
# handler with PushRelay's settings (Benchmarks/mhd_bare.c: the HTTP layer's own ceiling), and
# Redis `XADD` with `appendfsync always` (a durable peer). `make bench` runs it with the
# WebSocket and idle benchmarks, several times, and writes the table into BENCHMARKS.md.
#
#   Benchmarks/run.sh                 (from the repo root, after `swift build -c release`)
#   DURATION=30s Benchmarks/run.sh
#
# Everything runs on 127.0.0.1 and stops by itself: wrk runs are bounded by DURATION (+ WARMUP),
# the catch-up fills post exactly CATCHUP_N messages. Servers started here are stopped on exit,
# also on failure or Ctrl-C. The summary goes to stdout and to Benchmarks/results/latest.md.
#
# Settings (environment):
#   DURATION=10s        each measured wrk run          WARMUP=2s     wrk warm-up before each run
#   WRK_THREADS=2  WRK_CONNECTIONS=64                   CATCHUP_N=10000  CATCHUP_RUNS=5
#   NGINX_WORKERS="1 auto"  worker_processes values tried; the best of each nginx test is reported
#   PR_PORT=18080  NG_PORT=18081  MHD_PORT=18083  REDIS_PORT=16379   KEEP_TMP=1  keep the temp dir
#   USERS=1000          PushRelay ingest recipients rotate over this many users
#   REDIS_REQUESTS=600000  requests of the redis-benchmark run (about DURATION at ~60k/s)
#   RESULTS_JSON=path   also copy the run's raw results there
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
BENCH="$ROOT/Benchmarks"
BIN="$ROOT/.build/release/pushrelay"

DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-2s}
WRK_THREADS=${WRK_THREADS:-2}
WRK_CONNECTIONS=${WRK_CONNECTIONS:-64}
CATCHUP_N=${CATCHUP_N:-10000}
CATCHUP_RUNS=${CATCHUP_RUNS:-5}
NGINX_WORKERS=${NGINX_WORKERS:-"1 auto"}
PR_PORT=${PR_PORT:-18080}
NG_PORT=${NG_PORT:-18081}
MHD_PORT=${MHD_PORT:-18083}
REDIS_PORT=${REDIS_PORT:-16379}
USERS=${USERS:-1000}
REDIS_REQUESTS=${REDIS_REQUESTS:-600000}
KEY=benchkey-0123456789
PR_URL="http://127.0.0.1:$PR_PORT"
NG_URL="http://127.0.0.1:$NG_PORT"

say() { printf '==> %s\n' "$*"; }
die() { printf '!!! %s\n' "$*" >&2; exit 1; }

# ---------------------------------------------------------------- prerequisites
[[ -x "$BIN" ]] || die "$BIN is missing: build it first (swift build -c release)"

apt_updated=0
need_pkg() { # need_pkg PACKAGE...: install the missing ones
    local missing=() p
    for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
    ((${#missing[@]} == 0)) && return 0
    say "installing ${missing[*]}"
    local sudo=""
    [[ $(id -u) == 0 ]] || sudo=sudo
    if ((apt_updated == 0)); then $sudo apt-get update -qq; apt_updated=1; fi
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}
command -v wrk >/dev/null || need_pkg wrk
command -v curl >/dev/null || need_pkg curl
command -v python3 >/dev/null || need_pkg python3
command -v nginx >/dev/null || need_pkg nginx-light
need_pkg libnginx-mod-nchan
NCHAN_SO=$(dpkg -L libnginx-mod-nchan | grep -m1 '/ngx_nchan_module\.so$') \
    || die "ngx_nchan_module.so not found in libnginx-mod-nchan"
NGINX_VERSION=$(nginx -v 2>&1 | sed 's/^nginx version: //')
command -v redis-server >/dev/null || need_pkg redis-server
command -v cc >/dev/null || need_pkg gcc
[[ -f /usr/include/microhttpd.h ]] || need_pkg libmicrohttpd-dev
REDIS_VERSION=$(redis-server --version | sed -n 's/.*v=\([0-9.]*\).*/\1/p')

for port in "$PR_PORT" "$NG_PORT" "$MHD_PORT"; do
    if curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$port/"; then
        die "something already answers on 127.0.0.1:$port (set PR_PORT / NG_PORT)"
    fi
done

# ---------------------------------------------------------------- temp dir, cleanup
TMP=$(mktemp -d "${TMPDIR:-/tmp}/pushrelay-bench.XXXXXX")
NGX_DIR="$TMP/nginx"
mkdir -p "$NGX_DIR/body"
chmod 755 "$TMP" "$NGX_DIR"
chmod 777 "$NGX_DIR/body" # nginx workers run as nobody when started by root
RESULTS="$TMP/results.json"
NGINX_PID=""
PR_PID=""
MHD_PID=""
REDIS_PID=""
CHILD_PID="" # the wrk or helper process running now

stop_pid() { # stop_pid PID NAME: TERM, wait up to 10 s, then KILL (and the children)
    local pid=$1 name=$2 children i
    [[ -n "$pid" ]] || return 0
    kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
    children=$(pgrep -P "$pid" || true)
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        printf '!!! %s (pid %s) did not stop on TERM: killing it\n' "$name" "$pid" >&2
        kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
    for i in $children; do kill -KILL "$i" 2>/dev/null || true; done
}

stop_nginx() { stop_pid "$NGINX_PID" nginx; NGINX_PID=""; }
stop_pushrelay() { stop_pid "$PR_PID" pushrelay; PR_PID=""; }

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [[ -n "$CHILD_PID" ]]; then kill -TERM "$CHILD_PID" 2>/dev/null || true; wait "$CHILD_PID" 2>/dev/null || true; fi
    stop_pushrelay
    stop_nginx
    stop_pid "$MHD_PID" mhd_bare
    stop_pid "$REDIS_PID" redis-server
    if ((rc != 0)); then
        if ((rc == 130 || rc == 143)); then
            printf '\n!!! benchmark interrupted\n' >&2
        else
            printf '\n!!! benchmark FAILED (exit %s)\n' "$rc" >&2
        fi
        if [[ -s "$TMP/pushrelay.log" ]]; then
            echo "--- last lines of the pushrelay log:" >&2
            tail -n 20 "$TMP/pushrelay.log" >&2
        fi
        if [[ -s "$NGX_DIR/error.log" ]]; then
            echo "--- last lines of the nginx error log:" >&2
            tail -n 20 "$NGX_DIR/error.log" >&2
        fi
    fi
    if [[ "${KEEP_TMP:-0}" == 1 || $rc != 0 ]]; then
        echo "(temp dir kept: $TMP)" >&2
    else
        rm -rf "$TMP"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

helper() { python3 "$BENCH/bench_helper.py" "$@"; }

# Runs a command in the background and waits for it, so that INT/TERM reach the trap at once
# (bash runs traps only between foreground commands) and the cleanup can stop it.
run_child() {
    local rc=0
    "$@" &
    CHILD_PID=$!
    wait "$CHILD_PID" || rc=$?
    CHILD_PID=""
    return "$rc"
}

# The benchmark body: a 200-byte JSON object; PushRelay gets it as `payload`, nchan as the body.
TEXT="PushRelay benchmark message: the quick brown fox jumps over the lazy dog while the relay commits it to SQLite and answers; nchan gets the very same bytes. 0123456789abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ"
# shellcheck disable=SC2089,SC2090 # JSON quotes meant literally; only Lua and Python read it
printf -v BENCH_PAYLOAD '{"text":"%s"}' "${TEXT:0:189}"
# shellcheck disable=SC2090
export BENCH_PAYLOAD
((${#BENCH_PAYLOAD} == 200)) || die "payload is ${#BENCH_PAYLOAD} bytes, not 200"
# A POST /v1/messages body of post.lua's: the payload in `{"id":"b1765100000m-1-12345",
# "recipients":["bench123"],"payload":…}` (a few bytes more or less as the counters grow).
BODY_BYTES=$((${#BENCH_PAYLOAD} + 66))

git_commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]]; then git_commit+="-dirty"; fi
helper set "$RESULTS" meta "$(python3 -c 'import json,sys; print(json.dumps(dict(zip(sys.argv[1::2], sys.argv[2::2]))))' \
    date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" commit "$git_commit" cpus "$(nproc)" nginx "$NGINX_VERSION" \
    wrk_args "-t$WRK_THREADS -c$WRK_CONNECTIONS -d$DURATION --latency" warmup "$WARMUP" \
    payload_bytes "${#BENCH_PAYLOAD}" catchup_n "$CATCHUP_N" catchup_runs "$CATCHUP_RUNS" users "$USERS" \
    redis "$REDIS_VERSION")"

# ---------------------------------------------------------------- nginx + nchan
start_nginx() { # start_nginx WORKERS
    local workers=$1 i
    cat >"$NGX_DIR/nginx.conf" <<EOF
load_module $NCHAN_SO;
worker_processes $workers;
daemon off;
pid $NGX_DIR/nginx.pid;
error_log $NGX_DIR/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    keepalive_timeout 75s;
    client_body_temp_path $NGX_DIR/body;
    server {
        listen 127.0.0.1:$NG_PORT backlog=4096;
        # The ceiling: the cheapest answer nginx can give.
        location = /ceiling { return 204; }
        # The relay's own catch-up answer, saved: the same bytes served from a file.
        location = /catchup.json { root $TMP; default_type application/json; }
        # nchan publisher: POST /pub/<channel>
        location ~ /pub/(\\w+)\$ {
            nchan_publisher;
            nchan_channel_id \$1;
            nchan_message_buffer_length 20000;
            nchan_message_timeout 1h;
        }
        # nchan long-poll subscriber: GET /sub/<channel> (without an Accept: multipart/mixed
        # header, which would make it a streaming subscriber) answers every buffered message
        # from the oldest on, in one multipart/mixed response.
        location ~ /sub/(\\w+)\$ {
            nchan_subscriber longpoll;
            nchan_channel_id \$1;
            nchan_subscriber_first_message oldest;
            nchan_longpoll_multipart_response on;
        }
    }
}
EOF
    nginx -t -q -p "$NGX_DIR" -e "$NGX_DIR/error.log" -c "$NGX_DIR/nginx.conf" \
        || die "nginx rejected its config ($NGX_DIR/nginx.conf)"
    nginx -p "$NGX_DIR" -e "$NGX_DIR/error.log" -c "$NGX_DIR/nginx.conf" &
    NGINX_PID=$!
    for ((i = 0; i < 100; i++)); do
        kill -0 "$NGINX_PID" 2>/dev/null || die "nginx exited at start (see $NGX_DIR/error.log)"
        [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$NG_URL/ceiling" || true) == 204 ]] && return 0
        sleep 0.1
    done
    die "nginx did not answer on $NG_URL/ceiling within 10 s"
}

run_wrk() { # run_wrk NAME URL [wrk args...]: warm-up, then the measured run into $TMP/NAME.wrk
    local name=$1 url=$2
    shift 2
    run_child wrk -t"$WRK_THREADS" -c"$WRK_CONNECTIONS" -d"$WARMUP" "$@" "$url" >"$TMP/$name.warmup.wrk"
    run_child wrk -t"$WRK_THREADS" -c"$WRK_CONNECTIONS" -d"$DURATION" --latency "$@" "$url" >"$TMP/$name.wrk"
}

best_pub_workers=""
best_pub_rps=0
for w in $NGINX_WORKERS; do
    start_nginx "$w"
    label=$w
    [[ $w == auto ]] && label="auto(=$(nproc))"
    say "nginx worker_processes $label: ceiling GET /ceiling ($DURATION)"
    run_wrk "ceiling_w$w" "$NG_URL/ceiling"
    helper parse-wrk "$RESULTS" "ceiling_w$label" "$TMP/ceiling_w$w.wrk"
    say "nginx worker_processes $label: nchan publish POST /pub/bench ($DURATION)"
    run_wrk "nchan_w$w" "$NG_URL/pub/bench" -s "$BENCH/nchan_pub.lua"
    helper parse-wrk "$RESULTS" "nchan_pub_w$label" "$TMP/nchan_w$w.wrk"
    rps=$(sed -n 's/^Requests\/sec:[[:space:]]*\([0-9.]*\).*/\1/p' "$TMP/nchan_w$w.wrk")
    if python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) > float(sys.argv[2]) else 1)' "${rps:-0}" "$best_pub_rps"; then
        best_pub_rps=$rps
        best_pub_workers=$w
    fi
    stop_nginx
done

# ---------------------------------------------------------------- bare libmicrohttpd
say "bare libmicrohttpd handler (PushRelay's settings) POST /v1/messages ($DURATION)"
cc -O2 -o "$TMP/mhd_bare" "$BENCH/mhd_bare.c" -lmicrohttpd || die "cannot build Benchmarks/mhd_bare.c"
"$TMP/mhd_bare" "$MHD_PORT" >"$TMP/mhd_bare.log" 2>&1 &
MHD_PID=$!
for ((i = 0; i < 100; i++)); do
    [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 1 -X POST -d x "http://127.0.0.1:$MHD_PORT/v1/messages" || true) == 202 ]] && break
    sleep 0.1
done
run_child wrk -t"$WRK_THREADS" -c"$WRK_CONNECTIONS" -d"$WARMUP" -s "$BENCH/post.lua" \
    "http://127.0.0.1:$MHD_PORT/v1/messages" -- mhdw bench "$KEY" "$USERS" >"$TMP/mhd_bare.warmup.wrk"
run_child wrk -t"$WRK_THREADS" -c"$WRK_CONNECTIONS" -d"$DURATION" --latency -s "$BENCH/post.lua" \
    "http://127.0.0.1:$MHD_PORT/v1/messages" -- mhdm bench "$KEY" "$USERS" >"$TMP/mhd_bare.wrk"
helper parse-wrk "$RESULTS" mhd_bare "$TMP/mhd_bare.wrk" --fail-non2xx
stop_pid "$MHD_PID" mhd_bare
MHD_PID=""

# ---------------------------------------------------------------- Redis XADD, fsync per write
say "redis-server $REDIS_VERSION XADD, appendfsync always ($REDIS_REQUESTS requests, -c $WRK_CONNECTIONS, $USERS streams)"
mkdir -p "$TMP/redis"
python3 "$BENCH/bench_helper.py" life "$TMP/redis.life" -- redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly yes \
    --appendfsync always --dir "$TMP/redis" --daemonize no >"$TMP/redis.log" 2>&1 &
REDIS_PID=$!
for ((i = 0; i < 100; i++)); do
    [[ $(redis-cli -p "$REDIS_PORT" ping 2>/dev/null || true) == PONG ]] && break
    sleep 0.1
done
redis_xadd() { # redis_xadd REQUESTS: CSV with the rps and latency percentiles
    redis-benchmark -p "$REDIS_PORT" -c "$WRK_CONNECTIONS" -n "$1" -r "$USERS" --csv \
        XADD 'stream:__rand_int__' '*' payload "$BENCH_PAYLOAD"
}
run_child redis_xadd 50000 >"$TMP/redis.warmup.csv"
run_child redis_xadd "$REDIS_REQUESTS" >"$TMP/redis.csv"
helper parse-redis "$RESULTS" redis_xadd "$TMP/redis.csv"
stop_pid "$REDIS_PID" redis-server
REDIS_PID=""
helper cost "$RESULTS" redis_cost "$TMP/redis.life" $((50000 + REDIS_REQUESTS)) "$BODY_BYTES"

# ---------------------------------------------------------------- PushRelay ingest
start_pushrelay() { # start_pushrelay [LIFE_JSON]: on $TMP/bench.sqlite, under `helper life` if given
    local wrap=()
    [[ -n ${1:-} ]] && wrap=(python3 "$BENCH/bench_helper.py" life "$1" --)
    say "starting pushrelay on $PR_URL (db $TMP/bench.sqlite)"
    "${wrap[@]}" "$BIN" serve --listen "127.0.0.1:$PR_PORT" --db "$TMP/bench.sqlite" --server-keys "$KEY" \
        --log-level warning --max-connections-per-ip 0 >>"$TMP/pushrelay.log" 2>&1 &
    PR_PID=$!
    for ((i = 0; i < 300; i++)); do
        kill -0 "$PR_PID" 2>/dev/null || die "pushrelay exited at start"
        [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$PR_URL/readyz" || true) == 200 ]] && break
        sleep 0.1
    done
    [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$PR_URL/readyz" || true) == 200 ]] \
        || die "pushrelay /readyz did not answer 200 within 30 s"
}
# The single-message run has a process of its own: its whole life's CPU and disk writes
# (checkpoints and shutdown included) divided by the messages it accepted.
start_pushrelay "$TMP/pushrelay.life"

say "pushrelay POST /v1/messages ($DURATION, one recipient of $USERS users, unique ids)"
run_id="b$(date +%s)"
run_child wrk -t"$WRK_THREADS" -c"$WRK_CONNECTIONS" -d"$WARMUP" -s "$BENCH/post.lua" "$PR_URL/v1/messages" \
    -- "${run_id}w" bench "$KEY" "$USERS" >"$TMP/pushrelay.warmup.wrk"
helper parse-wrk "$RESULTS" pushrelay_warmup "$TMP/pushrelay.warmup.wrk" --fail-non2xx >/dev/null
curl -s "$PR_URL/metrics" >"$TMP/metrics.before"
run_child wrk -t"$WRK_THREADS" -c"$WRK_CONNECTIONS" -d"$DURATION" --latency -s "$BENCH/post.lua" \
    "$PR_URL/v1/messages" -- "${run_id}m" bench "$KEY" "$USERS" >"$TMP/pushrelay.wrk"
curl -s "$PR_URL/metrics" >"$TMP/metrics.after"
helper batch-delta "$RESULTS" batch "$TMP/metrics.before" "$TMP/metrics.after"
helper parse-wrk "$RESULTS" pushrelay "$TMP/pushrelay.wrk" --fail-non2xx
stop_pushrelay
accepted=$(cat "$TMP/pushrelay.warmup.wrk" "$TMP/pushrelay.wrk" | awk '/requests in/ {n += $1} END {print n}')
helper cost "$RESULTS" pushrelay_cost "$TMP/pushrelay.life" "$accepted" "$BODY_BYTES"
start_pushrelay

say "pushrelay POST /v1/messages/batch ($DURATION, -c16, 100 messages x 10 recipients per batch)"
run_child wrk -t"$WRK_THREADS" -c16 -d"$DURATION" --latency -s "$BENCH/batch.lua" "$PR_URL/v1/messages/batch" \
    -- "${run_id}b" 100 10 "$KEY" >"$TMP/batch.wrk"
helper parse-wrk "$RESULTS" pushrelay_batch "$TMP/batch.wrk" --fail-non2xx

# ---------------------------------------------------------------- catch-up
say "catch-up: posting $CATCHUP_N messages to PushRelay user 'catchup'"
run_child helper fill-pushrelay "$PR_PORT" "$KEY" catchup "$CATCHUP_N" 8 >"$TMP/fill_pr"
fill_pr=$(<"$TMP/fill_pr")
say "  posted in ${fill_pr}s"
times=()
bytes=0
for ((r = 1; r <= CATCHUP_RUNS; r++)); do
    out=$(curl -s -o "$TMP/catchup.json" -w '%{http_code} %{time_total} %{size_download}' \
        -H "Authorization: Bearer $KEY" "$PR_URL/v1/users/catchup/messages?after=0&limit=$CATCHUP_N")
    read -r code t bytes <<<"$out"
    [[ $code == 200 ]] || die "catch-up answered $code: $(head -c 300 "$TMP/catchup.json")"
    helper check-pushrelay "$TMP/catchup.json" "$CATCHUP_N" >/dev/null
    times+=("$t")
done
median=$(helper median "${times[@]}")
say "  PushRelay catch-up: median ${median}s (${times[*]}), $bytes bytes"
helper set "$RESULTS" catchup_pushrelay "$(printf '{"request":"GET /v1/users/catchup/messages?after=0&limit=%s","times":[%s],"median":%s,"bytes":%s,"fill_s":%s}' \
    "$CATCHUP_N" "$(IFS=,; echo "${times[*]}")" "$median" "$bytes" "$fill_pr")"
stop_pushrelay

[[ -n $best_pub_workers ]] || best_pub_workers=1
start_nginx "$best_pub_workers"
say "catch-up: publishing $CATCHUP_N messages to nchan channel 'catchup' (worker_processes $best_pub_workers)"
run_child helper fill-nchan "$NG_PORT" catchup "$CATCHUP_N" "$BENCH_PAYLOAD" 4 >"$TMP/fill_nc"
fill_nc=$(<"$TMP/fill_nc")
say "  published in ${fill_nc}s"
times=()
for ((r = 1; r <= CATCHUP_RUNS; r++)); do
    out=$(curl -s -o "$TMP/nchan.body" -D "$TMP/nchan.headers" -w '%{http_code} %{time_total} %{size_download}' \
        --max-time 30 "$NG_URL/sub/catchup")
    read -r code t bytes <<<"$out"
    [[ $code == 200 ]] || die "nchan subscriber answered $code"
    helper check-nchan "$TMP/nchan.body" "$TMP/nchan.headers" "$CATCHUP_N" >/dev/null
    times+=("$t")
done
median=$(helper median "${times[@]}")
say "  nchan catch-up: median ${median}s (${times[*]}), $bytes bytes"
helper set "$RESULTS" catchup_nchan "$(printf '{"request":"GET /sub/catchup (longpoll, multipart on)","times":[%s],"median":%s,"bytes":%s,"fill_s":%s}' \
    "$(IFS=,; echo "${times[*]}")" "$median" "$bytes" "$fill_nc")"
chmod a+rx "$TMP" && chmod a+r "$TMP/catchup.json"  # nginx's workers run as another user
times=()
for ((r = 1; r <= CATCHUP_RUNS; r++)); do
    out=$(curl -s -o /dev/null -w '%{http_code} %{time_total} %{size_download}' "$NG_URL/catchup.json")
    read -r code t bytes <<<"$out"
    [[ $code == 200 ]] || die "nginx answered $code for the saved catch-up page"
    times+=("$t")
done
median=$(helper median "${times[@]}")
say "  nginx serving PushRelay's catch-up answer from a file: median ${median}s (${times[*]}), $bytes bytes"
helper set "$RESULTS" catchup_nginx_file "$(printf '{"request":"GET /catchup.json (the relay'"'"'s answer, saved)","times":[%s],"median":%s,"bytes":%s}' \
    "$(IFS=,; echo "${times[*]}")" "$median" "$bytes")"
helper set "$RESULTS" meta "$(python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))["meta"]
m["nchan_catchup_note"] = sys.argv[2]
print(json.dumps(m))' "$RESULTS" "a long-poll GET with nchan_subscriber_first_message oldest and nchan_longpoll_multipart_response on returns all $CATCHUP_N buffered messages in one multipart/mixed response (checked by counting parts); sending Accept: multipart/mixed instead selects nchan's streaming subscriber, which never ends the response")"
stop_nginx

# ---------------------------------------------------------------- summary
echo
helper report "$RESULTS" "$BENCH/results/latest.md"
say "written to Benchmarks/results/latest.md"
if [[ -n "${RESULTS_JSON:-}" ]]; then cp "$RESULTS" "$RESULTS_JSON"; fi
