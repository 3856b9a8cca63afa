import RelayPrimitives

/// The opening handshake (RFC 6455 §4), both roles, as pure functions over header values.
package enum WebSocketHandshake {
    static let guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    /// `Sec-WebSocket-Accept` for a `Sec-WebSocket-Key`.
    package static func acceptValue(forKey key: String) -> String {
        Base64.encode(SHA1.hash(Array((key + guid).utf8)))
    }

    /// A fresh `Sec-WebSocket-Key`: 16 random bytes, base64.
    package static func randomKey() -> String {
        var generator = SystemRandomNumberGenerator()
        return Base64.encode((0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    /// Why a server refuses an upgrade, with the HTTP status to answer.
    package struct Refusal: Error, Sendable, Equatable {
        package var status: Int
        package var reason: String
        /// `Sec-WebSocket-Version: 13` is sent back with a 426 (§4.4).
        package var upgradeRequired: Bool { status == 426 }
    }

    /// Validates a client's upgrade request; returns the `Sec-WebSocket-Accept` value.
    /// - Parameters:
    ///   - header: looks a request header up by lower-case name.
    ///   - allowedOrigins: when non-nil, origins in `normalizedOrigin` form; a request whose
    ///     `Origin` is not among them is refused (403). Requests without `Origin` (native apps) pass.
    package static func validate(
        method: String, header: (String) -> String?, allowedOrigins: Set<String>? = nil
    ) -> Result<String, Refusal> {
        guard method == "GET" else {
            return .failure(Refusal(status: 405, reason: "a WebSocket upgrade must be a GET"))
        }
        guard tokens(header("upgrade")).contains("websocket") else {
            return .failure(Refusal(status: 400, reason: "missing 'Upgrade: websocket'"))
        }
        guard tokens(header("connection")).contains("upgrade") else {
            return .failure(Refusal(status: 400, reason: "missing 'Connection: Upgrade'"))
        }
        guard header("sec-websocket-version")?.trimmingASCIISpaces() == "13" else {
            return .failure(Refusal(status: 426, reason: "only WebSocket version 13 is supported"))
        }
        guard let key = header("sec-websocket-key")?.trimmingASCIISpaces(), Base64.decode(key)?.count == 16 else {
            return .failure(Refusal(status: 400, reason: "missing or malformed Sec-WebSocket-Key"))
        }
        if let allowedOrigins, let origin = header("origin"), !allowedOrigins.contains(normalizedOrigin(origin)) {
            return .failure(Refusal(status: 403, reason: "origin not allowed"))
        }
        return .success(acceptValue(forKey: key))
    }

    /// An origin as compared: scheme, host and port, case-insensitive (RFC 6454), with the
    /// scheme's default port and a trailing slash dropped (`HTTPS://Chat.Example:443/` becomes
    /// `https://chat.example`).
    package static func normalizedOrigin(_ text: String) -> String {
        var origin = text.trimmingASCIISpaces().lowercased()
        if origin.hasSuffix("/") { origin.removeLast() }
        for (scheme, port) in [("https://", ":443"), ("http://", ":80")]
        where origin.hasPrefix(scheme) && origin.hasSuffix(port) {
            origin.removeLast(port.count)
        }
        return origin
    }

    /// The client's request bytes. Extensions and subprotocols are not offered.
    package static func clientRequest(
        host: String, path: String, key: String, headers: [(String, String)] = []
    ) -> [UInt8] {
        var text = "GET \(path) HTTP/1.1\r\nHost: \(host)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        text += "Sec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        text += "\r\n"
        return Array(text.utf8)
    }

    /// The server's answer to a client request, parsed far enough to decide.
    package struct Response: Sendable, Equatable {
        package var status: Int
        package var headers: [String: String]
        /// Bytes after the header block: the first WebSocket frames, already sent by the server.
        package var rest: [UInt8]
    }

    /// Parses a response head from `bytes`; nil until the blank line has arrived.
    package static func parseResponse(_ bytes: [UInt8]) -> Response? {
        guard let end = headerEnd(bytes) else { return nil }
        let head = String(decoding: bytes[..<end], as: UTF8.self)
        var lines = head.split(separator: "\r\n", omittingEmptySubsequences: false).makeIterator()
        guard let statusLine = lines.next() else { return nil }
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]) else {
            return Response(status: 0, headers: [:], rest: [])
        }
        var headers: [String: String] = [:]
        while let line = lines.next() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = String(line[line.index(after: colon)...]).trimmingASCIISpaces()
        }
        return Response(status: status, headers: headers, rest: Array(bytes[(end + 4)...]))
    }

    /// Whether a response accepts the upgrade requested with `key`.
    package static func accepts(_ response: Response, key: String) -> Bool {
        response.status == 101 && tokens(response.headers["upgrade"]).contains("websocket")
            && tokens(response.headers["connection"]).contains("upgrade")
            && response.headers["sec-websocket-accept"] == acceptValue(forKey: key)
            && response.headers["sec-websocket-extensions"] == nil
    }

    private static func headerEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4)
        where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
            return index
        }
        return nil
    }

    /// Comma-separated header tokens, lower-cased.
    private static func tokens(_ value: String?) -> [String] {
        (value ?? "").split(separator: ",").map { String($0).trimmingASCIISpaces().lowercased() }
    }
}
