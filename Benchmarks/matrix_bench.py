#!/usr/bin/env python3
"""Helpers of Benchmarks/matrix.sh: registers Matrix-identified devices, and measures the added
latency of the gateway (notify sent → push at the receiver) at a steady rate. Loopback only."""
import concurrent.futures
import http.server
import json
import sys
import threading
import time
import urllib.request

KEY = "benchkey-0123456789"


def req(base, method, path, body=None, key=KEY):
    request = urllib.request.Request(base + path, method=method)
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, data, timeout=30) as response:
        return json.loads(response.read() or b"null")


def register(base, receiver, count, prefix=""):
    def one(n):
        req(base, "PUT", f"/v1/users/{prefix}u{n}/devices/phone",
            {"pushUrl": f"{receiver}/p/{prefix}{n}", "matrix": {"appId": "bench.app", "pushkey": f"{prefix}pk{n}"}})
    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        list(pool.map(one, range(count)))


class Receiver(http.server.ThreadingHTTPServer):
    daemon_threads = True


def latency(base, secret, count, rate):
    arrivals = {}
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            now = time.monotonic()
            with lock:
                arrivals[body["push"]["data"]["event_id"]] = now
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = Receiver(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    register(base, f"http://127.0.0.1:{server.server_address[1]}", count, prefix="lat")
    sent = {}
    start = time.monotonic()
    for n in range(count):
        due = start + n / rate
        if due > time.monotonic():
            time.sleep(due - time.monotonic())
        event = f"$lat-{n}"
        body = {"notification": {"event_id": event, "room_id": "!lat:example.org", "sender": "@bob:example.org",
                                 "content": {"body": "hi"}, "counts": {"unread": 1},
                                 "devices": [{"app_id": "bench.app", "pushkey": f"latpk{n}"}]}}
        sent[event] = time.monotonic()
        answer = req(base, "POST", f"/_matrix/push/v1/notify?secret={secret}", body, key=None)
        assert answer == {"rejected": []}, answer
    deadline = time.monotonic() + 15
    while len(arrivals) < count and time.monotonic() < deadline:
        time.sleep(0.1)
    added = sorted((arrivals[e] - sent[e]) * 1000 for e in arrivals if e in sent)
    p50 = added[len(added) // 2]
    p99 = added[min(len(added) - 1, int(len(added) * 0.99))]
    print(f"{len(added)}/{count} pushed at {rate:.0f} notifies/s; notify sent → push at the receiver p50 {p50:.1f} ms, "
          f"p99 {p99:.1f} ms")


if __name__ == "__main__":
    mode, base = sys.argv[1], sys.argv[2]
    if mode == "register":
        register(base, sys.argv[3], int(sys.argv[4]))
    else:
        latency(base, sys.argv[3], int(sys.argv[4]), float(sys.argv[5]))
