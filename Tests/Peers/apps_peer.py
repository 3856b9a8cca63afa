"""Several apps, one relay: each app's pushes signed with its own credential, checked by the
independent doubles — two Apple teams (and two apps of one team's key), two Firebase projects,
two VAPID keys — a Matrix pusher's app_id selecting its app, and an app taken out of the
configuration holding its devices' pushes until it comes back.

    apps_peer.py RELAY_BINARY"""
import json
import os
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from pushdoubles import APNsDouble, FCMDouble, WebPushEndpoint, b64url, ca_file, make_apns_key  # noqa: E402
from relaypeer import Relay, registry, run_checks, wait_for  # noqa: E402
from webpush_peer import vapid_key  # noqa: E402

checks, check = registry()
TEAM_A, KEY_A, TOPIC, BETA_TOPIC = "TEAMAAAAAA", "KEYAAAAAAA", "com.example.chat", "com.example.chat.beta"
TEAM_B, KEY_B, ACME_TOPIC = "TEAMBBBBBB", "KEYBBBBBBB", "com.acme.messenger"
SECRET = "apps-peer-matrix-secret"


def token(n):
    return f"{n:02x}" * 32


class World:
    """The doubles and a config file naming the apps `default`, `beta` (team A's key, another
    bundle id) and `acme` (team B, its own Firebase project and VAPID key)."""

    def __init__(self):
        key_a, public_a = make_apns_key()
        key_b, public_b = make_apns_key()
        self.apns = APNsDouble(public_a, TEAM_A, KEY_A, {TOPIC, BETA_TOPIC})
        self.apns.add_key(public_b, TEAM_B, KEY_B, ACME_TOPIC)
        self.fcm = FCMDouble()
        self.account = self.fcm.make_account(project_id="example-chat")
        self.acme_account = self.fcm.make_account(project_id="acme-chat")
        self.web = WebPushEndpoint()
        self.apps = {
            "beta": {"apnsKeyFile": key_a, "apnsKeyId": KEY_A, "apnsTeamId": TEAM_A, "apnsTopic": BETA_TOPIC},
            "acme": {"apnsKeyFile": key_b, "apnsKeyId": KEY_B, "apnsTeamId": TEAM_B, "apnsTopic": ACME_TOPIC,
                     "fcmServiceAccountFile": self.acme_account.path, "vapidKeyFile": vapid_key(),
                     "vapidSubject": "mailto:ops@acme.example", "matrixAppIds": ["com.acme.*"]},
        }
        self.settings = {
            "apnsKeyFile": key_a, "apnsKeyId": KEY_A, "apnsTeamId": TEAM_A, "apnsTopic": TOPIC,
            "apnsUrl": self.apns.base, "apnsSandboxUrl": self.apns.base,
            "fcmServiceAccountFile": self.account.path, "fcmUrl": self.fcm.base,
            "vapidKeyFile": vapid_key(), "vapidSubject": "mailto:ops@example.com",
            "pushCaFile": ca_file(), "webPushAllowedHosts": ["127.0.0.1:*"], "pushDelayMs": 300,
            "pushRetryBaseMs": 200, "pushRetryCapMs": 1000, "matrixNotifySecret": SECRET, "logLevel": "warning",
        }

    def config(self, apps):
        path = os.path.join(tempfile.mkdtemp(prefix="apps-peer-"), "config.json")
        with open(path, "w") as file:
            json.dump({**self.settings, "apps": apps}, file)
        return ("--config", path)

    def close(self):
        self.apns.close()
        self.fcm.close()
        self.web.close()


def put(relay, user, device, body, status=201):
    answered, reply = relay.http("PUT", f"/v1/users/{user}/devices/{device}", body)
    assert answered == status, (device, answered, reply)
    return reply


def subscribe(relay, world, user, device, app=None):
    status, key = relay.http("GET", "/v1/webpush/key" + (f"?app={app}" if app else ""))
    assert status == 200, key
    subscription = world.web.make_subscription(application_server_key=key["publicKey"])
    put(relay, user, device, {"webPush": subscription, **({"app": app} if app else {})})
    return subscription, key["publicKey"]


