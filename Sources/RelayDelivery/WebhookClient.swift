import Glibc
package import RelayCore
import RelayLocks
import WebSocketCodec

/// A small blocking HTTP/1.1 client for webhook POSTs over plain HTTP and TLS (OpenSSL), with
/// keep-alive connections pooled per (scheme, host, port, address).
///
/// An attempt has one wall-clock deadline (`totalTimeoutMs`) for connect, send, status line and
/// body together: a receiver that trickles its answer a byte a second fails like one that never
/// answers. Only `maxBodyBytes` of an answer's body are read; a longer one ends the connection.
///
/// Written here rather than using URLSession, which delivered ~214 pushes/s on this platform
/// (measurement in BENCHMARKS.md); and it connects to the exact addresses the SSRF guard checked
/// (each in turn until one answers), so a DNS answer cannot change between the check and the
/// connection — for https too, where the certificate is checked against the URL's host name.
package final class WebhookClient: Sendable {
    package struct Response: Sendable {
        package var status: Int
        package var retryAfter: String?
    }

    package struct Failure: Error, CustomStringConvertible {
        package var description: String
    }

    /// Idle keep-alive connections by "scheme://host:port@address".
    private let idle = LockedValue<[String: [WireConnection]]>([:])
    private let maxIdlePerAddress: Int
    let connectTimeoutMs: Int
    let totalTimeoutMs: Int
    /// For https receivers.
    private let tls: TLSContext
    /// The most of an answer's body that is read (and thrown away) to keep the connection.
    static let maxBodyBytes = 16_384

    package init(
        tls: TLSContext, connectTimeoutMs: Int = 5000, totalTimeoutMs: Int = 10_000, maxIdlePerAddress: Int = 64
    ) {
        self.tls = tls
        self.connectTimeoutMs = connectTimeoutMs
        self.totalTimeoutMs = totalTimeoutMs
        self.maxIdlePerAddress = maxIdlePerAddress
    }

    /// POSTs `body` to `url`, connecting to the first of `addresses` (already resolved and
    /// checked) that accepts a connection (and, for https, completes the handshake).
    package func post(
        _ url: PushURL, addresses: [IPAddress], headers: [(String, String)], body: [UInt8]
    ) throws(Failure) -> Response {
        var head = "POST \(url.target) HTTP/1.1\r\nHost: \(url.hostHeader)\r\nContent-Length: \(body.count)\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        head += "\r\n"
        let request = Array(head.utf8) + body
        let deadline = Deadline(milliseconds: totalTimeoutMs)
        var lastFailure = Failure(description: "no address to connect to")
        for address in addresses {
            let key = "\(url.scheme)://\(url.host):\(url.port)@\(address.text)"
            // A pooled connection may have been closed by the peer meanwhile: one fresh retry.
            if let pooled = idle.withLock({ $0[key]?.popLast() }) {
                if let response = try? exchange(pooled, request, key: key, deadline: deadline) { return response }
            }
            let connection: WireConnection
            do {
                connection = try connect(url, address: address, deadline: deadline)
            } catch {
                lastFailure = error  // try the next address
                continue
            }
            return try exchange(connection, request, key: key, deadline: deadline)
        }
        throw lastFailure
    }

    private func exchange(
        _ connection: WireConnection, _ request: [UInt8], key: String, deadline: Deadline
    ) throws(Failure) -> Response {
        try connection.write(request, deadline: deadline)
        let (response, keepAlive) = try readResponse(connection, deadline: deadline)
        if keepAlive {
            idle.withLock { pool in
                guard pool[key, default: []].count < maxIdlePerAddress else { return }
                pool[key, default: []].append(connection)
            }
        }
        return response
    }

    // MARK: Socket work

    /// A connection to `address` for `url`: TCP, then for https the TLS handshake.
    private func connect(_ url: PushURL, address: IPAddress, deadline: Deadline) throws(Failure) -> WireConnection {
        let fd = try connect(address, port: url.port, deadline: deadline)
        guard url.scheme == "https" else { return WireConnection(fd: fd, ssl: nil) }
        do {
            return WireConnection(fd: fd, ssl: try tls.handshake(fd: fd, host: url.host, deadline: deadline))
        } catch {
            close(fd)
            throw error
        }
    }

    private func connect(_ address: IPAddress, port: Int, deadline: Deadline) throws(Failure) -> Int32 {
        let family = address.isIPv4 ? AF_INET : AF_INET6
        let fd = socket(
            family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var storage = sockaddr_storage()
        let length: socklen_t
        if address.isIPv4 {
            var sin = sockaddr_in()
            sin.sin_family = sa_family_t(AF_INET)
            sin.sin_port = UInt16(port).bigEndian
            withUnsafeMutableBytes(of: &sin.sin_addr) { $0.copyBytes(from: address.bytes) }
            withUnsafeBytes(of: sin) { source in withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: source) } }
            length = socklen_t(MemoryLayout<sockaddr_in>.size)
        } else {
            var sin6 = sockaddr_in6()
            sin6.sin6_family = sa_family_t(AF_INET6)
            sin6.sin6_port = UInt16(port).bigEndian
            withUnsafeMutableBytes(of: &sin6.sin6_addr) { $0.copyBytes(from: address.bytes) }
            withUnsafeBytes(of: sin6) { source in withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: source) } }
            length = socklen_t(MemoryLayout<sockaddr_in6>.size)
        }
        let result = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, length) }
        }
        if result != 0 {
            guard errno == EINPROGRESS else {
                let code = errno
                close(fd)
                throw Failure(description: "connect failed: \(String(cString: strerror(code)))")
            }
            var poller = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            let ready = poll(&poller, 1, Int32(min(connectTimeoutMs, deadline.remaining)))
            var error: Int32 = 0
            var size = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size)
            guard ready > 0, error == 0 else {
                close(fd)
                throw Failure(
                    description: ready == 0
                        ? "connect timed out" : "connect failed: \(String(cString: strerror(error)))")
            }
        }
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags & ~O_NONBLOCK)
        return fd
    }

    /// Reads one response (status, headers, and up to `maxBodyBytes` of the body, which is
    /// discarded); says whether the connection may be reused.
    private func readResponse(_ connection: WireConnection, deadline: Deadline) throws(Failure) -> (Response, Bool) {
        var reader = ResponseReader(connection: connection, deadline: deadline)
        let headLines = try reader.head()
        guard let statusLine = headLines.first, statusLine.hasPrefix("HTTP/1."),
            let status = Int(statusLine.split(separator: " ").dropFirst().first ?? "")
        else { throw Failure(description: "malformed response") }
        var headers: [String: String] = [:]
        for line in headLines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = String(line[line.index(after: colon)...]).trimmingASCIISpaces()
        }
        var keepAlive = statusLine.hasPrefix("HTTP/1.1") && headers["connection"]?.lowercased() != "close"
        if headers["transfer-encoding"]?.lowercased().contains("chunked") == true {
            keepAlive = try reader.skipChunked(upTo: Self.maxBodyBytes) && keepAlive
        } else if let length = headers["content-length"].flatMap({ Int($0) }) {
            if length <= Self.maxBodyBytes {
                try reader.skip(length)
            } else {
                keepAlive = false  // not worth reading: the answer is in the status line
            }
        } else if status != 204 && status != 304 && !(100..<200).contains(status) {
            keepAlive = false  // body until close: do not read it, do not reuse
        }
        return (Response(status: status, retryAfter: headers["retry-after"]), keepAlive)
    }
}

