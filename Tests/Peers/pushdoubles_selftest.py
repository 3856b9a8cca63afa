#!/usr/bin/env python3
"""The push service doubles (pushdoubles.py) checked on their own, each driven by an independent
python client: an h2 client over ssl (ALPN h2) with provider tokens signed here for APNs, OAuth
token fetch and sends over http.client for FCM, and http_ece encryption with a VAPID JWT for
Web Push. Every client verifies the doubles' certificates against the run's test CA.
Usage: pushdoubles_selftest.py (no relay needed)"""
import base64
import http.client
import json
import os
import socket
import ssl
import sys
import time
import urllib.parse

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.settings
import http_ece
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

import pushdoubles
from relaypeer import registry, run_checks, wait_for

checks, check = registry()
TEAM, KID, TOPIC = "TEAM123456", "KEY1234567", "org.pushrelay.test"


# --- signing, independent of the doubles' verification code


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jws(header, claims, sign):
    signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}"
    return f"{signing_input}.{b64(sign(signing_input.encode()))}"


def es256(key, header, claims, der=False):
    def sign(data):
        signature = key.sign(data, ec.ECDSA(hashes.SHA256()))
        if der:
            return signature
        r, s = decode_dss_signature(signature)
        return r.to_bytes(32, "big") + s.to_bytes(32, "big")
    return jws({"alg": "ES256", **header}, claims, sign)


def rs256(key, header, claims):
    return jws({"alg": "RS256", "typ": "JWT", **header}, claims,
               lambda data: key.sign(data, padding.PKCS1v15(), hashes.SHA256()))


def client_context(alpn=None):
    context = ssl.create_default_context(cafile=pushdoubles.ca_file())
    if alpn:
        context.set_alpn_protocols(alpn)
    return context


# --- APNs


class ClientConnection(h2.connection.H2Connection):
    """h2 takes a GOAWAY for the end of every stream; RFC 9113 lets those up to last_stream_id
    complete, and the double answers them."""

    def _receive_goaway_frame(self, frame):
        event = h2.events.ConnectionTerminated()
        event.error_code, event.last_stream_id = frame.error_code, frame.last_stream_id
        event.additional_data = frame.additional_data
        return [], [event]


class H2Client:
    """A small HTTP/2 client: requests, pings, and what came back per stream."""

    def __init__(self, port, alpn=("h2",)):
        raw = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.sock = client_context(list(alpn)).wrap_socket(raw, server_hostname="127.0.0.1")
        self.sock.settimeout(0.05)
        self.conn = ClientConnection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.conn.initiate_connection()
        self.sock.sendall(self.conn.data_to_send())
        self.streams, self.acked_pings, self.goaway, self.closed = {}, set(), None, False

    def request(self, token, headers=None, body=None, jwt=None, path=None):
        sid = self.conn.get_next_available_stream_id()
        data = json.dumps(body if body is not None else {"aps": {"alert": "hi"}}).encode() \
            if not isinstance(body, bytes) else body
        fields = [(":method", "POST"), (":scheme", "https"), (":path", path or f"/3/device/{token}"),
                  (":authority", "127.0.0.1")]
        if jwt:
            fields.append(("authorization", f"bearer {jwt}"))
        fields += list({"apns-topic": TOPIC, "apns-push-type": "alert", "apns-priority": "10",
                        "apns-expiration": "0", **(headers or {})}.items())
        fields = [(k, v) for k, v in fields if v is not None]
        self.conn.send_headers(sid, fields)
        self.conn.send_data(sid, data, end_stream=True)
        self.sock.sendall(self.conn.data_to_send())
        self.streams[sid] = {"headers": None, "data": b"", "ended": False, "reset": None}
        return sid

    def ping(self, data):
        self.conn.ping(data)
        self.sock.sendall(self.conn.data_to_send())

    def pump(self, until, timeout=3.0):
        deadline = time.monotonic() + timeout
        while not until() and time.monotonic() < deadline and not self.closed:
            try:
                data = self.sock.recv(65536)
            except (socket.timeout, TimeoutError):
                continue
            except (ssl.SSLError, OSError):
                data = b""
            if not data:
                self.closed = True
                break
            for event in self.conn.receive_data(data):
                stream = self.streams.get(getattr(event, "stream_id", None))
                if isinstance(event, h2.events.ResponseReceived):
                    stream["headers"] = dict(event.headers)
                elif isinstance(event, h2.events.DataReceived):
                    stream["data"] += event.data
                    self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                elif isinstance(event, h2.events.StreamEnded):
                    stream["ended"] = True
                elif isinstance(event, h2.events.StreamReset):
                    stream["reset"] = event.error_code
                elif isinstance(event, h2.events.PingAckReceived):
                    self.acked_pings.add(event.ping_data)
                elif isinstance(event, h2.events.ConnectionTerminated):
                    self.goaway = event
            out = self.conn.data_to_send()
            if out:
                self.sock.sendall(out)
        return until()

    def response(self, sid, timeout=3.0):
        """(status, JSON body or None, headers) of a stream once it ended."""
        assert self.pump(lambda: self.streams[sid]["ended"] or self.streams[sid]["reset"] is not None, timeout), \
            f"no answer on stream {sid}"
        stream = self.streams[sid]
        return int(stream["headers"][":status"]), json.loads(stream["data"]) if stream["data"] else None, \
            stream["headers"]

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def apns(**options):
    key = ec.generate_private_key(ec.SECP256R1())
    public_pem = key.public_key().public_bytes(serialization.Encoding.PEM,
                                               serialization.PublicFormat.SubjectPublicKeyInfo)
    double = pushdoubles.APNsDouble(public_pem, TEAM, KID, TOPIC, **options)
    jwt = es256(key, {"kid": KID}, {"iss": TEAM, "iat": int(time.time())})
    return double, key, jwt


