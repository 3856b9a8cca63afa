#!/usr/bin/env python3
"""Two relay nodes on one PostgreSQL database: what a cluster must keep true, against the real
binary, a real PostgreSQL and the python `websockets` library.

Needs PUSHRELAY_TEST_POSTGRES (run it through `Tests/Postgres/pg.sh run`).
Usage: cluster_peer.py PATH_TO_PUSHRELAY
"""
import asyncio
import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error

import websockets
import relaypeer
from relaypeer import Relay, call, fresh_db, registry, run_checks, wait_for

KEY = "cluster-test-server-key"
PG_SH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Postgres", "pg.sh")
CHECKS, check = registry()


def pair(binary, *extra):
    """Two nodes started with the same database URI and keys."""
    db = fresh_db()
    common = ("--client-token-secret", "cluster-client-token-secret-0123456789", *extra)
    return Relay(binary, *common, key=KEY, db=db), Relay(binary, *common, key=KEY, db=db)


def post(relay, msg_id, users, payload=None, timeout=10):
    return relay.http("POST", "/v1/messages",
                      {"id": msg_id, "recipients": users, "payload": payload or {"id": msg_id}}, timeout=timeout)


def ws_url(relay, user, device="phone", after=None):
    url = relay.base.replace("http://", "ws://") + f"/v1/ws?access_token={relay.token(user, device)}"
    return url + (f"&after={after}" if after is not None else "")


async def frames_until(ws, count, seconds=10):
    """Message frames until `count` arrived (or the time is up)."""
    messages = []
    deadline = time.monotonic() + seconds
    while len(messages) < count and time.monotonic() < deadline:
        try:
            frame = json.loads(await asyncio.wait_for(ws.recv(), max(0.05, deadline - time.monotonic())))
        except asyncio.TimeoutError:
            break
        if frame["type"] == "message":
            messages.append(frame)
    return messages


class Reader:
    """Reads a socket's message frames in the background while the check waits elsewhere.

    A client must go on reading: past 16 unread frames websockets stops reading from the network,
    so the relay's pings go unanswered and, 60 s later, the relay rightly drops the socket as dead.
    """

    def __init__(self, ws):
        self.frames = []
        self.task = asyncio.create_task(self._read(ws))

    async def _read(self, ws):
        async for raw in ws:
            frame = json.loads(raw)
            if frame["type"] == "message":
                self.frames.append(frame)

    async def until(self, count, seconds=15):
        """The message frames once `count` arrived or the time is up; raises if the socket closed."""
        deadline = time.monotonic() + seconds
        while len(self.frames) < count and time.monotonic() < deadline:
            if self.task.done():
                self.task.result()
                break
            await asyncio.sleep(0.05)
        self.task.cancel()
        return self.frames


async def synced(ws):
    while True:
        frame = json.loads(await asyncio.wait_for(ws.recv(), 5))
        if frame["type"] == "synced":
            return frame


def seqs_of(relay, user):
    """Every stored message of `user`, page by page: (seqs, ids)."""
    seqs, ids = [], []
    while True:
        status, body = relay.http("GET", f"/v1/users/{user}/messages?limit=1000&after={seqs[-1] if seqs else 0}")
        assert status == 200, body
        seqs += [m["seq"] for m in body["messages"]]
        ids += [m["id"] for m in body["messages"]]
        if not body["hasMore"]:
            return seqs, ids


@check("a message posted on B reaches a socket on A live, once and in order")
def cross_node_live(binary):
    a, b = pair(binary)
    try:
        async def run():
            async with websockets.connect(ws_url(a, "alice")) as ws:
                await synced(ws)
                latencies = []
                for n in range(1, 101):
                    started = time.monotonic()
                    status, body = post(b, f"x{n}", ["alice"])
                    assert status == 202, body
                    [frame] = await frames_until(ws, 1, 5)
                    latencies.append((time.monotonic() - started) * 1000)
                    assert frame["seq"] == n and frame["id"] == f"x{n}", frame
                # Nothing more arrives (no message twice).
                assert await frames_until(ws, 1, 0.5) == []
                latencies.sort()
                return f"post on B to frame on A, p50 {latencies[50]:.1f} ms, max {latencies[-1]:.1f} ms"
        return asyncio.run(run())
    finally:
        a.stop()
        b.stop()


