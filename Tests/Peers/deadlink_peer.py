#!/usr/bin/env python3
"""The SDK as an app meets a silently dead link: `pushrelay-tail` (the SDK's example) behind a
proxy that lets its open connections go dead for good (no FIN, no RST, nothing forwarded) while
new connections pass. The client must reconnect and print every message posted meanwhile, once
and in order, within the documented bound (ping interval × 1.5 + 5 s, plus a check, a backoff and
the catch-up); while it was cut off, the relay pushes what it did not ack.
Usage: deadlink_peer.py PATH_TO_PUSHRELAY (pushrelay-tail beside it)"""
import os
import socket
import subprocess
import sys
import threading
import time
import tempfile

from relaypeer import Receiver, Relay, registry, run_checks, wait_for

checks, check = registry()


class BlackHoleProxy:
    """127.0.0.1:port → the relay; `cut()` silences every connection open now, for good."""

    def __init__(self, target):
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.pairs = []  # [client, relay, forwards]
        threading.Thread(target=self.accept_loop, daemon=True).start()

    def accept_loop(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            relay = socket.create_connection(("127.0.0.1", self.target))
            pair = [client, relay, True]
            with self.lock:
                self.pairs.append(pair)
            threading.Thread(target=self.pump, args=(pair, client, relay), daemon=True).start()
            threading.Thread(target=self.pump, args=(pair, relay, client), daemon=True).start()

    def pump(self, pair, source, destination):
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                return
            if not data:
                break
            with self.lock:
                forwards = pair[2]
            if forwards:
                try:
                    destination.sendall(data)
                except OSError:
                    return
        with self.lock:
            forwards = pair[2]
        if forwards:
            try:
                destination.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def cut(self):
        with self.lock:
            for pair in self.pairs:
                pair[2] = False

    def close(self):
        self.listener.close()
        with self.lock:
            for client, relay, _ in self.pairs:
                for end in (client, relay):
                    try:
                        end.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass


def run_tail(binary, relay, proxy, user):
    tail = os.path.join(os.path.dirname(binary), "pushrelay-tail")
    # pushrelay-tail keeps its cursor in the temporary directory: start from none.
    cursor = os.path.join(tempfile.gettempdir(), f"pushrelay-tail-{user}.cursor")
    if os.path.exists(cursor):
        os.remove(cursor)
    proc = subprocess.Popen([tail, "--url", f"http://127.0.0.1:{proxy.port}", "--user", user, "--device", "tail",
                             "--key", relay.key], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    lines = []
    threading.Thread(target=lambda: [lines.append(line.split("\t")[:2]) for line in proc.stdout], daemon=True).start()
    return proc, lines


def cut_and_recover(binary, *relay_args, bound, pushes=None):
    """Seconds from the cut until every message posted meanwhile was printed."""
    user = "nat-" + os.urandom(4).hex()
    relay = Relay(binary, "--push-delay-ms", "0", *relay_args)
    proxy = BlackHoleProxy(relay.port)
    tail = None
    try:
        if pushes is not None:
            status, body = relay.http("PUT", f"/v1/users/{user}/devices/tail",
                                      {"pushUrl": f"{pushes.base}/p"})
            assert status in (200, 201), body
        tail, lines = run_tail(binary, relay, proxy, user)
        assert relay.http("POST", "/v1/messages", {"id": "m1", "recipients": [user], "payload": {}})[0] == 202
        assert wait_for(lambda: len(lines) == 1, 20), lines
        proxy.cut()
        cut = time.monotonic()
        for n in range(2, 6):
            assert relay.http("POST", "/v1/messages", {"id": f"m{n}", "recipients": [user], "payload": {}})[0] == 202
        assert wait_for(lambda: len(lines) == 5, bound), f"after {bound} s: {lines}"
        took = time.monotonic() - cut
        assert lines == [[str(n), f"m{n}"] for n in range(1, 6)], lines
        time.sleep(1)
        assert len(lines) == 5, lines  # once each
        return took
    finally:
        if tail:
            tail.terminate()
            tail.wait(10)
        proxy.close()
        relay.stop()


@check("with a 1 s relay ping, a dead link is replaced and every message printed once, in order, within 20 s")
def fast_ping(binary):
    took = cut_and_recover(binary, "--ping-interval-ms", "1000", bound=30)
    # 6.5 s of silence, a check, a backoff and the catch-up: about 8 s. The bound leaves a busy
    # machine room and still tells it from the default ping's 42.5 s; the rule's arithmetic is
    # LinkWatchdogTests', on a stepping clock.
    assert took <= 20, f"{took:.1f} s"
    return f"{took:.1f} s (rule: 6.5 s of silence)"


@check("with the default 25 s ping, within the documented 42.5 s + a check; the messages meanwhile are pushed")
def default_ping(binary):
    pushes = Receiver()
    try:
        took = cut_and_recover(binary, bound=120, pushes=pushes)
        # 42.5 s of silence, seen within a check (5 s), a backoff (≤ 1 s) and the catch-up; slack
        # for a busy machine.
        assert took <= 60, f"{took:.1f} s"
        # Pushes coalesce (one push may cover m2…m5), so check the seqs the message pushes cover.
        covered = {seq for body in pushes.bodies() if body.get("type") == "message"
                   for seq in range(body["seq"]["from"], body["seq"]["to"] + 1)}
        assert {2, 3, 4, 5} <= covered, pushes.bodies()
        return f"{took:.1f} s (rule: 42.5 s of silence); seqs pushed meanwhile: {sorted(covered - {1})}"
    finally:
        pushes.shutdown()


if __name__ == "__main__":
    sys.exit(run_checks(checks, lambda fn: fn(sys.argv[1])))
