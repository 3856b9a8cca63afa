package import RelayCore

/// Reading a provider's answer: its headers (HTTP/2 names are lower-case, HTTP/1.1 ones may not
/// be) and the text it gives for a failure, kept short and printable because it ends up in the
/// store (`last_error`, `disabled_reason`), in events and in logs.
package enum ProviderAnswer {
    /// The longest provider-supplied text kept in a reason.
    package static let maxReasonLength = 200

    /// The first value of header `name`, matched without regard to case.
    package static func header(_ name: String, in headers: [(name: String, value: String)]) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    /// `Retry-After` in milliseconds, when it is delta-seconds (as the webhook honours it).
    package static func retryAfter(in headers: [(name: String, value: String)]) -> Int64? {
        DeliveryOutcome.parseRetryAfter(header("retry-after", in: headers))
    }

    /// `text` with control characters replaced and at most `maxReasonLength` characters: a
    /// provider's words, safe to store and log.
    package static func printable(_ text: String) -> String {
        var result = ""
        for scalar in text.unicodeScalars.prefix(maxReasonLength) {
            let control = scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
            result.unicodeScalars.append(control ? " " : scalar)
        }
        return result
    }

    /// The body parsed as a JSON object, or nil (an empty body, HTML from a proxy, garbage).
    package static func object(_ body: [UInt8]) -> JSONValue? {
        guard !body.isEmpty, let value = try? JSONParser.parse(body), case .object = value else { return nil }
        return value
    }
}