@check("apns: 200 with an apns-id on HTTP/2 (ALPN h2), one provider token reused, SETTINGS advertised")
def apns_ok():
    double, _, jwt = apns(max_concurrent_streams=50)
    client = H2Client(double.port)
    try:
        first, second = client.request("aa01", jwt=jwt), client.request("aa02", jwt=jwt, headers={"apns-id": None})
        status, body, headers = client.response(first)
        assert status == 200 and body is None and len(headers["apns-id"]) == 36, (status, body, headers)
        assert client.response(second)[0] == 200
        assert client.sock.selected_alpn_protocol() == "h2"
        assert client.conn.remote_settings.max_concurrent_streams == 50, client.conn.remote_settings
        client.ping(b"12345678")
        assert client.pump(lambda: b"12345678" in client.acked_pings), "ping not acknowledged"
        records = double.requests
        assert [r.token for r in records] == ["aa01", "aa02"], records
        assert records[0].iat and records[0].connection == 1 and records[0].body == {"aps": {"alert": "hi"}}
        assert records[0].headers["apns-topic"] == TOPIC and records[0].status == 200
        assert double.distinct_jwts == 1 and double.connections == 1 and double.pings == 1, vars(double)
        assert double.violations == [], double.violations
        return f"apns-id {headers['apns-id']}"
    finally:
        client.close()
        double.close()


@check("apns: scripted answers per device token (410 with timestamp, 400, 403, 429, 503, then 200)")
def apns_scripted():
    double, _, jwt = apns()
    client = H2Client(double.port)
    try:
        double.script("dead", [("410", "Unregistered"), (400, "BadDeviceToken"), (403, "ExpiredProviderToken"),
                               (403, "InvalidProviderToken"), (429, "TooManyRequests"),
                               (503, "ServiceUnavailable")])
        seen = []
        for _ in range(7):
            status, body, _ = client.response(client.request("dead", jwt=jwt))
            seen.append((status, (body or {}).get("reason")))
            if status == 410:
                assert isinstance(body["timestamp"], int) and abs(body["timestamp"] / 1000 - time.time()) < 60, body
        assert seen == [(410, "Unregistered"), (400, "BadDeviceToken"), (403, "ExpiredProviderToken"),
                        (403, "InvalidProviderToken"), (429, "TooManyRequests"), (503, "ServiceUnavailable"),
                        (200, None)], seen
        assert double.violations == [], double.violations
        return ", ".join(f"{s} {r}" if r else str(s) for s, r in seen)
    finally:
        client.close()
        double.close()


