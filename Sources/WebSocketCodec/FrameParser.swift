/// Cuts a byte stream into frames, enforcing the frame-level rules of RFC 6455 §5: reserved
/// bits clear (no extension is negotiated), known opcodes, control frames final and ≤ 125
/// bytes, masking by role, and a size limit checked before a payload is buffered.
/// Pure and incremental: feed any split of the stream, get the same frames.
package struct FrameParser: Sendable {
    package enum Role: Sendable {
        /// Parses what a client sent: frames must be masked.
        case server
        /// Parses what a server sent: frames must not be masked.
        case client
    }

    package let role: Role
    /// The largest payload of one frame; larger is a 1009 before the payload is read.
    package let maxFrameSize: Int
    private var buffer: [UInt8] = []
    private var start = 0

    package init(role: Role, maxFrameSize: Int) {
        self.role = role
        self.maxFrameSize = maxFrameSize
    }

    /// Bytes received and not yet returned as frames.
    package var bufferedCount: Int { buffer.count - start }

    package mutating func append(_ bytes: some Sequence<UInt8>) {
        if start > 0, start >= buffer.count / 2 {
            buffer.removeFirst(start)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The header of the frame at the front of the buffer.
    private struct Header {
        var fin: Bool
        var opcode: Opcode
        var length: Int
        /// Where the payload starts in `buffer`.
        var payloadStart: Int
        var maskKey: (UInt8, UInt8, UInt8, UInt8)?
    }

    /// The next complete frame, nil when more bytes are needed.
    package mutating func next() throws(WebSocketError) -> WebSocketFrame? {
        guard let header = try header(), buffer.count - header.payloadStart >= header.length else { return nil }
        let end = header.payloadStart + header.length
        let payload = unmasked(header, buffer[header.payloadStart..<end])
        start = end
        if start == buffer.count {
            buffer = []  // idle connections keep no buffer
            start = 0
        }
        return WebSocketFrame(fin: header.fin, opcode: header.opcode, payload: payload)
    }

    /// The frame still arriving when `next()` returns nil: its opcode and its payload's full
    /// length; nil before its header is whole. With `pendingPayload(from:)`, lets the connection
    /// fail a text frame on its first invalid byte (RFC 6455 §8.1).
    package var pendingFrame: (opcode: Opcode, length: Int)? {
        guard let header = try? header() else { return nil }
        return (header.opcode, header.length)
    }

    /// The payload bytes of the pending frame received so far, from `offset` on, unmasked.
    package func pendingPayload(from offset: Int) -> [UInt8] {
        guard let header = try? header() else { return [] }
        let end = min(buffer.count, header.payloadStart + header.length)
        let from = header.payloadStart + max(0, offset)
        guard from < end else { return [] }
        return unmasked(header, buffer[from..<end], at: from - header.payloadStart)
    }

    private func header() throws(WebSocketError) -> Header? {
        let available = buffer.count - start
        guard available >= 2 else { return nil }
        let b0 = buffer[start]
        let b1 = buffer[start + 1]
        guard b0 & 0x70 == 0 else { throw WebSocketError(CloseCode.protocolError, "reserved bits set") }
        guard let opcode = Opcode(rawValue: b0 & 0x0F) else {
            throw WebSocketError(CloseCode.protocolError, "unknown opcode")
        }
        let fin = b0 & 0x80 != 0
        let masked = b1 & 0x80 != 0
        switch role {
        case .server where !masked: throw WebSocketError(CloseCode.protocolError, "client frames must be masked")
        case .client where masked: throw WebSocketError(CloseCode.protocolError, "server frames must not be masked")
        default: break
        }
        var headerLength = 2
        var length = UInt64(b1 & 0x7F)
        if opcode.isControl {
            guard fin else { throw WebSocketError(CloseCode.protocolError, "fragmented control frame") }
            guard length <= 125 else { throw WebSocketError(CloseCode.protocolError, "control frame over 125 bytes") }
        }
        if length == 126 {
            guard available >= 4 else { return nil }
            length = UInt64(buffer[start + 2]) << 8 | UInt64(buffer[start + 3])
            headerLength = 4
        } else if length == 127 {
            guard available >= 10 else { return nil }
            length = 0
            for i in 0..<8 { length = length << 8 | UInt64(buffer[start + 2 + i]) }
            guard length & (1 << 63) == 0 else { throw WebSocketError(CloseCode.protocolError, "bad frame length") }
            headerLength = 10
        }
        guard length <= UInt64(maxFrameSize) else { throw WebSocketError(CloseCode.tooBig, "frame too big") }
        var maskKey: (UInt8, UInt8, UInt8, UInt8)?
        if masked {
            guard available >= headerLength + 4 else { return nil }
            let at = start + headerLength
            maskKey = (buffer[at], buffer[at + 1], buffer[at + 2], buffer[at + 3])
            headerLength += 4
        }
        return Header(
            fin: fin, opcode: opcode, length: Int(length), payloadStart: start + headerLength, maskKey: maskKey)
    }

    /// `bytes` of the payload, starting `offset` bytes into it, unmasked (§5.3).
    private func unmasked(_ header: Header, _ bytes: ArraySlice<UInt8>, at offset: Int = 0) -> [UInt8] {
        var payload = Array(bytes)
        guard let key = header.maskKey else { return payload }
        payload.withUnsafeMutableBufferPointer { bytes in
            for index in bytes.indices {
                switch (index + offset) & 3 {
                case 0: bytes[index] ^= key.0
                case 1: bytes[index] ^= key.1
                case 2: bytes[index] ^= key.2
                default: bytes[index] ^= key.3
                }
            }
        }
        return payload
    }
}
