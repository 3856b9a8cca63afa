/// A push or events URL, checked once at registration: `http` or `https`, a host, an optional
/// port, no credentials. Parsing is deliberately strict and pure (no Foundation `URL`, whose
/// leniency differs across platforms).
package struct PushURL: Sendable, Equatable {
    package var scheme: String
    package var host: String
    package var port: Int
    /// Path and query, at least `/`.
    package var target: String
    /// As it was written.
    package var text: String

    package static let maxLength = 2048

    /// `https://<host>/`, for a host name written in code (the push services' defaults).
    package init(https host: String) {
        scheme = "https"
        self.host = host
        port = 443
        target = "/"
        text = "https://\(host)"
    }

    package init(_ text: String) throws(ValidationError) {
        func invalid(_ why: String) -> ValidationError { ValidationError(.invalidField, field: "pushUrl", why) }
        self.text = text
        guard text.utf8.count <= Self.maxLength, text.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F })
        else { throw invalid("'pushUrl' must be an absolute http(s) URL of printable ASCII, at most 2048 bytes") }
        // (Searched in the UTF-8 view: `firstRange(of:)` costs more than the rest of the parse,
        // and the notifier parses a URL per push.)
        guard let colon = text.utf8.firstIndex(of: UInt8(ascii: ":")),
            text.utf8[colon...].starts(with: "://".utf8)
        else {
            throw invalid("'pushUrl' must be an absolute http(s) URL")
        }
        scheme = text[..<colon].lowercased()
        guard scheme == "http" || scheme == "https" else { throw invalid("'pushUrl' must use http or https") }
        let rest = text[text.utf8.index(colon, offsetBy: 3)...]
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        var path = String(rest[authorityEnd...])
        if let hash = path.firstIndex(of: "#") { path = String(path[..<hash]) }
        if path.isEmpty {
            target = "/"
        } else if path.hasPrefix("/") {
            target = path
        } else {
            target = "/" + path
        }
        guard !authority.contains("@") else { throw invalid("'pushUrl' must not carry credentials") }
        var hostPart = Substring(authority)
        var portPart: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else {
                throw invalid("'pushUrl' has a malformed IPv6 host")
            }
            hostPart = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw invalid("'pushUrl' has a malformed host") }
                portPart = after.dropFirst()
            }
            guard IPAddress(hostPart) != nil else { throw invalid("'pushUrl' has a malformed IPv6 host") }
        } else if let colon = authority.lastIndex(of: ":") {
            hostPart = authority[..<colon]
            portPart = authority[authority.index(after: colon)...]
        }
        guard !hostPart.isEmpty else { throw invalid("'pushUrl' has no host") }
        host = hostPart.lowercased()
        if let portPart {
            guard let value = Int(portPart), (1...65535).contains(value) else {
                throw invalid("'pushUrl' has a bad port")
            }
            port = value
        } else {
            port = scheme == "https" ? 443 : 80
        }
    }
}

extension PushURL {
    /// `scheme://host[:port]`, the port only when it is not the scheme's default (RFC 6454): a
    /// VAPID audience, an HTTP/2 connection pool's key.
    package var origin: String { "\(scheme)://\(hostHeader)" }

    /// The `Host` header: the name as written, with the port when it is not the default.
    package var hostHeader: String {
        // (Not `contains(":")`: Foundation's substring search, per push, cost more than the request.)
        let name = host.utf8.contains(UInt8(ascii: ":")) ? "[\(host)]" : host
        let defaultPort = scheme == "https" ? 443 : 80
        return port == defaultPort ? name : "\(name):\(port)"
    }
}
