import Foundation
import RelayCore
import RelayHTTP
import RelayPrimitives

extension HTTPRequest {
    /// The body as a JSON value: 415 unless it is declared JSON, 400 when it does not parse.
    func jsonBody() throws(APIError) -> JSONValue {
        let contentType =
            header("content-type")?.split(separator: ";").first?.trimmingASCIISpaces().lowercased() ?? ""
        guard
            contentType == "application/json"
                || (contentType.hasPrefix("application/") && contentType.hasSuffix("+json"))
        else {
            throw APIError(415, "unsupported_media_type", "send the body as 'Content-Type: application/json'")
        }
        guard !body.isEmpty else { throw APIError(400, "bad_json", "a JSON body is required") }
        do {
            return try JSONParser.parse(body)
        } catch {
            throw APIError(400, "bad_json", "the body is not valid JSON: \(error)")
        }
    }

    /// A `{name}` path parameter that must be a user or device id.
    func identifier(_ name: String) throws(APIError) -> String {
        let value = parameter(name)
        guard Identifier.isValidUserOrDeviceId(value) else {
            throw .invalid("'\(name)' must be 1-128 characters from [A-Za-z0-9._:@+=-]")
        }
        return value
    }

    /// An integer query parameter within `range`, or `defaultValue` when absent.
    func integerQuery(
        _ name: String, default defaultValue: Int64, in range: ClosedRange<Int64>
    ) throws(APIError) -> Int64 {
        guard let text = queryValue(name) else { return defaultValue }
        guard let value = Int64(text), range.contains(value) else {
            throw .invalid(
                "query parameter '\(name)' must be an integer from \(range.lowerBound) to \(range.upperBound)")
        }
        return value
    }
}
