#!/usr/bin/env python3
"""Nothing polls: once its work is done, the relay's threads stop waking up.

Messages, a device, a WebSocket opened and closed, then the connections gone: within a generous
settling time (a retention pass `--prune-interval-s` after the last write, the heap trim after
the socket closed, the connection sweep), the relay must reach a quiet window in which none of
its threads is scheduled at all (context switches from /proc, per thread). Not a speed figure:
a relay with a periodic timer anywhere never gets such a window.
Usage: idle_peer.py PATH_TO_PUSHRELAY"""
import asyncio
import os
import sys
import time

import websockets
from relaypeer import Relay, registry, run_checks

checks, check = registry()
QUIET_WINDOW_S = 5
SETTLE_LIMIT_S = 40


def switches(pid):
    """Context switches so far, per thread id."""
    counts = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                fields = dict(line.split(":", 1) for line in f if "ctxt_switches" in line)
        except FileNotFoundError:
            continue  # the thread ended meanwhile
        counts[tid] = sum(int(value) for value in fields.values())
    return counts


def woken(before, after):
    """Wake-ups between two snapshots, over the threads present in both."""
    return sum(after[tid] - before[tid] for tid in before.keys() & after.keys())


@check("an idle relay does not wake up once its work is done")
def idle_relay_sleeps(binary):
    relay = Relay(binary, "--prune-interval-s", "1")
    try:
        status, _ = relay.http("PUT", "/v1/users/alice/devices/phone", {"pushUrl": "http://127.0.0.1:9/push"})
        assert status in (200, 201), status
        for n in range(10):
            status, _ = relay.http("POST", "/v1/messages",
                                   {"id": f"idle-{n}", "recipients": [f"nodevice{n}"], "payload": {"n": n}})
            assert status == 202, status

        async def visit():
            url = relay.base.replace("http://", "ws://") + "/v1/ws?access_token=" + relay.token("bob")
            async with websockets.connect(url) as socket:
                await socket.recv()  # welcome
        asyncio.run(visit())

        started = time.monotonic()
        windows = []
        while time.monotonic() - started < SETTLE_LIMIT_S:
            before = switches(relay.proc.pid)
            time.sleep(QUIET_WINDOW_S)
            count = woken(before, switches(relay.proc.pid))
            windows.append(count)
            if count == 0:
                return (f"quiet {QUIET_WINDOW_S} s window reached {time.monotonic() - started:.0f} s after the work "
                        f"(wake-ups per window until then: {windows})")
        raise AssertionError(f"never a quiet {QUIET_WINDOW_S} s window in {SETTLE_LIMIT_S} s; wake-ups: {windows}")
    finally:
        relay.stop()


def main(binary):
    return run_checks(checks, lambda fn: fn(binary))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
