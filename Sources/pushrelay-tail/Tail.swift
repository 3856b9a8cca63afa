import Foundation
import RelayClient

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

enum Tail {
    static func run(_ arguments: [String]) async {
        func value(_ flag: String) -> String? {
            guard let index = arguments.firstIndex(of: flag), index + 1 < arguments.count else { return nil }
            return arguments[index + 1]
        }
        guard let urlText = value("--url"), let url = URL(string: urlText), let user = value("--user") else {
            FileHandle.standardError.write(
                Data(
                    "usage: pushrelay-tail --url URL --user USER [--device DEVICE] (--key SERVER_KEY | --token TOKEN)\n"
                        .utf8))
            exit(2)
        }
        let device = value("--device") ?? "tail"
        let key = value("--key")
        let fixedToken = value("--token")
        var configuration = RelayClient.Configuration(relayURL: url, userId: user, deviceId: device) { _ in
            if let fixedToken { return fixedToken }
            guard let key else { throw CancellationError() }
            return try await mintToken(url: url, key: key, user: user, device: device)
        }
        let cursorFile = FileManager.default.temporaryDirectory.appendingPathComponent("pushrelay-tail-\(user).cursor")
        configuration.cursorStore = FileCursorStore(url: cursorFile)
        let client = RelayClient(configuration: configuration)
        Task {
            for await state in client.states { FileHandle.standardError.write(Data("[\(state)]\n".utf8)) }
        }
        Task {
            for await reason in client.resyncs { FileHandle.standardError.write(Data("[resync: \(reason)]\n".utf8)) }
        }
        await client.connect()
        for await message in client.messages {
            print("\(message.seq)\t\(message.id)\t\(String(decoding: message.payload, as: UTF8.self))")
            fflush(nil)
            await client.ack(message.seq)
        }
    }

    static func mintToken(url: URL, key: String, user: String, device: String) async throws -> String {
        var request = URLRequest(url: url.appendingPathComponent("v1/tokens"))
        request.httpMethod = "POST"
        request.setValue("Bearer \(key)", forHTTPHeaderField: "Authorization")
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = try JSONSerialization.data(withJSONObject: ["userId": user, "deviceId": device])
        request.timeoutInterval = 5
        // A fresh connection per token: one pooled over a path that just went dead would hang
        // the reconnect (a token is needed once per connection, so the handshake costs little).
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let (data, _) = try await session.data(for: request)
        guard let object = try JSONSerialization.jsonObject(with: data) as? [String: Any],
            let token = object["token"] as? String
        else { throw URLError(.badServerResponse) }
        return token
    }
}
