"""Shared pieces of the python peer tests: a real relay process on an ephemeral port, JSON over
HTTP to it, polling, and a quiet threaded HTTP server for local receivers."""
import atexit
import datetime
import http.server
import ipaddress
import json
import os
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request


def call(base, method, path, body=None, token=None, timeout=30):
    """One JSON request; returns (status, decoded body or None). The timeout is long: an answer
    on a busy machine can take seconds."""
    request = urllib.request.Request(base + path, method=method)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, data, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def fresh_db():
    """A new database for one relay: a SQLite file, or a new PostgreSQL database when
    PUSHRELAY_TEST_POSTGRES names the socket directory of a test PostgreSQL (Tests/Postgres/pg.sh)."""
    socket_dir = os.environ.get("PUSHRELAY_TEST_POSTGRES")
    if not socket_dir:
        return os.path.join(tempfile.mkdtemp(prefix="pushrelay-peer-"), "relay.sqlite")
    name = "p_" + os.urandom(8).hex()
    subprocess.run(["createdb", "-h", socket_dir, "-p", "5432", "-U", "postgres", name], check=True)
    return f"postgresql:///{name}?host={socket_dir}&port=5432&user=postgres"


# Every Relay started, so that a failed check can show what its relays wrote to stderr.
STARTED = []


@atexit.register
def _remove_logs():
    for relay in STARTED:
        if os.path.exists(relay.log):
            os.unlink(relay.log)


class Relay:
    """`pushrelay serve` on 127.0.0.1 with its own database; restarts keep the port."""

    def __init__(self, binary, *extra, key="peer-test-server-key", db=None):
        self.binary, self.extra, self.key = binary, extra, key
        self.db = db or fresh_db()
        self.port = 0
        # Its stderr, shown when a check fails (a crash's backtrace, MHD's last words).
        self.log = tempfile.mktemp(prefix="pushrelay-peer-", suffix=".err")
        STARTED.append(self)
        self.start()

    def start(self):
        """Starts the relay; returns the seconds until it was listening."""
        started = time.monotonic()
        self.proc = subprocess.Popen(
            [self.binary, "serve", "--listen", f"127.0.0.1:{self.port}", "--db", self.db, "--server-keys", self.key,
             "--log-level", "warning", "--push-allowed-hosts", "127.0.0.1:*,[::1]:*", *self.extra],
            stdout=subprocess.PIPE, stderr=open(self.log, "a"), text=True)
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            self.proc.kill()
            raise RuntimeError(f"relay did not start: {line!r}")
        self.base = line.strip().split("listening on ")[1]
        self.port = int(self.base.rsplit(":", 1)[1])
        return time.monotonic() - started

    def http(self, method, path, body=None, token=None, timeout=30):
        return call(self.base, method, path, body, token or self.key, timeout)

    def token(self, user, device="phone"):
        status, body = self.http("POST", "/v1/tokens", {"userId": user, "deviceId": device})
        assert status == 200, body
        return body["token"]

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


def post(relay, message_id, user, **extra):
    """Posts a message for `user` with a push text ("text of <id>"); asserts the 202."""
    status, body = relay.http("POST", "/v1/messages", {
        "id": message_id, "recipients": [user], "payload": {"n": message_id},
        "push": {"title": "Carol", "body": f"text of {message_id}"}, **extra})
    assert status == 202, body


def post_together(relay, message_ids, user, **extra):
    """Posts `post`'s messages in one batch (one commit): they fall into one push window however
    slow the machine is, where separate posts might straddle two."""
    status, body = relay.http("POST", "/v1/messages/batch", {"messages": [
        {"id": message_id, "recipients": [user], "payload": {"n": message_id},
         "push": {"title": "Carol", "body": f"text of {message_id}"}, **extra} for message_id in message_ids]})
    assert status == 200 and all(r["status"] == 202 for r in body["results"]), body


def pushed(relay, message_id):
    """Whether the relay has recorded the message pushed to every recipient."""
    status, body = relay.http("GET", f"/v1/messages/{message_id}")
    return status == 200 and all(r["state"] == "pushed" for r in body["recipients"])


