"""Hardening round 4: what a probe of the push services from outside found, each against the real
binary and the independent doubles. Each check failed on the binary before its fix."""
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from pushdoubles import APNsDouble, FCMDouble, WebPushEndpoint, ca_file, make_apns_key  # noqa: E402
from relaypeer import Receiver, Relay, post, registry, run_checks, wait_for  # noqa: E402
from webpush_peer import vapid_key  # noqa: E402

checks, check = registry()
TEAM, KEY_ID, TOPIC = "TEAM123456", "KEY1234567", "com.example.chat"
LOOPBACK = "127.0.0.1:*"


def token(n):
    return f"{n:064x}"


class APNs:
    """An APNs double (and, when asked, a second one as the sandbox) and the relay flags."""

    def __init__(self, sandbox=False):
        path, public = make_apns_key()
        self.double = APNsDouble(public, TEAM, KEY_ID, TOPIC)
        self.sandbox = APNsDouble(public, TEAM, KEY_ID, TOPIC) if sandbox else self.double
        self.flags = ["--apns-key-file", path, "--apns-key-id", KEY_ID, "--apns-team-id", TEAM,
                      "--apns-topic", TOPIC, "--apns-url", self.double.base, "--apns-sandbox-url", self.sandbox.base,
                      "--push-ca-file", ca_file()]

    def close(self):
        self.double.close()
        if self.sandbox is not self.double:
            self.sandbox.close()


def devices(relay, user):
    status, body = relay.http("GET", f"/v1/users/{user}/devices")
    assert status == 200, body
    return {d["deviceId"]: d for d in body["devices"]}


def deliveries(relay, user):
    """The user's pending and dead push jobs."""
    found = []
    for state in ("pending", "dead"):
        status, body = relay.http("GET", f"/v1/deliveries?userId={user}&state={state}&limit=100")
        assert status == 200, body
        found += body["deliveries"]
    return found


def log_of(relay):
    with open(relay.log, errors="replace") as log:
        return log.read()


@check("REFUSED_STREAM and GOAWAY: a push is resent at once at most 3 times, then backs off")
def refused_streams_are_bounded(binary):
    details = []
    for answer in ("reset-refused", "goaway"):
        apns = APNs()
        apns.double.default = answer
        relay = Relay(binary, "--push-delay-ms", "100", "--push-retry-base-ms", "1000", *apns.flags)
        try:
            status, body = relay.http("PUT", "/v1/users/rita/devices/phone", {"apns": {"token": token(1)}})
            assert status == 201, body
            post(relay, "r1", "rita")
            assert wait_for(lambda: apns.double.for_token(token(1)), 20), apns.double.requests
            # Counted as attempts once past the immediate resends: wait for the first one.
            assert wait_for(lambda: any(d["attempts"] >= 1 for d in deliveries(relay, "rita")), 20), \
                deliveries(relay, "rita")
            time.sleep(3)
            sent = len(apns.double.for_token(token(1)))
            # 1 + 3 resends, then one attempt per backoff (≤ 1 s, 2 s, …): a handful, not thousands.
            assert sent <= 20, f"{answer}: {sent} requests for one push in ~3 s"
            details.append(f"{answer}: {sent} requests")
        finally:
            relay.stop()
            apns.close()
    return ", ".join(details)


