#!/usr/bin/env python3
"""A real Matrix homeserver drives the relay: Synapse (from PyPI, SQLite, loopback, no
federation) with an HTTP pusher pointed at the relay's Push Gateway endpoint.

    matrix_peer.py RELAY_BINARY SYNAPSE_VENV

Two users, alice and bob, share a room; alice's pusher goes through a small proxy (so that one
answer can be made to fail) to `POST /_matrix/push/v1/notify?secret=…`; alice's relay
device carries that pusher's identity and a push URL on a local receiver. If Synapse cannot
start, the checks fail: nothing is skipped."""
import asyncio
import base64
import hashlib
import hmac
import http.server
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import websockets

from relaypeer import QuietServer, Receiver, Relay, call, registry, run_checks, wait_for

KEY = "matrix-test-server-key"
GATEWAY_SECRET = "gateway-secret-0123456789"
SECRET_BYTES = b"0123456789abcdef0123456789abcdef"
WEBHOOK_SECRET = "whsec_" + base64.b64encode(SECRET_BYTES).decode()
APP_ID = "org.pushrelay.test"
PUSHKEY = "alice-pushkey-1"
checks, check = registry()


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Proxy(QuietServer):
    """Between Synapse and the relay: forwards every notify; `fail_next` makes it answer 503 to
    Synapse once *after* the relay took the notify (the relay's answer is lost, as when a
    connection breaks), so that Synapse retries a notify the relay already has."""

    def __init__(self, target):
        super().__init__(("127.0.0.1", 0), ProxyHandler)
        self.target = target
        self.lock = threading.Lock()
        self.fail_next = False
        self.forwarded = []  # (event_id, status)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def base(self):
        return f"http://127.0.0.1:{self.server_address[1]}"


class ProxyHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        request = urllib.request.Request(self.server.target + self.path, data=body, method="POST")
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                status, answer = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, answer = error.code, error.read()
        event = json.loads(body).get("notification", {}).get("event_id")
        with self.server.lock:
            self.server.forwarded.append((event, status))
            if self.server.fail_next and event:
                self.server.fail_next = False
                status, answer = 503, b'{"errcode":"M_UNKNOWN","error":"proxy: made to fail once"}'
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)


