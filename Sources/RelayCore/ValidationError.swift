/// A request that parsed as JSON but does not meet the contract. The HTTP layer maps `kind`
/// to a status (400 for most, 413 for an oversized payload).
package struct ValidationError: Error, Equatable, Sendable {
    package enum Kind: Sendable {
        case missingField
        case invalidField
        case payloadTooLarge
        /// A device's push transport is missing, doubled or malformed.
        case invalidTransport
    }

    package var kind: Kind
    package var field: String
    package var message: String

    package init(_ kind: Kind, field: String, _ message: String) {
        self.kind = kind
        self.field = field
        self.message = message
    }

    package var code: String {
        switch kind {
        case .missingField: return "missing_field"
        case .invalidField: return "invalid_field"
        case .payloadTooLarge: return "payload_too_large"
        case .invalidTransport: return "invalid_transport"
        }
    }
}

/// Reads typed fields out of a JSON object and says precisely what is wrong when it cannot.
package struct FieldReader {
    package let object: JSONValue

    package init(_ value: JSONValue) throws(ValidationError) {
        guard case .object = value else {
            throw ValidationError(
                .invalidField, field: "$", "the request body must be a JSON object, not \(value.kindName)")
        }
        object = value
    }

    /// Refuses a member not in `known`: a typo ("enviroment") must not fall back to a default in
    /// silence. `path` prefixes the field named in the error (`apns.enviroment`).
    package func refusingUnknown(_ known: Set<String>, in path: String? = nil) throws(ValidationError) {
        guard case .object(let members) = object else { return }
        for (name, _) in members where !known.contains(name) {
            let field = path.map { "\($0).\(name)" } ?? name
            throw ValidationError(
                .invalidField, field: field,
                "unknown member '\(field)' (known: \(known.sorted().map { "'\($0)'" }.joined(separator: ", ")))")
        }
    }

    /// The member, with `null` treated as absent.
    package func value(_ name: String) -> JSONValue? {
        guard let value = object[name], !value.isNull else { return nil }
        return value
    }

    package func string(_ name: String) throws(ValidationError) -> String {
        guard let value = value(name) else {
            throw ValidationError(.missingField, field: name, "'\(name)' is required")
        }
        guard let string = value.stringValue else {
            throw ValidationError(.invalidField, field: name, "'\(name)' must be a string, not \(value.kindName)")
        }
        return string
    }

    package func optionalString(_ name: String, maxLength: Int = 1024) throws(ValidationError) -> String? {
        guard value(name) != nil else { return nil }
        let string = try string(name)
        guard !string.isEmpty, string.utf8.count <= maxLength else {
            throw ValidationError(.invalidField, field: name, "'\(name)' must be 1 to \(maxLength) bytes long")
        }
        return string
    }

    package func identifier(_ name: String) throws(ValidationError) -> String {
        let string = try string(name)
        guard Identifier.isValidUserOrDeviceId(string) else {
            throw ValidationError(
                .invalidField, field: name, "'\(name)' must be 1-128 characters from [A-Za-z0-9._:@+=-]")
        }
        return string
    }

    package func optionalInteger(_ name: String, in range: ClosedRange<Int64>) throws(ValidationError) -> Int64? {
        guard let value = value(name) else { return nil }
        guard let integer = value.int64Value, range.contains(integer) else {
            throw ValidationError(
                .invalidField, field: name,
                "'\(name)' must be an integer from \(range.lowerBound) to \(range.upperBound)")
        }
        return integer
    }

    package func integer(_ name: String, in range: ClosedRange<Int64>) throws(ValidationError) -> Int64 {
        guard let integer = try optionalInteger(name, in: range) else {
            throw ValidationError(.missingField, field: name, "'\(name)' is required")
        }
        return integer
    }

    package func optionalBool(_ name: String) throws(ValidationError) -> Bool? {
        guard let value = value(name) else { return nil }
        guard case .bool(let flag) = value else {
            throw ValidationError(.invalidField, field: name, "'\(name)' must be a boolean, not \(value.kindName)")
        }
        return flag
    }

    /// A non-empty array of identifiers, duplicates dropped (first occurrence kept).
    package func identifierList(_ name: String, maxCount: Int) throws(ValidationError) -> [String] {
        guard let value = value(name) else {
            throw ValidationError(.missingField, field: name, "'\(name)' is required")
        }
        guard case .array(let elements) = value else {
            throw ValidationError(.invalidField, field: name, "'\(name)' must be an array, not \(value.kindName)")
        }
        guard !elements.isEmpty, elements.count <= maxCount else {
            throw ValidationError(.invalidField, field: name, "'\(name)' must have 1 to \(maxCount) entries")
        }
        var seen = Set<String>()
        var result: [String] = []
        result.reserveCapacity(elements.count)
        for element in elements {
            guard let id = element.stringValue, Identifier.isValidUserOrDeviceId(id) else {
                throw ValidationError(
                    .invalidField, field: name,
                    "every entry of '\(name)' must be a user id of 1-128 characters from [A-Za-z0-9._:@+=-]")
            }
            if seen.insert(id).inserted { result.append(id) }
        }
        return result
    }

    package func optionalObject(_ name: String) throws(ValidationError) -> JSONValue? {
        guard let value = value(name) else { return nil }
        guard case .object = value else {
            throw ValidationError(.invalidField, field: name, "'\(name)' must be an object, not \(value.kindName)")
        }
        return value
    }
}