@check("apns: provider tokens: another key, wrong kid, old iat -> 403; missing or DER-signed ones are violations")
def apns_jwt():
    double, key, good = apns()
    other = ec.generate_private_key(ec.SECP256R1())
    now = int(time.time())
    cases = [
        (es256(other, {"kid": KID}, {"iss": TEAM, "iat": now}), "InvalidProviderToken", False),
        (es256(key, {"kid": "OTHERKEY00"}, {"iss": TEAM, "iat": now}), "InvalidProviderToken", False),
        (es256(key, {"kid": KID}, {"iss": "OTHERTEAM0", "iat": now}), "InvalidProviderToken", False),
        (es256(key, {"kid": KID}, {"iss": TEAM, "iat": now - 7200}), "ExpiredProviderToken", False),
        (None, "MissingProviderToken", True),
        (es256(key, {"kid": KID}, {"iss": TEAM, "iat": now}, der=True), "InvalidProviderToken", True),
        (good, None, False),
    ]
    client = H2Client(double.port)
    try:
        for jwt, reason, violation in cases:
            before = len(double.violations)
            status, body, _ = client.response(client.request("bb", jwt=jwt))
            if reason is None:
                assert status == 200, (status, body)
            else:
                assert (status, body["reason"]) == (403, reason), (reason, status, body)
            assert len(double.violations) == before + violation, (reason, double.violations)
        assert double.distinct_jwts == 6, double.jwts
        return "; ".join(double.violations)
    finally:
        client.close()
        double.close()


@check("apns: headers and payload checked (topic, priority, expiration, collapse id, size, aps)")
def apns_headers():
    double, _, jwt = apns()
    cases = [
        ({"apns-topic": "com.other.app"}, None, 400, "BadTopic", False),
        ({"apns-topic": None}, None, 400, "MissingTopic", True),
        ({"apns-push-type": "background", "apns-priority": "10"}, None, 400, "BadPriority", True),
        ({"apns-priority": "7"}, None, 400, "BadPriority", True),
        ({"apns-push-type": "voip"}, None, 400, "InvalidPushType", True),
        ({"apns-expiration": "soon"}, None, 400, "BadExpirationDate", True),
        ({"apns-collapse-id": "c" * 65}, None, 400, "BadCollapseId", True),
        ({"apns-id": "not-a-uuid"}, None, 400, "BadMessageId", True),
        ({}, {"aps": {"alert": "x" * 4100}}, 413, "PayloadTooLarge", True),
        ({}, {"alert": "no aps"}, 400, "PayloadEmpty", True),
        ({"apns-push-type": "background", "apns-priority": "5", "apns-collapse-id": "c" * 64},
         {"aps": {"content-available": 1}}, 200, None, False),
    ]
    client = H2Client(double.port)
    try:
        for headers, body, status, reason, violation in cases:
            before = len(double.violations)
            got, answer, _ = client.response(client.request("cc", headers=headers, body=body, jwt=jwt))
            assert (got, (answer or {}).get("reason")) == (status, reason), (headers, got, answer)
            assert len(double.violations) == before + violation, (reason, double.violations)
        client.response(client.request("cc", jwt=jwt, path="/3/other/cc"))
        assert double.requests[-1].status == 404 and double.requests[-1].reason == "BadPath"
        return f"{len(double.violations)} violations noted, e.g. {double.violations[0]!r}"
    finally:
        client.close()
        double.close()


@check("apns: goaway: GOAWAY names the stream below, lower streams answered, the rest not, then a close; "
       "a stream opened after the GOAWAY was read is a violation")