/// Buffered reads of one response from a blocking socket, each within the attempt's deadline.
private struct ResponseReader {
    let connection: WireConnection
    let deadline: Deadline
    var buffer: [UInt8] = []
    static let maxHead = 64 * 1024

    init(connection: WireConnection, deadline: Deadline) {
        self.connection = connection
        self.deadline = deadline
    }

    mutating func fill() throws(WebhookClient.Failure) {
        let chunk = try connection.read(deadline: deadline)
        guard !chunk.isEmpty else { throw WebhookClient.Failure(description: "connection closed before the response") }
        buffer += chunk
    }

    mutating func line() throws(WebhookClient.Failure) -> String {
        while true {
            if let index = buffer.firstIndex(of: 10) {
                let line = String(decoding: buffer[..<index], as: UTF8.self)
                buffer.removeFirst(index + 1)
                return line.hasSuffix("\r") ? String(line.dropLast()) : line
            }
            guard buffer.count < Self.maxHead else {
                throw WebhookClient.Failure(description: "response head too large")
            }
            try fill()
        }
    }

    mutating func head() throws(WebhookClient.Failure) -> [String] {
        var lines: [String] = []
        while true {
            let line = try line()
            if line.isEmpty {
                // Interim 1xx answers come before the real one.
                if let first = lines.first, first.hasPrefix("HTTP/1.1 1") || first.hasPrefix("HTTP/1.0 1") {
                    lines = []
                    continue
                }
                return lines
            }
            lines.append(line)
        }
    }

    mutating func skip(_ count: Int) throws(WebhookClient.Failure) {
        var remaining = count
        while remaining > 0 {
            if buffer.isEmpty { try fill() }
            let take = min(remaining, buffer.count)
            buffer.removeFirst(take)
            remaining -= take
        }
    }

    /// Skips a chunked body of at most `limit` bytes; false (stop reading, drop the connection)
    /// when it is longer.
    mutating func skipChunked(upTo limit: Int) throws(WebhookClient.Failure) -> Bool {
        var total = 0
        while true {
            let sizeLine = try line()
            guard let size = Int(sizeLine.split(separator: ";").first ?? "", radix: 16), size >= 0 else {
                throw WebhookClient.Failure(description: "malformed chunked body")
            }
            if size == 0 {
                while try !line().isEmpty {}  // trailers
                return true
            }
            guard size <= limit - total else { return false }  // (no overflow on a huge size)
            total += size
            try skip(size + 2)
        }
    }
}

extension IPAddress {
    /// Textual form, for pool keys and logs.
    package var text: String {
        if isIPv4 { return bytes.map(String.init).joined(separator: ".") }
        return stride(from: 0, to: 16, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
            .joined(separator: ":")
    }
}

extension PushURL {
    /// The `Host` header: the name as written, with the port when it is not the default.
    package var hostHeader: String {
        let name = host.contains(":") ? "[\(host)]" : host
        let defaultPort = scheme == "https" ? 443 : 80
        return port == defaultPort ? name : "\(name):\(port)"
    }
}
