/// Finds the raw bytes of members' values in a JSON document without decoding them, so that the
/// app gets a payload byte for byte as the relay sent it (`JSONSerialization` would reorder
/// members, turn `1.10` into `1.1` and `/` into `\/`). Assumes well-formed JSON (the frame was
/// parsed before); on anything else it finds nothing.
enum JSONSpans {
    /// The raw values of the members named `name` of the objects nested `depth` objects deep
    /// (1: the document's own members; 2: members of objects inside it, arrays not counted), in
    /// document order. A member of that name deeper inside a payload is never picked up.
    static func values(named name: String, atDepth depth: Int, in bytes: [UInt8]) -> [[UInt8]] {
        var scanner = Scanner(bytes: bytes, name: Array(name.utf8), depth: depth)
        scanner.skipValue(objectDepth: 0)
        return scanner.found
    }

    private struct Scanner {
        let bytes: [UInt8]
        let name: [UInt8]
        let depth: Int
        var index = 0
        var found: [[UInt8]] = []

        init(bytes: [UInt8], name: [UInt8], depth: Int) {
            self.bytes = bytes
            self.name = name
            self.depth = depth
        }

        mutating func skipWhitespace() {
            while index < bytes.count,
                bytes[index] == 0x20 || bytes[index] == 0x09 || bytes[index] == 0x0A || bytes[index] == 0x0D
            {
                index += 1
            }
        }

        /// Skips a string starting at `index` (a quote); returns its raw contents.
        mutating func skipString() -> ArraySlice<UInt8> {
            let start = index + 1
            index += 1
            while index < bytes.count, bytes[index] != UInt8(ascii: "\"") {
                index += bytes[index] == UInt8(ascii: "\\") ? 2 : 1
            }
            let contents = bytes[start..<min(index, bytes.count)]
            index += 1
            return contents
        }

        mutating func skipValue(objectDepth: Int) {
            skipWhitespace()
            guard index < bytes.count else { return }
            switch bytes[index] {
            case UInt8(ascii: "{"):
                index += 1
                while index < bytes.count {
                    skipWhitespace()
                    guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
                        index += 1  // `}` (or malformed input: stop soon)
                        return
                    }
                    let key = skipString()
                    skipWhitespace()
                    index += 1  // `:`
                    skipWhitespace()
                    let start = index
                    skipValue(objectDepth: objectDepth + 1)
                    if objectDepth + 1 == depth, key.elementsEqual(name) {
                        found.append(Array(bytes[start..<min(index, bytes.count)]))
                    }
                    skipWhitespace()
                    if index < bytes.count, bytes[index] == UInt8(ascii: ",") { index += 1 }
                }
            case UInt8(ascii: "["):
                index += 1
                while index < bytes.count {
                    skipWhitespace()
                    if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                        index += 1
                        return
                    }
                    skipValue(objectDepth: objectDepth)
                    skipWhitespace()
                    if index < bytes.count, bytes[index] == UInt8(ascii: ",") { index += 1 }
                }
            case UInt8(ascii: "\""):
                _ = skipString()
            default:  // number, true, false, null
                while index < bytes.count, !",}] \t\r\n".utf8.contains(bytes[index]) { index += 1 }
            }
        }
    }
}