@check("Web Push subscriptions answering 403 on FCM's host:port never hold FCM's pushes; no credentials error")
def web_push_never_pauses_fcm(binary):
    fcm = FCMDouble()
    account = fcm.make_account()
    browser = WebPushEndpoint()
    fcm.web_push = browser
    relay = Relay(binary, "--push-delay-ms", "100", "--push-retry-base-ms", "200",
                  "--fcm-service-account-file", account.path, "--fcm-url", fcm.base, "--push-ca-file", ca_file(),
                  "--vapid-key-file", vapid_key(), "--vapid-subject", "mailto:ops@example.com",
                  "--web-push-allowed-hosts", LOOPBACK)
    try:
        status, key = relay.http("GET", "/v1/webpush/key")
        assert status == 200, key
        for n in range(6):
            subscription = browser.make_subscription(application_server_key=key["publicKey"])
            subscription["endpoint"] = f"{fcm.base}/push/{WebPushEndpoint.id_of(subscription)}"
            browser.script(subscription, [403] * 1000)
            status, body = relay.http("PUT", f"/v1/users/w{n}/devices/browser", {"webPush": subscription})
            assert status == 201, body
            post(relay, f"wm{n}", f"w{n}")
        # Let the subscriptions fail first, several times, as they did when they paused the host.
        assert wait_for(lambda: len(browser.requests) >= 18, 20), len(browser.requests)
        for n in range(5):
            status, body = relay.http("PUT", f"/v1/users/a{n}/devices/pixel", {"fcm": {"token": f"tok{n}:APA91"}})
            assert status == 201, body
            post(relay, f"am{n}", f"a{n}")
        assert wait_for(lambda: all(any(m.status == 200 for m in fcm.for_token(f"tok{n}:APA91")) for n in range(5)),
                        30), [(m.token, m.status) for m in fcm.messages]
        log = log_of(relay)
        assert "refused the relay's credentials" not in log, log[-2000:]
        # Never delivered on that route: the subscriptions are kept (and retried), not disabled.
        state = devices(relay, "w0")
        assert state["browser"]["state"] == "active", state
        assert "error" not in log.split("level=", 1)[-1][:5], log[-2000:]
        return f"5 of 5 FCM pushes delivered beside {len(browser.requests)} refused Web Push requests"
    finally:
        relay.stop()
        fcm.close()
        browser.close()


@check("a 410 for a token the app has since replaced disables nothing; the push goes to the new token")
def a_late_410_acts_only_on_its_token(binary):
    apns = APNs()
    events = Receiver()
    relay = Relay(binary, "--push-delay-ms", "100", "--events-url", f"{events.base}/events", *apns.flags)
    try:
        gone_at = int(time.time() * 1000)
        apns.double.script(token(1), [("delay", 2.0, (410, "Unregistered", gone_at))])
        status, body = relay.http("PUT", "/v1/users/lia/devices/phone", {"apns": {"token": token(1)}})
        assert status == 201, body
        post(relay, "l1", "lia")
        assert wait_for(lambda: apns.double.for_token(token(1)), 20), apns.double.requests
        # While the answer is delayed, the app registers its new token with its client token.
        client = relay.token("lia", "phone")
        status, body = relay.http("PUT", "/v1/users/lia/devices/phone", {"apns": {"token": token(2)}}, token=client)
        assert status == 200 and body["state"] == "active", body
        assert wait_for(lambda: any(r.status == 200 for r in apns.double.for_token(token(2))), 20), \
            [(r.token, r.status) for r in apns.double.requests]
        state = devices(relay, "lia")["phone"]
        assert state["state"] == "active" and state["apns"]["token"] == token(2), state

        def kinds():
            return [e["type"] for e in events.bodies() if e.get("data", {}).get("deviceId") == "phone"]
        # (Events go out in order: a device.disabled would come before the push.delivered.)
        assert wait_for(lambda: "push.delivered" in kinds(), 20), events.bodies()
        assert "device.disabled" not in kinds(), kinds()
        # Apple's timestamp before the device's last registration: the token registered again stays.
        status, body = relay.http("PUT", "/v1/users/lia/devices/tablet", {"apns": {"token": token(3)}})
        assert status == 201, body
        apns.double.script(token(3), [(410, "Unregistered", gone_at - 60_000)])
        post(relay, "l2", "lia")
        assert wait_for(lambda: any(r.status == 410 for r in apns.double.for_token(token(3))), 20)
        assert wait_for(lambda: any(d["deviceId"] == "tablet" and d["state"] == "dead"
                                    for d in deliveries(relay, "lia")), 20), deliveries(relay, "lia")
        tablet = devices(relay, "lia")["tablet"]
        assert tablet["state"] == "active", tablet
        # The push itself is a dead letter like any other: push.failed, not device.disabled.
        failed = lambda: [e for e in events.bodies()  # noqa: E731
                          if e.get("type") == "push.failed" and e["data"]["deviceId"] == "tablet"]
        assert wait_for(failed, 20), events.bodies()
        assert not [e for e in events.bodies() if e.get("type") == "device.disabled"], events.bodies()
        return "new token pushed, device active, no device.disabled; a token registered after Apple's timestamp kept"
    finally:
        relay.stop()
        apns.close()
        events.shutdown()