class Receiver(relaypeer.Receiver):
    """Records every push webhook it receives (`relaypeer.Receiver`), for one relay's users."""

    def register(self, relay, user):
        """Registers `user`'s device "phone" on `relay`, pushing here."""
        status, body = relay.http("PUT", f"/v1/users/{user}/devices/phone", {"pushUrl": f"{self.base}/{user}"})
        assert status in (200, 201), body

    def seqs(self):
        return [seq for push in self.bodies() if push["type"] == "message"
                for seq in range(push["seq"]["from"], push["seq"]["to"] + 1)]


class EventReceiver(Receiver):
    def events(self, kind):
        return [push for push in self.bodies() if push.get("type") == kind]


def online_on(relay, user):
    status, body = relay.http("GET", f"/v1/users/{user}/presence")
    assert status == 200, body
    return body["online"]


@check("presence is cluster-wide: a socket on A is online seen from B (and B's posts go live), "
       "presence.changed is sent once per transition; a killed node's devices go offline after its lease")
def cross_node_presence(binary):
    receiver = EventReceiver()
    # An 8 s lease, renewed every third of it: a renewal late by seconds on a busy machine does not
    # end it before the kill below, and the check right after the kill has seconds to run.
    a, b = pair(binary, "--node-lease-ms", "8000", "--push-delay-ms", "200", "--events-url", f"{receiver.base}/events")
    try:
        async def run():
            async with websockets.connect(ws_url(a, "gina")) as ws:
                await synced(ws)
                assert wait_for(lambda: online_on(b, "gina")), "B does not see gina online"
                status, body = post(b, "g1", ["gina"])
                assert status == 202 and body["recipients"][0]["delivery"] == "live", body
                await asyncio.sleep(1.5)  # well past the debounce (push delay): a real change, reported
            assert wait_for(lambda: not online_on(b, "gina")), "B still sees gina online after the close"
            assert wait_for(lambda: len(receiver.events("presence.changed")) >= 2)
            time.sleep(1.0)
            changes = [(e["data"]["userId"], e["data"]["online"]) for e in receiver.events("presence.changed")]
            assert changes == [("gina", True), ("gina", False)], changes
            # A node dies with a socket open: its device stays online until the lease ends.
            ws = await websockets.connect(ws_url(a, "hugo"))
            await synced(ws)
            assert wait_for(lambda: online_on(b, "hugo"))
            a.kill9()
            killed = time.monotonic()
            assert online_on(b, "hugo"), "offline before the lease ended"
            assert wait_for(lambda: not online_on(b, "hugo")), "still online long after the lease"
            waited = time.monotonic() - killed
            assert wait_for(lambda: ("hugo", False) in [(e["data"]["userId"], e["data"]["online"])
                                                       for e in receiver.events("presence.changed")])
            return f"offline everywhere {waited:.1f} s after kill -9 (lease 8 s, renewed every 2.7 s)"
        return asyncio.run(run())
    finally:
        a.stop()
        b.stop()
        receiver.shutdown()


@check("deleting a device on B revokes its tokens on A and closes its socket there")
def cross_node_revocation(binary):
    a, b = pair(binary)
    try:
        token = a.token("ivy", "phone")

        async def run():
            url = a.base.replace("http://", "ws://") + f"/v1/ws?access_token={token}"
            async with websockets.connect(url) as ws:
                await synced(ws)
                assert b.http("DELETE", "/v1/users/ivy/devices/phone")[0] == 204
                try:
                    while True:
                        await asyncio.wait_for(ws.recv(), 5)
                except websockets.ConnectionClosed as closed:
                    assert closed.rcvd.code == 1008 and closed.rcvd.reason == "device deleted", closed
        asyncio.run(run())
        status, _ = call(a.base, "GET", "/v1/users/ivy/messages", token=token)
        assert status == 401, status
    finally:
        a.stop()
        b.stop()


