#if canImport(Glibc)
public import Foundation
import Glibc
import RelayLocks
import WebSocketCodec

/// WebSocket over a plain TCP socket with the project's codec in client role (ws:// only).
/// Blocking I/O on a thread of its own per connection, bridged to async streams.
public struct POSIXWebSocketTransport: RelayTransport {
    /// The socket's own backstop: it is closed after this long without a byte. The client's
    /// ``LinkWatchdog`` finds a dead link much sooner, from the relay's ping interval.
    public var silenceTimeout: Double
    /// Seconds to wait for the TCP connection and the handshake.
    public var connectTimeout: Double

    /// A transport with these timeouts (seconds).
    public init(silenceTimeout: Double = 75, connectTimeout: Double = 10) {
        self.silenceTimeout = silenceTimeout
        self.connectTimeout = connectTimeout
    }

    /// Opens a `ws://` connection to `url` with `headers` on the upgrade request.
    public func connect(url: URL, headers: [String: String]) async throws -> any RelayConnection {
        guard let host = url.host, url.scheme == "ws" || url.scheme == "http" else {
            throw RelayTransportError.connectionFailed("POSIXWebSocketTransport supports ws:// URLs only")
        }
        let port = url.port ?? 80
        var target = url.path.isEmpty ? "/" : url.path
        if let query = url.query { target += "?" + query }
        let path = target
        let silence = silenceTimeout
        let connectTimeout = connectTimeout
        return try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                do {
                    let connection = try POSIXWebSocketConnection.open(
                        host: host, port: port, path: path, headers: headers, connectTimeout: connectTimeout,
                        silenceTimeout: silence)
                    continuation.resume(returning: connection)
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }
}

/// The protocol state is behind a lock; the reader thread is the socket's only reader.
final class POSIXWebSocketConnection: RelayConnection, Sendable {
    private struct State {
        var connection = WebSocketConnection(role: .client, maxMessageSize: 16 << 20)
        var closed = false
        /// Reads that returned bytes (`receivedCount`).
        var reads: UInt64 = 0
    }

    let frames: AsyncThrowingStream<String, any Error>
    private let continuation: AsyncThrowingStream<String, any Error>.Continuation
    private let fd: Int32
    private let state = LockedValue(State())

    private init(fd: Int32) {
        self.fd = fd
        (frames, continuation) = AsyncThrowingStream.makeStream(of: String.self, throwing: (any Error).self)
    }

    static func open(
        host: String, port: Int, path: String, headers: [String: String], connectTimeout: Double, silenceTimeout: Double
    ) throws -> POSIXWebSocketConnection {
        let fd = try dial(host: host, port: port, timeout: connectTimeout)
        var timeout = timeval(tv_sec: Int(silenceTimeout), tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        // A write to a dead link whose send buffer is full must not block the client for ever.
        var sendTimeout = timeval(tv_sec: Int(max(1, connectTimeout)), tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &sendTimeout, socklen_t(MemoryLayout<timeval>.size))
        let key = WebSocketHandshake.randomKey()
        let hostHeader = port == 80 ? host : "\(host):\(port)"
        let request = WebSocketHandshake.clientRequest(
            host: hostHeader, path: path, key: key, headers: headers.map { ($0.key, $0.value) })
        let connection = POSIXWebSocketConnection(fd: fd)
        do {
            try connection.write(request)
            var received: [UInt8] = []
            while true {
                let chunk = connection.readChunk()
                guard !chunk.isEmpty else { throw RelayTransportError.connectionFailed("closed during the handshake") }
                received += chunk
                guard let response = WebSocketHandshake.parseResponse(received) else { continue }
                guard response.status == 101 else {
                    throw RelayTransportError.handshakeRefused(status: response.status)
                }
                guard WebSocketHandshake.accepts(response, key: key) else {
                    throw RelayTransportError.connectionFailed("invalid handshake answer")
                }
                Thread.detachNewThread { connection.readLoop(first: response.rest) }
                return connection
            }
        } catch {
            connection.shutdownSocket()
            throw error
        }
    }

    deinit { Glibc.close(fd) }

    func send(_ text: String) async throws {
        let bytes: [UInt8]? = state.withLock { $0.closed ? nil : $0.connection.text(text) }
        guard let bytes else { throw RelayTransportError.closed(code: CloseCode.abnormal) }
        try write(bytes)
    }

    var receivedCount: UInt64? { state.withLock { $0.reads } }

    func ping() async throws {
        let bytes: [UInt8]? = state.withLock { $0.closed ? nil : $0.connection.ping() }
        guard let bytes else { throw RelayTransportError.closed(code: CloseCode.abnormal) }
        try write(bytes)
    }

    func close() async {
        let frame: [UInt8] = state.withLock {
            guard !$0.closed else { return [] }
            return $0.connection.close(code: CloseCode.normal)
        }
        if !frame.isEmpty { try? write(frame) }
        shutdownSocket()
    }

    private func shutdownSocket() {
        state.withLock { $0.closed = true }
        shutdown(fd, Int32(SHUT_RDWR))
    }

    private func readLoop(first: [UInt8]) {
        var pending = first
        while true {
            if !pending.isEmpty {
                let outputs = state.withLock {
                    $0.reads &+= 1
                    return $0.connection.receive(pending)
                }
                for output in outputs {
                    switch output {
                    case .write(let bytes): try? write(bytes)
                    case .message(.text(let text)): continuation.yield(text)
                    case .message(.binary), .pong: break
                    case .closed(let code, _):
                        shutdownSocket()
                        continuation.finish(throwing: RelayTransportError.closed(code: code))
                        return
                    }
                }
            }
            pending = readChunk()
            if pending.isEmpty {
                shutdownSocket()
                continuation.finish(throwing: RelayTransportError.closed(code: CloseCode.abnormal))
                return
            }
        }
    }

    private func readChunk() -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        return count > 0 ? Array(buffer[0..<count]) : []
    }

    private func write(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            guard sent > 0 else { throw RelayTransportError.closed(code: CloseCode.abnormal) }
            offset += sent
        }
    }

    /// Resolves `host` and connects with a timeout.
    private static func dial(host: String, port: Int, timeout: Double) throws -> Int32 {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &list) == 0, let first = list else {
            throw RelayTransportError.connectionFailed("cannot resolve \(host)")
        }
        defer { freeaddrinfo(list) }
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let entry = cursor {
            cursor = entry.pointee.ai_next
            let fd = socket(entry.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            guard fd >= 0 else { continue }
            var poller = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            let started = Glibc.connect(fd, entry.pointee.ai_addr, entry.pointee.ai_addrlen)
            var error: Int32 = 0
            if started != 0 {
                guard errno == EINPROGRESS, poll(&poller, 1, Int32(timeout * 1000)) > 0 else {
                    Glibc.close(fd)
                    continue
                }
                var size = socklen_t(MemoryLayout<Int32>.size)
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size)
            }
            guard error == 0 else {
                Glibc.close(fd)
                continue
            }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            return fd
        }
        throw RelayTransportError.connectionFailed("cannot connect to \(host):\(port)")
    }
}
#endif
