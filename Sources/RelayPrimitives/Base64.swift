/// Base64 (RFC 4648), the one codec of the code base, here because this is its lowest target:
/// `.standard` (padded, `+/`) for `Sec-WebSocket-Key`/`-Accept`, webhook signatures and
/// `whsec_` secrets; `.url` (unpadded, `-_`) for JWTs. Pure, so the SDK and the fuzzers need no
/// Foundation. Decoding is strict: one spelling per value (no stray characters, padding only
/// where it belongs, zero spare bits).
package enum Base64 {
    package enum Variant: Sendable {
        /// RFC 4648 §4, with `=` padding.
        case standard
        /// RFC 4648 §5, without padding.
        case url

        fileprivate var alphabet: [UInt8] { self == .standard ? Base64.standardAlphabet : Base64.urlAlphabet }
        fileprivate var reverse: [UInt8] { self == .standard ? Base64.standardReverse : Base64.urlReverse }
    }

    private static let standardAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let urlAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    private static let standardReverse = reverseTable(standardAlphabet)
    private static let urlReverse = reverseTable(urlAlphabet)

    private static func reverseTable(_ alphabet: [UInt8]) -> [UInt8] {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(index) }
        return table
    }

    /// Whether `byte` is in the base64url alphabet (RFC 4648 §5).
    package static func isURLCharacter(_ byte: UInt8) -> Bool { urlReverse[Int(byte)] != 0xFF }

    package static func encode(_ bytes: some Collection<UInt8>, _ variant: Variant = .standard) -> String {
        let input = Array(bytes)
        let alphabet = variant.alphabet
        var out: [UInt8] = []
        out.reserveCapacity((input.count + 2) / 3 * 4)
        var i = 0
        while i < input.count {
            let remaining = input.count - i
            let n =
                UInt32(input[i]) << 16 | (remaining > 1 ? UInt32(input[i + 1]) << 8 : 0)
                | (remaining > 2 ? UInt32(input[i + 2]) : 0)
            out.append(alphabet[Int(n >> 18 & 63)])
            out.append(alphabet[Int(n >> 12 & 63)])
            if remaining > 1 {
                out.append(alphabet[Int(n >> 6 & 63)])
            } else if variant == .standard {
                out.append(UInt8(ascii: "="))
            }
            if remaining > 2 {
                out.append(alphabet[Int(n & 63)])
            } else if variant == .standard {
                out.append(UInt8(ascii: "="))
            }
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The bytes, or nil for anything malformed.
    package static func decode(_ text: some StringProtocol, _ variant: Variant = .standard) -> [UInt8]? {
        var input = Array(text.utf8)
        if variant == .standard {
            guard input.count % 4 == 0 else { return nil }
            var padding = 0
            while padding < 2, input.last == UInt8(ascii: "=") {
                input.removeLast()
                padding += 1
            }
        }
        guard input.count % 4 != 1 else { return nil }
        let reverse = variant.reverse
        var out: [UInt8] = []
        out.reserveCapacity(input.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for byte in input {
            let value = reverse[Int(byte)]
            guard value != 0xFF else { return nil }
            accumulator = (accumulator << 6 | UInt32(value)) & 0xFFFF
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        // Leftover bits must be zero so that every value has exactly one spelling.
        guard accumulator & ((1 << UInt32(bits)) - 1) == 0 else { return nil }
        return out
    }
}
