#!/usr/bin/env bash
# Wake-ups per live message: a relay build under `pushrelay-load latency`, and the voluntary
# context switches of each of its threads (by name) over the run, divided by the messages sent.
#
#   Benchmarks/live_wakeups.sh BINARY [SUBSCRIBERS RATE]     (default 1000 5000; after
#                                                             `swift build -c release`)
#
# A thread that sleeps and is woken (a queue hop, an epoll or futex wait, an fsync) counts one
# per wait; prints the load tool's latencies, then each thread's switches and the total.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BIN=$1 SUBS=${2:-1000} RATE=${3:-5000}
LOAD=$(pwd)/.build/release/pushrelay-load
PR=18381
ulimit -n "$(ulimit -Hn)"
TMP=$(mktemp -d /tmp/pushrelay-wakeups.XXXXXX)
PID=""
cleanup() { [[ -n $PID ]] && kill "$PID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT INT TERM
"$BIN" serve --listen 127.0.0.1:$PR --db "$TMP/pr.sqlite" --server-keys benchkey-0123456789 --log-level warning \
    --max-connections 30000 --max-connections-per-ip 0 >"$TMP/relay.log" 2>&1 &
PID=$!
for _ in $(seq 100); do curl -s -o /dev/null --max-time 1 http://127.0.0.1:$PR/readyz && break; sleep 0.1; done
switches() {
    for task in /proc/"$PID"/task/*; do
        printf '%s %s\n' "$(tr ' ' '_' <"$task/comm")" "$(awk '/^voluntary_ctxt_switches/ {print $2}' "$task/status")"
    done | awk '{n[$1] += $2} END {for (k in n) print k, n[k]}' | sort
}
switches >"$TMP/before"
out=$("$LOAD" latency --target pushrelay --url http://127.0.0.1:$PR --server-pid "$PID" \
    --subscribers "$SUBS" --rate "$RATE" --duration 10)
switches >"$TMP/after"
echo "$out"
sent=$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['sent'])" "$out")
join -a2 -e0 -o 0,1.2,2.2 "$TMP/before" "$TMP/after" | awk -v sent="$sent" '
    { d = $3 - $2; total += d; if (d > 0) printf "  %-20s %8d  %.2f per message\n", $1, d, d / sent }
    END { printf "  %-20s %8d  %.2f per message (%d messages)\n", "all threads", total, total / sent, sent }'
