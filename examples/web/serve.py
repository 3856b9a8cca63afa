#!/usr/bin/env python3
"""The web chat example's development server: the page, its service worker, the SDK, and the two
calls of "the chat server" that need the relay's server key (which never reaches the browser).

    python3 examples/web/serve.py [--relay http://127.0.0.1:8080] [--server-key KEY]
                                  [--listen 127.0.0.1:8000] [--users alice,bob]

Open http://localhost:8000/ (another origin than the relay's 127.0.0.1:8080: the relay must list
it in corsAllowedOrigins). Serves:

- `/`, `/app.js`, `/sw.js`: this folder's files;
- `/pushrelay.js`, `/pushrelay-sw.js`: the SDK, read from ../../clients/js at each request (no copy,
  no build step), so the page always runs the SDK of this checkout;
- `GET /config.json`: the relay's URL and the two users;
- `POST /api/token {userId, deviceId}`: a client token for that user's device, minted by the
  relay (`POST /v1/tokens` with the server key);
- `POST /api/messages {from, text}`: posts the message to both users (`POST /v1/messages`).

A real chat server checks who is asking before it mints a token; this one gives any of the two
users a token to whoever asks, which is why it listens on loopback only. Standard library only.
"""
import argparse
import http.server
import json
import os
import pathlib
import sys
import urllib.error
import urllib.request
import uuid

HERE = pathlib.Path(__file__).resolve().parent
SDK = HERE.parent.parent / "clients" / "js"
FILES = {
    "/": HERE / "index.html",
    "/index.html": HERE / "index.html",
    "/app.js": HERE / "app.js",
    "/sw.js": HERE / "sw.js",
    "/pushrelay.js": SDK / "pushrelay.js",
    "/pushrelay-sw.js": SDK / "pushrelay-sw.js",
}
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8"}


class ChatServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, listen, relay, server_key, users):
        host, _, port = listen.rpartition(":")
        super().__init__((host, int(port)), Handler)
        self.relay, self.server_key, self.users = relay.rstrip("/"), server_key, users

    def handle_error(self, request, client_address):
        pass  # a browser that went away mid-answer

    def relay_call(self, method, path, body):
        """One JSON call to the relay with the server key: (status, decoded body)."""
        request = urllib.request.Request(self.relay + path, method=method, data=json.dumps(body).encode(),
                                         headers={"Authorization": f"Bearer {self.server_key}",
                                                  "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return answer.status, json.loads(answer.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")
        except OSError as error:
            return 502, {"error": {"code": "relay_unreachable", "message": str(error)}}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body, content_type="application/json"):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        if path == "/config.json":
            return self.reply(200, {"relay": self.server.relay, "users": self.server.users})
        file = FILES.get(path)
        if file is None:
            return self.reply(404, {"error": "not found"})
        self.reply(200, file.read_bytes(), TYPES[file.suffix])

    def do_POST(self):
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        except ValueError:
            return self.reply(400, {"error": "not JSON"})
        users = self.server.users
        if self.path == "/api/token":
            if body.get("userId") not in users or not isinstance(body.get("deviceId"), str):
                return self.reply(400, {"error": "userId must be one of " + ", ".join(users)})
            status, answer = self.server.relay_call(
                "POST", "/v1/tokens", {"userId": body["userId"], "deviceId": body["deviceId"], "ttl": 3600})
            return self.reply(status, answer)
        if self.path == "/api/messages":
            sender, text = body.get("from"), body.get("text")
            if sender not in users or not isinstance(text, str) or not text.strip():
                return self.reply(400, {"error": "needs from (a user) and text"})
            status, answer = self.server.relay_call("POST", "/v1/messages", {
                "id": f"msg-{uuid.uuid4()}", "recipients": users, "conversationId": "-".join(users),
                "senderId": sender, "payload": {"from": sender, "text": text},
                "push": {"title": sender, "body": text[:200]}})
            return self.reply(status, answer)
        self.reply(404, {"error": "not found"})


def default_server_key():
    """$PUSHRELAY_SERVER_KEYS, else the key `make run` keeps in .pushrelay-dev.env."""
    keys = os.environ.get("PUSHRELAY_SERVER_KEYS")
    if not keys:
        env = HERE.parent.parent / ".pushrelay-dev.env"
        if env.exists():
            for line in env.read_text().splitlines():
                if line.startswith("PUSHRELAY_SERVER_KEYS="):
                    keys = line.split("=", 1)[1].strip().strip("'\"")
    return keys.split(",")[0].strip() if keys else None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--relay", default="http://127.0.0.1:8080", help="the relay's URL, as the browser reaches it")
    parser.add_argument("--server-key", default=default_server_key(),
                        help="the relay's server key (default: $PUSHRELAY_SERVER_KEYS, else .pushrelay-dev.env)")
    parser.add_argument("--listen", default="127.0.0.1:8000", help="host:port to serve the page on")
    parser.add_argument("--users", default="alice,bob", help="the two users (comma-separated)")
    args = parser.parse_args()
    if not args.server_key:
        parser.error("no server key: pass --server-key (make run prints it)")
    users = [u.strip() for u in args.users.split(",") if u.strip()]
    server = ChatServer(args.listen, args.relay, args.server_key, users)
    port = server.server_address[1]
    print(f"chat page on http://localhost:{port}/ (relay {args.relay})")
    print(f"the relay must allow this origin: PUSHRELAY_CORS_ALLOWED_ORIGINS=http://localhost:{port}")
    for user in users:
        print(f"  http://localhost:{port}/?user={user}")
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