def wait_for(predicate, timeout=30.0):
    """Whether `predicate` holds within `timeout` seconds, polled until then: for what a check waits
    for (a push, a stored state). The default is far beyond what any step takes on a quiet machine,
    so that a busy one (two shared cores, other builds) cannot fail a check; it costs nothing
    unless the check fails. Not for "it does not happen": a wait proves nothing there, a check
    waits instead for something that must come after it (see `notifier_peer.barrier`)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


class QuietServer(http.server.ThreadingHTTPServer):
    """A threaded HTTP server that does not print connections cut by a killed relay."""
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass


class Receiver(QuietServer):
    """A webhook receiver on 127.0.0.1 (it stands in for a push gateway): records every POST as
    (path, headers, body) and answers a status per path (default 204)."""

    def __init__(self):
        super().__init__(("127.0.0.1", 0), ReceiverHandler)
        self.lock = threading.Lock()
        self.pushes = []  # (path, headers, body)
        self.status = {}
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def base(self):
        return f"http://127.0.0.1:{self.server_address[1]}"

    def paths(self):
        """The path of every POST received, in order."""
        with self.lock:
            return [p for p, _, _ in self.pushes]

    def bodies(self, path=None):
        """The JSON bodies received (on `path`, or on every path), in order."""
        with self.lock:
            return [json.loads(body) for p, _, body in self.pushes if path is None or p == path]


class ReceiverHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with self.server.lock:
            self.server.pushes.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            status = self.server.status.get(self.path, 204)
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()


def cert_name(text):
    from cryptography import x509
    from cryptography.x509.oid import NameOID
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, text)])


def authority(label):
    """A test certificate authority made here (python `cryptography`): (private key, certificate)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    now = datetime.datetime.now(datetime.timezone.utc)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(cert_name(label)).issuer_name(cert_name(label))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    return key, cert


def leaf(ca, host, *more_hosts, valid_days=30, expired=False):
    """A server certificate signed by `ca` for `host` and `more_hosts` (DNS names, or IP literals
    which go in as IP addresses): (private key, certificate)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, ca_cert = ca
    key = ec.generate_private_key(ec.SECP256R1())
    start = now - datetime.timedelta(days=10 if expired else 1)
    end = now - datetime.timedelta(days=2) if expired else now + datetime.timedelta(days=valid_days)
    names = []
    for entry in (host, *more_hosts):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(entry)))
        except ValueError:
            names.append(x509.DNSName(entry))
    cert = (x509.CertificateBuilder().subject_name(cert_name(host)).issuer_name(ca_cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return key, cert


def write(path, *parts):
    with open(path, "wb") as file:
        for part in parts:
            file.write(part)
    return path


def registry():
    """A list of `(name, fn)` checks and the decorator `@check("name")` that adds to it."""
    checks = []

    def check(name):
        def decorator(fn):
            checks.append((name, fn))
            return fn
        return decorator
    return checks, check


def run_checks(checks, run):
    """Runs `(name, fn)` pairs through `run(fn)` (which may return a detail line), prints one line
    per check and the closing `N passed, M failed`; returns the exit code."""
    import traceback
    passed = failed = 0
    for name, fn in checks:
        first = len(STARTED)
        try:
            detail = run(fn)
            passed += 1
            print(f"ok     {name}" + (f": {detail}" if detail else ""))
        except Exception:
            failed += 1
            print(f"FAILED {name}")
            traceback.print_exc()
            for relay in STARTED[first:]:
                with open(relay.log, errors="replace") as log:
                    lines = log.readlines()
                # A crash report names the crashed thread first and lists every other one after:
                # show its head, then the log's last lines.
                crashed = next((i for i, line in enumerate(lines) if "crashed" in line or "Fatal error" in line), None)
                if crashed is not None and crashed < len(lines) - 40:
                    print(f"--- stderr of the relay on port {relay.port}, from its crash report:")
                    print("".join(lines[max(0, crashed - 5):crashed + 60]), end="")
                tail = lines[-40:]
                if tail:
                    print(f"--- stderr of the relay on port {relay.port}, last {len(tail)} lines:")
                    print("".join(tail), end="")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0
