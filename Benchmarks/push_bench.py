#!/usr/bin/env python3
"""Helpers of Benchmarks/push.sh: throughput, latency and scheduling measurements of the notifier.
Prints one line of results. Loopback only."""
import concurrent.futures
import http.server
import json
import os
import sqlite3
import statistics
import sys
import threading
import time
import urllib.request

KEY = "benchkey-0123456789"


def req(base, method, path, body=None):
    request = urllib.request.Request(base + path, method=method)
    request.add_header("Authorization", f"Bearer {KEY}")
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, data, timeout=30) as response:
        return json.loads(response.read() or b"null")


def metric(base, prefix):
    """The sum of the samples whose line starts with `prefix` (every app's, and a build from
    before the `app` label alike when the prefix stops before the closing brace)."""
    text = urllib.request.urlopen(base + "/metrics", timeout=10).read().decode()
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(prefix))


def register(base, receiver, users):
    """Each user gets one device: a webhook to `receiver`, or (receiver "apns") an APNs token."""
    def device(n):
        return {"apns": {"token": f"{n:064x}"}} if receiver == "apns" else {"pushUrl": f"{receiver}/p/{n}"}

    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        list(pool.map(lambda n: req(base, "PUT", f"/v1/users/u{n}/devices/d", device(n)), range(users)))


def pending(base):
    return len(req(base, "GET", "/v1/deliveries?state=pending&limit=1")["deliveries"])


def throughput(base, receiver, jobs, db, pid):
    """`jobs` devices with one pending message each (the relay runs with a push delay of an hour),
    all made due at once: pushes/s while the notifier drains them. Posting is not timed."""
    register(base, receiver, jobs)
    for k in range(0, jobs, 1000):
        recipients = [f"u{n}" for n in range(k, min(jobs, k + 1000))]
        req(base, "POST", "/v1/messages", {"id": f"t{k}", "recipients": recipients, "payload": {}})
    make_due(db)
    ticks = cpu_ticks(pid)
    start = time.monotonic()
    wake(base, receiver)
    while metric(base, 'pushrelay_push_attempts_total{outcome="delivered"') < jobs and time.monotonic() - start < 300:
        time.sleep(0.01)
    elapsed = time.monotonic() - start
    cpu = (cpu_ticks(pid) - ticks) / os.sysconf("SC_CLK_TCK")
    delivered = metric(base, 'pushrelay_push_attempts_total{outcome="delivered"')
    print(f"{delivered:.0f} pushes in {elapsed:.2f} s = {delivered / elapsed:.0f} pushes/s; "
          f"relay CPU {cpu / delivered * 1e6:.0f} µs per push")


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def make_due(db):
    """Makes every pending job due now (as if the push delay had passed), behind the relay's back."""
    connection = sqlite3.connect(db, timeout=30)
    connection.execute("UPDATE push_jobs SET due_at = 0 WHERE state = 'pending'")
    connection.commit()
    connection.close()


def wake(base, receiver):
    """The notifier sleeps until the earliest due time it knows of and wakes on the relay's own
    commits; an edit behind its back needs one commit to be noticed (else the 30 s safety net)."""
    device = {"apns": {"token": "ff" * 32}} if receiver == "apns" else {"pushUrl": receiver + "/wake"}
    req(base, "PUT", "/v1/users/wake/devices/phone", device)


class Receiver(http.server.ThreadingHTTPServer):
    daemon_threads = True


def latency(base, _receiver, count):
    arrivals = {}
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            now = time.monotonic()
            with lock:
                arrivals[json.loads(body)["messageId"]] = now
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = Receiver(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    receiver = f"http://127.0.0.1:{server.server_address[1]}"
    register(base, receiver, count)
    sent = {}
    start = time.monotonic()
    for n in range(count):
        due = start + n / 200.0
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        req(base, "POST", "/v1/messages", {"id": f"l{n}", "recipients": [f"u{n}"], "payload": {}})
        sent[f"l{n}"] = time.monotonic()
    deadline = time.monotonic() + 15
    while len(arrivals) < count and time.monotonic() < deadline:
        time.sleep(0.1)
    latencies = sorted((arrivals[k] - (sent[k] + 1.0)) * 1000 for k in arrivals if k in sent)
    p50 = latencies[len(latencies) // 2]
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    print(f"{len(latencies)}/{count} received; push delay 1000 ms; due → receiver p50 {p50:.1f} ms, p99 {p99:.1f} ms")


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def schedule(base, receiver, jobs, pid, db):
    register(base, receiver, 1000)
    before = rss_kib(pid)
    start = time.monotonic()
    for k in range(jobs // 1000):
        req(base, "POST", "/v1/messages", {"id": f"s{k}", "recipients": [f"u{n}" for n in range(1000)], "payload": {}})
    queued = time.monotonic() - start
    time.sleep(1)
    with_pending = rss_kib(pid)
    make_due(db)
    start = time.monotonic()
    wake(base, receiver)
    while pending(base) and time.monotonic() - start < 300:
        time.sleep(0.1)
    drained = time.monotonic() - start
    time.sleep(0.5)  # outcomes reach the metrics just after their commit
    delivered = metric(base, 'pushrelay_push_attempts_total{outcome="delivered"')
    print(f"{jobs} jobs queued in {queued:.1f} s; RSS {before} → {with_pending} KiB with them pending; all due at once → "
          f"delivered as {delivered:.0f} coalesced pushes in {drained:.1f} s")


if __name__ == "__main__":
    mode, base, receiver = sys.argv[1], sys.argv[2], sys.argv[3]
    if mode == "throughput":
        throughput(base, receiver, int(sys.argv[4]), sys.argv[5], int(sys.argv[6]))
    elif mode == "latency":
        latency(base, receiver, int(sys.argv[4]))
    else:
        schedule(base, receiver, int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
