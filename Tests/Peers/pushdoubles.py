"""Test doubles of the three push services the relay speaks directly, for the end-to-end peers:

- `APNsDouble`: Apple's provider API, HTTP/2 over TLS (ALPN "h2" only), ES256 provider tokens;
- `FCMDouble`: the FCM HTTP v1 API and the OAuth token endpoint of a service account
  (`make_service_account` writes one), HTTPS with HTTP/1.1;
- `WebPushEndpoint`: a push service endpoint (RFC 8030/8291/8292: aes128gcm bodies, VAPID),
  HTTPS with HTTP/1.1; `make_subscription()` is the browser's side.

Each runs in background threads on 127.0.0.1 with an ephemeral port, answers per device token /
registration token / subscription from a script the test sets (`script(key, [answers...])`,
one answer per request in order, then `default`), records every request, and keeps
`violations`: the things a correct relay never does (a malformed request, a header out of range,
HTTP/2 misuse), for the test to assert empty. Answers that the real service gives to a
misconfigured but well-formed request (a JWT signed with another key, a wrong topic, an expired
access token) are answered the same way and are not violations.

TLS: one test CA per run (`ca_file()`, the relay's `pushCaFile` / `--push-ca-file`) and one
server certificate for localhost, 127.0.0.1 and ::1 that all doubles share.
"""
import base64
import dataclasses
import http.server
import itertools
import json
import os
import re
import socket
import ssl
import tempfile
import threading
import time
import urllib.parse
import uuid

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings
import http_ece
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from hyperframe.frame import GoAwayFrame, PingFrame

from relaypeer import QuietServer, authority, leaf, write

# ---------------------------------------------------------------------------------------------
# TLS: one CA and one server certificate per run


_tls_lock = threading.Lock()
_tls = None


def _material():
    global _tls
    with _tls_lock:
        if _tls is None:
            directory = tempfile.mkdtemp(prefix="pushrelay-doubles-")
            ca = authority("PushRelay push doubles test CA")
            key, cert = leaf(ca, "localhost", "127.0.0.1", "::1")
            pem = serialization.Encoding.PEM
            _tls = {
                "dir": directory,
                "ca": write(os.path.join(directory, "ca.pem"), ca[1].public_bytes(pem)),
                "cert": write(os.path.join(directory, "server.crt"), cert.public_bytes(pem)),
                "key": write(os.path.join(directory, "server.key"), key.private_bytes(
                    pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())),
            }
    return _tls


def ca_file():
    """The PEM file of this run's test CA: give it to the relay as `pushCaFile`."""
    return _material()["ca"]


def work_dir():
    """A private temporary directory of this run (mode 0700), for keys and service accounts."""
    return _material()["dir"]


def server_context(alpn):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    material = _material()
    context.load_cert_chain(material["cert"], material["key"])
    context.set_alpn_protocols(list(alpn))
    return context


