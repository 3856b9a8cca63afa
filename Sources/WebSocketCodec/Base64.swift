/// Standard base64 with padding (RFC 4648 §4), for `Sec-WebSocket-Key` and `-Accept`.
enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i < bytes.count {
            let b0 = UInt32(bytes[i])
            let b1 = i + 1 < bytes.count ? UInt32(bytes[i + 1]) : 0
            let b2 = i + 2 < bytes.count ? UInt32(bytes[i + 2]) : 0
            let n = b0 << 16 | b1 << 8 | b2
            out.append(alphabet[Int(n >> 18 & 63)])
            out.append(alphabet[Int(n >> 12 & 63)])
            out.append(i + 1 < bytes.count ? alphabet[Int(n >> 6 & 63)] : UInt8(ascii: "="))
            out.append(i + 2 < bytes.count ? alphabet[Int(n & 63)] : UInt8(ascii: "="))
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes padded base64; nil for anything malformed.
    static func decode(_ text: String) -> [UInt8]? {
        let input = Array(text.utf8)
        guard input.count % 4 == 0 else { return nil }
        var out: [UInt8] = []
        var quad: [UInt32] = []
        for (index, byte) in input.enumerated() {
            if byte == UInt8(ascii: "=") {
                // Padding only in the last one or two places.
                guard index >= input.count - 2, input[index...].allSatisfy({ $0 == UInt8(ascii: "=") }) else {
                    return nil
                }
                quad.append(0)
            } else {
                guard let value = alphabet.firstIndex(of: byte) else { return nil }
                quad.append(UInt32(value))
            }
            if quad.count == 4 {
                let n = quad[0] << 18 | quad[1] << 12 | quad[2] << 6 | quad[3]
                out += [UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)]
                quad.removeAll(keepingCapacity: true)
            }
        }
        let padding = input.suffix(2).filter { $0 == UInt8(ascii: "=") }.count
        return Array(out.dropLast(padding))
    }
}
