#!/usr/bin/env python3
"""A push receiver for PushRelay: where the relay's webhook arrives for devices registered with
a `pushUrl`.

PushRelay speaks APNs, FCM and Web Push itself (devices registered with `apns`, `fcm` or
`webPush`). A device registered with a `pushUrl` instead gets a signed webhook: for a push service
the relay does not speak, or a bridge of your own. Something you run must verify that webhook and
act on it. This is that something, in the Python standard library only:

    PUSHRELAY_WEBHOOK_SECRET=whsec_... python3 examples/push_receiver.py --port 9000

then register devices with `"pushUrl": "http://127.0.0.1:9000/<your-token-or-id>"` (and allow
`127.0.0.1:9000` in PUSHRELAY_PUSH_ALLOWED_HOSTS). It checks the Standard Webhooks signature
(`webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64 HMAC-SHA256>`), refuses
stale timestamps and replayed ids, and prints one JSON line per verified push on stdout where
`send_to_apns_or_fcm` is called. Its answers follow the relay's rules: 2xx delivered; 404/410 the
device is gone (the relay disables it); 5xx/429 retry later; other 4xx give up.
"""
import argparse
import base64
import hashlib
import hmac
import http.server
import json
import os
import sys
import threading
import time

TOLERANCE_SECONDS = 300  # Standard Webhooks' suggested window against replays of old requests


class Verifier:
    def __init__(self, secret):
        if not secret.startswith("whsec_"):
            raise ValueError("the secret must be the relay's 'whsec_…' webhook secret")
        self.key = base64.b64decode(secret[len("whsec_"):])
        self.seen = {}  # webhook-id -> time, for replay protection within the window
        self.lock = threading.Lock()

    def verify(self, headers, body):
        """Returns (problem, repeat): problem is None when the request is authentic; repeat is
        True for an id already handled within the window (a retry: acknowledge, send nothing)."""
        msg_id = headers.get("webhook-id")
        timestamp = headers.get("webhook-timestamp")
        signatures = headers.get("webhook-signature")
        if not (msg_id and timestamp and signatures):
            return "missing webhook-id, webhook-timestamp or webhook-signature", False
        try:
            sent = int(timestamp)
        except ValueError:
            return "malformed webhook-timestamp", False
        now = time.time()
        if abs(now - sent) > TOLERANCE_SECONDS:
            return "timestamp outside the tolerance window", False
        signed = f"{msg_id}.{timestamp}.".encode() + body
        expected = base64.b64encode(hmac.new(self.key, signed, hashlib.sha256).digest()).decode()
        # The header may carry several space-separated signatures (key rotation); one must match.
        if not any(part.startswith("v1,") and hmac.compare_digest(part[3:], expected)
                   for part in signatures.split(" ")):
            return "signature does not verify", False
        with self.lock:
            for old in [key for key, at in self.seen.items() if now - at > TOLERANCE_SECONDS]:
                del self.seen[old]
            if msg_id in self.seen:
                return None, True  # a retry of a push already handled: acknowledge, send nothing
            self.seen[msg_id] = now
        return None, False


def send_to_apns_or_fcm(device_path, push):
    """The one place to fill in. `device_path` is what you put in the device's pushUrl (say, the
    APNs device token or FCM registration token); `push` is the relay's JSON:
    {type: "message"|"clear", userId, deviceId, messageId?, seq: {from, to}, unread, priority,
     collapseKey, push?: {title, body, data}}. Content-free devices get no messageId and no push.

    For APNs: POST https://api.push.apple.com/3/device/<token> with an `aps` alert built from
    push["push"] (or a background `content-available` for content-free devices), badge = unread,
    `apns-collapse-id` = collapseKey, `apns-priority` 10 for "high". For FCM: POST
    https://fcm.googleapis.com/v1/projects/<id>/messages:send with the same fields. A "clear"
    push carries the new unread count: update the badge. Answer 410 when Apple/Google say the
    token is gone, so that the relay disables the device."""
    print(json.dumps({"verified": True, "device": device_path, "push": push}), flush=True)
    return 204


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    verifier = None

    def log_message(self, *args):
        pass

    def answer(self, status):
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        if length > 1 << 20:
            return self.answer(413)
        body = self.rfile.read(length)
        headers = {name.lower(): value for name, value in self.headers.items()}
        problem, repeat = self.verifier.verify(headers, body)
        if problem:
            print(json.dumps({"verified": False, "reason": problem}), file=sys.stderr, flush=True)
            return self.answer(401)  # another 4xx: the relay dead-letters it instead of retrying
        if repeat:
            return self.answer(204)
        self.answer(send_to_apns_or_fcm(self.path.lstrip("/"), json.loads(body)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9000)
    args = parser.parse_args()
    secret = os.environ.get("PUSHRELAY_WEBHOOK_SECRET")
    if not secret:
        sys.exit("set PUSHRELAY_WEBHOOK_SECRET to the relay's webhook secret "
                 "(pushrelay check-config --show-secrets prints it)")
    Handler.verifier = Verifier(secret)
    server = http.server.ThreadingHTTPServer((args.host, args.port), Handler)
    print(json.dumps({"listening": f"http://{args.host}:{server.server_address[1]}"}), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
