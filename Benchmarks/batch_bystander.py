#!/usr/bin/env python3
"""Big batches against one relay (standard library only): what a bystander waits, and what 100k
inbox rows cost as the database grows.

  bystander: POSTERS threads post 1,000-recipient batches (ITEMS items each) back to back for
    SECONDS; meanwhile one bystander posts a single 1-recipient message every 50 ms and times
    it, and `/readyz` is timed every 250 ms. Prints p50/p99/max of both.
  growth: 100k-row batches (100 items x 1,000 recipients) one after the other; prints the time
    of each, and the median of three at 0, 1 M and 5 M stored inbox rows (filled through the same
    batches; `--until` stops earlier).

  batch_bystander.py BINARY [--mode bystander|growth|both] [--seconds 20] [--posters 2]
                     [--until 5000000] [--max-seconds 1800]

Users are drawn from a pool of 50,000 (`u0` … `u49999`), 1,000 distinct per message, so inbox rows
spread over every user as on a real relay.
"""

import argparse
import http.client
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time

KEY = "bench-batch-server-key-0123456789"
POOL = 50_000


class Relay:
    def __init__(self, binary):
        self.dir = tempfile.mkdtemp(prefix="pushrelay-batch-bench-")
        self.proc = subprocess.Popen(
            [binary, "serve", "--listen", "127.0.0.1:0", "--db", os.path.join(self.dir, "relay.sqlite"),
             "--server-keys", KEY, "--log-level", "warning"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            self.proc.kill()
            raise RuntimeError(f"relay did not start: {line!r}")
        self.port = int(line.strip().rsplit(":", 1)[1])

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Client:
    """One keep-alive connection."""

    def __init__(self, port, timeout=600):
        self.port, self.timeout = port, timeout
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)

    def request(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {KEY}"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        try:
            self.conn.request(method, path, data, headers)
            response = self.conn.getresponse()
            return response.status, response.read()
        except (http.client.HTTPException, OSError):
            self.conn.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
            raise


def batch(rng, tag, items, recipients=1000):
    return {"messages": [
        {"id": f"{tag}-{i}", "recipients": [f"u{n}" for n in rng.sample(range(POOL), recipients)],
         "payload": {"n": i}}
        for i in range(items)]}


def post_batch(client, body):
    started = time.monotonic()
    status, raw = client.request("POST", "/v1/messages/batch", body)
    elapsed = time.monotonic() - started
    assert status == 200, (status, raw[:200])
    results = json.loads(raw)["results"]
    assert all(r["status"] in (200, 202) for r in results), [r for r in results if r["status"] not in (200, 202)][:3]
    return elapsed


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def summary(name, values):
    if not values:
        return f"{name}: no samples"
    ms = [v * 1000 for v in values]
    return (f"{name}: n={len(ms)} p50={percentile(ms, 50):.0f} ms p99={percentile(ms, 99):.0f} ms "
            f"max={max(ms):.0f} ms")


def bystander(port, seconds, posters, items):
    stop = threading.Event()
    batches, single, ready = [], [], []

    def poster(n):
        client, rng, k = Client(port), random.Random(n), 0
        while not stop.is_set():
            batches.append(post_batch(client, batch(rng, f"p{n}-{k}", items)))
            k += 1

    def lone():
        client, k = Client(port, timeout=300), 0
        time.sleep(1.0)  # the batches are flowing
        while not stop.is_set():
            started = time.monotonic()
            status, raw = client.request(
                "POST", "/v1/messages", {"id": f"lone-{k}", "recipients": ["bystander"], "payload": {"k": k}})
            assert status == 202, (status, raw)
            single.append(time.monotonic() - started)
            k += 1
            time.sleep(0.05)

    def readyz():
        client = Client(port, timeout=300)
        time.sleep(1.0)
        while not stop.is_set():
            started = time.monotonic()
            status, _ = client.request("GET", "/readyz")
            assert status == 200, status
            ready.append(time.monotonic() - started)
            time.sleep(0.25)

    threads = [threading.Thread(target=poster, args=(n,)) for n in range(posters)]
    threads += [threading.Thread(target=lone), threading.Thread(target=readyz)]
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    rows = len(batches) * items * 1000
    print(f"bystander: {posters} posters of {items} x 1,000-recipient batches for {seconds} s: "
          f"{len(batches)} batches, {rows / seconds:,.0f} inbox rows/s")
    print("  " + summary("batch", batches))
    print("  " + summary("single post (bystander)", single))
    print("  " + summary("/readyz", ready))
    return {"batches": len(batches), "rows_per_s": rows / seconds,
            "single_p50_ms": percentile(single, 50) * 1000 if single else None,
            "single_p99_ms": percentile(single, 99) * 1000 if single else None,
            "single_max_ms": max(single) * 1000 if single else None,
            "readyz_p99_ms": percentile(ready, 99) * 1000 if ready else None,
            "readyz_max_ms": max(ready) * 1000 if ready else None}


def growth(port, until, max_seconds):
    client, rng = Client(port, timeout=900), random.Random(7)
    times, stored, started = [], 0, time.monotonic()
    while stored < until + 300_000 and time.monotonic() - started < max_seconds:
        elapsed = post_batch(client, batch(rng, f"g{len(times)}", 100))
        times.append((stored, elapsed))
        stored += 100_000
        print(f"  at {stored - 100_000:>9,} stored rows: 100k rows in {elapsed:.2f} s", flush=True)
    points = {}
    for mark in (0, 1_000_000, 5_000_000):
        near = [t for s, t in times if mark <= s < mark + 300_000]
        if len(near) == 3:
            points[mark] = statistics.median(near)
            print(f"growth: at {mark:,} stored rows, median of 3: {points[mark]:.2f} s per 100k rows")
    return {"times": times, "points": points}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("--mode", default="both", choices=["bystander", "growth", "both"])
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--posters", type=int, default=2)
    parser.add_argument("--items", type=int, default=100)
    parser.add_argument("--until", type=int, default=5_000_000)
    parser.add_argument("--max-seconds", type=float, default=1800)
    args = parser.parse_args()
    if args.mode in ("bystander", "both"):
        relay = Relay(args.binary)
        try:
            bystander(relay.port, args.seconds, args.posters, args.items)
        finally:
            relay.stop()
    if args.mode in ("growth", "both"):
        relay = Relay(args.binary)
        try:
            growth(relay.port, args.until, args.max_seconds)
        finally:
            relay.stop()


if __name__ == "__main__":
    sys.exit(main())
