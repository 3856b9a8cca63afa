import RelayPrimitives

/// The protocol state of one WebSocket, without I/O (RFC 6455 §5.4–5.5, §7): reassembles
/// fragmented messages, validates text as UTF-8 across fragments, answers pings, runs the close
/// handshake, and fails the connection with the right code on any violation.
///
/// The I/O layer feeds received bytes to `receive(_:)` and carries out the returned outputs in
/// order: write bytes, deliver messages, and close the socket once `.closed` appears.
package struct WebSocketConnection: Sendable {
    package enum Message: Sendable, Equatable {
        case text(String)
        case binary([UInt8])
    }

    package enum Output: Sendable, Equatable {
        /// Bytes to write to the peer.
        case write([UInt8])
        /// A complete message from the peer.
        case message(Message)
        /// A pong arrived (liveness).
        case pong([UInt8])
        /// The connection is over: close the socket after the writes before this output.
        /// `code` is what the peer sent (or 1005), or the code we failed the connection with.
        case closed(code: UInt16, reason: String)
    }

    package enum State: Sendable, Equatable {
        case open
        /// We sent a close frame and wait for the peer's.
        case closing
        case closed
    }

    package let role: FrameParser.Role
    package private(set) var state: State = .open
    /// The largest message (all fragments together).
    package let maxMessageSize: Int
    private var parser: FrameParser
    private var fragments: (opcode: Opcode, bytes: [UInt8], utf8: UTF8Stream)?
    /// How much of the text frame still arriving was validated, and the UTF-8 state after it.
    private var partial: (validated: Int, utf8: UTF8Stream)?
    /// Makes the 4-byte mask of each client frame; random in production, fixed in tests.
    private let maskKey: @Sendable () -> [UInt8]

    package init(
        role: FrameParser.Role, maxMessageSize: Int,
        maskKey: @escaping @Sendable () -> [UInt8] = WebSocketConnection.randomMaskKey
    ) {
        self.role = role
        self.maxMessageSize = maxMessageSize
        parser = FrameParser(role: role, maxFrameSize: maxMessageSize)
        self.maskKey = maskKey
    }

    package static func randomMaskKey() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        let value = generator.next() as UInt32
        return [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }

    // MARK: Receiving

    /// Feeds bytes from the socket.
    package mutating func receive(_ bytes: some Sequence<UInt8>) -> [Output] {
        guard state != .closed else { return [] }
        parser.append(bytes)
        var outputs: [Output] = []
        while state != .closed {
            do {
                guard let frame = try parser.next() else {
                    try checkPartialText()
                    break
                }
                let checked = partial
                partial = nil
                try handle(frame, checked: checked, into: &outputs)
            } catch {
                fail(error, into: &outputs)
            }
        }
        return outputs
    }

    /// Fails a text frame still arriving as soon as its bytes cannot become valid UTF-8 or its
    /// message cannot fit (RFC 6455 §8.1 asks to fail fast), not when its last byte comes: the
    /// same checks, in the same order, as `append` makes on the whole frame.
    private mutating func checkPartialText() throws(WebSocketError) {
        guard state == .open, let frame = parser.pendingFrame else { return }
        var progress: (validated: Int, utf8: UTF8Stream)
        switch (frame.opcode, fragments) {
        case (.text, nil):
            progress = partial ?? (0, UTF8Stream())
        case (.continuation, let assembly?) where assembly.opcode == .text:
            guard assembly.bytes.count + frame.length <= maxMessageSize else {
                throw WebSocketError(CloseCode.tooBig, "message too big")
            }
            progress = partial ?? (0, assembly.utf8)
        default:
            return
        }
        // Only the bytes that arrived since the last look: linear in the frame, however it is cut.
        let bytes = parser.pendingPayload(from: progress.validated)
        guard progress.utf8.feed(bytes) else {
            throw WebSocketError(CloseCode.invalidPayload, "invalid UTF-8 in a text message")
        }
        progress.validated += bytes.count
        partial = progress
    }

    /// `checked`: how much of this frame `checkPartialText` validated while it arrived.
    private mutating func handle(
        _ frame: WebSocketFrame, checked: (validated: Int, utf8: UTF8Stream)?, into outputs: inout [Output]
    ) throws(WebSocketError) {
        switch frame.opcode {
        case .ping:
            if state == .open { outputs.append(.write(encode(WebSocketFrame(opcode: .pong, payload: frame.payload)))) }
        case .pong:
            outputs.append(.pong(frame.payload))
        case .close:
            try handleClose(frame.payload, into: &outputs)
        case .text, .binary:
            guard fragments == nil else {
                throw WebSocketError(CloseCode.protocolError, "new message inside a fragmented one")
            }
            if state == .closing { return }  // data after our close is discarded (§1.4)
            var assembly = (opcode: frame.opcode, bytes: [UInt8](), utf8: UTF8Stream())
            try append(frame.payload, checked: checked, to: &assembly)
            if frame.fin {
                try deliver(assembly, into: &outputs)
            } else {
                fragments = assembly
            }
        case .continuation:
            guard var assembly = fragments else {
                throw WebSocketError(CloseCode.protocolError, "continuation without a message")
            }
            try append(frame.payload, checked: checked, to: &assembly)
            if frame.fin {
                fragments = nil
                if state == .open { try deliver(assembly, into: &outputs) }
            } else {
                fragments = assembly
            }
        }
    }

    private func append(
        _ payload: [UInt8], checked: (validated: Int, utf8: UTF8Stream)?,
        to assembly: inout (opcode: Opcode, bytes: [UInt8], utf8: UTF8Stream)
    ) throws(WebSocketError) {
        guard assembly.bytes.count + payload.count <= maxMessageSize else {
            throw WebSocketError(CloseCode.tooBig, "message too big")
        }
        if assembly.opcode == .text {
            // What was validated while the frame arrived is not validated again.
            var utf8 = checked?.utf8 ?? assembly.utf8
            guard utf8.feed(payload.dropFirst(checked?.validated ?? 0)) else {
                throw WebSocketError(CloseCode.invalidPayload, "invalid UTF-8 in a text message")
            }
            assembly.utf8 = utf8
        }
        assembly.bytes += payload
    }

    private func deliver(
        _ assembly: (opcode: Opcode, bytes: [UInt8], utf8: UTF8Stream), into outputs: inout [Output]
    ) throws(WebSocketError) {
        if assembly.opcode == .text {
            guard assembly.utf8.isComplete else {
                throw WebSocketError(CloseCode.invalidPayload, "text message ends inside a character")
            }
            outputs.append(.message(.text(String(decoding: assembly.bytes, as: UTF8.self))))
        } else {
            outputs.append(.message(.binary(assembly.bytes)))
        }
    }

    private mutating func handleClose(_ payload: [UInt8], into outputs: inout [Output]) throws(WebSocketError) {
        var code = CloseCode.noStatus
        var reason = ""
        if payload.count == 1 { throw WebSocketError(CloseCode.protocolError, "close frame with a 1-byte payload") }
        if payload.count >= 2 {
            code = UInt16(payload[0]) << 8 | UInt16(payload[1])
            guard CloseCode.isValidOnTheWire(code) else {
                throw WebSocketError(CloseCode.protocolError, "invalid close code")
            }
            let reasonBytes = payload[2...]
            var utf8 = UTF8Stream()
            guard utf8.feed(reasonBytes), utf8.isComplete else {
                throw WebSocketError(CloseCode.invalidPayload, "close reason is not UTF-8")
            }
            reason = String(decoding: reasonBytes, as: UTF8.self)
        }
        if state == .open {
            // Echo the code (§5.5.1); a close without one is answered without one.
            let echo = code == CloseCode.noStatus ? [] : [UInt8(code >> 8), UInt8(code & 0xFF)]
            outputs.append(.write(encode(WebSocketFrame(opcode: .close, payload: echo))))
        }
        state = .closed
        outputs.append(.closed(code: code, reason: reason))
    }

    private mutating func fail(_ error: WebSocketError, into outputs: inout [Output]) {
        if state == .open {
            outputs.append(.write(closeFrame(code: error.code, reason: error.reason)))
        }
        state = .closed
        outputs.append(.closed(code: error.code, reason: error.reason))
    }

    // MARK: Sending

    /// A text message as one frame.
    package func text(_ text: String) -> [UInt8] { encode(WebSocketFrame(opcode: .text, payload: Array(text.utf8))) }

    package func binary(_ bytes: [UInt8]) -> [UInt8] { encode(WebSocketFrame(opcode: .binary, payload: bytes)) }

    package func ping(_ payload: [UInt8] = []) -> [UInt8] { encode(WebSocketFrame(opcode: .ping, payload: payload)) }

    /// Starts the close handshake: returns the close frame to write; the socket closes when the
    /// peer's close arrives (or a timeout of the I/O layer's choosing passes).
    package mutating func close(code: UInt16, reason: String = "") -> [UInt8] {
        guard state == .open else { return [] }
        state = .closing
        return closeFrame(code: code, reason: reason)
    }

    private func closeFrame(code: UInt16, reason: String) -> [UInt8] {
        // A control payload is at most 125 bytes: 2 for the code, up to 123 for the reason,
        // cut on a character boundary.
        var reasonBytes: [UInt8] = []
        for character in reason {
            guard reasonBytes.count + character.utf8.count <= 123 else { break }
            reasonBytes += Array(character.utf8)
        }
        return encode(WebSocketFrame(opcode: .close, payload: [UInt8(code >> 8), UInt8(code & 0xFF)] + reasonBytes))
    }

    private func encode(_ frame: WebSocketFrame) -> [UInt8] {
        frame.encoded(maskKey: role == .client ? maskKey() : nil)
    }
}
