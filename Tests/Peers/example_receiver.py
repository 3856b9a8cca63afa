#!/usr/bin/env python3
"""Runs examples/push_receiver.py the way an operator would: against a real relay whose webhook
secret was generated on first start and read back with `pushrelay check-config --show-secrets`.
A real push must verify and reach the APNs/FCM hand-off; a forged one must be refused.
Usage: example_receiver.py PATH_TO_PUSHRELAY"""
import json
import os
import subprocess
import sys
import threading
import urllib.error
import urllib.request

from relaypeer import Relay, run_checks, wait_for

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "push_receiver.py")


def start_receiver(secret):
    proc = subprocess.Popen([sys.executable, EXAMPLE, "--port", "0"], env={**os.environ, "PUSHRELAY_WEBHOOK_SECRET": secret},
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    base = json.loads(proc.stdout.readline())["listening"]
    lines = []
    threading.Thread(target=lambda: [lines.append(json.loads(line)) for line in proc.stdout], daemon=True).start()
    return proc, base, lines


def check_example(binary):
    relay = Relay(binary, "--push-delay-ms", "0")
    receiver = None
    try:
        shown = subprocess.run([binary, "check-config", "--show-secrets", "--db", relay.db],
                               capture_output=True, text=True, check=True).stdout
        secret = next(line.split("=", 1)[1] for line in shown.splitlines() if line.startswith("webhookSecret="))
        assert secret.startswith("whsec_"), shown
        receiver, base, lines = start_receiver(secret)
        status, body = relay.http("PUT", "/v1/users/ann/devices/phone", {"pushUrl": f"{base}/apns-token-123"})
        assert status in (200, 201), body
        status, body = relay.http("POST", "/v1/messages", {"id": "hello", "recipients": ["ann"], "payload": {"t": 1},
                                                          "push": {"title": "Ann", "body": "hi"}})
        assert status == 202 and body["recipients"][0]["delivery"] == "push", body
        assert wait_for(lambda: lines), "the example receiver printed nothing"
        push = lines[0]
        assert push["verified"] and push["device"] == "apns-token-123", push
        assert push["push"]["messageId"] == "hello" and push["push"]["push"] == {"title": "Ann", "body": "hi"}, push
        assert wait_for(lambda: relay.http("GET", "/v1/messages/hello")[1]["recipients"][0]["state"] == "pushed")
        # The same signed request twice (a retry): acknowledged both times, handed on once.
        import base64, hashlib, hmac, time
        body = json.dumps({"type": "message", "userId": "ann", "deviceId": "phone"}).encode()
        stamp = str(int(time.time()))
        key = base64.b64decode(secret[len("whsec_"):])
        signature = base64.b64encode(hmac.new(key, f"msg_twice.{stamp}.".encode() + body, hashlib.sha256).digest())
        for _ in range(2):
            again = urllib.request.Request(f"{base}/apns-token-123", data=body, method="POST", headers={
                "webhook-id": "msg_twice", "webhook-timestamp": stamp, "webhook-signature": "v1," + signature.decode()})
            assert urllib.request.urlopen(again, timeout=5).status == 204
        assert wait_for(lambda: len(lines) >= 2) and not wait_for(lambda: len(lines) >= 3, 1), lines
        # A request without a valid signature is refused (4xx: the sender gives up).
        forged = urllib.request.Request(f"{base}/apns-token-123", data=b'{"type":"message"}', method="POST",
                                        headers={"webhook-id": "msg_x", "webhook-timestamp": "1",
                                                 "webhook-signature": "v1,AAAA"})
        try:
            urllib.request.urlopen(forged, timeout=5)
            raise AssertionError("a forged push was accepted")
        except urllib.error.HTTPError as error:
            assert error.code == 401, error.code
        return "a real push verified and reached send_to_apns_or_fcm; a forged one got 401"
    finally:
        relay.stop()
        if receiver:
            receiver.kill()


if __name__ == "__main__":
    sys.exit(run_checks([("examples/push_receiver.py verifies the relay's real pushes", check_example)],
                        lambda fn: fn(sys.argv[1])))