def post(relay, message_id, user):
    status, body = relay.http("POST", "/v1/messages", {
        "id": message_id, "recipients": [user], "payload": {"n": message_id},
        "push": {"title": "Carol", "body": f"text of {message_id}"}})
    assert status == 202, body


def delivered(requests):
    return [r for r in requests if r.status in (200, 201)]


def metric(relay, name):
    with urllib.request.urlopen(relay.base + "/metrics", timeout=10) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[-1])
    return 0.0


@check("one relay, three apps: each APNs team, Firebase project and VAPID key signs only its own app's pushes")
def each_app_its_own_credential(binary):
    world = World()
    relay = Relay(binary, *world.config(world.apps))
    try:
        put(relay, "u", "ios", {"apns": {"token": token(1)}})
        assert put(relay, "u", "ios-beta", {"apns": {"token": token(2)}, "app": "beta"})["app"] == "beta"
        put(relay, "v", "ios-acme", {"apns": {"token": token(3)}, "app": "acme"})
        put(relay, "u", "android", {"fcm": {"token": "tok-default:APA91"}})
        put(relay, "u", "android-acme", {"fcm": {"token": "tok-acme:APA91"}, "app": "acme"})
        web, web_key = subscribe(relay, world, "u", "web")
        web_acme, acme_key = subscribe(relay, world, "u", "web-acme", app="acme")
        assert web_key != acme_key
        # What the relay does not have is refused, naming the app.
        refused = put(relay, "u", "x", {"fcm": {"token": "t"}, "app": "nope"}, status=400)
        assert refused["error"]["code"] == "transport_unavailable" and "nope" in refused["error"]["message"], refused
        refused = put(relay, "u", "x", {"fcm": {"token": "t"}, "app": "beta"}, status=400)
        assert refused["error"]["code"] == "transport_unavailable" and "beta" in refused["error"]["message"], refused
        assert relay.http("GET", "/v1/webpush/key?app=nope")[0] == 404
        assert relay.http("GET", "/v1/webpush/key?app=beta")[0] == 404  # beta has no Web Push

        post(relay, "m1", "u")
        assert wait_for(lambda: all(delivered(world.apns.for_token(token(n))) for n in (1, 2)), 30)
        # Team B's push after team A's connection is up: it must not ride on it.
        post(relay, "m2", "v")
        assert wait_for(lambda: delivered(world.apns.for_token(token(3)))
                        and delivered(world.fcm.for_token("tok-default:APA91"))
                        and delivered(world.fcm.for_token("tok-acme:APA91"))
                        and world.web.payloads(web) and world.web.payloads(web_acme), 30), (
            [(r.token[:4], r.status, r.reason) for r in world.apns.requests],
            [(m.project_id, m.status, m.answer) for m in world.fcm.messages],
            [(r.subscription, r.status, r.problem) for r in world.web.requests])
        sent = {n: delivered(world.apns.for_token(token(n)))[0] for n in (1, 2, 3)}
        assert (sent[1].team, sent[1].headers["apns-topic"]) == (TEAM_A, TOPIC), sent[1].headers
        assert (sent[2].team, sent[2].headers["apns-topic"]) == (TEAM_A, BETA_TOPIC), sent[2].headers
        assert (sent[3].team, sent[3].headers["apns-topic"]) == (TEAM_B, ACME_TOPIC), sent[3].headers
        # One provider token per key (default and beta share team A's), and no connection
        # carried both teams' tokens (the double calls that a violation).
        assert sent[1].jwt == sent[2].jwt != sent[3].jwt
        assert world.apns.connections >= 2 and not world.apns.violations, world.apns.violations
        fcm = {m.token: m for m in world.fcm.messages if m.status == 200}
        assert fcm["tok-default:APA91"].project_id == "example-chat", fcm
        assert fcm["tok-acme:APA91"].project_id == "acme-chat", fcm
        assert not world.fcm.violations, world.fcm.violations
        # Each subscription was pushed with the key the browser subscribed with (the double
        # refuses any other, as push services do).
        assert world.web.for_subscription(web)[0].vapid_key == web_key
        assert world.web.for_subscription(web_acme)[0].vapid_key == acme_key
        assert world.web.for_subscription(web_acme)[0].vapid_claims["sub"] == "mailto:ops@acme.example"
        assert not world.web.violations, world.web.violations
        # (Counted once the relay has recorded the answers.)
        counts = lambda: [metric(relay, f'pushrelay_push_attempts_total{{outcome="delivered",app="{app}"}}')
                          for app in ("default", "beta", "acme")]
        assert wait_for(lambda: counts() == [3, 1, 3], 30), counts()
        return (f"7 devices, 3 apps: APNs teams {sent[1].team}/{sent[3].team} on {world.apns.connections} "
                f"connections, {world.apns.distinct_jwts} provider tokens; FCM projects "
                f"{sorted({m.project_id for m in world.fcm.messages})}; 2 VAPID keys")
    finally:
        relay.stop()
        world.close()


