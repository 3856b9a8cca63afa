import RelayCore
package import RelayHTTP
import RelayStore

/// An error answer: status, machine-readable code, human message, rendered as
/// `{"error":{"code":…,"message":…}}`.
package struct APIError: Error, Sendable {
    package var status: Int
    package var code: String
    package var message: String
    package var headers: [(name: String, value: String)] = []

    package init(_ status: Int, _ code: String, _ message: String, headers: [(name: String, value: String)] = []) {
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers
    }

    /// The answer: `{"error":{"code":…,"message":…}}`, the one error shape of the API.
    package var response: HTTPResponse {
        var writer = JSONWriter(capacity: 64 + message.utf8.count)
        writer.beginObject()
        writer.apiError(code: code, message)
        writer.endObject()
        var response = HTTPResponse.json(status, writer.bytes)
        response.headers += headers
        return response
    }

    /// The HTTP layer's refusals, in the API's shape.
    package init(_ refusal: HTTPRefusal) {
        switch refusal {
        case .bodyTooLarge: self.init(refusal.status, "body_too_large", refusal.message)
        case .conflictingFraming, .nulInQuery: self.init(refusal.status, "bad_request", refusal.message)
        case .shuttingDown, .unfinishedAtShutdown: self.init(refusal.status, "shutting_down", refusal.message)
        }
    }

    static func unauthorized(_ message: String) -> APIError {
        APIError(401, "unauthorized", message, headers: [("WWW-Authenticate", "Bearer")])
    }

    static func forbidden(_ message: String) -> APIError { APIError(403, "forbidden", message) }

    static func invalid(_ message: String) -> APIError { APIError(400, "invalid_field", message) }

    static func notFound(_ message: String) -> APIError { APIError(404, "not_found", message) }

    static func validation(_ error: ValidationError) -> APIError {
        APIError(error.kind == .payloadTooLarge ? 413 : 400, error.code, error.message)
    }

    /// Runs request decoding, turning a `ValidationError` into its 400/413 answer: the one way a
    /// handler decodes its body.
    static func validating<T>(_ body: () throws(ValidationError) -> T) throws(APIError) -> T {
        do {
            return try body()
        } catch {
            throw .validation(error)
        }
    }

    static func store(_ error: StoreError) -> APIError {
        switch error {
        case .closed:
            return APIError(503, "shutting_down", "the relay is shutting down; retry on another instance or later")
        case .unavailable:
            return APIError(
                503, "store_unavailable", "the message store is unavailable; nothing was stored, retry later")
        }
    }
}