class Synapse:
    """A homeserver in a temporary directory: config generated, then made fit for the test."""

    def __init__(self, venv):
        self.venv = venv
        self.dir = tempfile.mkdtemp(prefix="pushrelay-synapse-")
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        config = os.path.join(self.dir, "hs.yaml")
        python = os.path.join(venv, "bin", "python")
        subprocess.run([python, "-m", "synapse.app.homeserver", "--server-name", "localhost", "--config-path", config,
                        "--data-directory", self.dir, "--generate-config", "--report-stats=no"],
                       check=True, capture_output=True, timeout=120)
        text = open(config).read()
        text = re.sub(r"port: 8008", f"port: {self.port}", text)
        text = re.sub(r"bind_addresses: \[.*\]", "bind_addresses: ['127.0.0.1']", text)
        text += "\n".join([
            "", "registration_shared_secret: 'matrix-peer-registration'", "trusted_key_servers: []",
            "suppress_key_server_warning: true",
            # Synapse refuses to push to private addresses unless they are listed.
            "ip_range_whitelist: ['127.0.0.1']",
            "rc_message: {per_second: 1000, burst_count: 1000}",
            "rc_login: {address: {per_second: 1000, burst_count: 1000}, account: {per_second: 1000, burst_count: 1000}}",
            "rc_registration: {per_second: 1000, burst_count: 1000}", ""])
        open(config, "w").write(text)
        self.config = config
        self.log = open(os.path.join(self.dir, "out.log"), "w")
        started = time.monotonic()
        self.proc = subprocess.Popen([python, "-m", "synapse.app.homeserver", "-c", config], stdout=self.log,
                                     stderr=subprocess.STDOUT, cwd=self.dir)
        if not wait_for(self.ready, 90):
            self.stop()
            raise RuntimeError("Synapse did not start within 90 s: " + open(os.path.join(self.dir, "out.log")).read()[-2000:])
        self.startup = time.monotonic() - started

    def ready(self):
        if self.proc.poll() is not None:
            raise RuntimeError("Synapse exited: " + open(os.path.join(self.dir, "out.log")).read()[-2000:])
        try:
            return urllib.request.urlopen(self.base + "/_matrix/client/versions", timeout=2).status == 200
        except OSError:
            return False

    def register(self, user, password):
        subprocess.run([os.path.join(self.venv, "bin", "register_new_matrix_user"), "-u", user, "-p", password,
                        "--no-admin", "-c", self.config, self.base], check=True, capture_output=True, timeout=60)
        status, body = call(self.base, "POST", "/_matrix/client/v3/login", {
            "type": "m.login.password", "identifier": {"type": "m.id.user", "user": user}, "password": password})
        assert status == 200, body
        return body["access_token"]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class World:
    def __init__(self, binary, venv):
        self.receiver = Receiver()
        self.relay = Relay(binary, "--matrix-notify-secret", GATEWAY_SECRET, "--webhook-secret", WEBHOOK_SECRET,
                           "--push-delay-ms", "200", "--ack-timeout-ms", "8000", key=KEY)
        self.proxy = Proxy(self.relay.base)
        self.synapse = Synapse(venv)
        self.alice = self.synapse.register("alice", "alice-password")
        self.bob = self.synapse.register("bob", "bob-password")
        status, room = call(self.synapse.base, "POST", "/_matrix/client/v3/createRoom",
                            {"preset": "private_chat", "invite": ["@bob:localhost"], "is_direct": True}, token=self.alice)
        assert status == 200, room
        self.room = room["room_id"]
        status, body = call(self.synapse.base, "POST", f"/_matrix/client/v3/join/{self.room}", {}, token=self.bob)
        assert status == 200, body
        status, body = self.relay.http("PUT", "/v1/users/alice/devices/phone", {
            "pushUrl": self.receiver.base + "/alice/phone", "matrix": {"appId": APP_ID, "pushkey": PUSHKEY}})
        assert status in (200, 201), body
        assert body["matrix"] == {"appId": APP_ID, "pushkey": PUSHKEY}, body
        status, body = call(self.synapse.base, "POST", "/_matrix/client/v3/pushers/set", {
            "kind": "http", "app_id": APP_ID, "pushkey": PUSHKEY, "app_display_name": "PushRelay test",
            "device_display_name": "phone", "lang": "en",
            "data": {"url": f"{self.proxy.base}/_matrix/push/v1/notify?secret={GATEWAY_SECRET}"}}, token=self.alice)
        assert status == 200, body
        self.txn = 0

    def bob_says(self, text):
        self.txn += 1
        status, body = call(self.synapse.base, "PUT",
                            f"/_matrix/client/v3/rooms/{self.room}/send/m.room.message/t{self.txn}-{time.time()}",
                            {"msgtype": "m.text", "body": text}, token=self.bob)
        assert status == 200, body
        return body["event_id"]

    def pushes_with(self, text):
        return [p for p in self.receiver.bodies("/alice/phone") if (p.get("push") or {}).get("body") == text]

    def inbox(self):
        status, page = self.relay.http("GET", "/v1/users/alice/messages?after=0&limit=1000")
        assert status == 200, page
        return page["messages"]

    def close(self):
        self.synapse.stop()
        self.relay.stop()
        self.proxy.shutdown()
        self.receiver.shutdown()


def verify(headers, body):
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    expected = base64.b64encode(hmac.new(SECRET_BYTES, signed, hashlib.sha256).digest()).decode()
    assert f"v1,{expected}" in headers["webhook-signature"].split(), headers


@check("a message from bob while alice is offline reaches her device as a signed push: title, body, badge")
def offline_push(world):
    event = world.bob_says("hello alice")
    assert wait_for(lambda: world.pushes_with("hello alice"), 20), world.receiver.bodies("/alice/phone")
    push = world.pushes_with("hello alice")[0]
    with world.receiver.lock:
        headers, body = next((h, b) for p, h, b in world.receiver.pushes if json.loads(b) == push)
    verify(headers, body)
    assert push["type"] == "message" and push["userId"] == "alice" and push["deviceId"] == "phone", push
    assert push["push"]["title"] == "bob", push
    assert push["push"]["data"]["event_id"] == event and push["push"]["data"]["room_id"] == world.room, push
    assert push["unread"] == 1, push  # Synapse's own count (counts.unread), not the relay's
    assert push["priority"] == "high", push
    [message] = [m for m in world.inbox() if m["payload"].get("event_id") == event]
    assert message["payload"]["content"]["body"] == "hello alice" and message["conversationId"] == world.room
    return f"pushed with title {push['push']['title']!r}, badge {push['unread']} (Synapse started in {world.synapse.startup:.1f} s)"


