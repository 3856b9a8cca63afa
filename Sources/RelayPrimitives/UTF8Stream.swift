/// Incremental UTF-8 validation (RFC 3629), for text messages that arrive in fragments: a code
/// point may be split across two frames, and invalid bytes must fail the connection as soon as
/// they arrive (RFC 6455 §8.1), not when the message is complete.
package struct UTF8Stream: Sendable {
    /// Continuation bytes still expected for the current code point.
    @usableFromInline var remaining = 0
    /// Allowed range of the next continuation byte (narrower right after some lead bytes).
    @usableFromInline var lower: UInt8 = 0x80
    @usableFromInline var upper: UInt8 = 0xBF

    package init() {}

    /// Feeds bytes; false as soon as they cannot be part of valid UTF-8. Inlinable so that it is
    /// specialized for the caller's collection (the JSON parser runs it over every string).
    @inlinable
    package mutating func feed(_ bytes: some Sequence<UInt8>) -> Bool {
        for byte in bytes {
            if remaining > 0 {
                guard byte >= lower, byte <= upper else { return false }
                lower = 0x80
                upper = 0xBF
                remaining -= 1
                continue
            }
            switch byte {
            case 0x00...0x7F: continue
            case 0xC2...0xDF: remaining = 1
            case 0xE0: remaining = 2; lower = 0xA0
            case 0xE1...0xEC, 0xEE...0xEF: remaining = 2
            case 0xED: remaining = 2; upper = 0x9F
            case 0xF0: remaining = 3; lower = 0x90
            case 0xF1...0xF3: remaining = 3
            case 0xF4: remaining = 3; upper = 0x8F
            default: return false
            }
        }
        return true
    }

    /// True when the bytes so far end on a code point boundary (a message may end here).
    package var isComplete: Bool { remaining == 0 }
}
