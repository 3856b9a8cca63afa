#!/usr/bin/env python3
"""End-to-end checks of PushRelay's WebSocket gateway with an independent peer: the python
`websockets` library (its own RFC 6455 implementation, strict about the handshake and framing).

Starts the real `pushrelay` binary on an ephemeral port with a temporary database.
Usage: websocket_peer.py PATH_TO_PUSHRELAY   (the Makefile runs it from a virtual environment)
"""
import asyncio
import base64
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import traceback

import websockets
from relaypeer import Relay, call, registry, wait_for
from websockets.exceptions import ConnectionClosed

KEY = "peer-test-server-key"
WAIT = 30  # seconds for a frame: far beyond what it takes, for a busy machine


def start_relay(binary, *extra):
    relay = Relay(binary, *extra, key=KEY)
    return relay.proc, relay.base


def http(base, method, path, body=None, token=KEY):
    return call(base, method, path, body, token)


def token(base, user, device="phone"):
    status, body = http(base, "POST", "/v1/tokens", {"userId": user, "deviceId": device})
    assert status == 200, body
    return body["token"]


def ws_url(base, user_token, **query):
    params = "&".join([f"access_token={user_token}"] + [f"{k}={v}" for k, v in query.items()])
    return base.replace("http://", "ws://") + "/v1/ws?" + params


async def recv_json(ws):
    return json.loads(await asyncio.wait_for(ws.recv(), WAIT))


RESULTS, check = registry()


@check("handshake, welcome, catch-up, synced, live, in order")
async def protocol_frames(base):
    for n in range(1, 4):
        http(base, "POST", "/v1/messages", {"id": f"p{n}", "recipients": ["alice"], "payload": {"n": n}})
    async with websockets.connect(ws_url(base, token(base, "alice"), after=1)) as ws:
        welcome = await recv_json(ws)
        assert welcome["type"] == "welcome" and welcome["headSeq"] == 3 and welcome["complete"] is True, welcome
        assert [(await recv_json(ws))["seq"] for _ in range(2)] == [2, 3]
        assert await recv_json(ws) == {"type": "synced", "seq": 3}
        status, body = http(base, "POST", "/v1/messages", {"id": "p4", "recipients": ["alice"], "payload": {"n": 4}})
        assert status == 202 and body["recipients"][0]["delivery"] == "live", body
        live = await recv_json(ws)
        assert live["type"] == "message" and live["seq"] == 4 and live["payload"] == {"n": 4}, live
        await ws.send(json.dumps({"type": "ack", "seq": 4}))
        state = lambda: http(base, "GET", "/v1/messages/p4")[1]["recipients"][0]["state"]  # noqa: E731
        assert await asyncio.to_thread(wait_for, lambda: state() == "acked"), state()


@check("ping from the client is answered with a pong")
async def ping_pong(base):
    async with websockets.connect(ws_url(base, token(base, "bob"))) as ws:
        await recv_json(ws)
        # The waiter resolves only on a pong carrying the ping's payload (RFC 6455 §5.5.3): a relay
        # that answers none, or another payload, fails here with a timeout.
        pong_waiter = await ws.ping(b"are-you-there")
        latency = await asyncio.wait_for(pong_waiter, WAIT)
        return f"pong after {latency * 1000:.1f} ms"


@check("the server pings an idle client, which stays connected by answering")
async def server_pings(base):
    async with websockets.connect(ws_url(base, token(base, "carol")), ping_interval=None) as ws:
        await recv_json(ws)
        await recv_json(ws)  # synced
        await asyncio.sleep(1.5)  # several server pings at 200 ms; websockets answers them itself
        status, body = http(base, "GET", "/v1/users/carol/presence")
        assert body["online"] is True, body


@check("normal close is echoed with 1000")
async def close_normal(base):
    ws = await websockets.connect(ws_url(base, token(base, "dave")))
    await recv_json(ws)
    await ws.close(code=1000, reason="bye")
    assert ws.close_code == 1000, ws.close_code


@check("a binary frame is refused with 1003")
async def binary_refused(base):
    async with websockets.connect(ws_url(base, token(base, "erin"))) as ws:
        await recv_json(ws)
        await ws.send(b"\x01\x02")
        try:
            while True:
                await asyncio.wait_for(ws.recv(), WAIT)
        except ConnectionClosed as closed:
            assert closed.rcvd.code == 1003, closed


@check("a message over the limit is refused with 1009")
async def too_big(base):
    async with websockets.connect(ws_url(base, token(base, "fay")), max_size=None) as ws:
        await recv_json(ws)
        await ws.send("x" * 5000)
        try:
            while True:
                await asyncio.wait_for(ws.recv(), WAIT)
        except ConnectionClosed as closed:
            assert closed.rcvd.code == 1009, closed


