internal import CNGHTTP2

/// A request's header fields, checked and with lower-case names, in one buffer that the
/// `nghttp2_nv`s of a submit point into (nghttp2 copies them before the submit returns).
///
/// Checked here rather than left to the peer: a field HTTP/2 cannot carry makes the server
/// reset the stream with PROTOCOL_ERROR, which says nothing about which field it was.
struct HTTP2HeaderBlock {
    private var storage: [UInt8] = []
    private var spans: [(name: Range<Int>, value: Range<Int>)] = []

    /// Connection-specific fields (RFC 9113 §8.2.2): a message carrying one is malformed.
    private static let connectionSpecific: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade",
    ]

    init(
        method: String, scheme: String, authority: String, path: String, headers: [(String, String)]
    )
        throws(HTTP2Session.Failure)
    {
        try appendPseudo(":method", method, check: nghttp2_check_method)
        // A scheme is a lower-case token, as a header name is.
        try appendPseudo(":scheme", scheme, check: nghttp2_check_header_name)
        try appendPseudo(":authority", authority, check: nghttp2_check_authority)
        try appendPseudo(":path", path, check: nghttp2_check_path)
        for (name, value) in headers {
            let lowered = name.utf8.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }
            let loweredName = String(decoding: lowered, as: UTF8.self)
            let valueBytes = Array(value.utf8)
            // `nghttp2_check_header_name` lets a leading ':' through: pseudo-headers come from arguments.
            guard lowered.first != UInt8(ascii: ":"), nghttp2_check_header_name(lowered, lowered.count) != 0,
                !Self.connectionSpecific.contains(loweredName), loweredName != "te" || value == "trailers"
            else { throw Self.invalid("header name \(name.debugDescription)") }
            guard nghttp2_check_header_value_rfc9113(valueBytes, valueBytes.count) != 0 else {
                throw Self.invalid("value of header \(loweredName)")
            }
            append(lowered, valueBytes)
        }
    }

    private mutating func appendPseudo(
        _ name: String, _ value: String, check: (UnsafePointer<UInt8>?, Int) -> Int32
    ) throws(HTTP2Session.Failure) {
        let bytes = Array(value.utf8)
        guard !bytes.isEmpty, check(bytes, bytes.count) != 0 else {
            throw Self.invalid("\(name) \(value.debugDescription)")
        }
        append(Array(name.utf8), bytes)
    }

    private mutating func append(_ name: [UInt8], _ value: [UInt8]) {
        let nameStart = storage.count
        storage += name
        let valueStart = storage.count
        storage += value
        spans.append((nameStart..<valueStart, valueStart..<storage.count))
    }

    private static func invalid(_ what: String) -> HTTP2Session.Failure {
        HTTP2Session.Failure(code: .invalidHeader, message: "HTTP/2 cannot carry this \(what)")
    }

    /// Calls `body` with the fields as nghttp2 takes them, valid only during the call.
    func withFields<Result>(_ body: (UnsafeBufferPointer<nghttp2_nv>) -> Result) -> Result {
        storage.withUnsafeBufferPointer { bytes in
            let fields = spans.map { span in
                pr_nghttp2_nv(
                    bytes.baseAddress?.advanced(by: span.name.lowerBound), span.name.count,
                    bytes.baseAddress?.advanced(by: span.value.lowerBound), span.value.count)
            }
            return fields.withUnsafeBufferPointer(body)
        }
    }
}
