import RelayPrimitives

/// An HTTP/1.x response read incrementally, as bytes arrive on a non-blocking socket: status,
/// the few headers a webhook sender acts on, and at most `maxBodyBytes` of the body (skipped).
/// Pure: it never touches a socket, so every framing case is unit-tested without one.
///
/// It completes as early as the answer allows: right after the head when the body is not worth
/// reading (longer than `maxBodyBytes`, or delimited by the close), in which case the
/// connection must not be reused.
package struct ResponseParser {
    package struct Response: Sendable, Equatable {
        package var status: Int
        package var retryAfter: String?
        /// The body, when it had a length or chunks within `maxBodyBytes` (FCM's errors and
        /// tokens are read from it; a webhook's is ignored).
        package var body: [UInt8]

        package init(status: Int, retryAfter: String? = nil, body: [UInt8] = []) {
            self.status = status
            self.retryAfter = retryAfter
            self.body = body
        }
    }

    package enum Progress: Equatable {
        case needMore
        case complete(Response, keepAlive: Bool)
        case malformed(String)
    }

    private enum Phase {
        case head
        case body(remaining: Int)
        case chunkSize
        case chunkData(remaining: Int)
        case trailers
        case done
    }

    private static let http1 = Array("HTTP/1.".utf8)
    private static let http11 = Array("HTTP/1.1".utf8)
    static let maxHeadBytes = 64 * 1024
    /// The most of an answer's body that is read (and kept) to keep the connection.
    static let maxBodyBytes = 16_384

    private var buffer: [UInt8] = []
    private var phase = Phase.head
    private var response = Response(status: 0)
    private var keepAlive = false
    private var chunkedTotal = 0

    package init() {}

    /// Takes the next bytes received; says whether the response is complete.
    package mutating func feed(_ bytes: some Sequence<UInt8>) -> Progress {
        if case .done = phase { return .malformed("bytes after the response") }
        buffer.append(contentsOf: bytes)
        while true {
            switch phase {
            case .head:
                guard let end = Self.endOfHead(buffer) else {
                    return buffer.count > Self.maxHeadBytes ? .malformed("response head too large") : .needMore
                }
                let lines = Self.lines(buffer[..<end])
                buffer.removeFirst(end)
                if let progress = readHead(lines) { return progress }
            case .body(let remaining):
                let take = min(remaining, buffer.count)
                response.body.append(contentsOf: buffer[..<take])
                buffer.removeFirst(take)
                guard take == remaining else {
                    phase = .body(remaining: remaining - take)
                    return .needMore
                }
                return complete(keepAlive: keepAlive)
            case .chunkSize:
                guard let line = takeLine() else { return needMoreOfLine() }
                let digits = line.prefix { $0 != UInt8(ascii: ";") }
                guard let size = Int(String(decoding: digits, as: UTF8.self).trimmingASCIISpaces(), radix: 16),
                    size >= 0
                else { return .malformed("malformed chunked body") }
                if size == 0 {
                    phase = .trailers
                } else {
                    // (Compared as a difference: a huge size cannot overflow.)
                    guard size <= Self.maxBodyBytes - chunkedTotal else { return complete(keepAlive: false) }
                    chunkedTotal += size
                    phase = .chunkData(remaining: size + 2)  // the data, then its CRLF
                }
            case .chunkData(let remaining):
                let take = min(remaining, buffer.count)
                // The chunk's data, not the CRLF after it (its last two bytes).
                response.body.append(contentsOf: buffer[..<min(take, max(0, remaining - 2))])
                buffer.removeFirst(take)
                guard take == remaining else {
                    phase = .chunkData(remaining: remaining - take)
                    return .needMore
                }
                phase = .chunkSize
            case .trailers:
                guard let line = takeLine() else { return needMoreOfLine() }
                if line.isEmpty { return complete(keepAlive: keepAlive) }
            case .done:
                return .malformed("bytes after the response")
            }
        }
    }

    /// Acts on a complete head; nil when the body is to be read.
    private mutating func readHead(_ lines: [ArraySlice<UInt8>]) -> Progress? {
        guard let statusLine = lines.first, statusLine.starts(with: Self.http1) else {
            return .malformed("malformed response")
        }
        let fields = statusLine.split(separator: UInt8(ascii: " "), maxSplits: 2)
        guard fields.count >= 2, let status = Int(String(decoding: fields[1], as: UTF8.self)),
            (100...999).contains(status)
        else { return .malformed("malformed response") }
        // Interim 1xx answers come before the real one.
        if (100..<200).contains(status) { return nil }
        var connection: String?
        var transferEncoding: String?
        var contentLength: String?
        response = Response(status: status)
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { continue }
            let name = String(decoding: line[..<colon], as: UTF8.self).lowercased()
            let value = String(decoding: line[(colon + 1)...], as: UTF8.self).trimmingASCIISpaces()
            switch name {
            case "connection": connection = value.lowercased()
            case "transfer-encoding": transferEncoding = value.lowercased()
            case "content-length": contentLength = value
            case "retry-after": response.retryAfter = value
            default: break
            }
        }
        keepAlive = statusLine.starts(with: Self.http11) && connection != "close"
        if transferEncoding?.contains("chunked") == true {
            phase = .chunkSize
        } else if let contentLength {
            guard let length = Int(contentLength), length >= 0 else { return .malformed("bad Content-Length") }
            // Not worth reading when long: the answer is in the status line.
            guard length <= Self.maxBodyBytes else { return complete(keepAlive: false) }
            phase = .body(remaining: length)
        } else if status == 204 || status == 304 {
            return complete(keepAlive: keepAlive)
        } else {
            return complete(keepAlive: false)  // body until close: not read, the connection not reused
        }
        return nil
    }

    private mutating func complete(keepAlive: Bool) -> Progress {
        phase = .done
        // Anything beyond the answer is unexpected: that connection is not reused.
        return .complete(response, keepAlive: keepAlive && buffer.isEmpty)
    }

    private func needMoreOfLine() -> Progress {
        buffer.count > Self.maxHeadBytes ? .malformed("response line too long") : .needMore
    }

    /// The next line without its CR LF (or bare LF), if a whole one is buffered.
    private mutating func takeLine() -> ArraySlice<UInt8>? {
        guard let newline = buffer.firstIndex(of: 10) else { return nil }
        var line = buffer[..<newline]
        if line.last == 13 { line = line.dropLast() }
        let copy = ArraySlice(Array(line))
        buffer.removeFirst(newline + 1)
        return copy
    }

    /// The index just past the blank line that ends the head (CR LF CR LF, or bare LFs).
    private static func endOfHead(_ bytes: [UInt8]) -> Int? {
        var index = 0
        var lineStart = 0
        while index < bytes.count {
            if bytes[index] == 10 {
                let length = index - lineStart
                if length == 0 || (length == 1 && bytes[lineStart] == 13) { return index + 1 }
                lineStart = index + 1
            }
            index += 1
        }
        return nil
    }

    /// The head's lines, without line ends and the final blank line.
    private static func lines(_ head: ArraySlice<UInt8>) -> [ArraySlice<UInt8>] {
        head.split(separator: 10, omittingEmptySubsequences: false).compactMap { line in
            let trimmed = line.last == 13 ? line.dropLast() : line
            return trimmed.isEmpty ? nil : ArraySlice(trimmed)
        }
    }
}
