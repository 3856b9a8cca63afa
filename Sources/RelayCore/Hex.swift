/// Lowercase hexadecimal: the one writer of it (random ids, digests, `apns-id`, JSON escapes).
package enum Hex {
    /// Appends `byte`'s two digits to `text`.
    @inlinable
    package static func append(_ byte: UInt8, to text: inout [UInt8]) {
        text.append(digit(byte >> 4))
        text.append(digit(byte & 0x0F))
    }

    /// `bytes` as a string of two digits each.
    package static func string(_ bytes: some Sequence<UInt8>) -> String {
        var text: [UInt8] = []
        text.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes { append(byte, to: &text) }
        return String(decoding: text, as: UTF8.self)
    }

    /// The digit of a nibble (0…15), computed rather than looked up: no table to load.
    @inlinable
    static func digit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? 0x30 &+ nibble : 0x57 &+ nibble
    }
}