@check("a wrong apnsTopic (DeviceTokenNotForTopic for every device) disables no device; one error line")
def a_wrong_topic_disables_nothing(binary):
    apns = APNs()
    apns.double.default = "DeviceTokenNotForTopic"
    relay = Relay(binary, "--push-delay-ms", "100", "--push-retry-base-ms", "100", *apns.flags)
    try:
        for n in range(30):
            status, body = relay.http("PUT", f"/v1/users/t{n}/devices/phone",
                                      {"apns": {"token": token(100 + n), "environment": "production"}})
            assert status == 201, body
            post(relay, f"tm{n}", f"t{n}")
        line = "refused the relay's credentials or configuration"
        assert wait_for(lambda: line in log_of(relay), 30), len(apns.double.requests)
        # The route's breaker pauses it; its probes keep failing meanwhile.
        time.sleep(3)
        answered = len(apns.double.requests)
        disabled = [n for n in range(30) if devices(relay, f"t{n}")["phone"]["state"] != "active"]
        assert not disabled, f"devices disabled by a configuration mistake: {disabled}"
        lines = log_of(relay).count(line)
        assert lines == 1, f"{lines} error lines"
        return f"0 of 30 disabled after {answered} answers, {lines} error line"
    finally:
        relay.stop()
        apns.close()


@check("BadDeviceToken for a device that named no environment: tried in the sandbox first; named: disabled")
def a_development_token_is_tried_in_the_sandbox(binary):
    apns = APNs(sandbox=True)
    relay = Relay(binary, "--push-delay-ms", "100", "--push-retry-base-ms", "100", *apns.flags)
    try:
        apns.double.script(token(5), ["BadDeviceToken"] * 100)
        status, body = relay.http("PUT", "/v1/users/dev/devices/phone", {"apns": {"token": token(5)}})
        assert status == 201 and "environment" not in body["apns"], body
        post(relay, "d1", "dev")
        assert wait_for(lambda: any(r.status == 200 for r in apns.sandbox.for_token(token(5))), 20), \
            [(r.status, r.reason) for r in apns.double.requests]
        # A device that works makes the route trusted; then a named production token refused is dead.
        status, body = relay.http("PUT", "/v1/users/dev/devices/fine", {"apns": {"token": token(6)}})
        assert status == 201, body
        apns.double.script(token(7), ["BadDeviceToken"] * 100)
        status, body = relay.http("PUT", "/v1/users/dev/devices/named",
                                  {"apns": {"token": token(7), "environment": "production"}})
        assert status == 201, body
        post(relay, "d2", "dev")
        assert wait_for(lambda: devices(relay, "dev")["named"]["state"] == "disabled", 30), devices(relay, "dev")
        state = devices(relay, "dev")
        assert state["phone"]["state"] == "active" and state["fine"]["state"] == "active", state
        assert not apns.sandbox.for_token(token(7)), "a named environment is never tried elsewhere"
        return f"sandbox delivered; named one disabled: {state['named']['disabledReason']}"
    finally:
        relay.stop()
        apns.close()


@check("an operator re-enables the devices disabled for a reason since a time")
def disabled_devices_come_back(binary):
    apns = APNs()
    relay = Relay(binary, "--push-delay-ms", "100", *apns.flags)
    try:
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 1))
        for n in range(3):
            apns.double.script(token(20 + n), ["Unregistered"])
            status, body = relay.http("PUT", f"/v1/users/op/devices/d{n}", {"apns": {"token": token(20 + n)}})
            assert status == 201, body
        post(relay, "o1", "op")
        assert wait_for(lambda: all(d["state"] == "disabled" for d in devices(relay, "op").values()), 20), \
            devices(relay, "op")
        status, body = relay.http("POST", "/v1/devices/reenable", {"reason": "APNs: BadDeviceToken", "since": since})
        assert status == 200 and body["reenabled"] == 0, body
        status, body = relay.http("POST", "/v1/devices/reenable", {"reason": "APNs: Unregistered", "since": since})
        assert status == 200 and body["reenabled"] == 3, body
        assert all(d["state"] == "active" for d in devices(relay, "op").values()), devices(relay, "op")
        status, body = relay.http("POST", "/v1/devices/reenable", {"reason": "APNs: Unregistered"})
        assert status == 400 and body["error"]["code"] == "missing_field", body
        client = relay.token("op", "d0")
        status, body = relay.http("POST", "/v1/devices/reenable", {"reason": "x", "since": since}, token=client)
        assert status == 403, body
        return "3 re-enabled by reason and time; another reason 0; a client token refused"
    finally:
        relay.stop()
        apns.close()


