import RelayCore
import RelayHTTP
import RelaySettings
import RelayStore
import RelayTelemetry
import Synchronization

extension RelayAPI {
    /// `GET /readyz`: 200 while the store takes writes and no shutdown has begun, else 503.
    func readiness(_ request: HTTPRequest, _ reply: Reply) {
        guard !shuttingDown.load(ordering: .relaxed) else {
            reply.send(APIError(503, "shutting_down", "the relay is shutting down"))
            return
        }
        store.checkWritable { writable in
            if writable {
                reply.json(200, Array(#"{"status":"ready"}"#.utf8))
            } else {
                reply.send(APIError(503, "store_unavailable", "the message store does not take writes"))
            }
        }
    }

    /// `GET /metrics`: Prometheus text; behind `metricsKey` when one is configured.
    func renderMetrics(_ request: HTTPRequest, _ reply: Reply) throws(APIError) {
        if let key = config.metricsKey {
            guard let given = Authenticator.bearer(request), ConstantTime.equals(Array(given.utf8), Array(key.utf8))
            else {
                throw .unauthorized("the metrics endpoint needs 'Authorization: Bearer <metrics key>'")
            }
        }
        reply.send(
            HTTPResponse(
                status: 200, headers: [("Content-Type", "text/plain; version=0.0.4; charset=utf-8")],
                body: Array(metrics.render().utf8)))
    }
}
