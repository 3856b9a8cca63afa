"""APNs and FCM end to end: the real relay against doubles that check it independently (the
APNs double speaks HTTP/2 with python h2 and verifies the ES256 provider token; the FCM double
verifies the RS256 assertion and the bearer), over TLS with a test CA (`pushCaFile`)."""
import os
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from pushdoubles import APNsDouble, FCMDouble, ca_file, make_apns_key  # noqa: E402
from relaypeer import Receiver, Relay, post, post_together, pushed, registry, run_checks, wait_for  # noqa: E402


def call_text(relay, path):
    with urllib.request.urlopen(relay.base + path, timeout=10) as response:
        return response.status, response.read().decode()

checks, check = registry()
TEAM, KEY_ID, TOPIC = "TEAM123456", "KEY1234567", "com.example.chat"


class APNs:
    """An APNs double and the relay flags that point at it."""

    def __init__(self, **double_args):
        path, public = make_apns_key()
        self.double = APNsDouble(public, TEAM, KEY_ID, TOPIC, **double_args)
        self.flags = ["--apns-key-file", path, "--apns-key-id", KEY_ID, "--apns-team-id", TEAM,
                      "--apns-topic", TOPIC, "--apns-url", self.double.base, "--apns-sandbox-url", self.double.base,
                      "--push-ca-file", ca_file()]


def token(n):
    return f"{n:02x}" * 32


def register_apns(relay, user, device, n, **apns):
    status, body = relay.http("PUT", f"/v1/users/{user}/devices/{device}", {"apns": {"token": token(n), **apns}})
    assert status == 201, body


def answered(double, device_token):
    """The requests for `device_token` the double has answered, in order."""
    return [r for r in double.for_token(device_token) if r.status is not None]


def devices(relay, user):
    status, body = relay.http("GET", f"/v1/users/{user}/devices")
    assert status == 200, body
    return {d["deviceId"]: d for d in body["devices"]}


@check("APNs: an offline iPhone gets one push per window with title, body, badge and sound; read elsewhere → a badge-only clear")
def apns_window_and_clear(binary):
    apns = APNs()
    relay = Relay(binary, "--push-delay-ms", "1500", *apns.flags)
    try:
        register_apns(relay, "ann", "iphone", 1)
        post_together(relay, ["a1", "a2", "a3"], "ann", priority="high")
        assert wait_for(lambda: apns.double.for_token(token(1)), 20), apns.double.requests
        time.sleep(1)
        pushes = answered(apns.double, token(1))
        assert len(pushes) == 1 and pushes[0].status == 200, [(p.status, p.reason) for p in pushes]
        aps = pushes[0].body["aps"]
        assert aps["alert"] == {"title": "Carol", "body": "text of a3"} and aps["badge"] == 3, aps
        assert aps.get("sound") == "default" and pushes[0].headers["apns-priority"] == "10", pushes[0].headers
        assert pushes[0].body["relay"]["seq"] == {"from": 1, "to": 3}, pushes[0].body
        # Read once the relay has recorded the push (an ack racing it finds nothing to withdraw).
        assert wait_for(lambda: pushed(relay, "a3"), 20)
        assert relay.http("POST", "/v1/users/ann/ack", {"seq": 3})[0] == 204
        # (The double records a request as its stream opens: wait for the answers.)
        assert wait_for(lambda: len(answered(apns.double, token(1))) == 2, 20), apns.double.requests
        clear = answered(apns.double, token(1))[1]
        assert clear.body["aps"].get("badge") == 0 and "alert" not in clear.body["aps"], clear.body
        assert clear.headers["apns-priority"] == "5", clear.headers
        assert not apns.double.violations, apns.double.violations
        return (f"one push for seq 1–3 (badge 3, {pushes[0].headers['apns-push-type']}, priority 10), then a clear "
                f"(badge 0, {clear.headers['apns-push-type']}, priority 5)")
    finally:
        relay.stop()
        apns.double.close()


@check("APNs: 410 Unregistered and 400 BadDeviceToken disable their devices (device.disabled); the others are pushed")
def apns_dead_tokens(binary):
    apns = APNs()
    events = Receiver()
    relay = Relay(binary, "--push-delay-ms", "200", "--events-url", f"{events.base}/events", *apns.flags)
    try:
        # (Named production: a token of no named environment is tried in the sandbox too. A
        # BadDeviceToken disables only once the route has delivered: "fine" makes it trusted.)
        for n, device in [(2, "gone"), (3, "bad"), (4, "fine")]:
            register_apns(relay, "bea", device, n, environment="production")
        # Apple's timestamp after the registration: a token registered again later would stay.
        apns.double.script(token(2), [("410", "Unregistered", int(time.time() * 1000) + 1)])
        apns.double.script(token(3), [(400, "BadDeviceToken")] * 10)
        post(relay, "b1", "bea")

        def settled():
            state = devices(relay, "bea")
            return state["gone"]["state"] == "disabled" and state["bad"]["state"] == "disabled"

        assert wait_for(settled, 20), devices(relay, "bea")
        state = devices(relay, "bea")
        assert state["fine"]["state"] == "active", state
        assert wait_for(lambda: len([e for e in events.bodies() if e.get("type") == "device.disabled"]) == 2, 20), \
            events.bodies()
        return f"gone: {state['gone']['disabledReason']}; bad: {state['bad']['disabledReason']}"
    finally:
        relay.stop()
        apns.double.close()
        events.shutdown()