@check("the same message while alice's device is live on its WebSocket is delivered live and not pushed")
def live_not_pushed(world):
    status, token = world.relay.http("POST", "/v1/tokens", {"userId": "alice", "deviceId": "phone"})
    assert status == 200, token

    async def scenario():
        url = world.relay.base.replace("http://", "ws://") + "/v1/ws?after=1000000&access_token=" + token["token"]
        async with websockets.connect(url) as ws:
            while json.loads(await ws.recv())["type"] != "synced":
                pass
            world.bob_says("are you there?")
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                frame = json.loads(await asyncio.wait_for(ws.recv(), deadline - time.monotonic()))
                if frame["type"] == "message" and frame["payload"].get("content", {}).get("body") == "are you there?":
                    await ws.send(json.dumps({"type": "ack", "seq": frame["seq"]}))
                    # Past the 8 s ack timeout a push would have gone out (the timeout leaves a
                    # busy machine room to store the ack first).
                    await asyncio.sleep(9)
                    return frame
            raise AssertionError("no live frame")
    frame = asyncio.run(scenario())
    assert not world.pushes_with("are you there?"), world.pushes_with("are you there?")
    return f"live frame seq {frame['seq']}, acked, no push"


@check("Synapse retrying a notify the relay already took (503 once) makes one inbox message")
def retry_is_idempotent(world):
    with world.proxy.lock:
        world.proxy.fail_next = True
    event = world.bob_says("retry me")
    assert wait_for(lambda: sum(1 for e, _ in world.proxy.forwarded if e == event) >= 2, 30), world.proxy.forwarded
    time.sleep(0.5)
    copies = [m for m in world.inbox() if m["payload"].get("event_id") == event]
    assert len(copies) == 1, copies
    assert wait_for(lambda: world.pushes_with("retry me"))
    time.sleep(1)
    assert len(world.pushes_with("retry me")) == 1, world.pushes_with("retry me")
    attempts = sum(1 for e, _ in world.proxy.forwarded if e == event)
    return f"{attempts} notifies for the event, 1 inbox message, 1 push"


def notify(world, notification, secret=GATEWAY_SECRET):
    return world.relay.http("POST", f"/_matrix/push/v1/notify?secret={secret}", {"notification": notification})


def register_device(world, user, device, pushkey):
    status, body = world.relay.http("PUT", f"/v1/users/{user}/devices/{device}", {
        "pushUrl": world.receiver.base + f"/{user}/{device}", "matrix": {"appId": APP_ID, "pushkey": pushkey}})
    assert status in (200, 201), body


def push_for(world, path, event):
    found = [p for p in world.receiver.bodies(path) if (p.get("push") or {}).get("data", {}).get("event_id") == event]
    return found[0] if found else None


@check("a user with a 240-byte id in a room with a 250-character name reaches alice's device as a push")
def long_sender_and_room_name(world):
    localpart = "l" * (240 - len("@:localhost"))
    token = world.synapse.register(localpart, "long-password")
    room_name = "R" * 249 + "!"
    status, room = call(world.synapse.base, "POST", "/_matrix/client/v3/createRoom",
                        {"preset": "private_chat", "name": room_name, "invite": ["@alice:localhost"]}, token=token)
    assert status == 200, room
    status, body = call(world.synapse.base, "POST", f"/_matrix/client/v3/join/{room['room_id']}", {}, token=world.alice)
    assert status == 200, body
    status, sent = call(world.synapse.base, "PUT",
                        f"/_matrix/client/v3/rooms/{room['room_id']}/send/m.room.message/long-{time.time()}",
                        {"msgtype": "m.text", "body": "from a long id"}, token=token)
    assert status == 200, sent
    assert wait_for(lambda: world.pushes_with("from a long id"), 30), (
        world.proxy.forwarded[-3:], world.receiver.bodies("/alice/phone")[-2:])
    push = world.pushes_with("from a long id")[0]
    title = push["push"]["title"]
    assert len(title.encode()) <= 512 and title.endswith("…") and " in RRR" in title, title
    assert push["push"]["data"]["event_id"] == sent["event_id"], push
    [message] = [m for m in world.inbox() if m["payload"].get("event_id") == sent["event_id"]]
    assert message["payload"]["sender"] == f"@{localpart}:localhost" and message["payload"]["room_name"] == room_name
    statuses = {s for e, s in world.proxy.forwarded if e == sent["event_id"]}
    assert statuses == {200}, statuses
    return f"title {len(title.encode())} bytes ({title[:12]}…{title[-8:]}), sender id {len(message['payload']['sender'])} bytes"


