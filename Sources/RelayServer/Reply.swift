import Foundation
import RelayHTTP

/// Answers one routed request: records its metrics and access log line, then hands the
/// response to the HTTP layer. Safe to call from any thread (store completions call it).
struct Reply: Sendable {
    let responder: HTTPResponder
    let method: String
    let route: String
    let started: UInt64
    let metrics: Metrics
    let logger: Logger

    func send(_ response: HTTPResponse) {
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        metrics.recordRequest(method: method, route: route, status: response.status, seconds: seconds)
        if response.status >= 500 {
            logger.warning("request failed", ("status", String(response.status)))
        } else {
            logger.debug("request", ("status", String(response.status)), ("seconds", String(format: "%.6f", seconds)))
        }
        responder.send(response)
    }

    func send(_ error: APIError) { send(error.response) }

    func json(_ status: Int, _ body: [UInt8]) { send(.json(status, body)) }

    func noContent() { send(HTTPResponse(status: 204)) }
}
