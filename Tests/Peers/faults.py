#!/usr/bin/env python3
"""Fault tests of PushRelay: a crash storm (kill -9 every second under concurrent producers), kill -9
between the message log and the database, a full disk (the database on a tiny tmpfs). Needs root for the tmpfs mount (CI runs as root).
Usage: faults.py PATH_TO_PUSHRELAY"""
import http.server
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

from relaypeer import QuietServer, Relay, run_checks
from relaypeer import call as peer_call

KEY = "fault-server-key-01"


def relay_at(binary, db, *extra):
    return Relay(binary, "--rate-limit-client-per-s", "0", *extra, key=KEY, db=db)


def call(base, method, path, body=None, timeout=30):
    return peer_call(base, method, path, body, KEY, timeout)


def start_producers(relay, workers, prefix, recipients_for, acknowledged, lock, stop, pause):
    """Threads posting messages `{prefix}{worker}-{n}` to `recipients_for(worker, n)` until `stop`,
    each id retried until it is acknowledged (then recorded in `acknowledged`)."""
    def producer(worker):
        n = 0
        while not stop.is_set():
            msg_id = f"{prefix}{worker}-{n}"
            recipients = recipients_for(worker, n)
            while not stop.is_set():  # retry the same id until it is acknowledged
                try:
                    status, _ = call(relay.base, "POST", "/v1/messages",
                                     {"id": msg_id, "recipients": recipients, "payload": {"n": n}}, timeout=2)
                except Exception:
                    time.sleep(pause)
                    continue
                if status in (200, 202):
                    with lock:
                        acknowledged[msg_id] = recipients
                    break
                time.sleep(pause)
            n += 1

    threads = [threading.Thread(target=producer, args=(w,)) for w in range(workers)]
    for thread in threads:
        thread.start()
    return threads


def stored_inboxes(relay, users, acknowledged):
    """Every acknowledged message is in its recipients' inboxes, once, with gapless seqs; each
    user's stored ids."""
    stored = {}
    for user in users:
        status, page = call(relay.base, "GET", f"/v1/users/{user}/messages?limit=10000")
        assert status == 200 and not page["hasMore"], page
        seqs = [m["seq"] for m in page["messages"]]
        assert seqs == list(range(1, len(seqs) + 1)), f"{user}: gap in {seqs[:20]}…"
        ids = [m["id"] for m in page["messages"]]
        assert len(ids) == len(set(ids)), f"{user}: duplicate ids"
        stored[user] = set(ids)
    missing = [(i, u) for i, recipients in acknowledged.items() for u in recipients if i not in stored[u]]
    assert not missing, f"acknowledged but missing: {missing[:5]}"
    return stored


def crash_between_log_and_database(binary):
    """kill -9 at random moments under many concurrent posters: the writer then often holds
    groups acknowledged from the message log that the database has not committed yet. Each
    restart runs them again; at least one must have (else this never tested that path)."""
    tmp = tempfile.mkdtemp(prefix="pushrelay-log-")
    relay = relay_at(binary, os.path.join(tmp, "relay.sqlite"))
    users = [f"l{n}" for n in range(50)]
    acknowledged = {}
    lock = threading.Lock()
    stop = threading.Event()

    threads = start_producers(relay, 32, "p", lambda w, n: [users[(w * 11 + n) % 50]], acknowledged, lock, stop,
                              pause=0.02)

    def replays():
        with open(relay.log) as log:
            return log.read().count("acknowledged writes ran again from the message log")

    # Ten kills, and more (up to 40) until one fell between a group's log sync and its commit.
    rng = random.Random(46)
    kills = 0
    while kills < 10 or (replays() == 0 and kills < 40):
        time.sleep(rng.uniform(0.3, 1.0))
        relay.kill9()
        relay.start()
        kills += 1
    time.sleep(0.5)
    stop.set()
    for thread in threads:
        thread.join()
    stored_inboxes(relay, users, acknowledged)
    relay.stop()
    assert replays() > 0, f"none of {kills} kills fell between a group's log sync and its commit"
    connection = sqlite3.connect(os.path.join(tmp, "relay.sqlite"))
    assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    connection.close()
    return (f"{len(acknowledged)} messages acknowledged across {kills} kill -9s, none missing or duplicated, "
            f"seqs gapless; {replays()} restarts ran acknowledged groups again from the log; integrity ok")


