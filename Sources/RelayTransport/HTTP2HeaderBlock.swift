internal import CNGHTTP2

/// A request's header fields, checked and with lower-case names, in one buffer that the
/// `nghttp2_nv`s of a submit point into (nghttp2 copies them before the submit returns).
///
/// Checked here rather than left to the peer: a field HTTP/2 cannot carry makes the server
/// reset the stream with PROTOCOL_ERROR, which says nothing about which field it was. Each
/// field is copied into the buffer once and checked there: a request is built per push.
struct HTTP2HeaderBlock {
    private var storage: [UInt8] = []
    private var spans: [(name: Range<Int>, value: Range<Int>)] = []

    /// Connection-specific fields (RFC 9113 §8.2.2): a message carrying one is malformed.
    private static let connectionSpecific = [
        "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade",
    ]
    .map { Array($0.utf8) }

    init(
        method: String, scheme: String, authority: String, path: String, headers: [(name: String, value: String)]
    )
        throws(HTTP2Session.Failure)
    {
        let pseudoBytes =
            ":method:scheme:authority:path".utf8.count + method.utf8.count + scheme.utf8.count
            + authority.utf8.count + path.utf8.count
        storage.reserveCapacity(headers.reduce(pseudoBytes) { $0 + $1.name.utf8.count + $1.value.utf8.count })
        spans.reserveCapacity(4 + headers.count)
        try appendPseudo(":method", method, check: nghttp2_check_method)
        // A scheme is a lower-case token, as a header name is.
        try appendPseudo(":scheme", scheme, check: nghttp2_check_header_name)
        try appendPseudo(":authority", authority, check: nghttp2_check_authority)
        try appendPseudo(":path", path, check: nghttp2_check_path)
        for (name, value) in headers {
            let span = append(name, value, lowercasingName: true)
            let lowered = storage[span.name]
            // `nghttp2_check_header_name` lets a leading ':' through: pseudo-headers come from arguments.
            guard lowered.first != UInt8(ascii: ":"), check(span.name, nghttp2_check_header_name),
                !Self.connectionSpecific.contains(where: { $0.elementsEqual(lowered) }),
                !lowered.elementsEqual("te".utf8) || value == "trailers"
            else { throw Self.invalid("header name \(name.debugDescription)") }
            guard check(span.value, nghttp2_check_header_value_rfc9113) else {
                throw Self.invalid("value of header \(String(decoding: lowered, as: UTF8.self))")
            }
        }
    }

    private mutating func appendPseudo(
        _ name: String, _ value: String, check test: (UnsafePointer<UInt8>?, Int) -> Int32
    ) throws(HTTP2Session.Failure) {
        let span = append(name, value, lowercasingName: false)
        guard !span.value.isEmpty, check(span.value, test) else {
            throw Self.invalid("\(name) \(value.debugDescription)")
        }
    }

    /// Copies a field in; returns where its name and value are.
    private mutating func append(
        _ name: String, _ value: String, lowercasingName: Bool
    ) -> (name: Range<Int>, value: Range<Int>) {
        let nameStart = storage.count
        storage.append(contentsOf: name.utf8)
        let valueStart = storage.count
        if lowercasingName {
            for index in nameStart..<valueStart where (0x41...0x5A).contains(storage[index]) { storage[index] |= 0x20 }
        }
        storage.append(contentsOf: value.utf8)
        let span = (name: nameStart..<valueStart, value: valueStart..<storage.count)
        spans.append(span)
        return span
    }

    private func check(_ range: Range<Int>, _ test: (UnsafePointer<UInt8>?, Int) -> Int32) -> Bool {
        storage.withUnsafeBufferPointer { bytes in
            test(bytes.baseAddress?.advanced(by: range.lowerBound), range.count) != 0
        }
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