@check("alice's second pusher with event_id_only gets its push without the content; her first gets the text")
def event_id_only_pusher(world):
    register_device(world, "alice", "tablet", "alice-pushkey-2")
    status, body = call(world.synapse.base, "POST", "/_matrix/client/v3/pushers/set", {
        "kind": "http", "app_id": APP_ID, "pushkey": "alice-pushkey-2", "app_display_name": "PushRelay test",
        "device_display_name": "tablet", "lang": "en", "append": True,
        "data": {"url": f"{world.proxy.base}/_matrix/push/v1/notify?secret={GATEWAY_SECRET}",
                 "format": "event_id_only"}}, token=world.alice)
    assert status == 200, body
    try:
        world.bob_says("the launch code is 1234")
        assert wait_for(lambda: world.receiver.bodies("/alice/tablet") and world.pushes_with("the launch code is 1234"), 20), (
            world.receiver.bodies("/alice/tablet"), world.receiver.bodies("/alice/phone")[-2:])
        time.sleep(1)
        with world.receiver.lock:
            tablet = [body for path, _, body in world.receiver.pushes if path == "/alice/tablet"]
        assert tablet and not any(b"launch code" in body or b"bob" in body for body in tablet), tablet
        pushed = json.loads(tablet[-1])
        assert pushed["type"] == "message" and "push" not in pushed and "messageId" not in pushed, pushed
        status, devices = world.relay.http("GET", "/v1/users/alice/devices")
        assert {d["deviceId"]: d["contentFree"] for d in devices["devices"]} == {"phone": False, "tablet": True}, devices
        title = world.pushes_with("the launch code is 1234")[0]["push"]["title"]
        return f"tablet: {len(tablet)} content-free push(es); phone: title {title!r} and the text"
    finally:
        call(world.synapse.base, "POST", "/_matrix/client/v3/pushers/set", {
            "kind": None, "app_id": APP_ID, "pushkey": "alice-pushkey-2"}, token=world.alice)
        world.relay.http("DELETE", "/v1/users/alice/devices/tablet")


@check("a disabled device's pushkey comes back in rejected and Synapse removes the pusher")
def rejected_pusher_is_removed(world):
    world.receiver.status["/alice/phone"] = 410  # the push service says the app is gone
    world.bob_says("anyone?")
    assert wait_for(lambda: world.relay.http("GET", "/v1/users/alice/devices")[1]["devices"][0]["state"] == "disabled", 20)
    world.bob_says("hello?")

    def pushers():
        status, body = call(world.synapse.base, "GET", "/_matrix/client/v3/pushers", token=world.alice)
        assert status == 200, body
        return body["pushers"]
    assert wait_for(lambda: not pushers(), 30), pushers()
    status, answer = world.relay.http("POST", f"/_matrix/push/v1/notify?secret={GATEWAY_SECRET}", {
        "notification": {"event_id": "$x", "devices": [{"app_id": APP_ID, "pushkey": PUSHKEY}]}})
    assert status == 200 and answer == {"rejected": [PUSHKEY]}, answer
    status, _ = world.relay.http("POST", "/_matrix/push/v1/notify?secret=wrong-secret-0123456789", {
        "notification": {"devices": [{"app_id": APP_ID, "pushkey": PUSHKEY}]}})
    assert status == 404, status
    return "pusher removed by Synapse; a wrong secret gets 404"


LONG_CASES = [
    ("a 248-byte sender", {"sender": "@" + "s" * 237 + ":hs.org"}),
    ("a 206-byte room_id", {"room_id": "!" + "r" * 198 + ":hs.org"}),
    ("a 256-character display name", {"sender_display_name": "N" * 256}),
    ("200 CJK characters of sender and of room name", {"sender_display_name": "漢" * 200, "room_name": "字" * 200}),
    ("a 64,500-byte body and an emoji name",
     {"sender_display_name": "👩‍👩‍👧‍👦" * 40, "content": {"msgtype": "m.text", "body": "b" * 64_500}}),
]


@check("direct notifies with long ids, names and bodies are answered 200 and pushed, their text shortened")
def long_fields_direct(world):
    register_device(world, "carol", "phone", "carol-pushkey")
    for number, (name, fields) in enumerate(LONG_CASES):
        event = f"$long{number}"
        notification = {"event_id": event, "room_id": "!room:hs.org", "sender": "@bob:hs.org", "prio": "high",
                        "content": {"msgtype": "m.text", "body": f"case {number}"}, "counts": {"unread": 1},
                        "devices": [{"app_id": APP_ID, "pushkey": "carol-pushkey"}], **fields}
        status, answer = notify(world, notification)
        assert status == 200 and answer == {"rejected": []}, (name, status, answer)
        # One at a time: pushes due together are coalesced into one carrying the newest.
        assert wait_for(lambda: push_for(world, "/carol/phone", event), 20), (name, world.receiver.bodies("/carol/phone"))
        push = push_for(world, "/carol/phone", event)["push"]
        assert len(push["title"].encode()) <= 512 and len(push.get("body", "").encode()) <= 2048, (name, push)
        if "漢" in fields.get("sender_display_name", ""):
            assert push["title"].startswith("漢漢") and "… in 字" in push["title"] and push["title"].endswith("字…"), push
        if "content" in fields:
            assert push["body"].endswith("b…") and push["title"].startswith("👩‍👩‍👧‍👦"), push["title"][:30]
    return f"{len(LONG_CASES)} notifies, 200 each, each pushed"


