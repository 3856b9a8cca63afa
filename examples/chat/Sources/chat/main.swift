// A terminal chat on PushRelay: messages arrive live (and are caught up after a reconnect),
// typing indicators travel as signals, and read messages are acked.
//
//     swift run --package-path examples/chat chat alice bob      # in one terminal
//     swift run --package-path examples/chat chat bob alice      # in another
//
// It needs a relay (`make run`) and its server key in PUSHRELAY_SERVER_KEY (`make run` prints
// it; PUSHRELAY_URL defaults to http://127.0.0.1:8080). A real app gets its token from its chat
// server; here the example plays the chat server too, with the server key: it mints the token,
// posts each line as a message, and relays typing signals to the other member.
import Foundation
import RelayClient

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

let arguments = CommandLine.arguments
let environment = ProcessInfo.processInfo.environment
guard arguments.count == 3, let key = environment["PUSHRELAY_SERVER_KEY"],
    let relay = URL(string: environment["PUSHRELAY_URL"] ?? "http://127.0.0.1:8080")
else {
    print("usage: PUSHRELAY_SERVER_KEY=… [PUSHRELAY_URL=http://127.0.0.1:8080] chat ME OTHER")
    exit(2)
}
let (me, other) = (arguments[1], arguments[2])
let conversation = [me, other].sorted().joined(separator: "+")

/// The chat server's side: calls to the relay's REST API with the server key.
struct ChatServer: Sendable {
    let relay: URL
    let key: String

    @discardableResult
    func call(_ method: String, _ path: String, _ body: [String: any Sendable]) async throws -> [String: Any] {
        var request = URLRequest(url: relay.appendingPathComponent(path))
        request.httpMethod = method
        request.setValue("Bearer \(key)", forHTTPHeaderField: "Authorization")
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = try JSONSerialization.data(withJSONObject: body)
        // A short timeout and a fresh connection per call: a pooled one over a path that just
        // went dead (the client's socket was found dead) would hang the reconnect's token.
        request.timeoutInterval = 5
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let (data, _) = try await session.data(for: request)
        return (try? JSONSerialization.jsonObject(with: data) as? [String: Any]) ?? [:]
    }
}
let chatServer = ChatServer(relay: relay, key: key)

struct Line: Codable { var from: String; var text: String }

/// Prints a line at once: piped (a script, a log), stdout is block-buffered, and a line shown only
/// at exit is a line the reader waits for in vain.
func show(_ text: String) {
    print(text)
    fflush(nil)
}

var configuration = RelayClient.Configuration(relayURL: relay, userId: me, deviceId: "terminal") {
    [chatServer, me] _ in
    let minted = try await chatServer.call("POST", "v1/tokens", ["userId": me, "deviceId": "terminal", "ttl": 3600])
    return minted["token"] as? String ?? ""
}
configuration.cursorStore = FileCursorStore(
    url: FileManager.default.temporaryDirectory.appendingPathComponent("pushrelay-chat-\(me).json"))
let client = RelayClient(configuration: configuration)
await client.connect()

// Incoming: messages (acked once shown), typing indicators, connection states.
Task {
    for await message in client.messages {
        if let line = try? message.decodePayload(as: Line.self) { show("\(line.from): \(line.text)") }
        await client.ack(message.seq)
    }
}
Task {
    for await signal in client.signals where signal.name == "typing" {
        show("(\(signal.senderId ?? "someone") is typing…)")
    }
}
Task {
    for await state in client.states { show("[\(state)]") }
}

// Outgoing: each line typed is a message to both members; a typing signal goes first.
while let text = readLine(strippingNewline: true) {
    guard !text.isEmpty else { continue }
    try? await client.send(signal: RelaySignal(conversationId: conversation, name: "typing"))
    _ = try? await chatServer.call(
        "POST", "v1/signals",
        ["recipients": [other], "conversationId": conversation, "name": "typing", "senderId": me])
    _ = try? await chatServer.call(
        "POST", "v1/messages",
        [
            "id": UUID().uuidString, "recipients": [me, other], "conversationId": conversation, "senderId": me,
            "payload": ["from": me, "text": text], "push": ["title": me, "body": text],
        ])
}
await client.disconnect()
