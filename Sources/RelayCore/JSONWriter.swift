/// Builds compact JSON straight into bytes.
///
/// Responses are written with this rather than `JSONEncoder`: a catch-up page splices stored
/// payloads in as they are, and the hot paths avoid reflection and intermediate dictionaries.
package struct JSONWriter: Sendable {
    package private(set) var bytes: [UInt8] = []
    /// Whether the next member or element needs a leading comma, one flag per open container.
    private var needsComma: [Bool] = []

    package init(capacity: Int = 256) {
        bytes.reserveCapacity(capacity)
    }

    // MARK: Containers

    package mutating func beginObject() {
        separate()
        bytes.append(UInt8(ascii: "{"))
        needsComma.append(false)
    }

    package mutating func endObject() {
        bytes.append(UInt8(ascii: "}"))
        needsComma.removeLast()
    }

    package mutating func beginArray() {
        separate()
        bytes.append(UInt8(ascii: "["))
        needsComma.append(false)
    }

    package mutating func endArray() {
        bytes.append(UInt8(ascii: "]"))
        needsComma.removeLast()
    }

    /// Writes `"key":`; the value written next completes the member.
    package mutating func key(_ key: String) {
        separate()
        writeString(key)
        bytes.append(UInt8(ascii: ":"))
        pendingValueAfterKey = true
    }

    /// Set between a key and its value, which must not be preceded by a comma.
    private var pendingValueAfterKey = false

    private mutating func separate() {
        if pendingValueAfterKey {
            pendingValueAfterKey = false
            return
        }
        guard !needsComma.isEmpty else { return }
        if needsComma[needsComma.count - 1] { bytes.append(UInt8(ascii: ",")) }
        needsComma[needsComma.count - 1] = true
    }

    // MARK: Scalars

    package mutating func string(_ value: String) {
        separate()
        writeString(value)
    }

    package mutating func int(_ value: some BinaryInteger) {
        separate()
        guard let value = Int64(exactly: value) else { return bytes.append(contentsOf: String(value).utf8) }
        // Digits written straight into the bytes: `String(value)` goes through the generic
        // description path, and writers put several numbers in every push.
        verbatimInt(value)
    }

    package mutating func bool(_ value: Bool) {
        separate()
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
    }

    package mutating func null() {
        separate()
        bytes.append(contentsOf: "null".utf8)
    }

    /// Writes `value`, or `null` when it is nil.
    package mutating func string(orNull value: String?) {
        if let value { string(value) } else { null() }
    }

    /// Splices already-serialized JSON (a stored payload) in as one value.
    package mutating func raw(_ json: some Collection<UInt8>) {
        separate()
        bytes.append(contentsOf: json)
    }

    package mutating func value(_ value: JSONValue) {
        switch value {
        case .null: null()
        case .bool(let b): bool(b)
        case .number(let text):
            separate()
            bytes.append(contentsOf: text.utf8)
        case .string(let s): string(s)
        case .array(let elements):
            beginArray()
            for element in elements { self.value(element) }
            endArray()
        case .object(let members):
            beginObject()
            for (name, member) in members {
                key(name)
                self.value(member)
            }
            endObject()
        }
    }

    // MARK: Verbatim

    /// Opens a value written in pieces by the `verbatim` calls below (a comma first if one is due).
    /// For the hottest writer only, a catch-up page's 10,000 messages: the caller's pieces must
    /// make one well-formed value.
    package mutating func beginVerbatim() { separate() }

    /// JSON text of this code's own (`,"id":`), appended as it is.
    package mutating func verbatim(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    package mutating func verbatimString(utf8 value: UnsafeBufferPointer<UInt8>) { writeString(utf8: value) }

    /// Written backwards into a stack buffer, then appended once (a catch-up page writes
    /// 10,000 seqs; an append per digit showed in its profile).
    package mutating func verbatimInt(_ value: Int64) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { out in
            var magnitude = value.magnitude
            var start = out.count
            repeat {
                start -= 1
                out[start] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            if value < 0 {
                start -= 1
                out[start] = UInt8(ascii: "-")
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: out[start...]))
        }
    }

    package mutating func verbatimTimestamp(_ value: Timestamp) {
        bytes.append(UInt8(ascii: "\""))
        value.appendRFC3339(to: &bytes)  // never needs escaping
        bytes.append(UInt8(ascii: "\""))
    }

    package mutating func verbatimRaw(_ json: UnsafeBufferPointer<UInt8>) { bytes.append(contentsOf: json) }

    // MARK: Escaping

    private mutating func writeString(_ value: String) {
        var value = value
        value.makeContiguousUTF8()  // native strings already are: no copy
        value.utf8.withContiguousStorageIfAvailable { writeString(utf8: $0) }
    }

    /// Copies runs that need no escaping whole (most strings are one such run).
    private mutating func writeString(utf8: UnsafeBufferPointer<UInt8>) {
        bytes.append(UInt8(ascii: "\""))
        var start = 0
        for index in 0..<utf8.count {
            let byte = utf8[index]
            guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<index]))
            start = index + 1
            switch byte {
            case UInt8(ascii: "\""): bytes.append(contentsOf: [0x5C, 0x22])
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [0x5C, 0x5C])
            case 0x0A: bytes.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x0D: bytes.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case 0x09: bytes.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            default:
                bytes.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30])
                Hex.append(byte, to: &bytes)
            }
        }
        bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<utf8.count]))
        bytes.append(UInt8(ascii: "\""))
    }
}

/// Object members in one call each, for the shapes every writer of this code base needs.
extension JSONWriter {
    package mutating func member(_ name: String, _ value: String) {
        key(name)
        string(value)
    }

    package mutating func member(_ name: String, orNull value: String?) {
        key(name)
        string(orNull: value)
    }

    package mutating func member(_ name: String, _ value: Int64) {
        key(name)
        int(value)
    }

    package mutating func member(_ name: String, _ value: Bool) {
        key(name)
        bool(value)
    }

    package mutating func member(_ name: String, _ value: Timestamp?) {
        key(name)
        timestamp(value)
    }

    /// A time as RFC 3339 text, or `null`.
    package mutating func timestamp(_ value: Timestamp?) {
        guard let value else { return null() }
        separate()
        verbatimTimestamp(value)
    }
}
