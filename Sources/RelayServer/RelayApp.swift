internal import CLinux
import Dispatch
import Foundation
package import RelayCore
import RelayCrypto
import RelayDelivery
import RelayHTTP
import RelayLive
import RelayLocks
import RelayPrimitives
import RelayREST
package import RelaySettings
package import RelayStore
package import RelayTelemetry
import RelayTransport
import RelayWebSocket
import Synchronization

/// The running relay: store, API and HTTP server wired together, with an orderly shutdown.
///
/// `@unchecked Sendable`: every stored property is Sendable except the service group, which is
/// only touched in `start()` and `shutdown()`, both called by the owner.
package final class RelayApp: @unchecked Sendable {
    package let config: RelayConfig
    let logger: Logger
    package let store: SQLStore
    let api: RelayAPI
    let http: HTTPServer
    let webSockets: WebSocketLoop
    let gateway: LiveGateway
    let notifier: PushNotifier
    /// The retention pass; armed by commits (see `startTimers`).
    private let prune = DemandTimer()
    /// Gives freed heap back to the system a few seconds after socket churn.
    private let trim = DemandTimer()
    /// Wall and monotonic time (`init`'s `clock`).
    private let clock: RelayClock
    /// Everything with a start and a stop, in start order (see `start()`).
    private var services = ServiceGroup([])

    /// Opens the store (creating secrets on first start) and builds everything; serves nothing yet.
    /// `clock` is the time every part reads (the in-process tests stop or step it).
    package init(config: RelayConfig, logger: Logger, clock: RelayClock = .system) throws {
        self.config = config
        self.logger = logger
        self.clock = clock
        let now = clock.now
        let metrics = Metrics()
        let commits = CommitSignal()
        store = try SQLStore(
            database: config.db, nodeLeaseMs: config.nodeLeaseMs,
            onBatch: { batch in
                metrics.recordBatch(size: batch.writes)
                commits.fire(batch.effect)
            },
            onFailure: { write, error in logger.error("store write failed", ("write", write), ("error", "\(error)")) })
        if store.replayedFromLog > 0 {
            logger.warning(
                "the last stop was not clean: acknowledged writes ran again from the message log",
                ("groups", String(store.replayedFromLog)))
        }
        let secrets = try Secrets.resolve(config: config, store: store)
        let tokenKey = Array(secrets.clientTokenSecret.utf8)
        let tokens = ClientTokenCodec(hmac: { Crypto.hmacSHA256(key: tokenKey, message: $0) })
        let allowList = config.pushAllowedHosts
        var loopConfig = WebSocketLoop.Configuration()
        loopConfig.maxMessageBytes = config.maxWsMessageBytes
        loopConfig.pingIntervalMs = config.pingIntervalMs
        loopConfig.deadAfterMs = config.wsDeadAfterMs
        loopConfig.maxQueuedBytes = config.wsMaxQueuedBytes
        loopConfig.maxFramesPerSecond = config.wsFramesPerS
        webSockets = try WebSocketLoop(configuration: loopConfig)
        let events = EventOutbox(store: store, metrics: metrics, logger: logger, deliver: config.eventsUrl != nil)
        let hub = LiveHub(
            store: store, logger: logger, events: events, delivery: config.deliveryPolicy, leaseMs: config.nodeLeaseMs,
            clock: clock)
        let webhookKey = secrets.webhookSecret.key
        let services = try PushServices(config: config)
        let apnsClient = try services.apnsClient(config: config)
        notifier = try PushNotifier(
            store: store,
            settings: PushNotifier.Settings(
                policy: config.deliveryPolicy, requestTimeoutSeconds: Double(config.pushTimeoutMs) / 1000),
            signer: WebhookSignature(
                hmac: { Crypto.hmacSHA256(key: webhookKey, message: $0) }, base64: { Base64.encode($0) }),
            allowList: allowList, webPushAllowList: config.webPushAllowedHosts, metrics: metrics, logger: logger,
            events: events, eventsURL: config.eventsUrl, tls: try TLSContext(caFile: config.pushCaFile),
            services: { sender in
                services.providers(config: config, sender: sender, apnsClient: apnsClient, now: now)
            }, now: now)
        commits.listen(from: .jobs) { [weak notifier] in notifier?.wake() }
        let prune = self.prune
        let pruneIntervalMs = config.pruneIntervalS * 1000
        commits.listen(from: .data) { prune.arm(afterMilliseconds: pruneIntervalMs) }
        let auth = Authenticator(
            serverKeys: secrets.serverKeys, tokens: tokens, revocations: TokenRevocations(try store.tokenRevocations()),
            limiter: RateLimiter(
                server: .init(
                    ratePerSecond: Double(config.rateLimitServerPerS), burst: Double(config.rateLimitServerPerS) * 2),
                client: .init(
                    ratePerSecond: Double(config.rateLimitClientPerS), burst: Double(config.rateLimitClientPerS) * 3)),
            now: now)
        gateway = LiveGateway(
            loop: webSockets, hub: hub, store: store, logger: logger, delivery: config.deliveryPolicy, auth: auth,
            accessLog: config.accessLog,
            signals: SignalForwarder(maxInFlight: config.signalsMaxInFlight, metrics: metrics, now: now) {
                [notifier] event, done in notifier.sendNow(event, done: done)
            })
        // Other nodes' commits (PostgreSQL): their messages go to the sessions held here, their
        // writes wake the notifier and retention as this node's own do.
        store.observeCluster(
            ClusterObserver(
                committed: { [weak hub] userId, seq in hub?.committedElsewhere(userId: userId, seq: seq) },
                presence: { [weak hub] node, userId, deviceId, online in
                    hub?.presenceElsewhere(node: node, userId: userId, deviceId: deviceId, online: online)
                },
                lease: { [weak hub] node, until in hub?.leaseElsewhere(node: node, until: until) },
                revoked: { [weak hub] userId, deviceId, seconds in
                    auth.revocations.revoke(userId: userId, deviceId: deviceId, atSeconds: seconds)
                    hub?.close(userId: userId, deviceId: deviceId, reason: "device deleted")
                },
                changed: { commits.fire($0) },
                resync: { [weak hub, weak store] in
                    if let revoked = try? store?.tokenRevocations() { auth.revocations.merge(revoked) }
                    hub?.loadClusterPresence()
                    hub?.resync()
                }))
        let loop = webSockets
        // Weak captures: the gauges live in `metrics`, which these objects hold (no cycle).
        metrics.registerGauge("pushrelay_websocket_connections", help: "Open WebSocket connections.") {
            [weak loop] in loop?.connectionCount ?? 0
        }
        metrics.registerGauge("pushrelay_users_online", help: "Users with at least one online device.") {
            [weak hub] in hub?.onlineUserCount ?? 0
        }
        let store = self.store
        metrics.registerGauge("pushrelay_push_jobs_pending", help: "Push jobs waiting to be delivered.") {
            [weak store] in (try? store?.pendingPushCount()) ?? -1
        }
        let notifier = self.notifier
        metrics.registerGaugeFamily(
            "pushrelay_push_breaker_open",
            help: "Push routes paused by their circuit breaker (transport, credential, host:port)."
        ) { [weak notifier] in notifier?.openBreakers ?? [] }
        api = RelayAPI(
            config: config, store: store, auth: auth, metrics: metrics,
            logger: logger, allowList: allowList, live: gateway,
            openBreakers: { [notifier] in notifier.breakerStates },
            vapidPublicKeys: services.vapidPublicKeys, clock: clock)
        var httpConfig = HTTPServer.Configuration()
        httpConfig.listen = config.listen
        httpConfig.threads = config.httpThreads
        httpConfig.maxBodyBytes = config.maxBodyBytes
        httpConfig.maxConnections = config.maxConnections
        httpConfig.maxConnectionsPerIP = config.maxConnectionsPerIp
        httpConfig.connectionTimeoutSeconds = config.connectionTimeoutS
        httpConfig.connectionMemoryBytes = config.connectionMemoryBytes
        httpConfig.render = { APIError($0).response }
        httpConfig.headerTimeoutMs = config.requestHeaderTimeoutMs
        httpConfig.bodyTimeoutMs = config.requestBodyTimeoutMs
        let throttle = LogThrottle(linesPerSecond: 2, burst: 10, now: now())
        httpConfig.errorLog = { [logger] text in
            guard let dropped = throttle.admit(now: now()) else { return }
            logger.warning("http server error", ("detail", text), ("suppressed", String(dropped)))
        }
        let api = self.api
        http = HTTPServer(configuration: httpConfig, headCheck: { api.checkHead($0) }) { request, responder in
            api.handle(request, responder)
        }
        let http = self.http
        metrics.registerGauge(
            "pushrelay_connections",
            help: "Open client connections, HTTP and WebSocket (the connection caps count these)."
        ) { [weak http] in http?.connectionCount ?? 0 }
    }

    /// Binds and starts serving; returns the base URL. Binding comes first (after the store,
    /// opened in `init`), so that a busy port fails before anything else runs.
    package func start() throws -> String {
        let store = self.store
        let http = self.http
        let api = self.api
        let webSockets = self.webSockets
        let gateway = self.gateway
        let notifier = self.notifier
        services = ServiceGroup([
            .init(name: "store", stop: { store.close() }),
            .init(
                name: "http", start: { try http.start() },
                beginShutdown: {
                    api.shuttingDown.store(true, ordering: .relaxed)  // /readyz answers 503
                    http.quiesce()
                },
                stop: { [drainMs = config.shutdownDrainMs] in http.shutdown(drainMs: drainMs) }),
            // Clients get 1001 and reconnect elsewhere, resuming from their cursor.
            .init(name: "websockets", start: { webSockets.start(delegate: gateway) }, stop: { webSockets.stop() }),
            .init(name: "notifier", start: { notifier.start() }, stop: { notifier.stop() }),
            // Weak: the group is held by self, and a strong capture would keep the app alive forever.
            .init(
                name: "timers", start: { [weak self] in self?.startTimers() },
                stop: { [weak self] in self?.stopTimers() }),
        ])
        try services.start()
        logger.info("listening", ("url", http.url), ("db", config.dbForDisplay))
        return http.url
    }

    /// Every timer is armed by the work it serves, so that an idle relay never wakes up: the
    /// retention pass after writes and then at the next expiry, presence reports and token
    /// expiries while sockets are open, the heap trim after socket churn.
    private func startTimers() {
        let store = self.store
        let logger = self.logger
        let retention = config.retentionS
        let interval = config.pruneIntervalS
        let prune = self.prune
        let clock = self.clock
        prune.start {
            let now = clock.now()
            store.prune(now: now, retentionSeconds: retention) { result in
                switch result {
                case .success(let pruned):
                    if pruned.removed > 0 { logger.info("pruned inbox entries", ("count", String(pruned.removed))) }
                    if let next = pruned.nextDue {
                        // Never sooner than the interval: each pass is a write transaction.
                        let wait = max(
                            interval * 1000,
                            next.milliseconds > now.milliseconds ? next.milliseconds - now.milliseconds : 0)
                        prune.arm(afterMilliseconds: wait)
                    }
                case .failure(let error):
                    logger.warning("prune failed", ("error", "\(error)"))
                    prune.arm(afterMilliseconds: interval * 1000)
                }
            }
        }
        prune.arm(afterMilliseconds: interval * 1000)  // what an earlier run left
        // A connection storm leaves the heap mostly free but fragmented (10,000 WebSockets opened
        // at once: 124 MB RSS, 45 MB after a trim); give those pages back a few seconds after.
        let trim = self.trim
        trim.start { _ = pr_malloc_trim() }
        let hub = gateway.hub
        hub.leases.start { hub.expireLeases() }
        hub.loadClusterPresence()
        hub.ticks.start {
            hub.reportDuePresence()
            hub.closeExpiredSessions(now: hub.clock.now())
            hub.retryStalledSessions(now: hub.clock.uptimeMs())
            trim.arm(afterMilliseconds: 5000)
            if hub.needsTicks { hub.ticks.arm(afterMilliseconds: LiveHub.tickIntervalMs) }
        }
    }

    private func stopTimers() {
        prune.stop()
        trim.stop()
        gateway.hub.ticks.stop()
        gateway.hub.leases.stop()
    }

    /// Graceful shutdown: the services in reverse order — readiness fails and the HTTP server
    /// stops accepting, then timers, notifier, WebSockets (1001), the HTTP drain, and the store
    /// (queued writes finish, the database closes).
    package func shutdown() {
        logger.info("shutting down")
        services.stop()
        logger.info("stopped")
    }
}

extension Timestamp {
    /// The system's wall clock.
    package static var now: Timestamp {
        Timestamp(milliseconds: Int64((Date().timeIntervalSince1970 * 1000).rounded(.down)))
    }
}

extension RelayClock {
    /// The system's clocks: `RelayApp`'s default.
    package static let system = RelayClock(now: { Timestamp.now }, uptimeMs: { MonotonicClock.milliseconds() })
}