@check("event_id_only is per pusher: in either order of the two notifies, the content never reaches that device")
def event_id_only_direct(world):
    register_device(world, "dave", "phone", "dave-full")
    register_device(world, "dave", "watch", "dave-ids")
    full = {"room_id": "!r:hs.org", "type": "m.room.message", "sender": "@bob:hs.org", "sender_display_name": "Bob",
            "room_name": "Secret room", "content": {"msgtype": "m.text", "body": "the launch code is 1234"},
            "counts": {"unread": 2}, "devices": [{"app_id": APP_ID, "pushkey": "dave-full", "data": {}}]}
    ids = {"room_id": "!r:hs.org", "prio": "high", "counts": {"unread": 2},
           "devices": [{"app_id": APP_ID, "pushkey": "dave-ids", "data": {"format": "event_id_only"}}]}
    # A notify carrying content for an event_id_only pusher (not what Synapse sends) leaks nothing either.
    both = dict(full, devices=[{"app_id": APP_ID, "pushkey": "dave-ids", "data": {"format": "event_id_only"}}])
    orders = {"$full-first": [full, ids], "$ids-first": [ids, full], "$content-to-ids": [both, full]}

    def phone(event):
        return [p for p in world.receiver.bodies("/dave/phone") if p.get("messageId", "").startswith("mx_")
                and (p.get("push") or {}).get("data", {}).get("event_id") == event]
    for number, (event, notifies) in enumerate(orders.items()):
        for notification in notifies:
            status, answer = notify(world, dict(notification, event_id=event))
            assert status == 200 and answer == {"rejected": []}, (event, status, answer)
        # A retry of each changes nothing.
        for notification in notifies:
            assert notify(world, dict(notification, event_id=event))[0] == 200
        # One event at a time: pushes due together are coalesced into one carrying the newest.
        assert wait_for(lambda: phone(event), 20), (event, world.receiver.bodies("/dave/phone"))
        assert wait_for(lambda: len(world.receiver.bodies("/dave/watch")) > number, 20), (
            event, world.receiver.bodies("/dave/watch"))
    time.sleep(1.5)
    for event in orders:
        [pushed] = phone(event)
        assert pushed["push"]["title"] == "Bob in Secret room" and pushed["push"]["body"] == "the launch code is 1234", pushed
    with world.receiver.lock:
        watch = [body for path, _, body in world.receiver.pushes if path == "/dave/watch"]
    assert len(watch) == len(orders), watch
    assert not any(b"launch code" in body or b"Bob" in body or b"Secret" in body for body in watch), watch
    assert all("push" not in json.loads(body) for body in watch), watch
    status, page = world.relay.http("GET", "/v1/users/dave/messages?after=0&limit=100")
    assert status == 200 and len(page["messages"]) == len(orders), page
    assert all(m["payload"].get("content", {}).get("body") == "the launch code is 1234" for m in page["messages"]), page
    return f"phone: {len(orders)} pushes with the text; watch: {len(watch)} content-free pushes; {len(orders)} inbox messages"


@check("wrong secrets: 404 until an address has sent 10, then 429; the right secret still passes")
def wrong_secret_budget(world):
    body = {"devices": [{"app_id": APP_ID, "pushkey": "nobody"}]}
    # The budget refills at 1/s while these are answered: sent until the first 429 (at most 40),
    # so a slow machine lengthens the run instead of failing it.
    statuses = []
    while len(statuses) < 40 and 429 not in statuses:
        statuses.append(notify(world, body, secret=f"wrong-secret-{len(statuses):04d}-0123456789")[0])
    assert statuses[:9] == [404] * 9 and statuses[-1] == 429 and set(statuses) == {404, 429}, statuses
    status, answer = notify(world, body)
    assert status == 200 and answer == {"rejected": ["nobody"]}, (status, answer)
    return f"statuses {statuses}"


def main(argv):
    binary, venv = argv[1], os.path.abspath(argv[2])
    try:
        world = World(binary, venv)
    except Exception as error:  # a homeserver that cannot start fails the run, loudly
        print(f"FAILED to set up Synapse and the relay: {error}")
        return 1
    try:
        return run_checks(checks, lambda fn: fn(world))
    finally:
        world.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