def apns_goaway():
    double, _, jwt = apns(goaway_grace=1.5)
    client = H2Client(double.port)
    try:
        double.script("slow", [("delay", 0.4, 200)])
        double.script("bye", ["goaway"])
        slow = client.request("slow", jwt=jwt)
        bye = client.request("bye", jwt=jwt)
        assert client.pump(lambda: client.goaway is not None), "no GOAWAY"
        assert client.goaway.last_stream_id == bye - 2 == slow, client.goaway
        assert client.goaway.error_code == h2.errors.ErrorCodes.NO_ERROR
        assert client.response(slow)[0] == 200
        client.pump(lambda: False, 0.2)  # (h2 acknowledged the PING behind the GOAWAY while reading)
        late = client.request("late", jwt=jwt)  # after the GOAWAY was read (and its PING acknowledged)
        assert wait_for(lambda: len(double.violations) == 1), double.violations
        assert "opened after the GOAWAY" in double.violations[0], double.violations
        assert client.pump(lambda: client.closed, 4), "connection not closed after GOAWAY"
        assert not any(client.streams[sid]["ended"] or client.streams[sid]["headers"] for sid in (bye, late))
        second = H2Client(double.port)
        try:
            assert second.response(second.request("bye", jwt=jwt))[0] == 200
        finally:
            second.close()
        answers = [(r.token, r.connection, r.answer) for r in double.requests]
        assert answers == [("slow", 1, "ok"), ("bye", 1, "goaway"), ("late", 1, "after-goaway"),
                           ("bye", 2, "ok")], answers
        assert double.connections == 2 and len(double.violations) == 1, (double.connections, double.violations)
        return f"last_stream_id {client.goaway.last_stream_id}, debug {client.goaway.additional_data!r}"
    finally:
        client.close()
        double.close()


@check("apns: hang: the stream is never answered and PINGs go unanswered; reset-refused: RST_STREAM")
def apns_hang_and_reset():
    double, _, jwt = apns()
    client = H2Client(double.port)
    try:
        double.script("refuse", ["reset-refused"])
        sid = client.request("refuse", jwt=jwt)
        assert client.pump(lambda: client.streams[sid]["reset"] is not None)
        assert client.streams[sid]["reset"] == h2.errors.ErrorCodes.REFUSED_STREAM, client.streams[sid]
        client.ping(b"before!!")
        assert client.pump(lambda: b"before!!" in client.acked_pings)
        double.script("stuck", ["hang"])
        stuck = client.request("stuck", jwt=jwt)
        assert wait_for(lambda: len(double.requests) == 2)
        client.ping(b"after!!!")
        assert not client.pump(lambda: b"after!!!" in client.acked_pings or client.streams[stuck]["ended"], 1.0)
        assert double.pings == 2 and double.pings_unanswered == 1, (double.pings, double.pings_unanswered)
        assert double.violations == [], double.violations
    finally:
        client.close()
        double.close()


@check("apns: a client without ALPN h2, or above MAX_CONCURRENT_STREAMS, is a violation")
def apns_alpn_and_concurrency():
    double, _, jwt = apns(max_concurrent_streams=2)
    try:
        old = H2Client(double.port, alpn=("http/1.1",))
        assert old.pump(lambda: False, 1.0) is False and old.closed
        assert wait_for(lambda: len(double.violations) == 1), double.violations
        assert "ALPN" in double.violations[0], double.violations
        greedy = H2Client(double.port)  # opens 3 streams before it has read the double's SETTINGS
        for token in ("d1", "d2", "d3"):
            double.script(token, [("delay", 0.5, 200)])
            greedy.request(token, jwt=jwt)
        # The double answers with GOAWAY and closes at once, with the client's data unread: its
        # RST may reach a client that reads late (a busy machine) before the GOAWAY is read, and
        # discard it. Then the double's own record is the evidence.
        greedy.pump(lambda: greedy.goaway is not None, 15)
        assert wait_for(lambda: any("protocol error" in v for v in double.violations)), double.violations
        if greedy.goaway is None:
            assert greedy.closed, "neither a GOAWAY nor a close after a stream above the limit"
        else:
            assert greedy.goaway.error_code == h2.errors.ErrorCodes.PROTOCOL_ERROR, greedy.goaway
        polite = H2Client(double.port)
        polite.pump(lambda: polite.conn.remote_settings.max_concurrent_streams == 2)
        for token in ("e1", "e2"):
            double.script(token, [("delay", 0.2, 200)])
        first = [polite.request(t, jwt=jwt) for t in ("e1", "e2")]
        assert all(polite.response(sid)[0] == 200 for sid in first)
        assert double.peak_streams == 2, double.peak_streams
        return "; ".join(double.violations)
    finally:
        double.close()