@check("APNs: one provider token for the run; a key APNs does not know is refused (403) and disables no device")
def apns_provider_tokens(binary):
    apns = APNs()
    relay = Relay(binary, "--push-delay-ms", "100", *apns.flags)
    try:
        # 1,000 devices of one user: one message makes 1,000 pushes, all with one provider token.
        for n in range(1000):
            status, body = relay.http("PUT", f"/v1/users/cy/devices/d{n}", {"apns": {"token": f"{n:064x}"}})
            assert status == 201, body
        post(relay, "c1", "cy")
        assert wait_for(lambda: len([r for r in apns.double.requests if r.status == 200]) == 1000, 60), \
            len(apns.double.requests)
        distinct = apns.double.distinct_jwts
        assert distinct == 1, apns.double.jwts
    finally:
        relay.stop()
        apns.double.close()
    # A relay whose key is not the one the double knows: every push is refused with 403
    # InvalidProviderToken, which is the operator's to fix — no device is disabled.
    other = APNs()
    wrong_key, _ = make_apns_key()
    flags = list(other.flags)
    flags[flags.index("--apns-key-file") + 1] = wrong_key
    relay = Relay(binary, "--push-delay-ms", "100", "--push-retry-base-ms", "50", *flags)
    try:
        for n in range(6, 9):
            register_apns(relay, "dee", f"d{n}", n)
        post(relay, "d1", "dee")
        assert wait_for(lambda: len(other.double.requests) >= 6, 20), other.double.requests
        time.sleep(1)
        state = devices(relay, "dee")
        assert all(d["state"] == "active" for d in state.values()), state
        host = f"127.0.0.1:{other.double.port}"
        status, metrics = call_text(relay, "/metrics")
        labels = f'transport="apns",credential="{KEY_ID}/{TOPIC}",host="{host}"'
        assert f'pushrelay_push_breaker_open{{{labels}}} 1' in metrics, metrics
        return f"1,000 pushes with 1 provider token; wrong key: {len(other.double.requests)} refused attempts, 0 devices disabled"
    finally:
        relay.stop()
        other.double.close()


@check("APNs: a GOAWAY with streams in flight and REFUSED_STREAM are requeued; every message is pushed")
def apns_goaway(binary):
    apns = APNs()
    relay = Relay(binary, "--push-delay-ms", "100", *apns.flags)
    try:
        apns.double.script(token(9), ["goaway"])
        apns.double.script(token(10), ["reset-refused"])
        register_apns(relay, "eve", "a", 9)
        register_apns(relay, "eve", "b", 10)
        for n in range(11, 31):
            register_apns(relay, "eve", f"x{n}", n)
        post(relay, "e1", "eve")
        every = [token(n) for n in [9, 10] + list(range(11, 31))]
        assert wait_for(lambda: all(any(r.status == 200 for r in apns.double.for_token(t)) for t in every), 30), \
            [(r.token[:4], r.status, r.answer) for r in apns.double.requests]
        assert not [v for v in apns.double.violations], apns.double.violations
        return (f"{len(every)} devices pushed over {apns.double.connections} connections; "
                f"answers: {sorted(set(r.answer for r in apns.double.requests))}")
    finally:
        relay.stop()
        apns.double.close()


@check("APNs: a connection that stops answering is dropped after the push timeout and the push goes out on a new one")
def apns_silent_connection(binary):
    apns = APNs()
    relay = Relay(binary, "--push-delay-ms", "100", "--push-timeout-ms", "2000", "--push-retry-base-ms", "100",
                  *apns.flags)
    try:
        apns.double.script(token(61), ["hang"])
        register_apns(relay, "gil", "iphone", 61)
        post(relay, "g1", "gil")
        assert wait_for(lambda: any(r.status == 200 for r in apns.double.for_token(token(61))), 30), \
            [(r.connection, r.status, r.answer) for r in apns.double.requests]
        answered = [r for r in apns.double.for_token(token(61)) if r.status == 200][0]
        assert answered.connection > 1, [(r.connection, r.answer) for r in apns.double.requests]
        return f"pushed on connection {answered.connection} after a silent one"
    finally:
        relay.stop()
        apns.double.close()


