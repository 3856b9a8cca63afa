#!/usr/bin/env python3
"""https push receivers with a test CA made here (python `cryptography`): the relay's own TLS
client (OpenSSL) must deliver to a good certificate and refuse, with a clear lastError, a wrong
host name, an expired certificate and an unknown CA. Usage: tls_peer.py PATH_TO_PUSHRELAY"""
import http.server
import os
import ssl
import sys
import tempfile
import threading

from cryptography.hazmat.primitives import serialization

from relaypeer import QuietServer, Relay, authority, leaf, run_checks, wait_for, write

DIR = tempfile.mkdtemp(prefix="pushrelay-tls-")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with self.server.lock:
            self.server.paths.append(self.path)
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()


def receiver(key, cert):
    server = QuietServer(("127.0.0.1", 0), Handler)
    server.lock, server.paths = threading.Lock(), []
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    label = str(id(server))
    context.load_cert_chain(
        write(os.path.join(DIR, f"{label}.crt"), cert.public_bytes(serialization.Encoding.PEM)),
        write(os.path.join(DIR, f"{label}.key"), key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def check_tls(binary):
    ca = authority("PushRelay test CA")
    stranger = authority("Some other CA")
    ca_file = write(os.path.join(DIR, "ca.pem"), ca[1].public_bytes(serialization.Encoding.PEM))
    servers = {
        "good": receiver(*leaf(ca, "localhost")),
        "wronghost": receiver(*leaf(ca, "push.example.com")),
        "expired": receiver(*leaf(ca, "localhost", expired=True)),
        "unknownca": receiver(*leaf(stranger, "localhost")),
    }
    relay = Relay(binary, "--push-delay-ms", "0", "--push-ca-file", ca_file,
                  "--push-allowed-hosts", "localhost:*,127.0.0.1:*,[::1]:*")
    try:
        for label, server in servers.items():
            status, body = relay.http("PUT", f"/v1/users/{label}/devices/phone",
                                      {"pushUrl": f"https://localhost:{server.server_address[1]}/{label}"})
            assert status in (200, 201), body
            status, body = relay.http("POST", "/v1/messages", {"id": f"m-{label}", "recipients": [label], "payload": {}})
            assert status == 202, body
        assert wait_for(lambda: servers["good"].paths == ["/good"]), servers["good"].paths
        assert wait_for(lambda: relay.http("GET", "/v1/messages/m-good")[1]["recipients"][0]["state"] == "pushed")

        def last_error(user):
            status, body = relay.http("GET", f"/v1/deliveries?state=pending&userId={user}")
            return (body["deliveries"] or [{}])[0].get("lastError") or ""
        expected = {"wronghost": "hostname mismatch", "expired": "certificate has expired",
                    "unknownca": "unable to get local issuer certificate"}
        for label, words in expected.items():
            assert wait_for(lambda: words in last_error(label)), (label, last_error(label))
            assert servers[label].paths == [], (label, servers[label].paths)
        return "; ".join(f"{label}: {last_error(label)!r}" for label in expected)
    finally:
        relay.stop()
        for server in servers.values():
            server.shutdown()


if __name__ == "__main__":
    sys.exit(run_checks([("https receivers: verified with OpenSSL against the configured CA, SNI and host name",
                          check_tls)], lambda fn: fn(sys.argv[1])))