# --- FCM


def https(port, method, path, body=None, headers=None):
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=client_context(), timeout=5)
    try:
        connection.request(method, path, body, headers or {})
        response = connection.getresponse()
        data = response.read()
        return response.status, (json.loads(data) if data else None), {k.lower(): v for k, v in response.getheaders()}
    finally:
        connection.close()


def fetch_token(double, account, scope=pushdoubles.FCM_SCOPE, key=None, aud=None):
    info = json.load(open(account.path))  # as the relay would: from the file
    private_key = key or serialization.load_pem_private_key(info["private_key"].encode(), None)
    now = int(time.time())
    assertion = rs256(private_key, {"kid": info["private_key_id"]},
                      {"iss": info["client_email"], "scope": scope, "aud": aud or info["token_uri"],
                       "iat": now, "exp": now + 3600})
    form = urllib.parse.urlencode({"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
                                   "assertion": assertion})
    path = urllib.parse.urlsplit(info["token_uri"]).path
    return https(double.port, "POST", path, form, {"Content-Type": "application/x-www-form-urlencoded"})


def fcm_send(double, project, access_token, message):
    return https(double.port, "POST", f"/v1/projects/{project}/messages:send", json.dumps({"message": message}),
                 {"Authorization": f"Bearer {access_token}", "Content-Type": "application/json; UTF-8"})


@check("fcm: a service account's token fetched (RS256 assertion), then a send answered with a message name")
def fcm_ok():
    double = pushdoubles.FCMDouble()
    try:
        account = double.make_account(project_id="relay-proj")
        info = json.load(open(account.path))
        assert info["type"] == "service_account" and info["token_uri"] == double.token_uri
        assert info["private_key"].startswith("-----BEGIN PRIVATE KEY-----"), info["private_key"][:40]
        assert oct(os.stat(account.path).st_mode & 0o777) == "0o600"
        status, token, _ = fetch_token(double, account)
        assert status == 200 and token["token_type"] == "Bearer" and token["expires_in"] == 3599, token
        message = {"token": "reg-1", "notification": {"title": "t", "body": "b"}, "data": {"k": "v"},
                   "android": {"priority": "high", "ttl": "3600s", "collapse_key": "c"}}
        status, body, _ = fcm_send(double, "relay-proj", token["access_token"], message)
        assert status == 200 and body["name"].startswith("projects/relay-proj/messages/"), (status, body)
        assert double.token_fetches == 1 and double.for_token("reg-1")[0].message == message
        assert double.token_requests[0].claims["iss"] == account.client_email
        assert double.violations == [], double.violations
        return body["name"]
    finally:
        double.close()


