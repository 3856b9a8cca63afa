import Foundation
import RelayHTTP
import RelayTelemetry

/// Answers one routed request: records its metrics and access log line, then hands the
/// response to the HTTP layer. Safe to call from any thread (store completions call it).
package struct Reply: Sendable {
    let responder: HTTPResponder
    let request: AccessLog.Request
    let started: UInt64
    let metrics: Metrics
    /// Carries `request.id` and `route`.
    let logger: Logger
    let accessLog: Bool
    /// Headers every answer to this request carries (CORS, for a page's request).
    var headers: [(name: String, value: String)] = []

    var route: String { request.route }

    func send(_ response: HTTPResponse) {
        var response = response
        response.headers += headers
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        metrics.recordRequest(method: request.method, route: request.route, status: response.status, seconds: seconds)
        if accessLog || response.status >= 500 {
            AccessLog.write(request, response: response, seconds: seconds, to: logger)
        }
        responder.send(response)
    }

    func send(_ error: APIError) { send(error.response) }

    func json(_ status: Int, _ body: [UInt8]) { send(.json(status, body)) }

    func noContent() { send(HTTPResponse(status: 204)) }
}
