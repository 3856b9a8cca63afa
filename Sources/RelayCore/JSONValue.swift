/// A parsed JSON document.
///
/// Numbers keep their original text so that a payload is relayed exactly as the chat server
/// wrote it (no `Double` rounding of large ids); objects keep their member order.
package enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(String)
    case string(String)
    case array([JSONValue])
    case object([(String, JSONValue)])

    package static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.number(a), .number(b)): return a == b
        case let (.string(a), .string(b)): return a == b
        case let (.array(a), .array(b)): return a == b
        case let (.object(a), .object(b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: return false
        }
    }

    /// The member `key` of an object, or nil (the parser refuses repeated names).
    package subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.last(where: { $0.0 == key })?.1
    }

    package var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    /// The value as an integer when it is one mathematically (`60`, `60.0`, `6e1`) and is exactly
    /// representable; JSON Schema's `integer` means the same.
    package var int64Value: Int64? {
        guard case .number(let text) = self else { return nil }
        if let exact = Int64(text) { return exact }
        guard let double = Double(text), double.rounded() == double, abs(double) <= 9_007_199_254_740_992 else {
            return nil
        }
        return Int64(double)
    }

    package var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// The kind, for error messages ("expected a string, got a number").
    package var kindName: String {
        switch self {
        case .null: return "null"
        case .bool: return "a boolean"
        case .number: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }

    /// The same value with every object's members sorted by key: two bodies that differ only in
    /// member order or spacing have the same canonical serialization (the idempotency fingerprint).
    package var canonical: JSONValue {
        switch self {
        case .array(let elements): return .array(elements.map(\.canonical))
        case .object(let members):
            var byKey: [String: JSONValue] = [:]
            for (key, value) in members { byKey[key] = value.canonical }
            return .object(byKey.sorted { Array($0.key.utf8).lexicographicallyPrecedes(Array($1.key.utf8)) })
        default: return self
        }
    }

    /// Compact serialization: no spaces, members in their original order.
    package var serialized: [UInt8] {
        var writer = JSONWriter()
        writer.value(self)
        return writer.bytes
    }
}