@check("fcm: scripted answers per registration token in FCM's error shape, Retry-After on 429")
def fcm_scripted():
    double = pushdoubles.FCMDouble()
    try:
        account = double.make_account()
        access = fetch_token(double, account)[1]["access_token"]
        double.script("reg-x", ["UNREGISTERED", "INVALID_ARGUMENT", ("QUOTA_EXCEEDED", 7), "UNAVAILABLE",
                                "PERMISSION_DENIED", "SENDER_ID_MISMATCH", "INTERNAL"])
        seen = []
        for _ in range(8):
            status, body, headers = fcm_send(double, account.project_id, access, {"token": "reg-x", "data": {}})
            error = (body or {}).get("error", {})
            codes = [d.get("errorCode") for d in error.get("details", []) if "errorCode" in d]
            seen.append((status, error.get("status"), codes[0] if codes else None))
            if status == 429:
                assert headers["retry-after"] == "7", headers
            if status == 404:
                assert body == {"error": {"code": 404, "message": "Requested entity was not found.",
                                          "status": "NOT_FOUND", "details": [{
                                              "@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError",
                                              "errorCode": "UNREGISTERED"}]}}, body
        assert seen == [(404, "NOT_FOUND", "UNREGISTERED"), (400, "INVALID_ARGUMENT", "INVALID_ARGUMENT"),
                        (429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED"), (503, "UNAVAILABLE", "UNAVAILABLE"),
                        (403, "PERMISSION_DENIED", None), (403, "PERMISSION_DENIED", "SENDER_ID_MISMATCH"),
                        (500, "INTERNAL", "INTERNAL"), (200, None, None)], seen
        assert double.violations == [], double.violations
        return ", ".join(f"{s} {c or st}" for s, st, c in seen)
    finally:
        double.close()


@check("fcm: expire_tokens() -> 401 UNAUTHENTICATED; a new token works; token fetches counted")
def fcm_expiry():
    double = pushdoubles.FCMDouble()
    try:
        account = double.make_account()
        first = fetch_token(double, account)[1]["access_token"]
        assert fcm_send(double, account.project_id, first, {"token": "r"})[0] == 200
        double.expire_tokens()
        status, body, headers = fcm_send(double, account.project_id, first, {"token": "r"})
        assert status == 401 and body["error"]["status"] == "UNAUTHENTICATED", body
        assert "invalid_token" in headers["www-authenticate"]
        assert fcm_send(double, account.project_id, "ya29.forged", {"token": "r"})[0] == 401
        second = fetch_token(double, account)[1]["access_token"]
        assert second != first and fcm_send(double, account.project_id, second, {"token": "r"})[0] == 200
        assert fcm_send(double, "someone-else", second, {"token": "r"})[0] == 403
        assert double.token_fetches == 2 and double.violations == [], (double.token_fetches, double.violations)
    finally:
        double.close()


@check("fcm: bad assertions and messages are refused as FCM would, and noted as violations")
def fcm_refusals():
    double = pushdoubles.FCMDouble()
    try:
        account = double.make_account()
        stranger = pushdoubles.make_service_account(os.path.join(pushdoubles.work_dir(), "x.json"), double.token_uri)
        status, body, _ = fetch_token(double, account, scope="https://www.googleapis.com/auth/userinfo.email")
        assert (status, body["error"]) == (400, "invalid_scope"), body
        status, body, _ = fetch_token(double, account, key=stranger.private_key)
        assert (status, body["error"]) == (400, "invalid_grant"), body
        status, body, _ = fetch_token(double, account, aud="https://elsewhere/token")
        assert (status, body["error"]) == (400, "invalid_grant"), body
        access = fetch_token(double, account)[1]["access_token"]
        status, body, _ = fcm_send(double, account.project_id, access, {"token": "r", "data": {"n": 12}})
        assert status == 400 and body["error"]["status"] == "INVALID_ARGUMENT", body
        assert body["error"]["details"][0]["fieldViolations"][0]["field"] == "message.data[0].value", body
        status, body, _ = fcm_send(double, account.project_id, access, {"token": "r", "android": {"ttl": 60}})
        assert status == 400, body
        status, body, _ = fcm_send(double, account.project_id, access, {"topic": "news"})
        assert status == 400, body
        assert len(double.violations) == 6 and double.token_fetches == 1, double.violations
        return "; ".join(double.violations[:2])
    finally:
        double.close()


# --- Web Push


VAPID = ec.generate_private_key(ec.SECP256R1())
VAPID_K = b64(VAPID.public_key().public_bytes(serialization.Encoding.X962,
                                               serialization.PublicFormat.UncompressedPoint))


def web_push(endpoint, subscription, payload, ttl="60", claims=None, key=VAPID, extra=None, encoding="aes128gcm"):
    url = urllib.parse.urlsplit(subscription["endpoint"])
    keys = subscription["keys"]
    pad = lambda text: text + "=" * (-len(text) % 4)  # noqa: E731
    sender = ec.generate_private_key(ec.SECP256R1())
    body = http_ece.encrypt(json.dumps(payload).encode(), private_key=sender,
                            dh=base64.urlsafe_b64decode(pad(keys["p256dh"])),
                            auth_secret=base64.urlsafe_b64decode(pad(keys["auth"])), version="aes128gcm")
    k = b64(key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint))
    jwt = es256(key, {"typ": "JWT"}, {"aud": f"{url.scheme}://{url.netloc}", "exp": int(time.time()) + 43200,
                                      "sub": "mailto:ops@example.org", **(claims or {})})
    headers = {"Content-Encoding": encoding, "TTL": ttl, "Authorization": f"vapid t={jwt}, k={k}",
               "Content-Type": "application/octet-stream", **(extra or {})}
    headers = {name: value for name, value in headers.items() if value is not None}
    return https(endpoint.port, "POST", url.path, body, headers)