@check("APNs: a client token registers its own device's token; kill -9 with pushes in flight → every device pushed after the restart")
def apns_kill9(binary):
    apns = APNs()
    apns.double.default = ("delay", 0.5, 200)
    relay = Relay(binary, "--push-delay-ms", "100", *apns.flags)
    try:
        for n in range(40, 60):
            client = relay.token("fay", device=f"p{n}")
            status, body = relay.http("PUT", f"/v1/users/fay/devices/p{n}", {"apns": {"token": token(n)}}, token=client)
            assert status == 201, body
        post(relay, "f1", "fay")
        assert wait_for(lambda: len(apns.double.requests) >= 5, 20), apns.double.requests
        relay.kill9()
        apns.double.default = 200
        relay.start()
        wanted = [token(n) for n in range(40, 60)]
        assert wait_for(lambda: all(any(r.status == 200 for r in apns.double.for_token(t)) for t in wanted), 30), \
            [(r.token[:4], r.status) for r in apns.double.requests]
        return f"20 of 20 devices pushed; {len(apns.double.requests)} requests in all"
    finally:
        relay.stop()
        apns.double.close()


class FCM:
    def __init__(self):
        self.double = FCMDouble()
        self.account = self.double.make_account()
        self.flags = ["--fcm-service-account-file", self.account.path, "--fcm-url", self.double.base,
                      "--push-ca-file", ca_file()]


@check("FCM: an offline Android device gets one notification per window with the count; UNREGISTERED disables; 401 renews the token once")
def fcm_end_to_end(binary):
    fcm = FCM()
    relay = Relay(binary, "--push-delay-ms", "1500", "--push-retry-base-ms", "100", *fcm.flags)
    try:
        for device, registration in [("pixel", "tok-pixel:APA91"), ("old", "tok-old:APA91")]:
            status, body = relay.http("PUT", f"/v1/users/gus/devices/{device}", {"fcm": {"token": registration}})
            assert status == 201, body
        fcm.double.script("tok-old:APA91", ["UNREGISTERED"])
        post_together(relay, ["g1", "g2", "g3"], "gus")
        assert wait_for(lambda: any(m.status == 200 for m in fcm.double.for_token("tok-pixel:APA91")), 20), \
            fcm.double.messages
        sent = [m for m in fcm.double.for_token("tok-pixel:APA91") if m.status == 200]
        message = sent[0].message
        assert message["notification"] == {"title": "Carol", "body": "text of g3"}, message
        assert message["data"]["unread"] == "3" and message["android"]["notification"]["notification_count"] == 3, message
        assert wait_for(lambda: devices(relay, "gus")["old"]["state"] == "disabled", 20), devices(relay, "gus")
        fetched = fcm.double.token_fetches
        # Every access token refused from now on: the next push renews it once and goes through.
        # (A token refused within 10 s of being fetched is the service account's fault, not
        # renewed: wait that out.)
        time.sleep(10.5)
        fcm.double.expire_tokens()
        post(relay, "g4", "gus")
        assert wait_for(lambda: len([m for m in fcm.double.for_token("tok-pixel:APA91") if m.status == 200]) == 2, 20), \
            [(m.status, m.answer) for m in fcm.double.messages]
        assert fcm.double.token_fetches == fetched + 1, fcm.double.token_fetches
        assert not fcm.double.violations, fcm.double.violations
        return (f"notification with count 3; old token disabled ({devices(relay, 'gus')['old']['disabledReason']}); "
                f"{fcm.double.token_fetches} access tokens in all")
    finally:
        relay.stop()
        fcm.double.close()


@check("FCM: 429 with Retry-After and 503 are retried; a clear is data-only")
def fcm_retries_and_clear(binary):
    fcm = FCM()
    relay = Relay(binary, "--push-delay-ms", "100", "--push-retry-base-ms", "100", *fcm.flags)
    try:
        status, body = relay.http("PUT", "/v1/users/hal/devices/pixel", {"fcm": {"token": "tok-hal:APA91"}})
        assert status == 201, body
        fcm.double.script("tok-hal:APA91", [("QUOTA_EXCEEDED", 1), "UNAVAILABLE"])
        post(relay, "h1", "hal")
        assert wait_for(lambda: any(m.status == 200 for m in fcm.double.for_token("tok-hal:APA91")), 30), \
            [(m.status, m.answer) for m in fcm.double.messages]
        statuses = [m.status for m in fcm.double.for_token("tok-hal:APA91")]
        assert wait_for(lambda: pushed(relay, "h1"), 20)
        assert relay.http("POST", "/v1/users/hal/ack", {"seq": 1})[0] == 204
        assert wait_for(lambda: any(m.message.get("data", {}).get("type") == "clear"
                                    for m in fcm.double.for_token("tok-hal:APA91") if m.message), 20)
        clear = [m.message for m in fcm.double.for_token("tok-hal:APA91") if m.message and m.message["data"]["type"] == "clear"][0]
        assert "notification" not in clear, clear
        return f"statuses {statuses}; clear: data only, unread {clear['data']['unread']}"
    finally:
        relay.stop()
        fcm.double.close()


if __name__ == "__main__":
    sys.exit(run_checks(checks, lambda fn: fn(sys.argv[1])))
