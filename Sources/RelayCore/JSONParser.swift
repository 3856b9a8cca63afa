/// A strict RFC 8259 JSON parser over bytes.
///
/// Written here rather than using Foundation so that request decoding is pure, fast, bounded
/// (nesting depth) and fuzzable. Rejects trailing garbage, lone surrogates, control characters
/// in strings, invalid UTF-8, and repeated member names (I-JSON). Names compare as Swift strings,
/// that is by canonical equivalence: the same way `JSONValue`'s subscript finds a member.
package struct JSONParser {
    package struct Error: Swift.Error, Equatable, Sendable, CustomStringConvertible {
        package var offset: Int
        package var reason: String
        package var description: String { "\(reason) at byte \(offset)" }
    }

    /// Deepest nesting accepted; deeper documents are rejected rather than risking the stack.
    package static let maxDepth = 64

    package static func parse(_ bytes: some Collection<UInt8>) throws(Error) -> JSONValue {
        let array = Array(bytes)
        return try array.withUnsafeBufferPointer { buffer throws(Error) in
            var parser = Parser(bytes: buffer)
            parser.skipWhitespace()
            let value = try parser.parseValue(depth: 0)
            parser.skipWhitespace()
            guard parser.index == buffer.count else { throw parser.error("unexpected data after the JSON value") }
            return value
        }
    }

    private struct Parser {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

        func error(_ reason: String) -> Error { Error(offset: index, reason: reason) }

        mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        mutating func parseValue(depth: Int) throws(Error) -> JSONValue {
            guard index < bytes.count else { throw error("unexpected end of input") }
            switch bytes[index] {
            case UInt8(ascii: "{"): return try parseObject(depth: depth + 1)
            case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
            case UInt8(ascii: "\""): return .string(try parseString())
            case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
            case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
            case UInt8(ascii: "n"): try expectLiteral("null"); return .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
            default: throw error("unexpected character")
            }
        }

        mutating func expectLiteral(_ literal: StaticString) throws(Error) {
            let count = literal.utf8CodeUnitCount
            guard index + count <= bytes.count else { throw error("unexpected end of input") }
            let base = literal.utf8Start
            for i in 0..<count where bytes[index + i] != base[i] {
                throw error("invalid literal")
            }
            index += count
        }

        mutating func parseObject(depth: Int) throws(Error) -> JSONValue {
            guard depth <= JSONParser.maxDepth else { throw error("nesting too deep") }
            index += 1
            var members: [(String, JSONValue)] = []
            // Names seen, once the object is past a few members (a linear scan is cheaper before).
            var names: Set<String> = []
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                index += 1
                return .object(members)
            }
            while true {
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
                    throw error("expected a member name")
                }
                let keyOffset = index
                let key = try parseString()
                // I-JSON (RFC 7493 §2.3): a repeated name is refused, so that no two readers of one
                // document (signature check, handler, fingerprint) can see different members.
                let repeated: Bool
                if members.count < 8 {
                    repeated = members.contains { $0.0 == key }
                } else {
                    if names.isEmpty { names = Set(members.map(\.0)) }
                    repeated = !names.insert(key).inserted
                }
                guard !repeated else { throw Error(offset: keyOffset, reason: "duplicate member name") }
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':'") }
                index += 1
                skipWhitespace()
                let value = try parseValue(depth: depth)
                members.append((key, value))
                skipWhitespace()
                guard index < bytes.count else { throw error("unexpected end of input") }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                } else if bytes[index] == UInt8(ascii: "}") {
                    index += 1
                    return .object(members)
                } else {
                    throw error("expected ',' or '}'")
                }
            }
        }

        mutating func parseArray(depth: Int) throws(Error) -> JSONValue {
            guard depth <= JSONParser.maxDepth else { throw error("nesting too deep") }
            index += 1
            var elements: [JSONValue] = []
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                index += 1
                return .array(elements)
            }
            while true {
                skipWhitespace()
                elements.append(try parseValue(depth: depth))
                skipWhitespace()
                guard index < bytes.count else { throw error("unexpected end of input") }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                } else if bytes[index] == UInt8(ascii: "]") {
                    index += 1
                    return .array(elements)
                } else {
                    throw error("expected ',' or ']'")
                }
            }
        }

        mutating func parseNumber() throws(Error) -> String {
            let start = index
            if bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count else { throw error("invalid number") }
            if bytes[index] == UInt8(ascii: "0") {
                index += 1
            } else if isDigit(bytes[index]) {
                while index < bytes.count, isDigit(bytes[index]) { index += 1 }
            } else {
                throw error("invalid number")
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                index += 1
                guard index < bytes.count, isDigit(bytes[index]) else { throw error("invalid number") }
                while index < bytes.count, isDigit(bytes[index]) { index += 1 }
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
                index += 1
                if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                    index += 1
                }
                guard index < bytes.count, isDigit(bytes[index]) else { throw error("invalid number") }
                while index < bytes.count, isDigit(bytes[index]) { index += 1 }
            }
            return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        }

        func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

        mutating func parseString() throws(Error) -> String {
            index += 1  // opening quote
            let start = index
            // Fast path: no escapes, ASCII or valid UTF-8 checked below.
            var hasEscape = false
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") { break }
                if byte == UInt8(ascii: "\\") {
                    hasEscape = true
                    index += 2
                    continue
                }
                if byte < 0x20 { throw error("control character in string") }
                index += 1
            }
            guard index < bytes.count else { throw error("unterminated string") }
            let raw = UnsafeBufferPointer(rebasing: bytes[start..<index])
            index += 1  // closing quote
            if !hasEscape {
                guard UTF8Validator.isValid(raw) else { throw Error(offset: start, reason: "invalid UTF-8 in string") }
                return String(decoding: raw, as: UTF8.self)
            }
            return try unescape(raw, offset: start)
        }

        func unescape(_ raw: UnsafeBufferPointer<UInt8>, offset: Int) throws(Error) -> String {
            var out: [UInt8] = []
            out.reserveCapacity(raw.count)
            var i = 0
            func fail(_ reason: String) -> Error { Error(offset: offset + i, reason: reason) }
            while i < raw.count {
                let byte = raw[i]
                guard byte == UInt8(ascii: "\\") else {
                    out.append(byte)
                    i += 1
                    continue
                }
                guard i + 1 < raw.count else { throw fail("invalid escape") }
                let escaped = raw[i + 1]
                i += 2
                switch escaped {
                case UInt8(ascii: "\""): out.append(0x22)
                case UInt8(ascii: "\\"): out.append(0x5C)
                case UInt8(ascii: "/"): out.append(0x2F)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    guard let high = hex4(raw, at: i) else { throw fail("invalid \\u escape") }
                    i += 4
                    var scalarValue = UInt32(high)
                    if (0xD800...0xDBFF).contains(high) {
                        guard i + 1 < raw.count, raw[i] == UInt8(ascii: "\\"), raw[i + 1] == UInt8(ascii: "u"),
                            let low = hex4(raw, at: i + 2), (0xDC00...0xDFFF).contains(low)
                        else { throw fail("lone surrogate") }
                        i += 6
                        scalarValue = 0x10000 + ((UInt32(high) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(high) {
                        throw fail("lone surrogate")
                    }
                    guard let scalar = Unicode.Scalar(scalarValue) else { throw fail("invalid code point") }
                    out.append(contentsOf: Array(String(Character(scalar)).utf8))
                default:
                    throw fail("invalid escape")
                }
            }
            let valid = out.withUnsafeBufferPointer { UTF8Validator.isValid($0) }
            guard valid else { throw Error(offset: offset, reason: "invalid UTF-8 in string") }
            return String(decoding: out, as: UTF8.self)
        }

        func hex4(_ raw: UnsafeBufferPointer<UInt8>, at start: Int) -> UInt16? {
            guard start + 4 <= raw.count else { return nil }
            var value: UInt16 = 0
            for i in start..<start + 4 {
                let byte = raw[i]
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: return nil
                }
                value = value << 4 | UInt16(digit)
            }
            return value
        }
    }
}