@check("idempotency holds across nodes: one 202 per id, the same seqs replayed by the other node, 409 on a new body")
def cross_node_idempotency(binary):
    a, b = pair(binary)
    try:
        answers = {}

        def send(relay, msg_id):
            answers.setdefault(msg_id, []).append(post(relay, msg_id, ["bob", "carol"]))

        for n in range(40):
            threads = [threading.Thread(target=send, args=(relay, f"i{n}")) for relay in (a, b, a, b)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        for msg_id, replies in answers.items():
            statuses = sorted(status for status, _ in replies)
            assert statuses == [200, 200, 200, 202], (msg_id, replies)
            assert len({json.dumps(body["recipients"]) for _, body in replies}) == 1, replies
        assert post(b, "i0", ["bob", "carol"], {"other": True})[0] == 409
        for user in ("bob", "carol"):
            seqs, _ = seqs_of(a, user)
            assert seqs == list(range(1, 41)), seqs
    finally:
        a.stop()
        b.stop()


@check("fan-outs to the same users in opposite orders on both nodes: no deadlock, every user's seqs gapless")
def no_deadlocks(binary):
    a, b = pair(binary)
    users = [f"f{n}" for n in range(8)]
    try:
        def poster(relay, worker, order):
            for n in range(150):
                status, body = post(relay, f"fan-{worker}-{n}", order)
                assert status == 202, body

        threads = [threading.Thread(target=poster, args=(relay, w, users if w % 2 else users[::-1]))
                   for w, relay in enumerate((a, b, a, b, a, b))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for user in users:
            seqs, ids = seqs_of(a, user)
            assert seqs == list(range(1, 901)) and len(set(ids)) == 900, (user, len(seqs))
        database = a.db.split("///")[1].split("?")[0]
        deadlocks = subprocess.run(
            ["psql", "-h", os.environ["PUSHRELAY_TEST_POSTGRES"], "-U", "postgres", "-Atc",
             f"SELECT deadlocks FROM pg_stat_database WHERE datname = '{database}'"],
            capture_output=True, text=True, check=True).stdout.strip()
        assert deadlocks == "0", deadlocks
        return "900 messages to 8 users each, 0 deadlocks reported by PostgreSQL"
    finally:
        a.stop()
        b.stop()


@check("both notifiers running: every seq of an offline device pushed exactly once, also across a node's kill -9")
def cross_node_pushes(binary):
    receiver = Receiver()
    a, b = pair(binary, "--push-delay-ms", "50")
    try:
        receiver.register(a, "dave")
        for n in range(1, 101):
            assert post(a if n % 2 else b, f"d{n}", ["dave"])[0] == 202
        assert wait_for(lambda: len(receiver.seqs()) >= 100, 20), receiver.seqs()
        # Killed once the outcomes are stored: a push received here but not yet recorded when the
        # node dies goes out again (at least once), which is not what this check is about. The
        # receiver having it says nothing about the record; on a busy machine the gap is long.
        assert wait_for(lambda: psql(a, "SELECT count(*) FROM push_jobs WHERE state = 'pending'") == "0")
        # Whichever node delivers dies; the other takes over.
        a.kill9()
        for n in range(101, 151):
            assert post(b, f"d{n}", ["dave"])[0] == 202
        assert wait_for(lambda: len(receiver.seqs()) >= 150, 20), len(receiver.seqs())
        time.sleep(0.5)
        seqs = receiver.seqs()
        assert sorted(seqs) == list(range(1, 151)), sorted(set(range(1, 151)) - set(seqs)) or seqs
        return f"{len(receiver.pushes)} pushes covered seqs 1-150, none twice"
    finally:
        a.stop()
        b.stop()
        receiver.shutdown()


@check("a message posted on the node that does not deliver wakes the one that does: pushed, not left waiting")
def pushes_woken_across_nodes(binary):
    receiver = Receiver()
    a, b = pair(binary, "--push-delay-ms", "50")
    try:
        receiver.register(a, "erin")
        # The test does not choose which node delivers: it posts on each in turn, one message at a
        # time, each push awaited before the next post, so that no commit of the delivering node's
        # own can be what wakes it. Nothing else runs (no socket, no lease renewal).
        for n in range(1, 21):
            assert post(a if n <= 10 else b, f"e{n}", ["erin"])[0] == 202
            assert wait_for(lambda: n in receiver.seqs()), (n, receiver.seqs())
        return "20 messages, 10 posted on each node, each pushed before the next was posted"
    finally:
        a.stop()
        b.stop()
        receiver.shutdown()


@check("a delivering node that stops running with its connection open (SIGSTOP) loses the lease after the node lease; "
       "the other takes over, and the resumed node pushes nothing twice")
def stopped_leader(binary):
    receiver = Receiver()
    db = fresh_db()
    common = ("--client-token-secret", "cluster-client-token-secret-0123456789", "--push-delay-ms", "50",
              "--node-lease-ms", "3000")
    a = Relay(binary, *common, key=KEY, db=db)
    b = None
    try:
        # A starts alone, so it is the one that delivers.
        held = "SELECT count(*) FROM pg_locks WHERE relation = 'delivery_lease'::regclass AND granted"
        assert wait_for(lambda: psql(a, held) == "1")
        b = Relay(binary, *common, key=KEY, db=db)
        receiver.register(b, "gus")
        assert post(b, "g1", ["gus"])[0] == 202
        assert wait_for(lambda: 1 in receiver.seqs()), receiver.seqs()
        # Stopped once its outcome is stored: a push in flight at the stop would go out again.
        assert wait_for(lambda: psql(a, "SELECT count(*) FROM push_jobs WHERE state = 'pending'") == "0")
        a.proc.send_signal(signal.SIGSTOP)
        stopped = time.monotonic()
        for n in range(2, 6):
            assert post(b, f"g{n}", ["gus"])[0] == 202
        assert wait_for(lambda: set(range(1, 6)) <= set(receiver.seqs()), 15), receiver.seqs()
        took = time.monotonic() - stopped
        a.proc.send_signal(signal.SIGCONT)
        time.sleep(1.5)
        for n in range(6, 9):
            assert post(a, f"g{n}", ["gus"])[0] == 202  # the resumed node serves
        assert wait_for(lambda: set(range(1, 9)) <= set(receiver.seqs()), 15), receiver.seqs()
        time.sleep(0.5)
        assert sorted(receiver.seqs()) == list(range(1, 9)), receiver.seqs()
        assert a.proc.poll() is None, "the resumed node exited"
        return f"pushes went on {took:.1f} s after the stop (node lease 3 s); seqs 1-8 pushed once each"
    finally:
        a.proc.send_signal(signal.SIGCONT)
        a.stop()
        if b:
            b.stop()
        receiver.shutdown()


@check("a node stopped (SIGSTOP) inside a write transaction holds the others' writes to the same inboxes for at "
       "most the node lease (PostgreSQL ends that session); resumed, it acknowledges nothing it did not store")
def stopped_inside_a_transaction(binary):
    db = fresh_db()
    common = ("--client-token-secret", "cluster-client-token-secret-0123456789", "--node-lease-ms", "3000")
    a = Relay(binary, *common, key=KEY, db=db)
    b = Relay(binary, *common, key=KEY, db=db)
    users = ["hal1", "hal2", "hal3", "hal4"]
    acknowledged = set()
    lock = threading.Lock()
    stop = threading.Event()

    def poster(relay, worker):
        n = 0
        while not stop.is_set():
            n += 1
            try:
                status, _ = post(relay, f"{worker}-{n}", users, timeout=20)
            except (OSError, urllib.error.URLError):
                continue
            if status == 202:
                with lock:
                    acknowledged.add(f"{worker}-{n}")

    # A store session that wrote (it has a transaction id: it holds row locks) waiting for its
    # client inside the transaction.
    open_transactions = ("SELECT pid FROM pg_stat_activity WHERE state = 'idle in transaction' "
                         "AND backend_xid IS NOT NULL")
    threads = [threading.Thread(target=poster, args=(a, f"a{w}")) for w in range(6)]
    try:
        for thread in threads:
            thread.start()
        caught = ""
        for _ in range(200):  # stop A until it is caught between two statements of a write
            time.sleep(0.05)
            a.proc.send_signal(signal.SIGSTOP)
            time.sleep(0.1)
            caught = psql(a, open_transactions)
            if caught:
                break
            a.proc.send_signal(signal.SIGCONT)
        assert caught, "A was never caught inside a write transaction"
        started = time.monotonic()
        status, body = post(b, "b-1", users, timeout=20)  # waits for A's row locks
        waited = time.monotonic() - started
        assert status == 202, (status, body)
        assert not set(caught.split()) & set(psql(a, "SELECT pid FROM pg_stat_activity").split()), \
            "the stopped node's session was not ended"
        a.proc.send_signal(signal.SIGCONT)
        time.sleep(1.0)
        stop.set()
        for thread in threads:
            thread.join()
        acknowledged.add("b-1")
        for user in users:
            seqs, ids = seqs_of(b, user)
            assert seqs == list(range(1, len(seqs) + 1)), f"gap in {user}'s seqs"
            assert len(ids) == len(set(ids)), f"duplicate in {user}'s inbox"
            missing = acknowledged - set(ids)
            assert not missing, f"acknowledged but lost: {sorted(missing)[:5]}"
        return (f"B's write to the same users waited {waited:.1f} s (lease 3 s); "
                f"{len(acknowledged)} acknowledged, all stored once, gapless")
    finally:
        stop.set()
        a.proc.send_signal(signal.SIGCONT)
        for thread in threads:
            thread.join()
        a.stop()
        b.stop()


@check("kill -9 of one node under posters retrying on the other: nothing acknowledged lost, no duplicate, no gap; "
       "the client resumes on the surviving node")
def kill_one_node(binary):
    a, b = pair(binary)
    acknowledged = set()
    lock = threading.Lock()
    stop = threading.Event()

    def poster(worker):
        n = 0
        while not stop.is_set():
            n += 1
            msg_id = f"w{worker}-{n}"
            for relay in (a, b, b, b):  # a's failure sends the same id to b
                try:
                    status, _ = post(relay, msg_id, ["erin"], timeout=5)
                except (OSError, urllib.error.URLError):
                    continue
                if status in (200, 202):
                    with lock:
                        acknowledged.add(msg_id)
                    break

    try:
        async def run():
            async with websockets.connect(ws_url(a, "erin", after=0)) as ws:
                await synced(ws)
                threads = [threading.Thread(target=poster, args=(w,)) for w in range(4)]
                for thread in threads:
                    thread.start()
                time.sleep(1.0)
                a.kill9()
                time.sleep(1.0)
                stop.set()
                for thread in threads:
                    thread.join()
                seen = []
                try:
                    while True:
                        frame = json.loads(await asyncio.wait_for(ws.recv(), 2))
                        if frame["type"] == "message":
                            seen.append(frame["seq"])
                except (websockets.ConnectionClosed, asyncio.TimeoutError, OSError):
                    pass
            last = max(seen, default=0)
            assert seen == list(range(1, last + 1)), seen[:20]
            async with websockets.connect(ws_url(b, "erin", after=last)) as ws:
                welcome = json.loads(await asyncio.wait_for(ws.recv(), 5))
                rest = await frames_until(ws, welcome["headSeq"] - last, 10)
                resumed = [frame["seq"] for frame in rest]
                assert resumed == list(range(last + 1, welcome["headSeq"] + 1)), (last, resumed[:10])
            return last

        last = asyncio.run(run())
        seqs, ids = seqs_of(b, "erin")
        assert seqs == list(range(1, len(seqs) + 1)), "gap in seqs"
        assert len(ids) == len(set(ids)), "a message stored twice"
        missing = acknowledged - set(ids)
        assert not missing, f"acknowledged but lost: {sorted(missing)[:5]}"
        return f"{len(acknowledged)} acknowledged, {len(ids)} stored once each, socket on A had {last}, rest resumed on B"
    finally:
        stop.set()  # a failed assertion must not leave the posters running
        a.stop()
        b.stop()


@check("PostgreSQL stopped under load: writes answer 503 (never 2xx), /readyz fails, sockets stay open; "
       "after it returns everything resumes by itself and nothing acknowledged is lost")
def database_outage(binary):
    a, b = pair(binary)
    directory = os.environ["PUSHRELAY_TEST_POSTGRES"]
    acknowledged, refused = set(), []
    lock = threading.Lock()
    stop = threading.Event()

    def poster(worker):
        n = 0
        while not stop.is_set():
            n += 1
            try:
                status, body = post(a if n % 2 else b, f"o{worker}-{n}", ["frank"], timeout=5)
            except (OSError, urllib.error.URLError):
                continue
            with lock:
                if status == 202:
                    acknowledged.add(f"o{worker}-{n}")
                else:
                    refused.append((status, body.get("error", {}).get("code") if body else None))
            time.sleep(0.01)

    try:
        def outage():
            threads = [threading.Thread(target=poster, args=(w,)) for w in range(3)]
            for thread in threads:
                thread.start()
            time.sleep(0.5)
            subprocess.run([PG_SH, "pause", directory], check=True)
            time.sleep(1.0)
            assert a.http("GET", "/readyz")[0] == 503
            with lock:
                during = len(refused)
            subprocess.run([PG_SH, "resume", directory], check=True)
            assert wait_for(lambda: a.http("GET", "/readyz")[0] == 200 and b.http("GET", "/readyz")[0] == 200, 15)
            with lock:
                before = len(acknowledged)
            assert wait_for(lambda: len(acknowledged) > before + 20, 15), "writes did not resume"
            stop.set()
            for thread in threads:
                thread.join()
            return during

        async def run():
            async with websockets.connect(ws_url(a, "frank", after=0)) as ws:
                await synced(ws)
                # The outage in a thread, the socket read meanwhile (the restart's WAL replay may
                # take minutes on a busy machine).
                reader = Reader(ws)
                during = await asyncio.to_thread(outage)
                # The socket on A stayed open and gets everything (its own node's and B's).
                _, ids = seqs_of(a, "frank")
                got = await reader.until(len(ids))
                assert [f["id"] for f in got] == ids, (len(got), len(ids))
                return during

        during = asyncio.run(run())
        assert during > 0 and all(status == 503 and code == "store_unavailable" for status, code in refused), refused[:5]
        seqs, ids = seqs_of(b, "frank")
        assert seqs == list(range(1, len(seqs) + 1)), "gap in seqs"
        missing = acknowledged - set(ids)
        assert not missing, f"acknowledged but lost: {sorted(missing)[:5]}"
        return f"{len(refused)} writes refused with 503 during the outage, {len(acknowledged)} acknowledged, all stored"
    finally:
        stop.set()  # a failed assertion must not leave the posters running
        a.stop()
        b.stop()


@check("a socket whose live reads fail while PostgreSQL is down stays open and, once it is back, gets every stored "
       "message in order")
def live_reads_during_outage(binary):
    a, b = pair(binary)
    directory = os.environ["PUSHRELAY_TEST_POSTGRES"]
    stop = threading.Event()

    def poster(worker):  # as fast as B takes them: A's session reads nearly all the time
        n = 0
        while not stop.is_set():
            n += 1
            try:
                post(b, f"r{worker}-{n}", ["ivy"], timeout=5)
            except (OSError, urllib.error.URLError):
                time.sleep(0.01)

    threads = [threading.Thread(target=poster, args=(w,)) for w in range(6)]
    try:
        def outage():
            for thread in threads:
                thread.start()
            time.sleep(0.5)
            subprocess.run([PG_SH, "pause", directory], check=True)
            time.sleep(1.5)
            subprocess.run([PG_SH, "resume", directory], check=True)
            assert wait_for(lambda: a.http("GET", "/readyz")[0] == 200, 15)
            time.sleep(1.0)
            stop.set()
            for thread in threads:
                thread.join()

        async def run():
            async with websockets.connect(ws_url(a, "ivy", after=0)) as ws:
                await synced(ws)
                reader = Reader(ws)  # as above
                await asyncio.to_thread(outage)
                _, ids = seqs_of(b, "ivy")
                got = await reader.until(len(ids))
                assert [f["id"] for f in got] == ids, (len(got), len(ids))
                return len(ids)

        return f"the socket on A stayed open and got all {asyncio.run(run())} messages in order"
    finally:
        stop.set()
        for thread in threads:
            if thread.is_alive():
                thread.join()
        a.stop()
        b.stop()


def psql(relay, sql):
    database = relay.db.split("///")[1].split("?")[0]
    return subprocess.run(
        ["psql", "-h", os.environ["PUSHRELAY_TEST_POSTGRES"], "-U", "postgres", "-d", database, "-Atc", sql],
        capture_output=True, text=True, check=True, timeout=30).stdout.strip()


@check("the node waiting to deliver holds no snapshot, so it holds back no cleanup of dead rows; the lease blocks no VACUUM")
def waiting_node_holds_no_snapshot(binary):
    a, b = pair(binary)
    try:
        waiting = "FROM pg_stat_activity WHERE query LIKE '%LOCK TABLE delivery_lease%' AND wait_event_type = 'Lock'"
        assert wait_for(lambda: psql(a, f"SELECT count(*) {waiting}") == "1"), psql(a, "SELECT * FROM pg_stat_activity")
        for relay in (a, b):  # while both write
            for n in range(20):
                assert post(relay, f"x{relay.port}-{n}", ["xavier"])[0] == 202
        xmin = psql(a, f"SELECT coalesce(backend_xmin::text, 'none') {waiting}")
        assert xmin == "none", f"the waiting node's backend holds xmin {xmin}"
        # The lease itself never stands in the way of a vacuum (a held table lock would).
        started = time.monotonic()
        psql(a, "VACUUM (FREEZE)")
        return f"one node waits in LOCK TABLE with no backend_xmin; VACUUM (FREEZE) beside the held lease took " \
               f"{time.monotonic() - started:.1f} s"
    finally:
        a.stop()
        b.stop()


@check("a node stopped (SIGTERM) under load on keep-alive connections exits cleanly; every 2xx is stored")
def graceful_stop_under_load(binary):
    a, b = pair(binary)
    acknowledged, refused = set(), []
    lock = threading.Lock()

    def poster(stop, worker):
        connection = http.client.HTTPConnection("127.0.0.1", a.port, timeout=10)
        for n in range(100000):
            msg_id = f"g{stop}-{worker}-{n}"
            body = json.dumps({"id": msg_id, "recipients": [f"g{worker}"], "payload": {}})
            try:
                connection.request("POST", "/v1/messages", body,
                                   {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
                response = connection.getresponse()
                answer = json.loads(response.read() or b"{}")
            except (OSError, http.client.HTTPException, ValueError):
                return
            with lock:
                if response.status == 202:
                    acknowledged.add(msg_id)
                else:
                    refused.append((response.status, answer.get("error", {}).get("code")))
            if response.getheader("Connection", "").lower() == "close":
                return

    try:
        for stop in range(5):
            threads = [threading.Thread(target=poster, args=(stop, w)) for w in range(8)]
            for thread in threads:
                thread.start()
            time.sleep(0.7)
            a.proc.terminate()
            code = a.proc.wait(15)
            for thread in threads:
                thread.join()
            assert code == 0, f"exit status {code} after SIGTERM under load"
            a.start()
        assert all(r == (503, "shutting_down") for r in refused), refused[:5]
        stored = set()
        for worker in range(8):
            stored |= set(seqs_of(b, f"g{worker}")[1])
        missing = acknowledged - stored
        assert not missing, f"acknowledged but lost: {sorted(missing)[:5]}"
        return f"5 stops, exit 0 each; {len(acknowledged)} acknowledged, all stored; {len(refused)} refused with 503"
    finally:
        a.stop()
        b.stop()


if __name__ == "__main__":
    if not os.environ.get("PUSHRELAY_TEST_POSTGRES"):
        sys.exit("cluster_peer.py needs PUSHRELAY_TEST_POSTGRES (run it through Tests/Postgres/pg.sh run)")
    binary = sys.argv[1]
    sys.exit(run_checks(CHECKS, lambda fn: fn(binary)))