@check("a Matrix pusher's app_id selects the app (matrixAppIds) of a device registered with none")
def matrix_app_id_selects_the_app(binary):
    world = World()
    relay = Relay(binary, *world.config(world.apps))
    try:
        device = put(relay, "mia", "phone", {
            "apns": {"token": token(7)}, "matrix": {"appId": "com.acme.messenger.ios", "pushkey": "pk7"}})
        assert device["app"] == "acme", device
        status, answer = relay.http("POST", f"/_matrix/push/v1/notify?secret={SECRET}", {"notification": {
            "event_id": "$ev1", "room_id": "!r:example.org", "type": "m.room.message", "sender": "@bob:example.org",
            "counts": {"unread": 1},
            "devices": [{"app_id": "com.acme.messenger.ios", "pushkey": "pk7"}]}})
        assert status == 200 and answer == {"rejected": []}, answer
        assert wait_for(lambda: delivered(world.apns.for_token(token(7))), 30), world.apns.requests
        push = delivered(world.apns.for_token(token(7)))[0]
        assert (push.team, push.headers["apns-topic"]) == (TEAM_B, ACME_TOPIC), push.headers
        assert not world.apns.violations, world.apns.violations
        return f"app_id com.acme.messenger.ios → app acme → team {push.team}, topic {push.headers['apns-topic']}"
    finally:
        relay.stop()
        world.close()


@check("an app taken out of the configuration holds its devices' pushes (nothing disabled) until it is back")
def a_removed_app_holds_its_pushes(binary):
    world = World()
    relay = Relay(binary, *world.config(world.apps))
    try:
        put(relay, "ray", "android", {"fcm": {"token": "tok-ray:APA91"}, "app": "acme"})
        relay.stop()
        relay.extra = world.config({"beta": world.apps["beta"]})
        relay.start()
        post(relay, "r1", "ray")
        with open(relay.log) as log:
            assert wait_for(lambda: "app 'acme' has no fcm credentials" in log.read(), 30), "no error line"
        status, devices = relay.http("GET", "/v1/users/ray/devices")
        assert devices["devices"][0]["state"] == "active", devices
        status, message = relay.http("GET", "/v1/messages/r1")
        assert message["recipients"][0]["state"] == "stored", message
        assert not world.fcm.messages
        relay.stop()
        relay.extra = world.config(world.apps)
        relay.start()
        # The held push is retried with the backoff (at most a second here) once acme is back.
        assert wait_for(lambda: delivered(world.fcm.for_token("tok-ray:APA91")), 30), world.fcm.messages
        assert world.fcm.for_token("tok-ray:APA91")[0].project_id == "acme-chat"
        return "held while acme was missing (device active, message stored), delivered after it came back"
    finally:
        relay.stop()
        world.close()


