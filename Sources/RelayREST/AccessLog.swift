import Foundation
import RelayHTTP
import RelayTelemetry

/// The access log: one line per answered request, at `info` (a 5xx at `warning`), in the
/// relay's logfmt. Only the path is logged, never the query string (a WebSocket's
/// `access_token` travels there) or any header.
package enum AccessLog {
    /// What the line says about the request.
    struct Request: Sendable {
        var method: String
        /// The route template (`/v1/users/{userId}/messages`) or `unmatched`.
        var route: String
        var path: String
        var client: String
    }

    static func write(_ request: Request, response: HTTPResponse, seconds: Double, to logger: Logger) {
        let fields: [(String, String)] = [
            ("method", request.method), ("path", request.path), ("status", String(response.status)),
            ("bytes", String(response.body.count)), ("ms", String(format: "%.2f", seconds * 1000)),
            ("client", request.client),
        ]
        if response.status >= 500 {
            logger.warning("request failed", fields)
        } else {
            logger.info("request", fields)
        }
    }
}
