/// An IPv4 or IPv6 address as 4 or 16 bytes. Only canonical textual forms are accepted
/// (dotted decimal for IPv4): odd spellings such as `0x7f.1` are not addresses here, so they
/// can only ever match an allow-list entry literally, never a CIDR.
package struct IPAddress: Sendable, Hashable {
    package var bytes: [UInt8]

    package init?(_ text: some StringProtocol) {
        if let v4 = Self.parseIPv4(Substring(text)) {
            bytes = v4
        } else if let v6 = Self.parseIPv6(Substring(text)) {
            bytes = v6
        } else {
            return nil
        }
    }

    package var isIPv4: Bool { bytes.count == 4 }

    /// Four dotted decimal parts of 0...255, no leading zeros (an octal reading elsewhere would
    /// name another address). Byte by byte: the notifier parses a host per push.
    static func parseIPv4(_ text: Substring) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(4)
        var value = 0
        var digits = 0
        for byte in text.utf8 {
            if byte == UInt8(ascii: ".") {
                guard digits > 0, out.count < 3 else { return nil }
                out.append(UInt8(value))
                value = 0
                digits = 0
            } else if byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") {
                guard digits < 3, !(digits == 1 && value == 0) else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
                guard value <= 255 else { return nil }
                digits += 1
            } else {
                return nil
            }
        }
        guard digits > 0, out.count == 3 else { return nil }
        out.append(UInt8(value))
        return out
    }

    static func parseIPv6(_ text: Substring) -> [UInt8]? {
        guard text.contains(":"), text.count <= 45 else { return nil }
        var groups: [UInt16] = []
        var tailV4: [UInt8]?
        let halves = text.splitOnce("::")
        guard halves.count == 1 || !halves[1].contains("::") else { return nil }
        func parseGroups(_ part: Substring, allowV4Tail: Bool) -> [UInt16]? {
            guard !part.isEmpty else { return [] }
            var result: [UInt16] = []
            let pieces = part.split(separator: ":", omittingEmptySubsequences: false)
            for (index, piece) in pieces.enumerated() {
                if allowV4Tail, index == pieces.count - 1, piece.contains(".") {
                    guard let v4 = parseIPv4(piece) else { return nil }
                    tailV4 = v4
                    continue
                }
                guard (1...4).contains(piece.count), let value = UInt16(piece, radix: 16) else { return nil }
                result.append(value)
            }
            return result
        }
        let head: [UInt16]
        let tail: [UInt16]
        if halves.count == 2 {
            guard let h = parseGroups(halves[0], allowV4Tail: false), let t = parseGroups(halves[1], allowV4Tail: true)
            else { return nil }
            head = h
            tail = t
        } else {
            guard let all = parseGroups(halves[0], allowV4Tail: true) else { return nil }
            head = all
            tail = []
        }
        let used = head.count + tail.count + (tailV4 == nil ? 0 : 2)
        if halves.count == 2 {
            guard used <= 7 else { return nil }
            groups = head + [UInt16](repeating: 0, count: 8 - used) + tail
        } else {
            guard used == 8 else { return nil }
            groups = head
        }
        var out: [UInt8] = []
        for group in groups { out += [UInt8(group >> 8), UInt8(group & 0xFF)] }
        if let tailV4 { out += tailV4 }
        return out.count == 16 ? out : nil
    }
}

extension Substring {
    /// Splits at the first occurrence of `separator`: one part when it does not occur, else two.
    func splitOnce(_ separator: String) -> [Substring] {
        guard let range = firstRange(of: separator) else { return [self] }
        return [self[..<range.lowerBound], self[range.upperBound...]]
    }
}

extension IPAddress {
    /// Loopback, private, link-local, CGNAT, multicast, unspecified, documentation/benchmark and
    /// other non-public ranges, IPv4-mapped IPv6 included: where a push must never go unless the
    /// operator allowed that network explicitly (SSRF guard, checked after DNS resolution).
    package var isSpecialPurpose: Bool {
        if bytes.count == 16 {
            if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF {
                return IPAddress(v4: Array(bytes[12..<16])).isSpecialPurpose
            }
            if bytes.allSatisfy({ $0 == 0 }) { return true }  // ::
            if bytes[0..<15].allSatisfy({ $0 == 0 }) && bytes[15] == 1 { return true }  // ::1
            if bytes[0] == 0xFC || bytes[0] == 0xFD { return true }  // unique local fc00::/7
            if bytes[0] == 0xFE && bytes[1] & 0xC0 == 0x80 { return true }  // link-local fe80::/10
            if bytes[0] == 0xFF { return true }  // multicast
            if bytes[0] == 0x20 && bytes[1] == 0x01 && bytes[2] == 0x0D && bytes[3] == 0xB8 { return true }  // doc
            if bytes[0..<12].allSatisfy({ $0 == 0 }) { return true }  // IPv4-compatible (deprecated)
            // Translation prefixes reach an IPv4 address: judge that one. NAT64 64:ff9b::/96
            // carries it in the last 4 bytes, 6to4 2002::/16 in bytes 2–5.
            if bytes[0..<12] == [0x00, 0x64, 0xFF, 0x9B, 0, 0, 0, 0, 0, 0, 0, 0] {
                return IPAddress(v4: Array(bytes[12..<16])).isSpecialPurpose
            }
            if bytes[0] == 0x20 && bytes[1] == 0x02 { return IPAddress(v4: Array(bytes[2..<6])).isSpecialPurpose }
            if bytes[0..<6] == [0x00, 0x64, 0xFF, 0x9B, 0x00, 0x01] { return true }  // local-use NAT64 64:ff9b:1::/48
            if bytes[0..<4] == [0x20, 0x01, 0x00, 0x00] { return true }  // Teredo 2001::/32 (tunnels to anywhere)
            return false
        }
        let (a, b) = (bytes[0], bytes[1])
        switch a {
        case 0, 10, 127: return true
        case 100 where b & 0xC0 == 64: return true  // CGNAT 100.64.0.0/10
        case 169 where b == 254: return true  // link-local
        case 172 where b & 0xF0 == 16: return true  // 172.16.0.0/12
        case 192 where b == 168: return true
        case 192 where b == 0 && (bytes[2] == 0 || bytes[2] == 2): return true  // 192.0.0.0/24, TEST-NET-1
        case 198 where b & 0xFE == 18: return true  // benchmarking 198.18.0.0/15
        case 198 where b == 51 && bytes[2] == 100: return true
        case 203 where b == 0 && bytes[2] == 113: return true
        case 224...255: return true  // multicast, reserved, broadcast
        default: return false
        }
    }

    init(v4: [UInt8]) { bytes = v4 }

    /// From 4 or 16 raw bytes (as a resolver returns them).
    package init(bytes: [UInt8]) { self.bytes = bytes }
}