@check("one app's refused credential never holds another app's pushes")
def a_refused_app_holds_only_its_own(binary):
    world = World()
    apps = dict(world.apps)
    # acme's key file holds a key Apple (the double) does not know: every acme push is refused.
    wrong_key, _ = make_apns_key()
    apps["acme"] = {**apps["acme"], "apnsKeyFile": wrong_key}
    relay = Relay(binary, *world.config(apps))
    try:
        for n in range(6):
            put(relay, f"acme{n}", "iphone", {"apns": {"token": token(20 + n)}, "app": "acme"})
        put(relay, "dee", "iphone", {"apns": {"token": token(30)}})
        for n in range(6):
            post(relay, f"a{n}", f"acme{n}")
        # Refused (403 InvalidProviderToken) until acme's route is paused by its breaker.
        host = f"127.0.0.1:{world.apns.port}"
        acme = f'pushrelay_push_breaker_open{{transport="apns",credential="{KEY_B}/{ACME_TOPIC}",host="{host}"}}'
        assert wait_for(lambda: metric(relay, acme) == 1, 30), "acme's breaker never opened"
        post(relay, "d1", "dee")
        assert wait_for(lambda: delivered(world.apns.for_token(token(30))), 30), world.apns.requests
        # Sent at its first chance: never postponed by acme's open breaker.
        postponed = metric(relay, 'pushrelay_push_attempts_total{outcome="postponed",app="default"}')
        assert postponed == 0, f"default's push was postponed {postponed} times"
        assert metric(relay, f'pushrelay_push_breaker_open{{transport="apns",credential="{KEY_A}/{TOPIC}",host="{host}"}}') == 0
        refused = [r for n in range(6) for r in world.apns.for_token(token(20 + n))]
        assert refused and all(r.reason == "InvalidProviderToken" for r in refused), [r.reason for r in refused]
        status, devices = relay.http("GET", "/v1/users/acme0/devices")
        assert devices["devices"][0]["state"] == "active", devices  # our credential, not the device
        return (f"{len(refused)} acme pushes refused (InvalidProviderToken), acme devices kept; "
                f"default's push delivered meanwhile")
    finally:
        relay.stop()
        world.close()


def trace(relay, message_id, user):
    status, body = relay.http("GET", f"/v1/messages/{message_id}/deliveries")
    assert status == 200, body
    recipient = next(r for r in body["recipients"] if r["userId"] == user)
    return {d["deviceId"]: d for d in recipient["devices"]}


@check("why didn't it arrive: the trace names, per device, the decision, each attempt's status and the service's id")
def the_delivery_trace(binary):
    world = World()
    relay = Relay(binary, *world.config(world.apps))
    try:
        put(relay, "tia", "iphone", {"apns": {"token": token(11)}, "app": "beta"})
        put(relay, "tia", "android", {"fcm": {"token": "tok-tia:APA91"}})
        world.apns.script(token(11), ["Unregistered"])
        post(relay, "t1", "tia")
        assert wait_for(lambda: trace(relay, "t1", "tia")["iphone"]["decision"] == "cancelled"
                        and trace(relay, "t1", "tia")["android"]["decision"] == "pushed", 30), trace(relay, "t1", "tia")
        put(relay, "tia", "tablet", {"fcm": {"token": "tok-tia-tablet:APA91"}})  # after the message
        devices = trace(relay, "t1", "tia")
        iphone, android = devices["iphone"], devices["android"]
        # The phone's token was gone: one attempt, 410, the service's id and reason; device disabled.
        assert (iphone["transport"], iphone["app"], iphone["to"]) == ("apns", "beta", token(11)[:8] + "…"), iphone
        assert iphone["deviceState"] == "disabled" and iphone["reason"] == "APNs: Unregistered", iphone
        [attempt] = iphone["attempts"]
        sent = world.apns.for_token(token(11))[0]
        assert (attempt["status"], attempt["result"], attempt["providerId"]) == (410, "device_gone", sent.apns_id), \
            attempt
        assert attempt["seq"] == {"from": 1, "to": 1} and attempt["latencyMs"] >= 0, attempt
        # Android: pushed, with FCM's message name.
        [attempt] = android["attempts"]
        fcm = world.fcm.for_token("tok-tia:APA91")[0]
        assert (attempt["status"], attempt["result"], attempt["providerId"]) == (200, "delivered", fcm.name), attempt
        assert devices["tablet"]["decision"] == "none" and devices["tablet"]["attempts"] == [], devices["tablet"]
        assert relay.http("GET", "/v1/messages/nope/deliveries")[0] == 404
        return (f"iphone: cancelled ({iphone['reason']}, 410, apns-id {sent.apns_id[:8]}…); android: pushed "
                f"({fcm.name}); tablet registered later: none")
    finally:
        relay.stop()
        world.close()