@check("webpush: an aes128gcm body with a VAPID JWT is verified, decrypted and recorded; 201 with Location")
def webpush_ok():
    endpoint = pushdoubles.WebPushEndpoint()
    try:
        subscription = endpoint.make_subscription(application_server_key=VAPID_K)
        assert subscription["endpoint"].startswith(f"https://127.0.0.1:{endpoint.port}/push/")
        assert len(base64.urlsafe_b64decode(subscription["keys"]["p256dh"] + "=")) == 65
        assert len(base64.urlsafe_b64decode(subscription["keys"]["auth"] + "==")) == 16
        status, _, headers = web_push(endpoint, subscription, {"text": "hello"},
                                      extra={"Urgency": "high", "Topic": "chat-1"})
        assert status == 201 and headers["location"].startswith(endpoint.origin), (status, headers)
        record = endpoint.for_subscription(subscription)[0]
        assert record.payload == {"text": "hello"} and record.ttl == 60, record
        assert (record.urgency, record.topic) == ("high", "chat-1"), record
        assert record.vapid_claims["sub"] == "mailto:ops@example.org", record.vapid_claims
        assert endpoint.payloads(subscription) == [{"text": "hello"}] and endpoint.violations == []
        return f"Location {headers['location']}"
    finally:
        endpoint.close()


@check("webpush: scripted answers per subscription (404, 410, 413, 429 with Retry-After, 500, then 201)")
def webpush_scripted():
    endpoint = pushdoubles.WebPushEndpoint()
    try:
        subscription = endpoint.make_subscription()
        endpoint.script(subscription, [404, 410, 413, (429, 30), 500])
        seen = []
        for _ in range(6):
            status, _, headers = web_push(endpoint, subscription, {"n": len(seen)})
            seen.append(status)
            if status == 429:
                assert headers["retry-after"] == "30", headers
        assert seen == [404, 410, 413, 429, 500, 201], seen
        status = web_push(endpoint, {**subscription, "endpoint": endpoint.origin + "/push/unknown"}, {})[0]
        assert status == 404 and endpoint.violations == [], endpoint.violations
        return ", ".join(map(str, seen))
    finally:
        endpoint.close()


@check("webpush: VAPID and header mistakes are refused (401/400) and noted; a foreign key gets 403")
def webpush_refusals():
    endpoint = pushdoubles.WebPushEndpoint()
    try:
        subscription = endpoint.make_subscription(application_server_key=VAPID_K)
        now = int(time.time())
        cases = [
            ({"claims": {"aud": "https://127.0.0.1:1"}}, 401, True),
            ({"claims": {"exp": now + 90000}}, 401, True),
            ({"claims": {"exp": now - 10}}, 401, True),
            ({"claims": {"sub": "ops@example.org"}}, 401, True),
            ({"ttl": None}, 400, True),
            ({"encoding": "aesgcm"}, 400, True),
            ({"extra": {"Urgency": "urgent"}}, 400, True),
            ({"extra": {"Topic": "t" * 33}}, 400, True),
            ({"key": ec.generate_private_key(ec.SECP256R1())}, 403, False),
            ({}, 201, False),
        ]
        for options, status, violation in cases:
            before = len(endpoint.violations)
            got = web_push(endpoint, subscription, {"x": 1}, **options)[0]
            assert got == status, (options, got, endpoint.requests[-1].problem)
            assert len(endpoint.violations) == before + violation, (options, endpoint.violations)
        return f"{len(endpoint.violations)} violations, e.g. {endpoint.violations[0]!r}"
    finally:
        endpoint.close()


if __name__ == "__main__":
    sys.exit(run_checks(checks, lambda fn: fn()))
