"""Web Push end to end: the real relay pushes to a Web Push service double that verifies the
VAPID token and decrypts every message with http_ece (an independent implementation)."""
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from pushdoubles import WebPushEndpoint, ca_file  # noqa: E402
from relaypeer import Receiver, Relay, post, post_together, pushed, registry, run_checks, wait_for  # noqa: E402

checks, check = registry()


def vapid_key():
    path = os.path.join(tempfile.mkdtemp(prefix="vapid-"), "vapid.pem")
    subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path],
                   check=True, capture_output=True)
    return path


def relay_with_web_push(binary, *extra):
    return Relay(binary, "--push-delay-ms", "1500", "--vapid-key-file", vapid_key(),
                 "--vapid-subject", "mailto:ops@example.com", "--push-ca-file", ca_file(),
                 "--web-push-allowed-hosts", "127.0.0.1:*", *extra)


def subscribe(relay, service, user, device="browser"):
    status, key = relay.http("GET", "/v1/webpush/key")
    assert status == 200, key
    subscription = service.make_subscription(application_server_key=key["publicKey"])
    status, body = relay.http("PUT", f"/v1/users/{user}/devices/{device}", {"webPush": subscription})
    assert status == 201, body
    assert body["transport"] == "webPush", body
    return subscription


@check("an offline browser gets one encrypted push per window with the unread count; VAPID verified")
def one_push_per_window(binary):
    service = WebPushEndpoint()
    relay = relay_with_web_push(binary)
    try:
        subscription = subscribe(relay, service, "wanda")
        post_together(relay, ["w1", "w2", "w3"], "wanda", priority="high")
        assert wait_for(lambda: service.payloads(subscription), 20), service.requests
        time.sleep(1)
        payloads = service.payloads(subscription)
        assert len(payloads) == 1, payloads
        push = payloads[0]
        assert push["type"] == "message" and push["seq"] == {"from": 1, "to": 3} and push["unread"] == 3, push
        assert push["push"] == {"title": "Carol", "body": "text of w3"}, push
        request = service.for_subscription(subscription)[0]
        assert request.urgency == "high" and 0 < request.ttl <= 604800, (request.urgency, request.ttl)
        assert request.vapid_claims["sub"] == "mailto:ops@example.com", request.vapid_claims
        assert not service.violations, service.violations
        return f"seq 1–3 in one push, unread 3, TTL {request.ttl} s, aud {request.vapid_claims['aud']}"
    finally:
        relay.stop()
        service.close()


@check("read on another device: the browser gets a clear with the badge down")
def clear_after_read(binary):
    service = WebPushEndpoint()
    relay = relay_with_web_push(binary)
    try:
        subscription = subscribe(relay, service, "xena")
        post(relay, "x1", "xena")
        # Read once the relay has recorded the push (an ack racing the push in flight finds
        # nothing pushed to withdraw).
        assert wait_for(lambda: pushed(relay, "x1"), 20), service.requests
        status, _ = relay.http("POST", "/v1/users/xena/ack", {"seq": 1})
        assert status == 204
        assert wait_for(lambda: any(p["type"] == "clear" for p in service.payloads(subscription)), 20), \
            service.payloads(subscription)
        clear = [p for p in service.payloads(subscription) if p["type"] == "clear"][0]
        assert clear["unread"] == 0, clear
        assert not service.violations, service.violations
        return f"clear with unread {clear['unread']}"
    finally:
        relay.stop()
        service.close()


@check("a subscription the push service says is gone (410) disables the device and emits device.disabled")
def gone_subscription(binary):
    service = WebPushEndpoint()
    events = Receiver()
    relay = relay_with_web_push(binary, "--events-url", f"{events.base}/events")
    try:
        subscription = subscribe(relay, service, "yuri")
        service.script(subscription, [410])
        post(relay, "y1", "yuri")

        def disabled():
            status, body = relay.http("GET", "/v1/users/yuri/devices")
            return status == 200 and body["devices"][0]["state"] == "disabled"

        assert wait_for(disabled, 20), relay.http("GET", "/v1/users/yuri/devices")
        assert wait_for(lambda: any(e.get("type") == "device.disabled" for e in events.bodies()), 20), events.bodies()
        _, body = relay.http("GET", "/v1/users/yuri/devices")
        return f"state disabled: {body['devices'][0]['disabledReason']}"
    finally:
        relay.stop()
        service.close()
        events.shutdown()


@check("429 with Retry-After, then 500: retried until the push service takes it")
def retried(binary):
    service = WebPushEndpoint()
    relay = relay_with_web_push(binary, "--push-retry-base-ms", "100")
    try:
        subscription = subscribe(relay, service, "zoe")
        service.script(subscription, [(429, 1), 500])
        post(relay, "z1", "zoe")
        assert wait_for(lambda: service.payloads(subscription), 30), service.requests
        statuses = [r.status for r in service.for_subscription(subscription)]
        assert statuses == [429, 500, 201], statuses
        return f"statuses {statuses}"
    finally:
        relay.stop()
        service.close()


@check("without VAPID credentials the key is 404 and a webPush device is 400 transport_unavailable")
def unavailable(binary):
    relay = Relay(binary)
    try:
        status, body = relay.http("GET", "/v1/webpush/key")
        assert status == 404, body
        subscription = {"endpoint": "https://127.0.0.1:9/push/x",
                        "keys": {"p256dh": "B" + "A" * 86, "auth": "A" * 22}}
        status, body = relay.http("PUT", "/v1/users/u/devices/d", {"webPush": subscription})
        assert status == 400 and body["error"]["code"] == "transport_unavailable", body
        return "404 key, 400 transport_unavailable"
    finally:
        relay.stop()


if __name__ == "__main__":
    sys.exit(run_checks(checks, lambda fn: fn(sys.argv[1])))