@check("a call rings the PushKit token at once and nothing else does; without one it is an urgent alert")
def a_call_rings_at_once(binary):
    world = World()
    world.settings["pushDelayMs"] = 10_000  # a message waits for its window; a call does not
    relay = Relay(binary, *world.config(world.apps))
    try:
        put(relay, "cal", "iphone", {"apns": {"token": token(8), "voipToken": token(9)}})
        put(relay, "cal", "old-iphone", {"apns": {"token": token(10)}})
        put(relay, "cal", "android", {"fcm": {"token": "tok-cal:APA91"}})
        started = time.monotonic()
        status, body = relay.http("POST", "/v1/messages", {
            "id": "call-1", "recipients": ["cal"], "payload": {"call": "c1"},
            "push": {"type": "call", "title": "Ann", "body": "is calling", "data": {"callId": "c1"}}})
        assert status == 202, body
        assert wait_for(lambda: delivered(world.apns.for_token(token(9)))
                        and delivered(world.apns.for_token(token(10)))
                        and delivered(world.fcm.for_token("tok-cal:APA91")), 30), world.apns.requests
        rang = time.monotonic() - started
        assert rang < 8, f"the call waited {rang:.1f} s: it must not wait for the 10 s window"
        voip = delivered(world.apns.for_token(token(9)))[0]
        assert voip.headers["apns-push-type"] == "voip" and voip.headers["apns-topic"] == TOPIC + ".voip", voip.headers
        assert voip.headers["apns-priority"] == "10" and voip.body["push"]["data"] == {"callId": "c1"}, voip.body
        alert = delivered(world.apns.for_token(token(10)))[0]
        assert alert.headers["apns-push-type"] == "alert" and alert.headers["apns-priority"] == "10", alert.headers
        android = delivered(world.fcm.for_token("tok-cal:APA91"))[0].message
        assert "notification" not in android and android["android"]["priority"] == "HIGH", android
        assert android["data"]["type"] == "call" and android["data"]["title"] == "Ann", android
        # A plain message to the same phone waits in its window (the trace says so, with the
        # window's messages), then goes to its alert token; never the PushKit one.
        post(relay, "after-call", "cal")
        waiting = trace(relay, "after-call", "cal")["iphone"]
        assert waiting["decision"] == "waiting" and waiting["window"] == ["after-call"], waiting
        # (The relay records an attempt once the answer is back: the double counted it on sending.)
        assert wait_for(lambda: trace(relay, "call-1", "cal")["iphone"]["attempts"], 30)
        assert trace(relay, "call-1", "cal")["iphone"]["attempts"][0]["kind"] == "call"
        assert wait_for(lambda: delivered(world.apns.for_token(token(8))), 30), world.apns.requests
        assert len(world.apns.for_token(token(9))) == 1, "the PushKit token got more than the call"
        assert delivered(world.apns.for_token(token(8)))[0].headers["apns-push-type"] == "alert"
        assert not world.apns.violations and not world.fcm.violations, (world.apns.violations, world.fcm.violations)
        return (f"rang {rang:.2f} s after the post (window 10 s): voip to {voip.headers['apns-topic']}, an urgent "
                f"alert to the phone without PushKit, a HIGH data message on Android; the next message to the alert token")
    finally:
        relay.stop()
        world.close()


if __name__ == "__main__":
    sys.exit(run_checks(checks, lambda fn: fn(sys.argv[1])))
