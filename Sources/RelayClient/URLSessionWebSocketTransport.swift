#if canImport(Darwin)
public import Foundation

/// WebSocket through `URLSessionWebSocketTask` (Apple platforms).
public struct URLSessionWebSocketTransport: RelayTransport {
    private let session: URLSession

    /// A transport opening tasks on `session`.
    public init(session: URLSession = URLSession(configuration: .default)) {
        self.session = session
    }

    /// Opens a `ws://` or `wss://` connection to `url` with `headers` on the upgrade request.
    public func connect(url: URL, headers: [String: String]) async throws -> any RelayConnection {
        var request = URLRequest(url: url)
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let task = session.webSocketTask(with: request)
        task.resume()
        let connection = URLSessionRelayConnection(task: task)
        // The first receive tells whether the handshake succeeded (the relay always sends `welcome`).
        do {
            let first = try await task.receive()
            connection.start(first: first)
        } catch {
            if let http = task.response as? HTTPURLResponse, http.statusCode != 101 {
                throw RelayTransportError.handshakeRefused(status: http.statusCode)
            }
            throw RelayTransportError.connectionFailed("\(error)")
        }
        return connection
    }
}

final class URLSessionRelayConnection: RelayConnection, @unchecked Sendable {
    let frames: AsyncThrowingStream<String, any Error>
    private let continuation: AsyncThrowingStream<String, any Error>.Continuation
    private let task: URLSessionWebSocketTask

    init(task: URLSessionWebSocketTask) {
        self.task = task
        (frames, continuation) = AsyncThrowingStream.makeStream(of: String.self, throwing: (any Error).self)
    }

    func start(first: URLSessionWebSocketTask.Message) {
        deliver(first)
        Task { [self] in
            while true {
                do {
                    deliver(try await task.receive())
                } catch {
                    continuation.finish(throwing: RelayTransportError.closed(code: UInt16(task.closeCode.rawValue)))
                    return
                }
            }
        }
    }

    private func deliver(_ message: URLSessionWebSocketTask.Message) {
        if case .string(let text) = message { continuation.yield(text) }
    }

    func send(_ text: String) async throws { try await task.send(.string(text)) }

    func close() async { task.cancel(with: .normalClosure, reason: nil) }
}
#endif
