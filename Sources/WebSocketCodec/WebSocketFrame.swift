/// Frame opcodes (RFC 6455 §5.2). Unknown opcodes are a protocol error, not a case here.
package enum Opcode: UInt8, Sendable {
    case continuation = 0x0
    case text = 0x1
    case binary = 0x2
    case close = 0x8
    case ping = 0x9
    case pong = 0xA

    package var isControl: Bool { rawValue & 0x8 != 0 }
}

/// One frame, payload already unmasked.
package struct WebSocketFrame: Sendable, Equatable {
    package var fin: Bool
    package var opcode: Opcode
    package var payload: [UInt8]

    package init(fin: Bool = true, opcode: Opcode, payload: [UInt8] = []) {
        self.fin = fin
        self.opcode = opcode
        self.payload = payload
    }

    /// The frame on the wire. A client masks with `maskKey` (4 bytes, RFC 6455 §5.3); a server
    /// passes nil and never masks.
    package func encoded(maskKey: [UInt8]? = nil) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(payload.count + 14)
        out.append((fin ? 0x80 : 0) | opcode.rawValue)
        let maskBit: UInt8 = maskKey == nil ? 0 : 0x80
        switch payload.count {
        case 0...125:
            out.append(maskBit | UInt8(payload.count))
        case 126...0xFFFF:
            out.append(maskBit | 126)
            out.append(UInt8(payload.count >> 8))
            out.append(UInt8(payload.count & 0xFF))
        default:
            out.append(maskBit | 127)
            let length = UInt64(payload.count)
            for shift in stride(from: 56, through: 0, by: -8) {
                out.append(UInt8(truncatingIfNeeded: length >> UInt64(shift)))
            }
        }
        if let maskKey, maskKey.count == 4 {
            out += maskKey
            for (index, byte) in payload.enumerated() { out.append(byte ^ maskKey[index & 3]) }
        } else {
            out += payload
        }
        return out
    }
}

/// Close status codes (RFC 6455 §7.4.1) the relay uses.
package enum CloseCode {
    package static let normal: UInt16 = 1000
    package static let goingAway: UInt16 = 1001
    package static let protocolError: UInt16 = 1002
    package static let unsupportedData: UInt16 = 1003
    /// Received in place of a code when a close frame carries none; never sent.
    package static let noStatus: UInt16 = 1005
    /// Reported when a connection ended without a close frame (reset, dropped); never sent.
    package static let abnormal: UInt16 = 1006
    package static let invalidPayload: UInt16 = 1007
    package static let policyViolation: UInt16 = 1008
    package static let tooBig: UInt16 = 1009
    package static let internalError: UInt16 = 1011

    /// Whether a peer may send `code` in a close frame (§7.4.1, §7.4.2; 3000–4999 for apps).
    package static func isValidOnTheWire(_ code: UInt16) -> Bool {
        switch code {
        case 1000...1003, 1007...1011, 3000...4999: return true
        default: return false
        }
    }
}

/// A protocol violation: the connection must be failed with `code` (RFC 6455 §7.1.7).
package struct WebSocketError: Error, Sendable, Equatable {
    package var code: UInt16
    package var reason: String

    package init(_ code: UInt16, _ reason: String) {
        self.code = code
        self.reason = reason
    }
}