@check("the app's own PUT changes its token only: contentFree, platform and the Matrix pusher stay")
def a_client_put_merges(binary):
    apns = APNs()
    relay = Relay(binary, *apns.flags)
    try:
        status, body = relay.http("PUT", "/v1/users/mo/devices/phone", {
            "apns": {"token": token(30)}, "contentFree": True, "platform": "ios",
            "matrix": {"appId": "com.example.chat.ios", "pushkey": "pk-1"}})
        assert status == 201, body
        client = relay.token("mo", "phone")
        status, body = relay.http("PUT", "/v1/users/mo/devices/phone", {"apns": {"token": token(31)}}, token=client)
        assert status == 200, body
        assert body["apns"]["token"] == token(31) and body["contentFree"] is True and body["platform"] == "ios", body
        assert body["matrix"] == {"appId": "com.example.chat.ios", "pushkey": "pk-1"}, body
        # What it names, it changes.
        status, body = relay.http("PUT", "/v1/users/mo/devices/phone",
                                  {"apns": {"token": token(31)}, "platform": "ipados"}, token=client)
        assert status == 200 and body["platform"] == "ipados" and body["contentFree"] is True, body
        return "token changed; contentFree, platform and matrix kept"
    finally:
        relay.stop()
        apns.close()


@check("device bodies: unknown members are 400 naming them; a client token names only apnsTopic")
def device_bodies_are_strict(binary):
    apns = APNs()
    relay = Relay(binary, *apns.flags)
    try:
        for body, field in [
            ({"apns": {"token": token(40), "enviroment": "sandbox"}}, "apns.enviroment"),
            ({"apns": {"token": token(40)}, "contentfree": True}, "contentfree"),
            ({"pushUrl": "http://127.0.0.1:9/p", "plattform": "web"}, "plattform"),
        ]:
            status, answer = relay.http("PUT", "/v1/users/ty/devices/phone", body)
            assert status == 400 and answer["error"]["code"] == "invalid_field", (body, answer)
            assert field in answer["error"]["message"], (body, answer)
        # One app so far: "default" names it, any other is not there.
        status, answer = relay.http("PUT", "/v1/users/ty/devices/phone", {"apns": {"token": token(40)}, "app": "beta"})
        assert status == 400 and answer["error"]["code"] == "transport_unavailable", answer
        client = relay.token("ty", "phone")
        status, answer = relay.http("PUT", "/v1/users/ty/devices/phone",
                                    {"apns": {"token": token(40), "topic": "com.other.app"}}, token=client)
        assert status == 403, answer
        status, answer = relay.http("PUT", "/v1/users/ty/devices/phone",
                                    {"apns": {"token": token(40), "topic": TOPIC}}, token=client)
        assert status == 201, answer
        status, answer = relay.http("PUT", "/v1/users/ty/devices/other",
                                    {"apns": {"token": token(41), "topic": "com.other.app"}})
        assert status == 201, answer  # the server key may name any topic of its team
        return "typos refused with their names; another app's topic refused to a client token"
    finally:
        relay.stop()
        apns.close()


@check("Web Push: endpoints obey webPushAllowedHosts, not pushAllowedHosts; an off-curve p256dh is 400")
def web_push_endpoints_are_checked(binary):
    browser = WebPushEndpoint()
    relay = Relay(binary, "--vapid-key-file", vapid_key(), "--vapid-subject", "mailto:ops@example.com")
    try:
        status, key = relay.http("GET", "/v1/webpush/key")
        subscription = browser.make_subscription(application_server_key=key["publicKey"])
        # `make run`'s pushAllowedHosts (loopback, any port) does not open it to browsers' endpoints.
        status, body = relay.http("PUT", "/v1/users/wu/devices/browser", {"webPush": subscription})
        assert status == 400 and body["error"]["code"] == "push_url_not_allowed", body
        assert "WEB_PUSH_ALLOWED_HOSTS" in body["error"]["message"], body
    finally:
        relay.stop()
    relay = Relay(binary, "--vapid-key-file", vapid_key(), "--vapid-subject", "mailto:ops@example.com",
                  "--web-push-allowed-hosts", LOOPBACK)
    try:
        status, body = relay.http("PUT", "/v1/users/wu/devices/browser", {"webPush": subscription})
        assert status == 201, body
        bad = dict(subscription, keys=dict(subscription["keys"], p256dh="B" + "A" * 86))
        status, body = relay.http("PUT", "/v1/users/wu/devices/browser", {"webPush": bad})
        assert status == 400 and body["error"]["code"] == "invalid_transport", body
        assert "p256dh" in body["error"]["message"], body
        return "loopback endpoint refused by default, taken with the setting; all-zero p256dh refused"
    finally:
        relay.stop()
        browser.close()


