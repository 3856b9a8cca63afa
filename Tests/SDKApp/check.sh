#!/usr/bin/env bash
# Builds a throw-away app package that depends on this repository by path and uses the
# `RelayClient` product, the way an app would, then runs it against a real relay: it must
# receive a message posted by the "chat server" and ack it. Usage: Tests/SDKApp/check.sh BINARY
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
TMP=$(mktemp -d /tmp/pushrelay-sdkapp.XXXXXX)
# SwiftPM names a path dependency after its folder (an app depending on the git URL uses the
# repository's name instead).
IDENTITY=$(basename "$REPO" | tr '[:upper:]' '[:lower:]')
PIDS=()
trap 'for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$TMP"' EXIT

mkdir -p "$TMP/app/Sources/ChatApp"
cat >"$TMP/app/Package.swift" <<SWIFT
// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "ChatApp",
    platforms: [.macOS(.v12), .iOS(.v15)],
    dependencies: [.package(path: "$REPO")],
    targets: [
        .executableTarget(name: "ChatApp", dependencies: [.product(name: "RelayClient", package: "$IDENTITY")])
    ]
)
SWIFT
cat >"$TMP/app/Sources/ChatApp/main.swift" <<'SWIFT'
import Foundation
import RelayClient

// An app: connect as `ann` on `phone`, print the first message as the chat server sent it, ack it.
let arguments = CommandLine.arguments
guard arguments.count == 3, let relay = URL(string: arguments[1]) else {
    print("usage: ChatApp RELAY_URL TOKEN")
    exit(2)
}
let token = arguments[2]
let client = RelayClient(
    configuration: .init(relayURL: relay, userId: "ann", deviceId: "phone", tokenProvider: { _ in token }))
await client.connect()
for await message in client.messages {
    print("message \(message.seq) \(String(decoding: message.payload, as: UTF8.self))")
    await client.ack(message.seq)
    try await Task.sleep(nanoseconds: 500_000_000)  // let the batched ack go out
    break
}
await client.disconnect()
SWIFT

echo "building the app package against the RelayClient product"
(cd "$TMP/app" && swift build -q 2>&1 | grep -v "^warning: you may be able" || true)
APP="$TMP/app/.build/debug/ChatApp"
[[ -x "$APP" ]] || { echo "FAILED: the app did not build"; exit 1; }
# Only the SDK's targets were compiled (SwiftPM lays out folders for every target, but no
# server target, and so no C library, has an object file).
for target in RelayServer RelayStore RelayHTTP RelayDelivery; do
    if ls "$TMP/app/.build/debug/$target.build/"*.o >/dev/null 2>&1; then echo "FAILED: compiled $target"; exit 1; fi
done

"$BIN" serve --listen 127.0.0.1:0 --db "$TMP/relay.sqlite" --server-keys sdk-server-key-0123 --log-level warning \
    >"$TMP/relay.out" 2>"$TMP/relay.err" &
PIDS+=($!)
# Every wait below is a poll up to a minute: far beyond what each step takes, for a busy machine.
for _ in $(seq 600); do grep -qs "listening on" "$TMP/relay.out" && break; sleep 0.1; done
URL=$(sed -n 's/.*listening on //p' "$TMP/relay.out")
TOKEN=$(curl -sf -X POST "$URL/v1/tokens" -H 'Authorization: Bearer sdk-server-key-0123' -H 'Content-Type: application/json' \
    -d '{"userId":"ann","deviceId":"phone"}' | sed 's/.*"token":"\([^"]*\)".*/\1/')
"$APP" "$URL" "$TOKEN" >"$TMP/app.out" 2>&1 &
APP_PID=$!
PIDS+=($APP_PID)
sleep 1
curl -sf -o /dev/null -X POST "$URL/v1/messages" -H 'Authorization: Bearer sdk-server-key-0123' -H 'Content-Type: application/json' \
    -d '{"id":"hello-app","recipients":["ann"],"payload":{"text":"hi","n":1.10}}'
for _ in $(seq 600); do kill -0 $APP_PID 2>/dev/null || break; sleep 0.1; done
cat "$TMP/app.out"
grep -qF 'message 1 {"text":"hi","n":1.10}' "$TMP/app.out" || { echo "FAILED: the app did not get the message byte for byte"; exit 1; }
echo "ok     a throw-away app package builds against the RelayClient product and gets a message byte for byte"

# The runnable example (examples/chat), as its README runs it: bob listens, alice types a line;
# bob sees alice typing (a signal) and her message (live). A signal reaches only a device online
# when it is sent: alice starts once the relay sees bob online, and bob reads on until alice is
# done (then 5 s more for her line to reach him), however long each takes to start.
swift build --package-path "$REPO/examples/chat" --scratch-path "$TMP/chat-build" 2>&1 | tail -1
CHAT="$TMP/chat-build/debug/chat"
export PUSHRELAY_SERVER_KEY=sdk-server-key-0123 PUSHRELAY_URL="$URL"
(for _ in $(seq 1200); do [[ -e "$TMP/alice.done" ]] && break; sleep 0.1; done; sleep 5) | "$CHAT" bob alice >"$TMP/bob.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 600); do
    curl -sf "$URL/v1/users/bob/presence" -H 'Authorization: Bearer sdk-server-key-0123' | grep -q '"online":true' && break
    sleep 0.1
done
(sleep 2; echo "hello bob"; sleep 2) | "$CHAT" alice bob >"$TMP/alice.out" 2>&1
touch "$TMP/alice.done"
for _ in $(seq 600); do grep -q "alice: hello bob" "$TMP/bob.out" && grep -q "(alice is typing…)" "$TMP/bob.out" && break; sleep 0.1; done
cat "$TMP/bob.out"
why() { echo "FAILED: $1"; echo "--- alice:"; cat "$TMP/alice.out"; echo "--- relay:"; tail -20 "$TMP/relay.err"; exit 1; }
grep -q "alice: hello bob" "$TMP/bob.out" || why "bob did not get alice's message"
grep -q "(alice is typing…)" "$TMP/bob.out" || why "bob did not see alice typing"
echo "ok     examples/chat: bob sees alice typing and gets her line live"
echo "2 passed, 0 failed"
