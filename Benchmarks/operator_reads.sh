#!/usr/bin/env bash
# The operator console's reads on a large outbox: seeds a SQLite database with JOBS delivered and
# 1,000 dead push jobs (default 2,000,000), then for each BINARY given times `/v1/stats`, the
# dead-letter list and a bystander's read while two console tabs poll, on a fresh copy of it
# (a binary with a newer schema migrates the copy at start: "serving after" includes it).
#   Benchmarks/operator_reads.sh .build/release/pushrelay [OTHER_BINARY…]
set -euo pipefail
dir=$(mktemp -d /tmp/pushrelay-opreads.XXXXXX)
trap 'rm -rf "$dir"' EXIT
jobs=${JOBS:-2000000}; port=${PORT:-18931}; key=benchkey-0123456789abcdef
now=$(($(date +%s) * 1000))
PUSHRELAY_DB=$dir/base.sqlite "$1" migrate >/dev/null
sqlite3 "$dir/base.sqlite" >/dev/null <<SQL
PRAGMA journal_mode=WAL;
BEGIN;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $jobs)
INSERT INTO push_jobs(webhook_id, kind, user_id, device_id, message_id, seq, state, due_at, expires_at, attempts,
    created_at, updated_at)
SELECT 'msg_' || hex(randomblob(12)), 'message', 'u' || (i % 20000), 'phone', 'm' || i, i / 20000 + 1, 'delivered',
    $now - i * 216, $now + 86400000, 1, $now - i * 216, $now - i * 216 FROM n;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000)
INSERT INTO push_jobs(webhook_id, kind, user_id, device_id, message_id, seq, state, due_at, expires_at, attempts,
    last_error, created_at, updated_at)
SELECT 'msg_' || hex(randomblob(12)), 'message', 'u' || (i % 20000), 'phone', 'd' || i, 1, 'dead',
    $now - i * 1000, $now + 86400000, 8, 'HTTP 500', $now - i * 1000, $now - i * 1000 FROM n;
COMMIT;
SQL
t() { curl -s -o /dev/null -w '%{time_total}\n' -H "Authorization: Bearer $key" "http://127.0.0.1:$port$1"; }
stat() { sort -n | awk '{a[NR]=$1} END {printf "min %.4f median %.4f max %.4f s (n=%d)\n", a[1], a[int((NR+1)/2)], a[NR], NR}'; }
for bin in "$@"; do
  rm -f "$dir"/run.sqlite*
  cp "$dir/base.sqlite" "$dir/run.sqlite"
  start=$(date +%s%N)
  PUSHRELAY_DB=$dir/run.sqlite PUSHRELAY_SERVER_KEYS=$key PUSHRELAY_LISTEN=127.0.0.1:$port "$bin" serve \
    >"$dir/relay.log" 2>&1 &
  pid=$!
  until curl -sf "http://127.0.0.1:$port/healthz" >/dev/null; do sleep 0.05; done
  echo "$bin: serving after $(((($(date +%s%N) - start)) / 1000000)) ms"
  echo -n " /v1/stats (1.1 s apart):              "; for _ in $(seq 10); do t /v1/stats; sleep 1.1; done | stat
  echo -n " /v1/stats (back to back):             "; for _ in $(seq 10); do t /v1/stats; done | stat
  echo -n " deliveries?state=dead&limit=100:      "; for _ in $(seq 10); do t "/v1/deliveries?state=dead&limit=100"; done | stat
  echo -n " deliveries?state=dead&userId=u7:      "
  for _ in $(seq 10); do t "/v1/deliveries?state=dead&userId=u7&limit=100"; done | stat
  echo -n " deliveries?state=delivered&limit=100: "
  for _ in $(seq 5); do t "/v1/deliveries?state=delivered&limit=100"; done | stat
  # Two console tabs polling every 2 s, and a bystander's store read meanwhile.
  tab() { for _ in $(seq 8); do t /v1/stats >/dev/null; t "/v1/deliveries?state=dead&limit=100" >/dev/null; sleep 2; done; }
  tab & tab1=$!
  (sleep 1; tab) & tab2=$!
  echo -n " bystander GET devices under 2 tabs:   "; for _ in $(seq 40); do t /v1/users/u1/devices; sleep 0.4; done | stat
  wait $tab1 $tab2
  kill $pid
  wait $pid || true
done