# ---------------------------------------------------------------------------------------------
# JWS (compact, no padding) verification


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(text):
    if isinstance(text, bytes):
        text = text.decode("ascii")
    if not re.fullmatch(r"[A-Za-z0-9_-]*", text):
        raise ValueError("not unpadded base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class JWTError(Exception):
    """`malformed`: not a well-formed JWS of the expected algorithm (a relay bug, whatever the
    keys); otherwise a signature or claim the service refuses."""

    def __init__(self, reason, malformed=False):
        super().__init__(reason)
        self.reason, self.malformed = reason, malformed


def decode_jwt(token, alg):
    """(header, claims, signing input, signature) of a compact JWS whose header says `alg`."""
    parts = token.split(".")
    if len(parts) != 3:
        raise JWTError(f"{len(parts)} parts, not 3", malformed=True)
    try:
        header = json.loads(b64url_decode(parts[0]))
        claims = json.loads(b64url_decode(parts[1]))
        signature = b64url_decode(parts[2])
    except ValueError as error:
        raise JWTError(f"undecodable: {error}", malformed=True) from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise JWTError("header or claims not a JSON object", malformed=True)
    if header.get("alg") != alg:
        raise JWTError(f"alg {header.get('alg')!r}, not {alg}", malformed=True)
    return header, claims, f"{parts[0]}.{parts[1]}".encode(), signature


def verify_es256(public_key, signing_input, signature):
    """A JWS ES256 signature is r||s, 32 bytes each (not DER)."""
    if len(signature) != 64:
        raise JWTError(f"ES256 signature of {len(signature)} bytes, not 64 (r||s)", malformed=True)
    der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
    try:
        public_key.verify(der, signing_input, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        raise JWTError("bad signature") from None


def verify_rs256(public_key, signing_input, signature):
    try:
        public_key.verify(signature, signing_input, padding.PKCS1v15(), hashes.SHA256())
    except InvalidSignature:
        raise JWTError("bad signature") from None


def _public_key(value):
    if isinstance(value, str):
        value = value.encode()
    if isinstance(value, bytes):
        return serialization.load_pem_public_key(value)
    return value


def make_apns_key(path=None):
    """An APNs signing key like the .p8 file Apple hands out (PKCS#8 PEM, P-256): writes it to
    `path` (default: in `work_dir()`) and returns (path, public key PEM) for `APNsDouble`."""
    key = ec.generate_private_key(ec.SECP256R1())
    path = path or os.path.join(work_dir(), f"AuthKey_{os.urandom(5).hex().upper()}.p8")
    write(path, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    os.chmod(path, 0o600)
    return path, key.public_key().public_bytes(serialization.Encoding.PEM,
                                               serialization.PublicFormat.SubjectPublicKeyInfo)


class _Scripts:
    """Answers per key, in order; `default` once a key's list is used up."""

    def __init__(self, default):
        self.default = default
        self.lock = threading.Lock()
        self.queues = {}

    def set(self, key, answers):
        with self.lock:
            self.queues[key] = list(answers)

    def next(self, key):
        with self.lock:
            queue = self.queues.get(key)
            return queue.pop(0) if queue else self.default


# ---------------------------------------------------------------------------------------------
# APNs


APNS_REASON_STATUS = {
    "BadCollapseId": 400, "BadDeviceToken": 400, "BadExpirationDate": 400, "BadMessageId": 400,
    "BadPriority": 400, "BadTopic": 400, "DeviceTokenNotForTopic": 400, "DuplicateHeaders": 400,
    "IdleTimeout": 400, "InvalidPushType": 400, "MissingDeviceToken": 400, "MissingTopic": 400,
    "PayloadEmpty": 400, "TopicDisallowed": 400, "BadCertificate": 403, "BadCertificateEnvironment": 403,
    "ExpiredProviderToken": 403, "Forbidden": 403, "InvalidProviderToken": 403, "MissingProviderToken": 403,
    "UnrelatedKeyIdInToken": 403, "BadEnvironmentKeyInToken": 403, "BadPath": 404, "MethodNotAllowed": 405,
    "ExpiredToken": 410, "Unregistered": 410, "PayloadTooLarge": 413, "TooManyProviderTokenUpdates": 429,
    "TooManyRequests": 429, "InternalServerError": 500, "ServiceUnavailable": 503, "Shutdown": 503,
}
APNS_MAX_PAYLOAD = 4096
_GOAWAY_PING = b"goaway!!"
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


@dataclasses.dataclass
class APNsRequest:
    """One request the APNs double received (every one is recorded, refused ones too)."""
    connection: int            # 1, 2, ... in the order the double accepted them
    stream: int
    method: str
    path: str
    token: str                 # the device token from /3/device/<token>
    headers: dict              # lower-case name -> value (pseudo-headers left out)
    raw_body: bytes
    body: object = None        # the parsed JSON, or None
    jwt: str = None
    team: str = None           # the team whose key signed the provider token (when it verified)
    iat: int = None            # the provider token's iat claim (when it decoded)
    time: float = 0.0
    status: int = None         # what was answered (None: not answered)
    reason: str = None
    answer: str = ""           # "ok", "error", "goaway", "hang", "reset-refused", "after-goaway"
    apns_id: str = None


def _goaway_keeping_streams(conn, frame):
    """A GOAWAY received without closing h2's connection state: RFC 9113 6.8 lets the streams up
    to last_stream_id complete, which h2 would refuse once it counts the connection closed."""
    event = h2.events.ConnectionTerminated()
    event.error_code = h2.errors._error_code_from_int(frame.error_code)
    event.last_stream_id = frame.last_stream_id
    event.additional_data = frame.additional_data or None
    return [], [event]


class _H2Server(h2.connection.H2Connection):
    """h2 acknowledges PINGs itself; a hung connection must not. A client's GOAWAY leaves its
    streams open to be answered."""
    mute_pings = False

    def _receive_ping_frame(self, frame):
        frames, events = super()._receive_ping_frame(frame)
        return ([] if self.mute_pings else frames), events

    def _receive_goaway_frame(self, frame):
        return _goaway_keeping_streams(self, frame)


class APNsDouble:
    """Apple's HTTP/2 provider API on https://127.0.0.1:<port> (`base`).

    `APNsDouble(public_key_pem, team_id, key_id, topic, max_concurrent_streams=100)`.
    Set `topic` (a string or a set of strings) to change the accepted apns-topic.
    `add_key(public_key_pem, team_id, key_id, topic)`: another signing key, of the same team or
    another (each team with its topics). As Apple, a connection carries one team's tokens: a
    token of another team on it is refused (403 InvalidProviderToken) and a violation.
    `script(token, answers)`; an answer is 200, (status, reason) or (status, reason, timestamp_ms)
    (a status may be a string: ("410", "Unregistered")), a bare reason such as "Unregistered",
    "goaway", "hang", "reset-refused", or ("delay", seconds, answer).
    Records: `requests` (APNsRequest), `for_token(token)`; counters: `connections`,
    `distinct_jwts` (`jwts`: each distinct provider token in the order seen), `pings`,
    `pings_unanswered`, `resets` (streams the client reset), `peak_streams` (most streams open at
    once on one connection), `handshake_failures`; `violations` (strings)."""

    def __init__(self, public_key_pem, team_id, key_id, topic, max_concurrent_streams=100, goaway_grace=0.5):
        self.public_key = _public_key(public_key_pem)
        self.team_id, self.key_id, self.topic = team_id, key_id, topic
        self.keys = {key_id: (self.public_key, team_id)}   # kid -> (public key, team)
        self.team_topics = {}                              # teams added by add_key -> topics
        self.max_concurrent_streams = max_concurrent_streams
        self.goaway_grace = goaway_grace
        self.lock = threading.Lock()
        self.requests, self.violations, self.jwts = [], [], []
        self.connections = self.pings = self.pings_unanswered = self.resets = 0
        self.peak_streams = self.handshake_failures = 0
        self._scripts = _Scripts(200)
        self._context = server_context(["h2"])
        self._stopped = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port = self._listener.getsockname()[1]
        self._threads = []
        thread = threading.Thread(target=self._accept, daemon=True)
        thread.start()
        self._threads.append(thread)

    base = property(lambda self: f"https://127.0.0.1:{self.port}")
    ca_file = property(lambda self: ca_file())
    distinct_jwts = property(lambda self: len(self.jwts))

    @property
    def default(self):
        return self._scripts.default

    @default.setter
    def default(self, answer):
        self._scripts.default = answer

    def script(self, token, answers):
        self._scripts.set(token, answers)

    def add_key(self, public_key_pem, team_id, key_id, topic):
        with self.lock:
            self.keys[key_id] = (_public_key(public_key_pem), team_id)
            if team_id != self.team_id:
                self.team_topics[team_id] = topic

    def topics(self, team_id):
        topic = self.topic if team_id == self.team_id else self.team_topics.get(team_id, ())
        return {topic} if isinstance(topic, str) else set(topic)

    def for_token(self, token):
        with self.lock:
            return [r for r in self.requests if r.token == token]

    def violation(self, text):
        with self.lock:
            self.violations.append(text)

    def close(self):
        self._stopped.set()
        self._listener.close()
        for thread in self._threads:
            thread.join(2)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _accept(self):
        while not self._stopped.is_set():
            try:
                sock, _ = self._listener.accept()
            except (socket.timeout, TimeoutError):
                continue
            except OSError:
                return
            with self.lock:
                self.connections += 1
                number = self.connections
            thread = threading.Thread(target=_APNsConnection(self, sock, number).run, daemon=True)
            thread.start()
            self._threads.append(thread)


class _APNsConnection:
    def __init__(self, double, sock, number):
        self.double, self.sock, self.number = double, sock, number
        self.open = {}           # stream id -> {"headers": [...], "body": bytearray, "record": ...}
        self.pending = []        # (due, stream id, answer, record): delayed answers
        self.goaway_last = self.goaway_at = None
        self.closed = self.client_goaway = self.goaway_read = False
        self.team = None         # the team of the first provider token it carried

    def run(self):
        tls = None
        try:
            self.sock.settimeout(5)
            try:
                tls = self.double._context.wrap_socket(self.sock, server_side=True)
            except (OSError, ssl.SSLError):
                with self.double.lock:
                    self.double.handshake_failures += 1
                return
            if tls.selected_alpn_protocol() != "h2":
                self.double.violation(f"connection {self.number}: ALPN {tls.selected_alpn_protocol()!r}, not h2")
                return
            self.serve(tls)
        except (OSError, ssl.SSLError):
            pass
        except Exception as error:  # a bug in the double must not pass silently
            self.double.violation(f"double error on connection {self.number}: {error!r}")
        finally:
            try:
                (tls or self.sock).close()
            except OSError:
                pass

    def serve(self, tls):
        double = self.double
        self.conn = conn = _H2Server(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        conn.local_settings = h2.settings.Settings(client=False, initial_values={
            h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: double.max_concurrent_streams,
            h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: conn.DEFAULT_MAX_HEADER_LIST_SIZE})
        conn.initiate_connection()
        tls.sendall(conn.data_to_send())
        tls.settimeout(0.05)
        while not double._stopped.is_set() and not self.closed:
            try:
                data = tls.recv(65536)
            except (socket.timeout, TimeoutError):
                data = None
            if data == b"":
                return
            if data:
                try:
                    events = conn.receive_data(data)
                except h2.exceptions.ProtocolError as error:
                    double.violation(f"connection {self.number}: HTTP/2 protocol error: {error!r}")
                    conn.close_connection(error_code=h2.errors.ErrorCodes.PROTOCOL_ERROR)
                    tls.sendall(conn.data_to_send())
                    return
                for event in events:
                    self.handle(event)
            self.tick()
            out = conn.data_to_send()
            if out:
                tls.sendall(out)
            if self.goaway_frame:
                tls.sendall(self.goaway_frame)
                self.goaway_frame = None

    goaway_frame = None

    def handle(self, event):
        double = self.double
        if isinstance(event, h2.events.RequestReceived):
            self.open[event.stream_id] = {"headers": event.headers, "body": bytearray()}
            with double.lock:
                double.peak_streams = max(double.peak_streams, self.conn.open_inbound_streams)
        elif isinstance(event, h2.events.DataReceived):
            stream = self.open.get(event.stream_id)
            if stream is not None:
                stream["body"] += event.data
            self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        elif isinstance(event, h2.events.StreamEnded):
            stream = self.open.pop(event.stream_id, None)
            if stream is not None:
                self.complete(event.stream_id, stream)
        elif isinstance(event, h2.events.StreamReset):
            self.open.pop(event.stream_id, None)
            with double.lock:
                double.resets += 1
        elif isinstance(event, h2.events.PingAckReceived):
            if event.ping_data == _GOAWAY_PING:
                self.goaway_read = True
        elif isinstance(event, h2.events.PingReceived):
            with double.lock:
                double.pings += 1
                double.pings_unanswered += self.conn.mute_pings
        elif isinstance(event, h2.events.ConnectionTerminated):
            self.client_goaway = True  # closed in tick() once its open streams are answered

    def tick(self):
        now = time.monotonic()
        for item in [p for p in self.pending if p[0] <= now]:
            self.pending.remove(item)
            self.answer(item[1], item[2], item[3])
        if self.client_goaway and not self.open and not self.pending:
            self.closed = True
        if self.goaway_at is not None:
            lower = any(s <= self.goaway_last for s in self.open) or any(p[1] <= self.goaway_last for p in self.pending)
            waited = now - self.goaway_at
            if (not lower and waited >= self.double.goaway_grace) or waited >= 3 + self.double.goaway_grace:
                self.closed = True

    def complete(self, stream_id, stream):
        double = self.double
        headers, names = {}, []
        pseudo = {}
        for name, value in stream["headers"]:
            if name.startswith(":"):
                pseudo[name] = value
            else:
                names.append(name)
                headers[name] = value
        path = pseudo.get(":path", "")
        token = path[len("/3/device/"):] if path.startswith("/3/device/") else ""
        record = APNsRequest(connection=self.number, stream=stream_id, method=pseudo.get(":method", ""), path=path,
                             token=token, headers=headers, raw_body=bytes(stream["body"]), time=time.time())
        with double.lock:
            double.requests.append(record)
        if self.goaway_last is not None and stream_id > self.goaway_last:
            # the client learns from last_stream_id that it was not processed; opening it after
            # having read the GOAWAY (it acknowledged the PING sent right behind it) is a bug
            record.answer = "after-goaway"
            if self.goaway_read:
                double.violation(f"connection {self.number}: stream {stream_id} opened after the GOAWAY was read")
            return
        refusal = self.check(record, names)
        if refusal:
            self.answer(stream_id, refusal, record)
        else:
            self.answer(stream_id, double._scripts.next(token), record)

    def check(self, record, names):
        """The refusal (status, reason) APNs would give this request, or None; notes violations."""
        double = self.double
        problems = []   # (status, reason, violation text or None)

        def bad(reason, text, violation=True):
            problems.append((APNS_REASON_STATUS[reason], reason, text if violation else None))

        where = f"connection {record.connection} stream {record.stream}"
        headers = record.headers
        if record.method != "POST":
            bad("MethodNotAllowed", f"{where}: method {record.method}")
        elif not record.path.startswith("/3/device/"):
            bad("BadPath", f"{where}: path {record.path!r}")
        elif not record.token:
            bad("MissingDeviceToken", f"{where}: no device token")
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            bad("DuplicateHeaders", f"{where}: duplicate headers {duplicated}")
        # the provider token
        authorization = headers.get("authorization")
        if authorization is None:
            bad("MissingProviderToken", f"{where}: no authorization header")
        else:
            scheme, _, jwt = authorization.partition(" ")
            record.jwt = jwt.strip()
            if scheme.lower() != "bearer" or not record.jwt:
                bad("InvalidProviderToken", f"{where}: authorization {authorization[:20]!r}… is not 'bearer <jwt>'")
            else:
                with double.lock:
                    if record.jwt not in double.jwts:
                        double.jwts.append(record.jwt)
                try:
                    header, claims, signing_input, signature = decode_jwt(record.jwt, "ES256")
                    if isinstance(claims.get("iat"), int):
                        record.iat = claims["iat"]
                    if not header.get("kid") or not isinstance(claims.get("iat"), int) or not claims.get("iss"):
                        raise JWTError("kid, iss or integer iat missing", malformed=True)
                    if header["kid"] not in double.keys:
                        raise JWTError(f"kid {header['kid']!r}, not one of {sorted(double.keys)}")
                    public_key, team = double.keys[header["kid"]]
                    if claims["iss"] != team:
                        raise JWTError(f"iss {claims['iss']!r}, not {team!r}")
                    verify_es256(public_key, signing_input, signature)
                    record.team = team
                    # Apple: one connection, one team's provider tokens.
                    if self.team is None:
                        self.team = team
                    elif self.team != team:
                        bad("InvalidProviderToken", f"{where}: a token of team {team} on a connection of team "
                                                    f"{self.team}")
                    if claims["iat"] < time.time() - 3600:
                        bad("ExpiredProviderToken", f"{where}: iat {claims['iat']} over an hour old", violation=False)
                    elif claims["iat"] > time.time() + 3600:
                        raise JWTError(f"iat {claims['iat']} over an hour ahead")
                except JWTError as error:
                    bad("InvalidProviderToken", f"{where}: provider token: {error.reason}", violation=error.malformed)
        # the headers
        topic = headers.get("apns-topic")
        topics = double.topics(record.team or double.team_id)
        push_type = headers.get("apns-push-type")
        # A VoIP push (PushKit) goes to the app's topic + ".voip", and nothing else does.
        voip = topic is not None and topic.endswith(".voip")
        if topic is None:
            bad("MissingTopic", f"{where}: no apns-topic")
        elif (topic[:-len(".voip")] if voip else topic) not in topics:
            bad("BadTopic", f"{where}: apns-topic {topic!r}, not {sorted(topics)}", violation=False)
        if push_type not in ("alert", "background", "voip"):
            bad("InvalidPushType", f"{where}: apns-push-type {push_type!r}")
        elif (push_type == "voip") != voip:
            bad("InvalidPushType", f"{where}: apns-push-type {push_type} with apns-topic {topic!r}")
        elif push_type == "voip" and headers.get("apns-priority", "10") != "10":
            bad("BadPriority", f"{where}: a voip push at apns-priority {headers.get('apns-priority')}")
        priority = headers.get("apns-priority", "10")
        if priority not in ("10", "5"):
            bad("BadPriority", f"{where}: apns-priority {priority!r}")
        elif push_type == "background" and priority != "5":
            bad("BadPriority", f"{where}: background push with apns-priority {priority}")
        expiration = headers.get("apns-expiration")
        if expiration is None or not re.fullmatch(r"[0-9]+", expiration):
            bad("BadExpirationDate", f"{where}: apns-expiration {expiration!r}")
        collapse = headers.get("apns-collapse-id")
        if collapse is not None and not 0 < len(collapse.encode()) <= 64:
            bad("BadCollapseId", f"{where}: apns-collapse-id of {len(collapse.encode())} bytes")
        apns_id = headers.get("apns-id")
        if apns_id is not None and not _UUID.fullmatch(apns_id):
            bad("BadMessageId", f"{where}: apns-id {apns_id!r}")
        # the payload
        raw = record.raw_body
        if len(raw) > APNS_MAX_PAYLOAD:
            bad("PayloadTooLarge", f"{where}: payload of {len(raw)} bytes")
        elif not raw:
            bad("PayloadEmpty", f"{where}: empty payload")
        else:
            try:
                record.body = json.loads(raw)
            except ValueError:
                record.body = None
            if push_type == "voip" and isinstance(record.body, dict):
                pass  # PushKit hands the app the whole dictionary: no aps needed
            elif not isinstance(record.body, dict) or not isinstance(record.body.get("aps"), dict):
                # (APNs has no reason of its own for this; PayloadEmpty is the nearest)
                bad("PayloadEmpty", f"{where}: payload is not a JSON object with an aps object: {raw[:80]!r}")
        for _, _, text in problems:
            if text:
                self.double.violation(text)
        return problems[0][:2] if problems else None

    def answer(self, stream_id, answer, record):
        conn = self.conn
        if isinstance(answer, tuple) and answer and answer[0] == "delay":
            record.answer = "delayed"
            self.pending.append((time.monotonic() + answer[1], stream_id, answer[2], record))
            return
        if answer == "hang":
            record.answer = "hang"
            conn.mute_pings = True
            return
        if answer == "reset-refused":
            record.answer = "reset-refused"
            self._safely(lambda: conn.reset_stream(stream_id, h2.errors.ErrorCodes.REFUSED_STREAM))
            return
        if answer == "goaway":
            record.answer = "goaway"
            if self.goaway_last is None:
                self.goaway_last = max(0, stream_id - 2)
                self.goaway_at = time.monotonic()
                # sent by hand after h2's own output: h2 would refuse to answer the lower streams
                # once it has sent a GOAWAY itself
                self.goaway_frame = GoAwayFrame(0, last_stream_id=self.goaway_last, error_code=0,
                                                additional_data=b'{"reason":"Shutdown"}').serialize() + \
                    PingFrame(0, opaque_data=_GOAWAY_PING).serialize()
            return
        if isinstance(answer, str) and answer in APNS_REASON_STATUS:
            answer = (APNS_REASON_STATUS[answer], answer)
        if isinstance(answer, (int, str)):
            answer = (answer,)
        status = int(answer[0])
        reason = answer[1] if len(answer) > 1 else None
        record.apns_id = record.headers.get("apns-id") or str(uuid.uuid4()).upper()
        record.status, record.reason = status, reason
        headers = [(":status", str(status)), ("apns-id", record.apns_id)]
        if status == 200 and reason is None:
            record.answer = "ok"
            self._safely(lambda: conn.send_headers(stream_id, headers, end_stream=True))
            return
        record.answer = "error"
        body = {"reason": reason or "InternalServerError"}
        if status == 410:
            body["timestamp"] = answer[2] if len(answer) > 2 else int(time.time() * 1000)
        data = json.dumps(body).encode()
        headers += [("content-type", "application/json; charset=utf-8"), ("content-length", str(len(data)))]

        def send():
            conn.send_headers(stream_id, headers)
            conn.send_data(stream_id, data, end_stream=True)
        self._safely(send)

    def _safely(self, action):
        try:
            action()
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
            pass  # the client reset the stream meanwhile


# ---------------------------------------------------------------------------------------------
# HTTP/1.1 over TLS, for FCM and Web Push


class _TLSServer(QuietServer):
    """A threaded HTTPS/1.1 server on 127.0.0.1: the handshake runs in the connection's thread."""

    def __init__(self, handler):
        super().__init__(("127.0.0.1", 0), handler)
        self.context = server_context(["http/1.1"])
        self.connections = self.handshake_failures = 0
        self.stopped = threading.Event()
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def finish_request(self, request, client_address):
        request.settimeout(10)
        try:
            tls = self.context.wrap_socket(request, server_side=True)
        except (OSError, ssl.SSLError):
            self.handshake_failures += 1
            return
        self.connections += 1
        try:
            self.RequestHandlerClass(tls, client_address, self)
        finally:
            try:
                tls.close()
            except OSError:
                pass

    def stop(self):
        self.stopped.set()
        self.shutdown()
        self.server_close()


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    double = None  # set on a subclass per double

    def log_message(self, *args):
        pass

    def body(self):
        """The request body (Content-Length or chunked), or None when it has neither."""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(data)
                data += self.rfile.read(size)
                self.rfile.readline()
        length = self.headers.get("Content-Length")
        return None if length is None else self.rfile.read(int(length))

    def reply(self, status, body=None, headers=()):
        data = b"" if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        if body is not None and not isinstance(body, bytes):
            self.send_header("Content-Type", "application/json; charset=UTF-8")
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def hang(self, seconds):
        """No answer: the connection is held, then closed."""
        self.server.stopped.wait(seconds)
        self.close_connection = True

    def do_POST(self):
        try:
            self.double._post(self)
        except (OSError, ssl.SSLError):
            self.close_connection = True
        except Exception as error:  # a bug in the double must not pass silently
            self.double.violation(f"double error: {error!r}")
            self.reply(500, {"error": "double error"})

    def do_GET(self):
        self.double.violation(f"GET {self.path}")
        self.reply(405, b"")

    do_PUT = do_DELETE = do_PATCH = do_GET


def _headers(handler):
    return {name.lower(): value for name, value in handler.headers.items()}


# ---------------------------------------------------------------------------------------------
# FCM


FCM_SCOPE = "https://www.googleapis.com/auth/firebase.messaging"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
_FCM_ERROR = "type.googleapis.com/google.firebase.fcm.v1.FcmError"


def fcm_error(code, status, message, error_code=None, details=None):
    """The FCM v1 error shape: {"error": {"code", "message", "status", "details": [...]}}."""
    error = {"code": code, "message": message, "status": status}
    details = list(details or [])
    if error_code:
        details.append({"@type": _FCM_ERROR, "errorCode": error_code})
    if details:
        error["details"] = details
    return {"error": error}


def _bad_request(field, description):
    return fcm_error(400, "INVALID_ARGUMENT", description, details=[{
        "@type": "type.googleapis.com/google.rpc.BadRequest",
        "fieldViolations": [{"field": field, "description": description}]}])


FCM_ANSWERS = {
    "UNREGISTERED": (404, fcm_error(404, "NOT_FOUND", "Requested entity was not found.", "UNREGISTERED")),
    "INVALID_ARGUMENT": (400, fcm_error(400, "INVALID_ARGUMENT",
                                        "The registration token is not a valid FCM registration token",
                                        "INVALID_ARGUMENT")),
    "QUOTA_EXCEEDED": (429, fcm_error(429, "RESOURCE_EXHAUSTED", "Quota exceeded for the device.",
                                      "QUOTA_EXCEEDED")),
    "UNAVAILABLE": (503, fcm_error(503, "UNAVAILABLE", "The service is currently unavailable.", "UNAVAILABLE")),
    "INTERNAL": (500, fcm_error(500, "INTERNAL", "Internal error encountered.", "INTERNAL")),
    "SENDER_ID_MISMATCH": (403, fcm_error(403, "PERMISSION_DENIED", "SenderId mismatch", "SENDER_ID_MISMATCH")),
    "THIRD_PARTY_AUTH_ERROR": (401, fcm_error(401, "UNAUTHENTICATED", "Auth error from APNS or Web Push Service",
                                              "THIRD_PARTY_AUTH_ERROR")),
    "UNAUTHENTICATED": (401, fcm_error(
        401, "UNAUTHENTICATED", "Request had invalid authentication credentials. Expected OAuth 2 access token, "
        "login cookie or other valid authentication credential.")),
}


def _permission_denied(project_id):
    return fcm_error(403, "PERMISSION_DENIED",
                     f"Permission 'cloudmessaging.messages.create' denied on resource "
                     f"'//cloudresourcemanager.googleapis.com/projects/{project_id}' (or it may not exist).",
                     details=[{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "IAM_PERMISSION_DENIED",
                               "domain": "cloudresourcemanager.googleapis.com",
                               "metadata": {"permission": "cloudmessaging.messages.create"}}])


@dataclasses.dataclass
class ServiceAccount:
    path: str
    info: dict                 # what the JSON file holds
    public_key: object
    private_key: object

    project_id = property(lambda self: self.info["project_id"])
    client_email = property(lambda self: self.info["client_email"])
    private_key_id = property(lambda self: self.info["private_key_id"])
    token_uri = property(lambda self: self.info["token_uri"])


def make_service_account(path, token_uri, project_id="pushrelay-test", client_email=None):
    """Writes a Google service-account JSON key file (mode 0600) whose `token_uri` is the given
    one (an FCMDouble's `token_uri`) and returns it as a ServiceAccount (keys kept)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    origin = token_uri.rsplit("/", 1)[0]
    client_email = client_email or f"pushrelay@{project_id}.iam.gserviceaccount.com"
    info = {
        "type": "service_account",
        "project_id": project_id,
        "private_key_id": os.urandom(20).hex(),
        "private_key": key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption()).decode(),
        "client_email": client_email,
        "client_id": str(int.from_bytes(os.urandom(8), "big")),
        "auth_uri": f"{origin}/o/oauth2/auth",
        "token_uri": token_uri,
        "auth_provider_x509_cert_url": f"{origin}/oauth2/v1/certs",
        "client_x509_cert_url": f"{origin}/robot/v1/metadata/x509/{urllib.parse.quote(client_email)}",
        "universe_domain": "googleapis.com",
    }
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as file:
        json.dump(info, file, indent=2)
    return ServiceAccount(path, info, key.public_key(), key)


@dataclasses.dataclass
class TokenRequest:
    """One POST to the token endpoint."""
    form: dict
    header: dict = None
    claims: dict = None
    status: int = None
    error: str = None          # the OAuth error answered, or None
    access_token: str = None
    time: float = 0.0


@dataclasses.dataclass
class FCMRequest:
    """One POST to messages:send."""
    project_id: str
    headers: dict
    raw_body: bytes
    body: object = None
    message: dict = None
    token: str = None          # message.token
    access_token: str = None
    status: int = None
    answer: str = None         # "ok", a scripted answer's name, or what was refused
    name: str = None           # the message name answered with 200
    time: float = 0.0


_DURATION = re.compile(r"[0-9]+(\.[0-9]{1,9})?s")
_MESSAGE_KEYS = {"name", "data", "notification", "android", "webpush", "apns", "fcm_options", "token", "topic",
                 "condition"}
_ANDROID_KEYS = {"collapse_key", "priority", "ttl", "restricted_package_name", "data", "notification",
                 "fcm_options", "direct_boot_ok", "bandwidth_constrained_ok", "restricted_satellite_ok"}
_RESERVED_DATA = {"from", "notification", "message_type"}


class FCMDouble:
    """The FCM HTTP v1 API and the service account's token endpoint, https://127.0.0.1:<port>.

    `FCMDouble(service_account=None, expires_in=3599)`; accounts are added with
    `add_account(account)` or made with `make_account(path, project_id=...)` (which writes the
    file with this double's `token_uri`). `send_url(project_id)`.
    `script(registration_token, answers)`: 200, "UNREGISTERED", "INVALID_ARGUMENT",
    "QUOTA_EXCEEDED" or ("QUOTA_EXCEEDED", retry_after_seconds) (429, Retry-After), "UNAVAILABLE"
    or ("UNAVAILABLE", retry_after), "INTERNAL", "PERMISSION_DENIED", "SENDER_ID_MISMATCH",
    "THIRD_PARTY_AUTH_ERROR", "UNAUTHENTICATED", "hang" or ("hang", seconds).
    `script_token(answers)` for the token endpoint: 200, (status, oauth_error), "hang".
    `expire_tokens()`: every access token issued so far is refused from now on (401).
    Records: `token_requests` (TokenRequest), `messages` (FCMRequest), `for_token(token)`;
    counters: `token_fetches` (access tokens issued), `connections`; `violations`."""

    def __init__(self, service_account=None, expires_in=3599):
        self.expires_in = expires_in
        self.web_push = None  # a WebPushEndpoint whose /push/<id> paths this double serves too
        self.lock = threading.Lock()
        self.accounts = {}
        self.tokens = {}           # access token -> (account, expiry as time.time())
        self.token_requests, self.messages, self.violations = [], [], []
        self.token_fetches = 0
        self._scripts = _Scripts(200)
        self._token_scripts = _Scripts(200)
        self._counter = itertools.count(1)
        handler = type("FCMHandler", (_Handler,), {"double": self})
        self.server = _TLSServer(handler)
        self.port = self.server.server_address[1]
        if service_account is not None:
            self.add_account(service_account)

    base = property(lambda self: f"https://127.0.0.1:{self.port}")
    token_uri = property(lambda self: f"{self.base}/token")
    ca_file = property(lambda self: ca_file())
    connections = property(lambda self: self.server.connections)

    def send_url(self, project_id):
        return f"{self.base}/v1/projects/{project_id}/messages:send"

    def add_account(self, account):
        with self.lock:
            self.accounts[account.client_email] = account
        return account

    def make_account(self, path=None, project_id="pushrelay-test", client_email=None):
        path = path or os.path.join(work_dir(), f"service-account-{project_id}-{os.urandom(3).hex()}.json")
        return self.add_account(make_service_account(path, self.token_uri, project_id, client_email))

    @property
    def default(self):
        return self._scripts.default

    @default.setter
    def default(self, answer):
        self._scripts.default = answer

    def script(self, registration_token, answers):
        self._scripts.set(registration_token, answers)

    def script_token(self, answers):
        self._token_scripts.set(None, answers)

    def expire_tokens(self):
        with self.lock:
            self.tokens = {token: (account, 0) for token, (account, _) in self.tokens.items()}

    def for_token(self, registration_token):
        with self.lock:
            return [m for m in self.messages if m.token == registration_token]

    def violation(self, text):
        with self.lock:
            self.violations.append(text)

    def close(self):
        self.server.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _post(self, handler):
        path = urllib.parse.urlsplit(handler.path).path
        if path == "/token":
            return self._token(handler)
        if path.startswith("/push/") and self.web_push is not None:
            # Chrome's Web Push endpoints live on FCM's own host:port: a WebPushEndpoint served here.
            return self.web_push._post(handler)
        match = re.fullmatch(r"/v1/projects/([^/]+)/messages:send", path)
        if match:
            return self._send(handler, match.group(1))
        handler.body()
        self.violation(f"POST {handler.path}")
        handler.reply(404, fcm_error(404, "NOT_FOUND", "Requested entity was not found."))

    def _token(self, handler):
        record = TokenRequest(form={}, time=time.time())
        with self.lock:
            self.token_requests.append(record)
        raw = handler.body()

        def refuse(status, error, description, violation=True):
            record.status, record.error = status, error
            if violation:
                self.violation(f"token request: {error}: {description}")
            handler.reply(status, {"error": error, "error_description": description})

        content_type = handler.headers.get("Content-Type", "")
        if raw is None or not content_type.startswith("application/x-www-form-urlencoded"):
            return refuse(400, "invalid_request", f"not a form body (Content-Type {content_type!r})")
        try:
            form = urllib.parse.parse_qs(raw.decode(), strict_parsing=True)
        except (ValueError, UnicodeDecodeError):
            return refuse(400, "invalid_request", f"undecodable form {raw[:80]!r}")
        record.form = {k: v[0] if len(v) == 1 else v for k, v in form.items()}
        if any(len(v) != 1 for v in form.values()):
            return refuse(400, "invalid_request", f"repeated form fields {sorted(form)}")
        if record.form.get("grant_type") != JWT_BEARER:
            return refuse(400, "unsupported_grant_type", f"Invalid grant_type: {record.form.get('grant_type')}")
        try:
            header, claims, signing_input, signature = decode_jwt(record.form.get("assertion", ""), "RS256")
            record.header, record.claims = header, claims
        except JWTError as error:
            return refuse(400, "invalid_grant", f"Invalid JWT: {error.reason}")
        with self.lock:
            account = self.accounts.get(claims.get("iss"))
        if account is None:
            return refuse(400, "invalid_grant", f"Invalid grant: account not found (iss {claims.get('iss')!r})")
        if "kid" in header and header["kid"] != account.private_key_id:
            return refuse(400, "invalid_grant", f"Invalid JWT Signature. (kid {header['kid']!r})")
        try:
            verify_rs256(account.public_key, signing_input, signature)
        except JWTError:
            return refuse(400, "invalid_grant", "Invalid JWT Signature.")
        if FCM_SCOPE not in str(claims.get("scope", "")).split(" "):
            return refuse(400, "invalid_scope", f"Invalid OAuth scope or ID token audience provided. "
                                                f"(scope {claims.get('scope')!r})")
        if claims.get("aud") != self.token_uri:
            return refuse(400, "invalid_grant", f"Invalid JWT audience {claims.get('aud')!r}, not {self.token_uri}")
        iat, exp, now = claims.get("iat"), claims.get("exp"), time.time()
        if (not isinstance(iat, int) or not isinstance(exp, int) or exp <= now or iat > now + 60 or exp - iat > 3600
                or exp <= iat):
            return refuse(400, "invalid_grant", "Invalid JWT: Token must be a short-lived token (60 minutes) and in a "
                                                f"reasonable timeframe. Check your iat and exp values in the JWT "
                                                f"claim. (iat {iat}, exp {exp}, now {int(now)})")
        answer = self._token_scripts.next(None)
        if answer == "hang" or (isinstance(answer, tuple) and answer[0] == "hang"):
            record.error = "hang"
            return handler.hang(answer[1] if isinstance(answer, tuple) else 3600)
        if answer != 200:
            status, error = (answer, "internal_failure") if isinstance(answer, int) else answer
            return refuse(int(status), error, "scripted", violation=False)
        access_token = "ya29.double-" + b64url(os.urandom(24))
        with self.lock:
            self.tokens[access_token] = (account, now + self.expires_in)
            self.token_fetches += 1
        record.status, record.access_token = 200, access_token
        handler.reply(200, {"access_token": access_token, "expires_in": self.expires_in, "token_type": "Bearer"})

    def _send(self, handler, project_id):
        record = FCMRequest(project_id=project_id, headers=_headers(handler), raw_body=b"", time=time.time())
        with self.lock:
            self.messages.append(record)
        raw = handler.body()
        record.raw_body = raw or b""

        def answer(status, body, name, headers=(), violation=None):
            record.status, record.answer = status, name
            if violation:
                self.violation(f"send to {project_id}: {violation}")
            handler.reply(status, body, headers)

        # the bearer
        authorization = record.headers.get("authorization", "")
        scheme, _, access_token = authorization.partition(" ")
        record.access_token = access_token or None
        with self.lock:
            account, expiry = self.tokens.get(access_token, (None, 0))
        if scheme.lower() != "bearer" or account is None or expiry <= time.time():
            reason = "CREDENTIALS_MISSING" if not authorization else "ACCESS_TOKEN_EXPIRED"
            status, body = FCM_ANSWERS["UNAUTHENTICATED"]
            body = json.loads(json.dumps(body))
            body["error"]["details"] = [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason,
                                         "domain": "googleapis.com",
                                         "metadata": {"service": "fcm.googleapis.com",
                                                      "method": "google.firebase.fcm.v1.FcmService.SendMessage"}}]
            return answer(401, body, "UNAUTHENTICATED", [("WWW-Authenticate", 'Bearer realm="https://accounts.google'
                                                          '.com/", error="invalid_token"')],
                          violation=None if authorization else "no authorization header")
        if account.project_id != project_id:
            return answer(403, _permission_denied(project_id), "PERMISSION_DENIED")
        # the body
        content_type = record.headers.get("content-type", "")
        if raw is None or not content_type.startswith("application/json"):
            return answer(400, _bad_request("", "Invalid JSON payload received."), "bad request",
                          violation=f"body without length or Content-Type {content_type!r}")
        try:
            record.body = json.loads(raw)
        except ValueError:
            return answer(400, _bad_request("", "Invalid JSON payload received."), "bad request",
                          violation=f"not JSON: {raw[:80]!r}")
        problem = self._check_message(record)
        if problem:
            field, description = problem
            return answer(400, _bad_request(field, description), "bad request", violation=f"{field}: {description}")
        scripted = self._scripts.next(record.token)
        name, argument = (scripted[0], scripted[1]) if isinstance(scripted, tuple) else (scripted, None)
        if name == "hang":
            record.answer = "hang"
            return handler.hang(argument or 3600)
        if name == "PERMISSION_DENIED":
            return answer(403, _permission_denied(project_id), name)
        if name in FCM_ANSWERS:
            status, body = FCM_ANSWERS[name]
            retry = [("Retry-After", str(argument if argument is not None else 1))] \
                if name == "QUOTA_EXCEEDED" or argument is not None else []
            return answer(status, body, name, retry)
        if name not in (200, "200"):
            raise ValueError(f"unknown FCM answer {scripted!r}")
        record.name = f"projects/{project_id}/messages/0:{next(self._counter)}%{os.urandom(8).hex()}"
        return answer(200, {"name": record.name}, "ok")

    @staticmethod
    def _check_message(record):
        """(field, description) of the first thing FCM would refuse, or None."""
        body = record.body
        if not isinstance(body, dict) or not isinstance(body.get("message"), dict):
            return "message", "a JSON object with a message object is required"
        unknown = set(body) - {"message", "validate_only"}
        if unknown:
            return sorted(unknown)[0], f"Invalid JSON payload received. Unknown name {sorted(unknown)[0]!r}"
        message = record.message = body["message"]
        unknown = set(message) - _MESSAGE_KEYS
        if unknown:
            return f"message.{sorted(unknown)[0]}", "Invalid JSON payload received. Unknown name at 'message'"
        targets = [key for key in ("token", "topic", "condition") if key in message]
        if targets != ["token"] or not isinstance(message["token"], str) or not message["token"]:
            return "message.token", f"one registration token is the target (the relay's), not {targets}"
        record.token = message["token"]

        def check_data(where, data):
            if not isinstance(data, dict):
                return where, "data must be an object"
            for index, (key, value) in enumerate(data.items()):
                if not isinstance(value, str):
                    field = f"{where}[{index}].value"
                    return field, f"Invalid value at '{field}' (TYPE_STRING), {value!r}"
                if key in _RESERVED_DATA or key.startswith(("google.", "gcm.")):
                    return f"{where}[{index}].key", f"Invalid data key {key!r} (reserved)"
            size = sum(len(k.encode()) + len(v.encode()) for k, v in data.items())
            if size > 4096:
                return where, f"Message is too big: data of {size} bytes"
            return None

        if "data" in message:
            problem = check_data("message.data", message["data"])
            if problem:
                return problem
        notification = message.get("notification")
        if notification is not None:
            if not isinstance(notification, dict) or set(notification) - {"title", "body", "image"} or \
                    not all(isinstance(v, str) for v in notification.values()):
                return "message.notification", f"notification must hold title, body, image strings: {notification!r}"
        android = message.get("android")
        if android is not None:
            if not isinstance(android, dict):
                return "message.android", "android must be an object"
            unknown = set(android) - _ANDROID_KEYS
            if unknown:
                return f"message.android.{sorted(unknown)[0]}", "Invalid JSON payload received. Unknown name"
            if "priority" in android and str(android["priority"]).upper() not in ("NORMAL", "HIGH"):
                return "message.android.priority", f"Invalid value {android['priority']!r}"
            if "ttl" in android and not (isinstance(android["ttl"], str) and _DURATION.fullmatch(android["ttl"])):
                return "message.android.ttl", f"Invalid value {android['ttl']!r}: a duration such as \"3600s\""
            if "collapse_key" in android and not isinstance(android["collapse_key"], str):
                return "message.android.collapse_key", "collapse_key must be a string"
            if "data" in android:
                problem = check_data("message.android.data", android["data"])
                if problem:
                    return problem
        return None


# ---------------------------------------------------------------------------------------------
# Web Push


@dataclasses.dataclass
class Subscription:
    id: str
    endpoint: str
    private_key: object        # the browser's P-256 key (ECDH)
    public_bytes: bytes        # its uncompressed point, the p256dh
    auth: bytes                # the 16-byte auth secret
    application_server_key: bytes = None   # when set, the VAPID k must be this key

    def json(self):
        return {"endpoint": self.endpoint, "keys": {"p256dh": b64url(self.public_bytes), "auth": b64url(self.auth)}}


@dataclasses.dataclass
class WebPushRequest:
    """One POST to a push resource."""
    subscription: str          # the subscription id
    headers: dict
    raw_body: bytes
    ttl: int = None
    urgency: str = None
    topic: str = None
    vapid_header: dict = None
    vapid_claims: dict = None
    vapid_key: str = None      # k, base64url
    plaintext: bytes = None
    payload: object = None     # the decrypted JSON
    status: int = None
    problem: str = None        # why it was refused, when it was
    time: float = 0.0


WEBPUSH_MAX_BODY = 4096
_URGENCIES = ("very-low", "low", "normal", "high")


class WebPushEndpoint:
    """A Web Push service at https://127.0.0.1:<port>/push/<id> (`origin`).

    `make_subscription(application_server_key=None)` -> the browser's PushSubscription JSON
    {"endpoint", "keys": {"p256dh", "auth"}} (`subscriptions[id]` keeps its keys; `id_of(sub)`).
    `script(subscription_or_id, answers)`: 201 (default), 404, 410, 413, 429 or (429, retry_after),
    500, "hang" or ("hang", seconds). Unknown subscription ids are answered 404.
    Records: `requests` (WebPushRequest), `for_subscription(sub)`, `payloads(sub)`;
    `connections`; `violations`."""

    def __init__(self):
        self.lock = threading.Lock()
        self.subscriptions = {}
        self.requests, self.violations = [], []
        self._scripts = _Scripts(201)
        self._counter = itertools.count(1)
        handler = type("WebPushHandler", (_Handler,), {"double": self})
        self.server = _TLSServer(handler)
        self.port = self.server.server_address[1]

    origin = property(lambda self: f"https://127.0.0.1:{self.port}")
    base = origin
    ca_file = property(lambda self: ca_file())
    connections = property(lambda self: self.server.connections)

    def make_subscription(self, application_server_key=None):
        key = ec.generate_private_key(ec.SECP256R1())
        sub_id = b64url(os.urandom(12))
        if isinstance(application_server_key, str):
            application_server_key = b64url_decode(application_server_key)
        subscription = Subscription(
            id=sub_id, endpoint=f"{self.origin}/push/{sub_id}", private_key=key,
            public_bytes=key.public_key().public_bytes(serialization.Encoding.X962,
                                                       serialization.PublicFormat.UncompressedPoint),
            auth=os.urandom(16), application_server_key=application_server_key)
        with self.lock:
            self.subscriptions[sub_id] = subscription
        return subscription.json()

    @staticmethod
    def id_of(subscription):
        if isinstance(subscription, dict):
            subscription = subscription["endpoint"]
        return subscription.rsplit("/push/", 1)[-1]

    @property
    def default(self):
        return self._scripts.default

    @default.setter
    def default(self, answer):
        self._scripts.default = answer

    def script(self, subscription, answers):
        self._scripts.set(self.id_of(subscription), answers)

    def for_subscription(self, subscription):
        sub_id = self.id_of(subscription)
        with self.lock:
            return [r for r in self.requests if r.subscription == sub_id]

    def payloads(self, subscription=None):
        """The decrypted JSON payloads accepted (201) for `subscription` (or all), in order."""
        with self.lock:
            requests = list(self.requests)
        sub_id = subscription and self.id_of(subscription)
        return [r.payload for r in requests if r.status == 201 and (sub_id is None or r.subscription == sub_id)]

    def violation(self, text):
        with self.lock:
            self.violations.append(text)

    def close(self):
        self.server.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _post(self, handler):
        path = urllib.parse.urlsplit(handler.path).path
        sub_id = path[len("/push/"):] if path.startswith("/push/") else None
        record = WebPushRequest(subscription=sub_id, headers=_headers(handler), raw_body=b"", time=time.time())
        with self.lock:
            self.requests.append(record)
            subscription = self.subscriptions.get(sub_id)
        raw = handler.body()
        record.raw_body = raw or b""

        def refuse(status, problem, violation=True, headers=()):
            record.status, record.problem = status, problem
            if violation:
                self.violation(f"push to {sub_id}: {problem}")
            handler.reply(status, {"code": status, "errno": 999, "error": problem}, headers)

        if subscription is None:
            return refuse(404, f"no subscription at {path}", violation=sub_id is None)
        headers = record.headers
        if raw is None:
            return refuse(411, "no Content-Length")
        if headers.get("content-encoding") != "aes128gcm":
            return refuse(400, f"Content-Encoding {headers.get('content-encoding')!r}, not aes128gcm")
        ttl = headers.get("ttl")
        if ttl is None or not re.fullmatch(r"[0-9]+", ttl):
            return refuse(400, f"TTL header {ttl!r}, not an integer")
        record.ttl = int(ttl)
        record.urgency = headers.get("urgency")
        if record.urgency is not None and record.urgency not in _URGENCIES:
            return refuse(400, f"Urgency {record.urgency!r}")
        record.topic = headers.get("topic")
        if record.topic is not None and not re.fullmatch(r"[A-Za-z0-9_-]{1,32}", record.topic):
            return refuse(400, f"Topic {record.topic!r}: at most 32 base64url characters")
        # VAPID (RFC 8292): Authorization: vapid t=<jwt>, k=<public key>
        authorization = headers.get("authorization", "")
        scheme, _, rest = authorization.partition(" ")
        params = {}
        for part in rest.split(","):
            name, _, value = part.strip().partition("=")
            params[name.strip()] = value.strip()
        if scheme.lower() != "vapid" or not params.get("t") or not params.get("k"):
            return refuse(401, f"Authorization {authorization[:40]!r}… is not 'vapid t=<jwt>, k=<key>'")
        record.vapid_key = params["k"]
        try:
            k = b64url_decode(params["k"])
            vapid_key = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), k)
            if len(k) != 65:
                raise ValueError("not an uncompressed point")
        except ValueError as error:
            return refuse(401, f"VAPID k is not a base64url uncompressed P-256 point: {error}")
        try:
            header, claims, signing_input, signature = decode_jwt(params["t"], "ES256")
            record.vapid_header, record.vapid_claims = header, claims
            verify_es256(vapid_key, signing_input, signature)
        except JWTError as error:
            return refuse(401, f"VAPID JWT: {error.reason}")
        now = time.time()
        if claims.get("aud") != self.origin:
            return refuse(401, f"VAPID aud {claims.get('aud')!r}, not {self.origin}")
        exp = claims.get("exp")
        if not isinstance(exp, int) or exp <= now or exp > now + 86400 + 5:
            return refuse(401, f"VAPID exp {exp!r}: not in the next 24 hours (now {int(now)})")
        sub = claims.get("sub")
        if not isinstance(sub, str) or not sub.startswith(("mailto:", "https:")):
            return refuse(401, f"VAPID sub {sub!r}: not a mailto: or https: URI")
        if subscription.application_server_key is not None and k != subscription.application_server_key:
            return refuse(403, "VAPID key is not the subscription's application server key", violation=False)
        # the body (RFC 8291: one aes128gcm record, keyid the sender's 65-byte ephemeral key)
        if len(raw) > WEBPUSH_MAX_BODY:
            return refuse(413, f"body of {len(raw)} bytes")
        if len(raw) < 21 + 65:
            return refuse(400, f"body of {len(raw)} bytes: shorter than an aes128gcm header with a key")
        rs, keyid_length = int.from_bytes(raw[16:20], "big"), raw[20]
        if keyid_length != 65:
            return refuse(400, f"aes128gcm keyid of {keyid_length} bytes, not the 65-byte sender key")
        if len(raw) - 86 > rs:
            return refuse(400, f"more than one record (rs {rs}, {len(raw) - 86} bytes of ciphertext)")
        try:
            record.plaintext = http_ece.decrypt(raw, private_key=subscription.private_key,
                                                auth_secret=subscription.auth, version="aes128gcm")
        except Exception as error:  # http_ece raises several kinds
            return refuse(400, f"does not decrypt: {error!r}")
        try:
            record.payload = json.loads(record.plaintext)
        except ValueError:
            return refuse(400, f"plaintext is not JSON: {record.plaintext[:80]!r}")
        scripted = self._scripts.next(sub_id)
        name, argument = (scripted[0], scripted[1]) if isinstance(scripted, tuple) else (scripted, None)
        if name == "hang":
            record.problem = "hang"
            return handler.hang(argument or 3600)
        status = int(name)
        if status == 201:
            record.status = 201
            location = f"{self.origin}/message/{next(self._counter)}"
            return handler.reply(201, b"", [("Location", location), ("TTL", str(record.ttl))])
        headers = [("Retry-After", str(argument if argument is not None else 1))] if status == 429 else []
        return refuse(status, "scripted", violation=False, headers=headers)
