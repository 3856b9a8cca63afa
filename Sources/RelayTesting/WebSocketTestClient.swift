import Foundation
import WebSocketCodec

/// A blocking WebSocket client for tests, built on the project's codec in client role over a
/// plain socket (URLSessionWebSocketTask does not work on Linux here).
package final class WebSocketTestClient {
    package struct Failure: Error, CustomStringConvertible {
        package var description: String
    }

    package enum Event: Equatable {
        case text(String)
        case binary([UInt8])
        case closed(code: UInt16)
    }

    private let fd: Int32
    private var connection = WebSocketConnection(role: .client, maxMessageSize: 16 << 20)
    private var pending: [Event] = []
    /// Status and headers of the handshake answer.
    package private(set) var handshakeStatus = 0
    /// The handshake answer's headers, names lower-cased.
    package private(set) var handshakeHeaders: [String: String] = [:]

    /// Connects to `127.0.0.1:port` and performs the opening handshake for `path`.
    /// Throws when the server does not answer 101 (`handshakeStatus` tells what it answered).
    /// `receiveBufferBytes` pins the kernel's receive buffer (no autotuning), so that a test of a
    /// reader that stops reading needs megabytes, not tens of megabytes, to fill the path.
    package init(port: Int, path: String, headers: [(String, String)] = [], receiveBufferBytes: Int? = nil) throws {
        do {
            fd = try RawConnection.connect(port: port, receiveBufferBytes: receiveBufferBytes)
        } catch {
            throw Failure(description: "\(error)")
        }
        setTimeout(seconds: 30)  // a wait for a frame, long enough for a sanitized relay on a busy machine
        let key = WebSocketHandshake.randomKey()
        try sendRaw(WebSocketHandshake.clientRequest(host: "127.0.0.1:\(port)", path: path, key: key, headers: headers))
        var received: [UInt8] = []
        while true {
            let chunk = try readChunk()
            guard !chunk.isEmpty else { throw Failure(description: "closed during the handshake") }
            received += chunk
            if let response = WebSocketHandshake.parseResponse(received) {
                handshakeStatus = response.status
                handshakeHeaders = response.headers
                guard WebSocketHandshake.accepts(response, key: key) else {
                    Glibc.close(fd)
                    throw Failure(description: "handshake refused with \(response.status)")
                }
                absorb(response.rest)
                return
            }
        }
    }

    deinit { Glibc.close(fd) }

    package func setTimeout(seconds: Double) {
        var timeout = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - Double(Int(seconds))) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    package func send(text: String) throws { try sendRaw(connection.text(text)) }

    /// Sends JSON built from a dictionary.
    package func send(json: [String: Any]) throws {
        let data = try JSONSerialization.data(withJSONObject: json)
        try send(text: String(decoding: data, as: UTF8.self))
    }

    /// Bytes as they are (for malformed-frame tests).
    package func sendRaw(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            guard sent > 0 else { throw Failure(description: "send failed") }
            offset += sent
        }
    }

    /// The next event; throws on timeout.
    package func next() throws -> Event {
        while pending.isEmpty {
            let chunk = try readChunk()
            if chunk.isEmpty {
                pending.append(.closed(code: CloseCode.abnormal))
                break
            }
            absorb(chunk)
        }
        return pending.removeFirst()
    }

    /// The next text frame parsed as a JSON object; throws on timeout or anything else.
    package func nextJSON() throws -> [String: Any] {
        let event = try next()
        guard case .text(let text) = event,
            let object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
        else { throw Failure(description: "expected a JSON text frame, got \(event)") }
        return object
    }

    /// Reads until the server closes; returns its close code.
    package func waitForClose() throws -> UInt16 {
        while true {
            if case .closed(let code) = try next() { return code }
        }
    }

    package func close(code: UInt16 = 1000) {
        let frame = connection.close(code: code)
        try? sendRaw(frame)
    }

    /// Drops the TCP connection without a close handshake.
    package func abort() { shutdown(fd, Int32(SHUT_RDWR)) }

    private func absorb(_ bytes: [UInt8]) {
        for output in connection.receive(bytes) {
            switch output {
            case .write(let frame): try? sendRaw(frame)
            case .message(.text(let text)): pending.append(.text(text))
            case .message(.binary(let bytes)): pending.append(.binary(bytes))
            case .pong: break
            case .closed(let code, _): pending.append(.closed(code: code))
            }
        }
    }

    private func readChunk() throws -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if count < 0 {
            if errno == EAGAIN || errno == EWOULDBLOCK { throw Failure(description: "timed out") }
            return []
        }
        return Array(buffer[0..<count])
    }
}
