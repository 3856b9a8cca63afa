#!/usr/bin/env bash
# `make bench`: the benchmarks of BENCHMARKS.md's top tables, RUNS times (default 2), each run with its
# anchors measured in the same script run, then one table of every run's figures spliced into
# BENCHMARKS.md (between the make-bench markers) and Benchmarks/results/bench.md; the README's
# headline figures (between its bench-figures markers) come from the same table.
#
#   Benchmarks/bench.sh            (after `swift build -c release`; `make bench` does both)
#   RUNS=3 DURATION=10s Benchmarks/bench.sh
#
# run.sh: nginx ceiling, nchan, bare libmicrohttpd, Redis XADD (fsync always), PushRelay single
# and batch ingest, catch-up of 10,000 (PushRelay and nchan). websocket.sh: RSS per idle socket and
# live latency at 100 x 1k/s and 1,000 x 5k/s (PushRelay, nchan, mosquitto). push.sh: pushes/s over
# http, https and APNs (HTTP/2) beside wrk's and h2load's ceilings, due → receiver latency. idle_cpu.sh: wake-ups
# and CPU of an idle relay after some work. cluster.sh: ingest on SQLite, PostgreSQL with one and
# two nodes, live latency across nodes, catch-up on PostgreSQL. Each script installs the servers
# it needs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
RUNS=${RUNS:-2}
OUT=$(mktemp -d /tmp/pushrelay-bench-all.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
for ((run = 1; run <= RUNS; run++)); do
    echo "=== run $run of $RUNS: ingest, batch, catch-up"
    RESULTS_JSON="$OUT/ingest$run.json" Benchmarks/run.sh
    echo "=== run $run of $RUNS: WebSockets (and what an fsync costs, beside them)"
    python3 Benchmarks/bench_helper.py fsync "$OUT" "$OUT/fsync$run.json"
    WS_JSON="$OUT/ws$run.json" Benchmarks/websocket.sh
    echo "=== run $run of $RUNS: pushes (webhook over http and https, APNs over HTTP/2)"
    PUSH_JSON="$OUT/push$run.json" Benchmarks/push.sh
done
echo "=== PostgreSQL and two nodes (table in Benchmarks/results/cluster.md)"
CLUSTER_JSON="$OUT/cluster.json" RUNS=$RUNS Benchmarks/cluster.sh
echo "=== idle"
IDLE_JSON="$OUT/idle.json" Benchmarks/idle_cpu.sh
mkdir -p Benchmarks/results
python3 Benchmarks/bench_helper.py summary "$OUT" BENCHMARKS.md README.md | tee Benchmarks/results/bench.md
echo "==> written to BENCHMARKS.md, README.md's figures and Benchmarks/results/bench.md"
