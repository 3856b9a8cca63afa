import Dispatch
package import RelayCore
import RelayCrypto
package import RelayHTTP
package import RelayLive
import RelayLocks
package import RelaySettings
package import RelayStore
package import RelayTelemetry
package import Synchronization
import WebSocketCodec

/// The REST API: routes, authentication, validation, and the calls into the store.
package final class RelayAPI: Sendable {
    /// Untyped `throws` here: typed throws in a stored generic closure type crashes the 6.3 compiler.
    typealias Handler = @Sendable (RelayAPI, HTTPRequest, Reply) throws -> Void

    let config: RelayConfig
    let store: any RelayStore
    let auth: Authenticator
    let metrics: Metrics
    let logger: Logger
    let allowList: HostAllowList
    let clock: RelayClock
    /// The WebSocket gateway and presence tracker.
    let live: any LiveSide
    /// The push hosts whose circuit breakers are open now (`GET /v1/stats`).
    let openBreakers: @Sendable () -> [(route: PushRoute, state: CircuitBreaker.State)]
    /// Web Push's `applicationServerKey` (base64url), when VAPID is configured.
    /// Each app's VAPID public key, for the apps with Web Push.
    let vapidPublicKeys: [AppID: String]
    /// When this process started serving.
    let startedAt: Timestamp
    /// When each device's push falls due.
    let delivery: DeliveryPolicy
    /// Which pages may call the client routes from their own origin.
    let cors: CORSPolicy
    /// `wsAllowedOrigins` in compared form; nil (the default, an empty list) allows every origin.
    let allowedOrigins: Set<String>?
    /// Set when shutdown begins: `/readyz` answers 503 so that balancers stop sending traffic.
    package let shuttingDown = Atomic<Bool>(false)
    /// `GET /v1/stats`'s push job counts, read at most once per `statsCacheMs` however many
    /// consoles poll.
    let jobCounts: LockedValue<CachedValue<[JobState: Int]>>

    /// The Matrix Push Gateway endpoint (its `secret` query parameter is the credential: Synapse
    /// insists on exactly this path).
    static let matrixNotifyRoute = "/_matrix/push/v1/notify"

    /// The route table; `openapi.yaml` must list exactly these (a test checks).
    static let router: Router<Handler> = {
        var router = Router<Handler>()
        router.add("POST", "/v1/messages") { api, request, reply in try api.postMessage(request, reply) }
        router.add("POST", "/v1/messages/batch") { api, request, reply in try api.postBatch(request, reply) }
        router.add("GET", "/v1/messages/{id}") { api, request, reply in try api.getMessage(request, reply) }
        router.add("GET", "/v1/messages/{id}/deliveries") { api, request, reply in
            try api.getMessageDeliveries(request, reply)
        }
        router.add("PUT", "/v1/users/{userId}/devices/{deviceId}") { api, request, reply in
            try api.putDevice(request, reply)
        }
        router.add("DELETE", "/v1/users/{userId}/devices/{deviceId}") { api, request, reply in
            try api.deleteDevice(request, reply)
        }
        router.add("POST", "/v1/devices/reenable") { api, request, reply in try api.reenableDevices(request, reply) }
        router.add("GET", "/v1/users/{userId}/devices") { api, request, reply in
            try api.listDevices(request, reply)
        }
        router.add("GET", "/v1/users/{userId}/presence") { api, request, reply in
            try api.getPresence(request, reply)
        }
        router.add("POST", "/v1/users/{userId}/presence") { api, request, reply in
            try api.postPresence(request, reply)
        }
        router.add("POST", "/v1/presence/query") { api, request, reply in
            try api.queryPresence(request, reply)
        }
        router.add("POST", matrixNotifyRoute) { api, request, reply in
            try api.matrixNotify(request, reply)
        }
        router.add("GET", "/v1/stats") { api, request, reply in try api.getStats(request, reply) }
        router.add("POST", "/v1/signals") { api, request, reply in try api.postSignal(request, reply) }
        router.add("POST", "/v1/tokens") { api, request, reply in try api.postToken(request, reply) }
        router.add("GET", "/v1/users/{userId}/messages") { api, request, reply in
            try api.catchUp(request, reply)
        }
        router.add("POST", "/v1/users/{userId}/ack") { api, request, reply in try api.ack(request, reply) }
        router.add("GET", "/v1/ws") { api, request, reply in try api.openWebSocket(request, reply) }
        router.add("GET", "/v1/deliveries") { api, request, reply in try api.listDeliveries(request, reply) }
        router.add("POST", "/v1/deliveries/{id}/retry") { api, request, reply in try api.retryDelivery(request, reply) }
        for file in ["/console", "/console/app.js", "/console/app.css"] {
            router.add("GET", file) { api, request, reply in api.getConsoleFile(request, reply) }
        }
        router.add("GET", "/v1/webpush/key") { api, request, reply in try api.getWebPushKey(request, reply) }
        router.add("GET", "/healthz") { _, _, reply in reply.json(200, Array(#"{"status":"ok"}"#.utf8)) }
        router.add("GET", "/readyz") { api, request, reply in api.readiness(request, reply) }
        router.add("GET", "/metrics") { api, request, reply in try api.renderMetrics(request, reply) }
        return router
    }()

    /// `(method, pattern)` of every route, for the contract test.
    package static var routes: [(method: String, path: String)] { router.routes.map { ($0.method, $0.pattern) } }

    package init(
        config: RelayConfig, store: any RelayStore, auth: Authenticator, metrics: Metrics, logger: Logger,
        allowList: HostAllowList, live: any LiveSide,
        openBreakers: @escaping @Sendable () -> [(route: PushRoute, state: CircuitBreaker.State)],
        vapidPublicKeys: [AppID: String],
        clock: RelayClock
    ) {
        self.openBreakers = openBreakers
        self.vapidPublicKeys = vapidPublicKeys
        startedAt = clock.now()
        self.config = config
        self.store = store
        self.auth = auth
        self.metrics = metrics
        self.logger = logger
        self.allowList = allowList
        self.live = live
        self.clock = clock
        delivery = config.deliveryPolicy
        jobCounts = LockedValue(CachedValue(windowMs: config.statsCacheMs))
        allowedOrigins =
            config.wsAllowedOrigins.isEmpty
            ? nil : Set(config.wsAllowedOrigins.map(WebSocketHandshake.normalizedOrigin))
        cors = CORSPolicy(origins: config.corsAllowedOrigins)
    }

    /// The HTTP server's handler: route, run, and turn thrown errors into JSON answers.
    package func handle(_ request: HTTPRequest, _ responder: HTTPResponder) {
        let started = DispatchTime.now().uptimeNanoseconds
        let match = Self.router.match(method: request.method, path: request.path)
        let access = Self.accessRequest(request, match)
        var reply = Reply(
            responder: responder, request: access, started: started, metrics: metrics,
            logger: logger.with("request.id", request.id).with("route", access.route), accessLog: config.accessLog)
        if request.method == "OPTIONS", let answer = preflight(request) { return reply.send(answer) }
        reply.headers = cors.headers(origin: request.header("Origin"), method: request.method, route: Self.route(match))
        switch match {
        case .found(let handler, _, let parameters):
            var routed = request
            routed.pathParameters = parameters
            do {
                try handler(self, routed, reply)
            } catch let error as APIError {
                reply.send(error)
            } catch {
                reply.logger.error("unexpected handler error", ("error", "\(error)"))
                reply.send(APIError(500, "internal_error", "unexpected server error"))
            }
        case .methodNotAllowed(let allowed):
            reply.send(Self.methodNotAllowed(request.method, allowed: allowed))
        case .notFound:
            reply.send(APIError.notFound("no such endpoint: \(request.method) \(request.path)"))
        }
    }

    /// A page's CORS preflight for a route it may call, answered; nil for any other `OPTIONS`.
    private func preflight(_ request: HTTPRequest) -> HTTPResponse? {
        let method = request.header("Access-Control-Request-Method")
        let route = method.map { Self.route(Self.router.match(method: $0, path: request.path)) } ?? nil
        return cors.preflight(origin: request.header("Origin"), requestedMethod: method, route: route)
    }

    /// The route template a match found, if any.
    static func route(_ match: Router<Handler>.Match) -> String? {
        if case .found(_, let pattern, _) = match { return pattern }
        return nil
    }

    /// Sees the head of every request that declares a body: without a valid credential it is
    /// answered 401 at once and its body never read, so that nobody without a key or token can
    /// make the relay buffer bodies. (Every body-carrying endpoint needs a credential; the
    /// Matrix gateway's is its `secret` query parameter, checked here the same way.)
    package func checkHead(_ request: HTTPRequest) -> HTTPResponse? {
        do throws(APIError) {
            let match = Self.router.match(method: request.method, path: request.path)
            // A method the path does not have is 405 whoever asks (the handler would say the same).
            if case .methodNotAllowed(let allowed) = match {
                throw Self.methodNotAllowed(request.method, allowed: allowed)
            }
            if case .found(_, let pattern, _) = match, pattern == Self.matrixNotifyRoute {
                try auth.checkMatrixSecret(
                    presented: request.queryValue("secret") ?? "", configured: config.matrixNotifySecret,
                    caller: request.remoteAddress)
                return nil
            }
            _ = try auth.verify(credential: Authenticator.bearer(request))
            return nil
        } catch {
            let match = Self.router.match(method: request.method, path: request.path)
            let access = Self.accessRequest(request, match)
            metrics.recordRequest(method: request.method, route: access.route, status: error.status, seconds: 0)
            var response = error.response
            // A page must be able to read its 401 to tell a refused token from a network error.
            response.headers += cors.headers(
                origin: request.header("Origin"), method: request.method, route: Self.route(match))
            if config.accessLog {
                AccessLog.write(
                    access, response: response, seconds: 0,
                    to: logger.with("request.id", request.id).with("route", access.route))
            }
            return response
        }
    }

    static func methodNotAllowed(_ method: String, allowed: [String]) -> APIError {
        APIError(
            405, "method_not_allowed", "\(method) is not allowed here; use \(allowed.joined(separator: ", "))",
            headers: [("Allow", allowed.joined(separator: ", "))])
    }

    /// What the access log and the metrics say about a request: its route template or `unmatched`.
    static func accessRequest(_ request: HTTPRequest, _ match: Router<Handler>.Match) -> AccessLog.Request {
        AccessLog.Request(
            method: request.method, route: route(match) ?? "unmatched", path: request.path,
            client: request.remoteAddress)
    }

    /// Completion for store writes: answers 503 on a store failure, else runs `body`.
    func onStore<T: Sendable>(
        _ reply: Reply, _ body: @escaping @Sendable (T) throws -> Void
    ) -> @Sendable (Result<T, StoreError>) -> Void {
        let logger = reply.logger
        return { result in
            switch result {
            case .success(let value):
                do {
                    try body(value)
                } catch let error as APIError {
                    reply.send(error)
                } catch {
                    logger.error("unexpected completion error", ("error", "\(error)"))
                    reply.send(APIError(500, "internal_error", "unexpected server error"))
                }
            case .failure(let error):
                logger.error("store write failed", ("error", "\(error)"))
                reply.send(APIError.store(error))
            }
        }
    }

    /// Runs a store read, mapping its failure to 503.
    func read<T>(_ reply: Reply, _ body: () throws(StoreError) -> T) throws(APIError) -> T {
        do {
            return try body()
        } catch {
            reply.logger.error("store read failed", ("error", "\(error)"))
            throw APIError.store(error)
        }
    }
}