@check("shutdown closes sockets with 1001")
async def going_away(base, relay):
    ws = await websockets.connect(ws_url(base, token(base, "gus")))
    await recv_json(ws)
    relay.terminate()
    try:
        while True:
            await asyncio.wait_for(ws.recv(), WAIT)
    except ConnectionClosed as closed:
        assert closed.rcvd is not None and closed.rcvd.code == 1001, closed
    assert relay.wait(10) == 0


async def echo_checks(binary):
    """`pushrelay ws-echo`: text, binary, a fragmented message, and close, echoed by a strict peer."""
    tmp = tempfile.mkdtemp(prefix="pushrelay-echo-")
    proc = subprocess.Popen([binary, "ws-echo", "--listen", "127.0.0.1:0", "--db", os.path.join(tmp, "x.sqlite")],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        base = proc.stdout.readline().strip().split("listening on ")[1].replace("http://", "ws://")
        async with websockets.connect(base + "/anything") as ws:
            await ws.send("héllo")
            assert await ws.recv() == "héllo"
            await ws.send(b"\x00\x01\x02")
            assert await ws.recv() == b"\x00\x01\x02"
            await ws.send(["frag", "mented ", "✓"])  # one message in three frames
            assert await ws.recv() == "fragmented ✓"
            await ws.close(code=1000)
            assert ws.close_code == 1000
        # Several frames in one write, the last of them bad or a close (the shapes of Autobahn's
        # 3.2, 5.15 and 7.1.x): what came before is answered, then the close, and nothing after
        # (no pong for the ping that follows the bad frame).
        host, port = base[len("ws://"):].split(":")
        text, close, pong = 0x1, 0x8, 0xA
        hello = frame(0x81, b"Hello, world!")
        assert raw_exchange(host, int(port), hello + frame(0xA1, b"Hello, world!") + frame(0x89, b"")) == [
            (text, b"Hello, world!"), (close, struct.pack("!H", 1002) + b"reserved bits set")]
        fragments = frame(0x01, b"fragment1") + frame(0x80, b"fragment2") + frame(0x00, b"fragment3")
        answer = raw_exchange(host, int(port), fragments + frame(0x81, b"fragment4"))
        assert answer[0] == (text, b"fragment1fragment2") and len(answer) == 2, answer
        assert answer[1][0] == close and answer[1][1][:2] == struct.pack("!H", 1002), answer
        assert raw_exchange(host, int(port), frame(0x89, b"p") + hello + frame(0x88, struct.pack("!H", 1000))) == [
            (pong, b"p"), (text, b"Hello, world!"), (close, struct.pack("!H", 1000))]
    finally:
        proc.terminate()
        proc.wait(10)


def frame(first_byte, payload):
    """A masked client frame (mask key 0, so the payload reads as is); payload under 126 bytes."""
    return bytes([first_byte, 0x80 | len(payload)]) + b"\0\0\0\0" + payload


def raw_exchange(host, port, data):
    """Opens a WebSocket by hand, sends `data` in one write, returns the server's frames
    (opcode, payload) up to and including its close frame."""
    with socket.create_connection((host, port), timeout=5) as sock:
        key = base64.b64encode(os.urandom(16)).decode()
        sock.sendall((f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = sock.recv(4096)
            assert chunk, "closed during the handshake"
            received += chunk
        head, received = received.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 101"), head
        sock.sendall(data)
        frames = []
        while True:
            while len(received) >= 2 and len(received) >= 2 + (received[1] & 0x7F):
                assert received[1] & 0x7F < 126, "a test answer is short"
                length = received[1] & 0x7F
                frames.append((received[0] & 0x0F, received[2:2 + length]))
                received = received[2 + length:]
                if frames[-1][0] == 0x8:
                    return frames
            chunk = sock.recv(4096)
            if not chunk:
                return frames
            received += chunk


async def main(binary):
    passed = failed = 0
    for name, fn in RESULTS:
        relay, base = start_relay(binary, "--ping-interval-ms", "200", "--max-ws-message-bytes", "4096")
        try:
            if fn.__code__.co_argcount == 2:
                await fn(base, relay)
            else:
                await fn(base)
            passed += 1
            print(f"ok     {name}")
        except Exception:
            failed += 1
            print(f"FAILED {name}")
            traceback.print_exc()
        finally:
            if relay.poll() is None:
                relay.kill()
                relay.wait()
    try:
        await echo_checks(binary)
        passed += 1
        print("ok     ws-echo echoes text, binary and fragmented messages, and what precedes a close")
    except Exception:
        failed += 1
        print("FAILED ws-echo echoes text, binary and fragmented messages, and what precedes a close")
        traceback.print_exc()
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1])))