def crash_storm(binary):
    tmp = tempfile.mkdtemp(prefix="pushrelay-storm-")
    received = set()
    lock = threading.Lock()

    class Receiver(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            with lock:
                for seq in range(body["seq"]["from"], body["seq"]["to"] + 1):
                    received.add((body["userId"], seq))
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()

    receiver = QuietServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    relay = relay_at(binary, os.path.join(tmp, "relay.sqlite"), "--push-delay-ms", "0",
                  "--push-retry-base-ms", "100", "--push-retry-cap-ms", "500")
    users = [f"s{n}" for n in range(20)]
    for user in users[:10]:  # half the users have a push device (all are offline)
        assert call(relay.base, "PUT", f"/v1/users/{user}/devices/phone",
                    {"pushUrl": f"http://127.0.0.1:{receiver.server_address[1]}/{user}"})[0] in (200, 201)
    acknowledged = {}  # id -> recipients
    stop = threading.Event()

    threads = start_producers(relay, 4, "w", lambda w, n: [users[(w * 7 + n) % 20], users[(w * 3 + n * 5) % 20]],
                              acknowledged, lock, stop, pause=0.05)
    restarts = []
    for _ in range(8):
        time.sleep(1)
        relay.kill9()
        restarts.append(relay.start())
    time.sleep(1)
    stop.set()
    for thread in threads:
        thread.join()
    stored = stored_inboxes(relay, users, acknowledged)
    # Every push job for the offline devices is delivered at least once.
    expected = {(u, seq) for u in users[:10] for seq in range(1, len(stored[u]) + 1)}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not expected <= received:
        time.sleep(0.2)
    assert expected <= received, f"{len(expected - received)} pushes never arrived"
    relay.stop()
    connection = sqlite3.connect(os.path.join(tmp, "relay.sqlite"))
    assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    connection.close()
    receiver.shutdown()
    restarts.sort()
    return (f"{len(acknowledged)} messages acknowledged across 8 kill -9s, none missing or duplicated, seqs gapless, "
            f"{len(expected)} pushes all delivered, integrity ok; restart-to-ready median "
            f"{restarts[len(restarts) // 2] * 1000:.0f} ms, max {restarts[-1] * 1000:.0f} ms")


def disk_full(binary):
    mount = tempfile.mkdtemp(prefix="pushrelay-tinyfs-")
    if os.geteuid() != 0:
        raise RuntimeError("needs root for the tmpfs mount")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", mount], check=True)
    relay = None
    try:
        filler = os.path.join(mount, "filler")
        relay = relay_at(binary, os.path.join(mount, "relay.sqlite"))
        with open(filler, "wb") as f:  # leave about 600 KB
            f.write(b"\0" * (2400 * 1024))
        accepted, refused = [], []
        payload = {"blob": "x" * 4000}
        for n in range(400):
            status, body = call(relay.base, "POST", "/v1/messages", {"id": f"d{n}", "recipients": ["u"], "payload": payload})
            if status == 202:
                accepted.append(f"d{n}")
            else:
                assert status in (503, 507), (status, body)
                assert body["error"]["code"] == "store_unavailable", body
                refused.append(f"d{n}")
                if len(refused) >= 5:
                    break
        assert refused, "the disk never filled"
        # While the disk is full a read shows everything accepted, or answers 503: acknowledged
        # writes the database could not take yet wait in the message log, and a read never shows
        # less than was acknowledged.
        status, page = call(relay.base, "GET", "/v1/users/u/messages?limit=10000")
        full_read = status
        if status == 200:
            assert [m["id"] for m in page["messages"]] == accepted
        else:
            assert status == 503 and page["error"]["code"] == "store_unavailable", (status, page)
        # Space comes back: writing resumes by itself, no restart.
        os.remove(filler)
        deadline = time.monotonic() + 30
        while True:
            status, body = call(relay.base, "POST", "/v1/messages", {"id": "after", "recipients": ["u"], "payload": {}})
            if status == 202 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert status == 202, (status, body)
        assert body["recipients"][0]["seq"] == len(accepted) + 1, body
        # Nothing refused was stored; everything accepted is intact, in order.
        for msg_id in refused:
            assert call(relay.base, "GET", f"/v1/messages/{msg_id}")[0] == 404, msg_id
        status, page = call(relay.base, "GET", "/v1/users/u/messages?limit=10000")
        assert status == 200 and [m["id"] for m in page["messages"]] == accepted + ["after"], (status, page)
        relay.stop()
        connection = sqlite3.connect(os.path.join(mount, "relay.sqlite"))
        assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        connection.close()
        return (f"{len(accepted)} accepted, then 503 store_unavailable; reads while full: {'exact' if full_read == 200 else '503'}; "
                "resumed after freeing space; refused ones absent, accepted ones all there; integrity ok")
    finally:
        if relay:
            relay.stop()
        subprocess.run(["umount", "-l", mount], check=False)


def io_errors(binary):
    """fdatasync fails with EIO (strace fault injection): nothing is acknowledged that was not
    durable, the relay keeps answering (503), and after a restart without the fault everything
    acknowledged is there and the database is intact."""
    tmp = tempfile.mkdtemp(prefix="pushrelay-eio-")
    db = os.path.join(tmp, "relay.sqlite")
    relay = relay_at(binary, db)
    accepted = []
    for n in range(20):
        status, _ = call(relay.base, "POST", "/v1/messages", {"id": f"ok{n}", "recipients": ["u"], "payload": {}})
        assert status == 202
        accepted.append(f"ok{n}")
    # Attach strace to the running relay: from now on every fdatasync fails.
    tracer = subprocess.Popen(["strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=fdatasync,fsync",
                               "-e", "inject=fdatasync,fsync:error=EIO", "-p", str(relay.proc.pid)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1)
    # Ten writes, and more until one is refused: strace may take longer than the second above to
    # attach on a busy machine, and a write before it does is acknowledged rightly.
    refused, n = 0, 0
    deadline = time.monotonic() + 30
    while n < 10 or (refused == 0 and time.monotonic() < deadline):
        status, body = call(relay.base, "POST", "/v1/messages", {"id": f"eio{n}", "recipients": ["u"], "payload": {}})
        if status == 202:
            accepted.append(f"eio{n}")  # only possible if the fault did not hit this commit
        else:
            assert status == 503 and body["error"]["code"] == "store_unavailable", (status, body)
            refused += 1
        n += 1
        if n >= 10:
            time.sleep(0.05)
    assert refused > 0, "the injected fsync errors were not reported"
    assert call(relay.base, "GET", "/healthz")[0] == 200  # still serving
    tracer.terminate()
    tracer.wait()
    relay.kill9()
    relay.start()
    status, page = call(relay.base, "GET", "/v1/users/u/messages?limit=1000")
    ids = [m["id"] for m in page["messages"]]
    assert set(accepted) <= set(ids), set(accepted) - set(ids)
    assert [m["seq"] for m in page["messages"]] == list(range(1, len(ids) + 1))
    relay.stop()
    connection = sqlite3.connect(db)
    assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    connection.close()
    return f"{refused}/{n} writes refused with 503 under fsync EIO, every acknowledged message kept, integrity ok"


def main(binary):
    checks = [("crash storm", crash_storm), ("crash between log and database", crash_between_log_and_database),
              ("disk full", disk_full), ("fsync I/O errors", io_errors)]
    return run_checks(checks, lambda fn: fn(binary))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
