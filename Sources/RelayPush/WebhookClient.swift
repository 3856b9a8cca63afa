import Glibc
package import RelayCore
import RelayLocks

/// A small blocking HTTP/1.1 client for webhook POSTs over plain HTTP, with keep-alive
/// connections pooled per address.
///
/// An attempt has one wall-clock deadline (`totalTimeoutMs`) for connect, send, status line and
/// body together: a receiver that trickles its answer a byte a second fails like one that never
/// answers. Only `maxBodyBytes` of an answer's body are read; a longer one ends the connection.
///
/// Written here rather than using URLSession, which delivered ~214 pushes/s on this platform
/// (measurement in BENCHMARKS.md); and it connects to the exact address the SSRF guard checked,
/// so a DNS answer cannot change between the check and the connection.
package final class WebhookClient: Sendable {
    package struct Response: Sendable {
        package var status: Int
        package var retryAfter: String?
    }

    package struct Failure: Error, CustomStringConvertible {
        package var description: String
    }

    /// Idle keep-alive connections by "address:port".
    private let idle = LockedValue<[String: [Int32]]>([:])
    private let maxIdlePerAddress: Int
    let connectTimeoutMs: Int
    let totalTimeoutMs: Int
    /// The most of an answer's body that is read (and thrown away) to keep the connection.
    static let maxBodyBytes = 16_384

    package init(connectTimeoutMs: Int = 5000, totalTimeoutMs: Int = 10_000, maxIdlePerAddress: Int = 64) {
        self.connectTimeoutMs = connectTimeoutMs
        self.totalTimeoutMs = totalTimeoutMs
        self.maxIdlePerAddress = maxIdlePerAddress
    }

    deinit {
        for fds in idle.withLock({ $0.values }) { for fd in fds { close(fd) } }
    }

    /// POSTs `body` to `url`, connecting to `address` (already resolved and checked).
    package func post(
        _ url: PushURL, address: IPAddress, headers: [(String, String)], body: [UInt8]
    ) throws(Failure) -> Response {
        let key = "\(address.text):\(url.port)"
        var head = "POST \(url.target) HTTP/1.1\r\nHost: \(url.hostHeader)\r\nContent-Length: \(body.count)\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        head += "\r\n"
        let request = Array(head.utf8) + body
        let deadline = Deadline(milliseconds: totalTimeoutMs)
        // A pooled connection may have been closed by the peer meanwhile: one fresh retry.
        if let pooled = idle.withLock({ $0[key]?.popLast() }) {
            if let response = try? exchange(pooled, request, key: key, deadline: deadline) { return response }
        }
        let fd = try connect(address, port: url.port, deadline: deadline)
        return try exchange(fd, request, key: key, deadline: deadline)
    }

    private func exchange(_ fd: Int32, _ request: [UInt8], key: String, deadline: Deadline) throws(Failure) -> Response
    {
        do {
            try writeAll(fd, request, deadline: deadline)
            let (response, keepAlive) = try readResponse(fd, deadline: deadline)
            if keepAlive {
                let pooled = idle.withLock { pool -> Bool in
                    guard pool[key, default: []].count < maxIdlePerAddress else { return false }
                    pool[key, default: []].append(fd)
                    return true
                }
                if !pooled { close(fd) }
            } else {
                close(fd)
            }
            return response
        } catch {
            close(fd)
            throw error
        }
    }

    // MARK: Socket work

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

    private func writeAll(_ fd: Int32, _ bytes: [UInt8], deadline: Deadline) throws(Failure) {
        var offset = 0
        while offset < bytes.count {
            try deadline.arm(fd, SO_SNDTIMEO)
            let sent = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { throw Failure(description: errno == EAGAIN ? "timed out" : "send failed") }
            offset += sent
        }
    }

    /// Reads one response (status, headers, and up to `maxBodyBytes` of the body, which is
    /// discarded); says whether the connection may be reused.
    private func readResponse(_ fd: Int32, deadline: Deadline) throws(Failure) -> (Response, Bool) {
        var reader = ResponseReader(fd: fd, deadline: deadline)
        let headLines = try reader.head()
        guard let statusLine = headLines.first, statusLine.hasPrefix("HTTP/1."),
            let status = Int(statusLine.split(separator: " ").dropFirst().first ?? "")
        else { throw Failure(description: "malformed response") }
        var headers: [String: String] = [:]
        for line in headLines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = String(line[line.index(after: colon)...]).trimmingSpaces()
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

/// The one wall-clock deadline of a delivery attempt.
struct Deadline {
    let at: Int64

    init(milliseconds: Int) { at = MonotonicClock.milliseconds() + Int64(milliseconds) }

    /// Milliseconds left, at least 0.
    var remaining: Int { Int(max(0, at - MonotonicClock.milliseconds())) }

    /// Sets the socket's receive or send timeout to the time left; throws once none is.
    func arm(_ fd: Int32, _ option: Int32) throws(WebhookClient.Failure) {
        let left = remaining
        guard left > 0 else { throw WebhookClient.Failure(description: "timed out") }
        var timeout = timeval(tv_sec: left / 1000, tv_usec: (left % 1000) * 1000)
        setsockopt(fd, SOL_SOCKET, option, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }
}

/// Buffered reads of one response from a blocking socket, each within the attempt's deadline.
private struct ResponseReader {
    let fd: Int32
    let deadline: Deadline
    var buffer: [UInt8] = []
    static let maxHead = 64 * 1024

    init(fd: Int32, deadline: Deadline) {
        self.fd = fd
        self.deadline = deadline
    }

    mutating func fill() throws(WebhookClient.Failure) {
        try deadline.arm(fd, SO_RCVTIMEO)
        var chunk = [UInt8](repeating: 0, count: 16_384)
        let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if count > 0 {
            buffer += chunk[0..<count]
        } else if count == 0 {
            throw WebhookClient.Failure(description: "connection closed before the response")
        } else {
            throw WebhookClient.Failure(description: errno == EAGAIN ? "timed out" : "receive failed")
        }
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
