// Compiled on Linux too (FoundationNetworking declares the same API), so that CI type-checks
// it; Debian's libcurl has no WebSocket support, so there it fails at connect time.
public import Foundation
import RelayLocks

#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

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
    /// Messages and pongs received: URLSessionWebSocketTask answers the relay's pings itself
    /// without telling, so on this transport the client's own pings keep the count moving.
    private let arrivals = LockedValue<UInt64>(0)

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
        arrivals.withLock { $0 &+= 1 }
        if case .string(let text) = message { continuation.yield(text) }
    }

    var receivedCount: UInt64? { arrivals.withLock { $0 } }

    func ping() async throws {
        task.sendPing { [arrivals] error in
            if error == nil { arrivals.withLock { $0 &+= 1 } }
        }
    }

    func send(_ text: String) async throws { try await task.send(.string(text)) }

    func close() async { task.cancel(with: .normalClosure, reason: nil) }
}