@check("a push URL whose host does not resolve is retried, not dead-lettered after one attempt")
def an_unresolved_host_is_retried(binary):
    relay = Relay(binary, "--push-delay-ms", "100", "--push-retry-base-ms", "100",
                  "--push-allowed-hosts", "127.0.0.1:*,no-such-receiver.invalid:*")
    try:
        status, body = relay.http("PUT", "/v1/users/dn/devices/hook",
                                  {"pushUrl": "http://no-such-receiver.invalid:9/push"})
        assert status == 201, body
        post(relay, "n1", "dn")
        assert wait_for(lambda: any(d["attempts"] >= 2 for d in deliveries(relay, "dn")), 20), deliveries(relay, "dn")
        delivery = deliveries(relay, "dn")[0]
        assert delivery["state"] == "pending" and "does not resolve" in delivery["lastError"], delivery
        return f"pending after {delivery['attempts']} attempts: {delivery['lastError']}"
    finally:
        relay.stop()


@check("stopping during deliveries records nothing: no attempt counted, no 'store closed' line")
def stopping_records_nothing(binary):
    apns = APNs()
    apns.double.default = "hang"
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held = []

    def hold():
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            held.append(connection)  # never answered

    threading.Thread(target=hold, daemon=True).start()
    port = listener.getsockname()[1]
    relay = Relay(binary, "--push-delay-ms", "100", "--push-timeout-ms", "60000", "--shutdown-drain-ms", "100",
                  *apns.flags)
    try:
        status, body = relay.http("PUT", "/v1/users/st/devices/hook", {"pushUrl": f"http://127.0.0.1:{port}/p"})
        assert status == 201, body
        for n in range(20):
            status, body = relay.http("PUT", f"/v1/users/st/devices/phone{n}", {"apns": {"token": token(60 + n)}})
            assert status == 201, body
        post(relay, "s1", "st")
        assert wait_for(lambda: held and len(apns.double.requests) == 20, 20), "the relay never sent"
        time.sleep(0.5)
        relay.stop()
        log = log_of(relay)
        assert "cannot record push outcome" not in log, log[-2000:]
        relay.start()
        counted = [d for d in deliveries(relay, "st") if d["attempts"] != 0 or d["state"] != "pending"]
        assert not counted, counted
        return "after a stop with 21 deliveries in flight: all pending, 0 attempts, nothing logged"
    finally:
        relay.stop()
        apns.close()
        listener.close()
        for connection in held:
            connection.close()


@check("a keep-alive connection to a webhook receiver is closed after 30 s idle, not kept for good")
def idle_connections_are_closed(binary):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    closed = []  # seconds from the answer to the relay's close, per connection

    def serve(connection):
        answered = None
        with connection:
            while True:
                data = connection.recv(65536)
                if not data:
                    closed.append(time.monotonic() - answered if answered else -1)
                    return
                if b"\r\n\r\n" in data:
                    connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                    answered = time.monotonic()

    def accept():
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(connection,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    relay = Relay(binary, "--push-delay-ms", "100")
    try:
        port = listener.getsockname()[1]
        status, body = relay.http("PUT", "/v1/users/ka/devices/hook", {"pushUrl": f"http://127.0.0.1:{port}/p"})
        assert status == 201, body
        post(relay, "k1", "ka")
        assert wait_for(lambda: closed, 60), "the relay kept its idle connection for a minute"
        assert 25 <= closed[0] <= 45, f"closed {closed[0]:.1f} s after the answer"
        return f"closed {closed[0]:.1f} s after its last answer"
    finally:
        relay.stop()
        listener.close()


if __name__ == "__main__":
    sys.exit(run_checks(checks, lambda fn: fn(sys.argv[1])))
